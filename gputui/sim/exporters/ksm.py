"""A simulated kube-state-metrics: the pod and node series a real Prometheus scrapes, on a port of its own.

    async with KubeStateMetrics(sim, allowlist={"pods": ["team"], "nodes": ["nvidia.com/gpu.product"]}) as ksm:
        ksm.url        # http://127.0.0.1:PORT: /metrics in the text exposition format

`exposition(nodes, pods, allowlist)` is a pure function of the objects, written as kube-state-metrics v2
writes them (its docs/metrics/workload/pod-metrics.md and cluster/node-metrics.md, internal/store/pod.go,
node.go and utils.go):

- `kube_pod_container_resource_requests{namespace,pod,uid,container,node,resource,unit}`: each container's
  `resources.requests` as stored (the API server has defaulted them from limits), whatever the pod's phase;
  the resource name sanitised (`nvidia.com/gpu` -> `nvidia_com_gpu`, `nvidia.com/mig-1g.10gb` ->
  `nvidia_com_mig_1g_10gb`), unit `core` for cpu, `byte` for memory, storage and hugepages, `integer` for
  extended resources; `node` empty for an unscheduled pod;
- `kube_pod_info`, `kube_pod_created` (the creation time, Unix seconds), `kube_pod_status_phase` (one series per phase, 1 for the pod's: none while it has no
  phase), `kube_pod_labels` (namespace, pod, uid and only the allow-listed labels, as `label_` and the key
  sanitised and snake-cased, colliding names suffixed `_conflictN`);
- `kube_node_info`, `kube_node_labels`, `kube_node_spec_unschedulable` (0 or 1), `kube_node_spec_taint`
  (key, value, effect: one per taint), `kube_node_status_capacity`, `kube_node_status_allocatable`,
  `kube_node_status_condition` (true, false and unknown per condition).

The allow-list is KSM's `--metric-labels-allowlist` (`parse_allowlist("pods=[team],nodes=[*]")`): a kind's
list, `*` first for every label; without one a kind's labels series carries no `label_*` at all.
"""
from __future__ import annotations

import math
import re
from datetime import datetime
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from aiohttp import web

from ..apiserver.quantity import QuantityError
from ..apiserver.quantity import parse as quantity_of
from ..apiserver.store import Store

Obj = dict[str, Any]
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PHASES = ("Pending", "Succeeded", "Failed", "Running", "Unknown")
CONDITION_STATUSES = ("true", "false", "unknown")
WILDCARD = "*"
_INVALID = re.compile(r"[^a-zA-Z0-9_]")
_CAPS = re.compile(r"([a-z0-9])([A-Z])")


def sanitize(name: str) -> str:
    return _INVALID.sub("_", name)


def label_name(prefix: str, key: str) -> str:
    """KSM's labelName: the key sanitised, then snake-cased and lower-cased."""
    return f"{prefix}_" + _CAPS.sub(r"\1_\2", sanitize(key)).lower()


def parse_allowlist(text: str) -> dict[str, list[str]]:
    """`pods=[team,app.kubernetes.io/name],nodes=[*]` -> {"pods": [...], "nodes": [...]}; ValueError if malformed."""
    out: dict[str, list[str]] = {}
    for match in re.finditer(r"\s*([a-z.]+)=\[([^\]]*)\]\s*(?:,|$)", text):
        out[match.group(1)] = [k.strip() for k in match.group(2).split(",") if k.strip()]
    if text.strip() and not out:
        raise ValueError(f"--metric-labels-allowlist: {text!r} is not KIND=[LABEL,...],...")
    return out


