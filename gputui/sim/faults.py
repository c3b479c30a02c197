"""Test-only fault hooks of the simulated cluster.

Off unless the cluster was started with faults enabled; every hook is then
refused, and the server's per-request check costs one attribute read.

    sim.faults.compact()                  # every older watch gets 410 Expired
    sim.faults.drop_watches()             # every open watch stream ends
    sim.faults.fail("pods", 403)          # 403 Forbidden (or 500) for pods, every verb
    sim.faults.fail("pods/proxy", 403)    # only that subresource (here: no pods/proxy RBAC)
    sim.faults.slow("nodes", 1.5)         # delay every nodes response
    sim.faults.clear("pods")              # or clear() for all resources
    await sim.faults.restart(downtime=.5) # connections refused, then back, same port and state
    await sim.faults.restart(fresh=True)  # same port, state from the scenario again, resourceVersions low again
    sim.faults.corrupt_next()             # the next API response's body is broken JSON

GPU signals, written as the components that own them would (the cluster keeps them until cleared):

    sim.faults.xid("gpu-1", 1, 79)        # the node's DCGM exporter reports XID 79 on GPU 1 (0 clears it)
    sim.faults.gpu_health("gpu-1", 1, healthy=False)  # the device plugin finds GPU 1 unhealthy: allocatable
                                          # drops by its devices, pods holding them say so (allocatedResourcesStatus)
    sim.faults.taint_device("gpu-1", "gpu-1", "gpu.nvidia.com/xid", "43", "NoSchedule")  # a DRA device taint
    sim.faults.untaint_device("gpu-1", "gpu-1")       # (KEP-5055) on the node's ResourceSlice, and taken off

GPU plumbing states (sim/behaviour/plumbing.py says how each component writes them):

    sim.faults.mig_state("mig-1", "pending")          # the MIG manager at work: its GPU clients paused
    sim.faults.upgrade_state("gpu-1", "drain-required")  # the driver upgrade controller's state (and cordon)
    sim.faults.quarantine("gpu-1", "GpuXidError", "XID 79")  # NVSentinel: the condition True, the node cordoned
    sim.faults.heal("gpu-1", "GpuXidError")           # the condition False again; NVSentinel uncordons
    sim.faults.heal("gpu-1", "GpuXidError", halted=True)  # ... its fault quarantine halted: the cordon stays
"""
from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import builders as b
from .behaviour import plumbing
from .builders import compute_domains
from .exporters.dcgm import XID_ANNOTATION, parse_xid_annotation
from .behaviour.nvidia_smi import UNHEALTHY_ANNOTATION, NodeGpus, parse_unhealthy_annotation

if TYPE_CHECKING:
    from .cluster import SimCluster