def prometheus_labels(prefix: str, labels: Mapping[str, str], allowed: list[str]) -> list[tuple[str, str]]:
    """KSM's createPrometheusLabelKeysValues: the allowed labels (all with `*` first), sorted by key; a name
    two keys sanitise to is suffixed _conflict1, _conflict2... on each of them."""
    if not allowed:
        return []
    chosen = dict(labels) if allowed[0] == WILDCARD else {k: labels[k] for k in allowed if k in labels}
    keys: list[str] = []
    values: list[str] = []
    seen: dict[str, list[int]] = {}  # name -> [count, index of the first]
    for key in sorted(chosen):
        name = label_name(prefix, key)
        if name in seen:
            count, first = seen[name]
            if count == 1:
                keys[first] = f"{keys[first]}_conflict1"
            seen[name][0] = count + 1
            name = f"{name}_conflict{count + 1}"
        else:
            seen[name] = [1, len(keys)]
        keys.append(name)
        values.append(chosen[key])
    return list(zip(keys, values, strict=True))


def _unit(resource: str) -> str | None:
    """KSM's unit of a resource, None for one it leaves out (a native name it does not know)."""
    if resource == "cpu":
        return "core"
    if resource in ("memory", "storage", "ephemeral-storage") or resource.startswith(("hugepages-", "attachable-volumes-")):
        return "byte"
    if resource == "pods":
        return "integer"
    if "/" in resource and "kubernetes.io/" not in resource and not resource.startswith("requests."):
        return "integer"  # an extended resource: nvidia.com/gpu, its MIG profiles and shared replicas
    return None


def _value(resource: str, quantity: object) -> float:
    """KSM's value: MilliValue()/1000 for cpu, Value() (rounded up to a whole number) for the others."""
    try:
        value = quantity_of(quantity).value
    except QuantityError:
        return math.nan
    return float(value) if resource == "cpu" else float(math.ceil(value))


def _timestamp(text: object) -> float | None:
    """An RFC 3339 time as Unix seconds; None when absent or not one."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _text(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class _Family:
    def __init__(self, name: str, help_text: str) -> None:
        self.name, self.help_text = name, help_text
        self.lines: list[str] = []

    def add(self, labels: Iterable[tuple[str, str]], value: float) -> None:
        text = ",".join(f'{k}="{_text(v)}"' for k, v in labels)
        shown = str(int(value)) if float(value).is_integer() else repr(float(value))
        self.lines.append(f"{self.name}{{{text}}} {shown}")

    def render(self) -> str:
        return f"# HELP {self.name} {self.help_text}\n# TYPE {self.name} gauge\n" + "".join(f"{line}\n" for line in self.lines)


def _controller(meta: Obj) -> tuple[str, str]:
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("kind", ""), ref.get("name", "")
    return "<none>", "<none>"


def exposition(nodes: Iterable[Obj], pods: Iterable[Obj], allowlist: Mapping[str, list[str]] | None = None) -> str:
    """What kube-state-metrics serves on /metrics for these nodes and pods."""
    allowlist = allowlist or {}
    requests = _Family("kube_pod_container_resource_requests", "The number of requested request resource by a container.")
    info = _Family("kube_pod_info", "Information about pod.")
    created = _Family("kube_pod_created", "Unix creation timestamp")
    phase = _Family("kube_pod_status_phase", "The pods current phase.")
    pod_labels = _Family("kube_pod_labels", "Kubernetes labels converted to Prometheus labels.")
    node_info = _Family("kube_node_info", "Information about a cluster node.")
    node_labels = _Family("kube_node_labels", "Kubernetes labels converted to Prometheus labels.")
    unschedulable = _Family("kube_node_spec_unschedulable", "Whether a node can schedule new pods.")
    taint = _Family("kube_node_spec_taint", "The taint of a cluster node.")
    capacity = _Family("kube_node_status_capacity", "The capacity for different resources of a node.")
    allocatable = _Family("kube_node_status_allocatable", "The allocatable for different resources of a node that are available for scheduling.")
    condition = _Family("kube_node_status_condition", "The condition of a cluster node.")

    for pod in pods:
        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
        base = [("namespace", meta.get("namespace", "")), ("pod", meta.get("name", "")), ("uid", meta.get("uid", ""))]
        node = spec.get("nodeName", "")
        for container in spec.get("containers") or []:
            for resource, quantity in sorted(((container.get("resources") or {}).get("requests") or {}).items()):
                unit = _unit(resource)
                if unit is not None:
                    requests.add([*base, ("container", container.get("name", "")), ("node", node),
                                  ("resource", sanitize(resource)), ("unit", unit)], _value(resource, quantity))
        kind, name = _controller(meta)
        info.add([*base, ("host_ip", status.get("hostIP", "")), ("pod_ip", status.get("podIP", "")), ("node", node),
                  ("created_by_kind", kind), ("created_by_name", name), ("priority_class", spec.get("priorityClassName", "")),
                  ("host_network", "true" if spec.get("hostNetwork") else "false")], 1)
        born = _timestamp(meta.get("creationTimestamp"))
        if born is not None:
            created.add(base, born)
        current = status.get("phase", "")
        if meta.get("deletionTimestamp") and status.get("reason") == "NodeLost":
            current = "Unknown"
        if current:
            for name in PHASES:
                phase.add([*base, ("phase", name)], 1 if name == current else 0)
        pod_labels.add([*base, *prometheus_labels("label", meta.get("labels") or {}, allowlist.get("pods", []))], 1)

    for node_obj in nodes:
        meta, spec, status = node_obj.get("metadata") or {}, node_obj.get("spec") or {}, node_obj.get("status") or {}
        name = meta.get("name", "")
        ni = status.get("nodeInfo") or {}
        internal = next((a.get("address", "") for a in status.get("addresses") or [] if a.get("type") == "InternalIP"), "")
        node_info.add([("node", name), ("kernel_version", ni.get("kernelVersion", "")), ("os_image", ni.get("osImage", "")),
                       ("container_runtime_version", ni.get("containerRuntimeVersion", "")),
                       ("kubelet_version", ni.get("kubeletVersion", "")), ("kubeproxy_version", ni.get("kubeProxyVersion", "")),
                       ("provider_id", spec.get("providerID", "")), ("pod_cidr", spec.get("podCIDR", "")),
                       ("system_uuid", ni.get("systemUUID", "")), ("internal_ip", internal)], 1)
        node_labels.add([("node", name), *prometheus_labels("label", meta.get("labels") or {}, allowlist.get("nodes", []))], 1)
        unschedulable.add([("node", name)], 1 if spec.get("unschedulable") else 0)
        for t in spec.get("taints") or []:
            taint.add([("node", name), ("key", t.get("key", "")), ("value", t.get("value", "")), ("effect", t.get("effect", ""))], 1)
        for family, resources in ((capacity, status.get("capacity")), (allocatable, status.get("allocatable"))):
            for resource, quantity in sorted((resources or {}).items()):
                unit = _unit(resource)
                if unit is not None:
                    family.add([("node", name), ("resource", sanitize(resource)), ("unit", unit)], _value(resource, quantity))
        for cond in status.get("conditions") or []:
            for value in CONDITION_STATUSES:
                condition.add([("node", name), ("condition", cond.get("type", "")), ("status", value)],
                              1 if str(cond.get("status", "")).lower() == value else 0)

    families = (requests, info, created, phase, pod_labels, node_info, node_labels, unschedulable, taint, capacity, allocatable, condition)
    return "".join(f.render() for f in families)


class _HasStore(Protocol):
    store: Store


class KubeStateMetrics:
    """/metrics for the cluster's objects at the time of each scrape, on a loopback port of its own."""

    def __init__(self, cluster: _HasStore, allowlist: Mapping[str, list[str]] | None = None, *,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        self.cluster, self.allowlist, self.host, self.port = cluster, dict(allowlist or {}), host, port
        self.scrapes = 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def _metrics(self, request: web.Request) -> web.Response:
        self.scrapes += 1
        store = self.cluster.store
        text = exposition(store.objects("nodes"), store.objects("pods"), self.allowlist)
        return web.Response(body=text.encode(), headers={"Content-Type": CONTENT_TYPE})

    async def start(self) -> KubeStateMetrics:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # aiohttp's TCPSite has no public accessor for its bound port
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> KubeStateMetrics:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