FAULT_USER = "system:serviceaccount:gputui:viewer"
SLICES = "resourceslices.resource.k8s.io"
_LABEL_NAME = re.compile(r"(?:[a-z0-9]([-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


class FaultsDisabled(RuntimeError):
    pass


@dataclass
class Fault:
    code: int | None = None
    delay: float = 0.0
    retry_after: int = 1  # seconds, the Retry-After of a 429 or 503
    refused: int = 0  # requests answered with `code` so far: how often a client tried
    cleared: asyncio.Event = field(default_factory=asyncio.Event)  # set by clear(): delayed requests go on at once


class Faults:
    def __init__(self, enabled: bool = False, cluster: "SimCluster | None" = None) -> None:
        self.enabled = enabled
        self.cluster = cluster
        self.active: dict[str, Fault] = {}  # resource key -> fault
        self.corrupt = 0  # how many of the next API responses get a broken JSON body
        self._answering = asyncio.Event()  # cleared by silence()
        self._answering.set()

    def _require(self) -> "SimCluster":
        if not self.enabled:
            raise FaultsDisabled("fault hooks are off: start the simulator with faults enabled (--faults)")
        if self.cluster is None:
            raise FaultsDisabled("fault hooks are not attached to a cluster")
        return self.cluster

    def _resource_key(self, key: str) -> str:
        """A resource key (`pods`), or one with a subresource (`pods/proxy`)."""
        cluster = self._require()
        resource, _, sub = key.partition("/")
        if resource not in cluster.store.resources:
            raise ValueError(f"unknown resource {resource!r}; served: {', '.join(cluster.store.resources)}")
        if sub and sub not in cluster.store.resources[resource].subresources:
            raise ValueError(f"{resource} has no subresource {sub!r}")
        return key

    def compact(self) -> None:
        self._require().store.compact()

    def drop_watches(self) -> int:
        return self._require().store.drop_watches()

    def fail(self, resource_key: str, code: int, retry_after: int = 1) -> None:
        """Answer every request for the resource with 403, 500, or 429/503 with Retry-After: retry_after seconds."""
        if code not in (403, 429, 500, 503):
            raise ValueError("fail() answers 403, 429, 500 or 503")
        fault = self.active.setdefault(self._resource_key(resource_key), Fault())
        fault.code, fault.retry_after = code, retry_after

    def slow(self, resource_key: str, seconds: float) -> None:
        self.active.setdefault(self._resource_key(resource_key), Fault()).delay = seconds

    def corrupt_next(self, count: int = 1) -> None:
        """The next `count` API responses with a body (not watch or log streams) end mid-JSON."""
        self._require()
        self.corrupt += max(0, count)

    def take_corrupt(self) -> bool:
        """The server's check: whether to break this response (and count it)."""
        if self.corrupt <= 0:
            return False
        self.corrupt -= 1
        return True

    def silence(self) -> None:
        """Accept connections and answer nothing: every request waits, /version too, and open watches send
        nothing more (a hung API server, a black-holed load balancer), until clear()."""
        self._require()
        self._answering.clear()

    async def answering(self) -> None:
        """Returns once the server answers (at once unless silence() is on)."""
        if not self._answering.is_set():
            await self._answering.wait()

    def clear(self, resource_key: str | None = None) -> None:
        self._require()
        if resource_key is None:
            ended = list(self.active.values())
            self.active.clear()
            self.corrupt = 0
            self._answering.set()
        else:
            ended = [fault] if (fault := self.active.pop(resource_key, None)) is not None else []
        for fault in ended:
            fault.cleared.set()

    async def restart(self, downtime: float = 0.5, *, fresh: bool = False, writes_while_down: int = 0,
                      back: asyncio.Event | None = None) -> None:
        await self._require().restart(downtime=downtime, fresh=fresh, writes_while_down=writes_while_down, back=back)

    def describe(self) -> dict[str, object]:
        """What is active, for the control endpoint."""
        return {"faults": {k: {"code": f.code, "delay": f.delay} for k, f in sorted(self.active.items())},
                "corruptNext": self.corrupt, "silent": not self._answering.is_set()}

    # -- GPU signals ------------------------------------------------------------------------------
    def _node(self, name: str) -> dict[str, Any]:
        node = self._require().store.find("nodes", "", name)
        if node is None:
            raise ValueError(f'node "{name}" not found')
        return node

    def _gpu_index(self, node: dict[str, Any], gpu: int) -> None:
        count = len(NodeGpus(node).gpus)
        if gpu < 0 or (count and gpu >= count):
            raise ValueError(f"node {node['metadata']['name']} has GPUs 0 to {count - 1}, not {gpu}")

    def xid(self, node_name: str, gpu: int, code: int) -> None:
        """The node's DCGM exporter reports XID `code` on GPU `gpu` from now on (0: none)."""
        node = self._node(node_name)
        self._gpu_index(node, gpu)
        if code < 0:
            raise ValueError("an XID is a number not below 0")

        def change(obj: dict[str, Any]) -> None:
            annotations = obj["metadata"].setdefault("annotations", {})
            try:
                xids = parse_xid_annotation(annotations.get(XID_ANNOTATION, ""))
            except ValueError:
                xids = {}
            xids.pop(gpu, None)
            if code:
                xids[gpu] = code
            if xids:
                annotations[XID_ANNOTATION] = ",".join(f"{i}:{c}" for i, c in sorted(xids.items()))
            else:
                annotations.pop(XID_ANNOTATION, None)

        self._require().store.mutate("nodes", "", node_name, change)

    def gpu_health(self, node_name: str, gpu: int, healthy: bool) -> None:
        """The device plugin's health check finds GPU `gpu` unhealthy (or healthy again): its devices leave
        allocatable (or come back), and the kubelet says so in the status of the pods holding them."""
        node = self._node(node_name)
        self._gpu_index(node, gpu)

        def change(obj: dict[str, Any]) -> None:
            annotations = obj["metadata"].setdefault("annotations", {})
            before = NodeGpus(obj)
            try:
                bad = set(parse_unhealthy_annotation(annotations.get(UNHEALTHY_ANNOTATION, "")))
            except ValueError:
                bad = set()
            if healthy:
                bad.discard(gpu)
            else:
                bad.add(gpu)
            if bad:
                annotations[UNHEALTHY_ANNOTATION] = ",".join(str(i) for i in sorted(bad))
            else:
                annotations.pop(UNHEALTHY_ANNOTATION, None)
            after = NodeGpus(obj)
            status = obj.setdefault("status", {})
            allocatable = status.setdefault("allocatable", {})
            for resource, capacity in after.capacity.items():
                was = sum(1 for d in before.devices(resource) if before.is_unhealthy(d))
                now = sum(1 for d in after.devices(resource) if after.is_unhealthy(d))
                if was != now:
                    left = after.allocatable.get(resource, capacity) - (now - was)
                    allocatable[resource] = str(max(0, min(capacity, left)))

        self._require().store.mutate("nodes", "", node_name, change)

    def _change_node(self, node_name: str, change: Any) -> None:
        self._node(node_name)
        self._require().store.mutate("nodes", "", node_name, change)

    def mig_state(self, node_name: str, state: str) -> None:
        """The MIG manager's nvidia.com/mig.config.state (pending, rebooting, success, failed)."""
        if state not in plumbing.MIG_STATES:
            raise ValueError(f"MIG state {state!r}: one of {', '.join(plumbing.MIG_STATES)}")
        self._change_node(node_name, lambda obj: plumbing.set_mig_state(obj, state))

    def upgrade_state(self, node_name: str, state: str) -> None:
        """The GPU driver upgrade controller moves the node to `state` (nvidia.com/gpu-driver-upgrade-state)."""
        if state not in plumbing.UPGRADE_STATES:
            raise ValueError(f"driver upgrade state {state!r}: one of {', '.join(plumbing.UPGRADE_STATES)}")
        now = b.utcnow()
        self._change_node(node_name, lambda obj: plumbing.set_upgrade_state(obj, state, now))

    def quarantine(self, node_name: str, condition: str, message: str = "") -> None:
        """NVSentinel: a health monitor sets `condition` True, its fault quarantine cordons the node."""
        if not _LABEL_VALUE.fullmatch(condition):
            raise ValueError(f"condition type {condition!r} is not a name")
        plumbing.monitor(condition)  # a check one of its monitors sends
        now = b.utcnow()
        self._change_node(node_name, lambda obj: plumbing.quarantine(obj, condition, message or f"{condition} failed", now))

    def heal(self, node_name: str, condition: str, halted: bool = False) -> None:
        """The monitor finds the node healthy again (`condition` False); NVSentinel lifts its quarantine once no
        check holds it, unless its fault quarantine is `halted` (the cordon stays)."""
        now = b.utcnow()
        self._change_node(node_name, lambda obj: plumbing.heal(obj, condition, now, halted=halted))

    def compute_domain(self, namespace: str, name: str, joined: list[str], not_ready: list[str]) -> str:
        """The ComputeDomain's IMEX daemons: those on `joined` started (Ready unless in `not_ready`), the others
        did not; its status follows as the driver's controller sets it. Returns that status."""
        key = f"computedomains.{compute_domains.GROUP}"
        store = self._require().store
        if key not in store.resources:
            raise ValueError("no ComputeDomain CRD in this cluster")
        domain = store.find(key, namespace, name)
        if domain is None:
            raise ValueError(f"no ComputeDomain {namespace}/{name}")
        for node in joined:
            self._node(node)
        if set(not_ready) - set(joined):
            raise ValueError(f"not Ready but not joined: {', '.join(sorted(set(not_ready) - set(joined)))}")
        before = {e.get("name"): e for e in (domain.get("status") or {}).get("nodes") or []}

        def change(obj: dict[str, Any]) -> None:
            entries = [{**(before.get(node) or compute_domains.node_entry(node, i, "")),
                        "status": compute_domains.NOT_READY if node in not_ready else compute_domains.READY}
                       for i, node in enumerate(joined)]
            compute_domains.set_nodes(obj, entries)

        return str(store.mutate(key, namespace, name, change)["status"]["status"])

    def _slice_with(self, node_name: str, device: str) -> dict[str, Any]:
        self._node(node_name)
        for candidate in self._require().store.objects(SLICES):
            spec = candidate.get("spec") or {}
            if spec.get("nodeName") == node_name and any(d.get("name") == device for d in spec.get("devices") or []):
                return candidate
        raise ValueError(f"no ResourceSlice of node {node_name} publishes a device {device!r}")

    def taint_device(self, node_name: str, device: str, key: str, value: str = "", effect: str = "NoSchedule") -> None:
        """A DRA device taint (KEP-5055) on the device of the node's ResourceSlice, as the NVIDIA DRA driver
        puts one on an unhealthy GPU; a taint of the same key and effect is replaced."""
        if not _LABEL_NAME.fullmatch(key):
            raise ValueError(f"taint key {key!r} is not a label name (prefix/name)")
        if value and not _LABEL_VALUE.fullmatch(value):
            raise ValueError(f"taint value {value!r} is not a label value")
        if effect == "NoExecute":
            raise ValueError("NoExecute would evict the pods using the device; the simulator does not evict: use NoSchedule or None")
        if effect not in ("NoSchedule", "None"):
            raise ValueError(f"effect {effect!r}: one of NoSchedule, None")
        found = self._slice_with(node_name, device)

        def change(obj: dict[str, Any]) -> None:
            for d in obj["spec"]["devices"]:
                if d.get("name") == device:
                    taints = [t for t in d.get("taints") or [] if (t.get("key"), t.get("effect")) != (key, effect)]
                    taint = {"key": key, "effect": effect, "timeAdded": b.rfc3339(b.utcnow())}
                    if value:
                        taint["value"] = value
                    d["taints"] = [*taints, taint]

        self._require().store.mutate(SLICES, "", found["metadata"]["name"], change)

    def untaint_device(self, node_name: str, device: str, key: str | None = None) -> None:
        """Take the device's taints off (those of `key`, or all)."""
        found = self._slice_with(node_name, device)

        def change(obj: dict[str, Any]) -> None:
            for d in obj["spec"]["devices"]:
                if d.get("name") == device:
                    kept = [t for t in d.get("taints") or [] if key is not None and t.get("key") != key]
                    if kept:
                        d["taints"] = kept
                    else:
                        d.pop("taints", None)

        self._require().store.mutate(SLICES, "", found["metadata"]["name"], change)

    def lookup(self, resource_key: str) -> Fault | None:
        """The server's per-request check (`pods` or `pods/proxy`)."""
        if not self.active:
            return None
        return self.active.get(resource_key)
