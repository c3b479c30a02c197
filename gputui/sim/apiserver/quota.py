"""ResourceQuota: what a namespace's quotas count, the admission check kube-apiserver's ResourceQuota plugin
makes on a new object, and the quota controller's status (hard and used).

Counted, as the pod evaluator and the generic object-count evaluator count them:

    pods                    pods not yet Succeeded or Failed
    count/pods              every pod (count/<resource>[.<group>] for any namespaced kind)
    cpu, requests.cpu       the pods' effective requests (containers summed, init containers' peak, overhead)
    memory, requests.memory
    limits.cpu, limits.memory
    ephemeral-storage, requests.ephemeral-storage, limits.ephemeral-storage, requests.hugepages-*
    requests.<extended>     an extended resource (requests.nvidia.com/gpu): only its requests are quota'd

A quota that limits cpu or memory (requests or limits) makes each container name it: `failed quota: <name>:
must specify limits.cpu for: <container>`. A pod that would take a quota over its hard limit is refused with
`exceeded quota: <name>, requested: ..., used: ..., limited: ...`, quantities as kube-apiserver prints them.
Quotas are checked in name order. Not modelled: quota scopes and scope selectors (a scoped quota is applied to
every pod, which is stricter), DRA device-class quotas, and the "status unknown" refusal (the simulator's
usage is always known: it is computed from the store).
"""
from __future__ import annotations

import asyncio
from fractions import Fraction
from typing import Any

from . import quantity as q
from .quantity import Quantity, QuantityError

Obj = dict[str, Any]
QUOTAS = "resourcequotas"
COMPUTE = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})
POD_RESOURCES = COMPUTE | {"pods", "count/pods", "ephemeral-storage", "requests.ephemeral-storage", "limits.ephemeral-storage"}
NATIVE_PREFIXES = ("kubernetes.io/", "requests.", "limits.")


def _quantities(items: Any) -> dict[str, Quantity]:
    out = {}
    for key, value in (items or {}).items():
        try:
            out[key] = q.parse(value)
        except QuantityError:
            continue
    return out


def is_extended(name: str) -> bool:
    """An extended resource name (nvidia.com/gpu): fully qualified, outside kubernetes.io."""
    return "/" in name and not name.startswith(NATIVE_PREFIXES) and not name.split("/", 1)[0].endswith("kubernetes.io")


def _container_usage(requests: dict[str, Quantity], limits: dict[str, Quantity]) -> dict[str, Quantity]:
    """podComputeUsageHelper: the quota names a container's (or a pod's) requests and limits fill."""
    out: dict[str, Quantity] = {"pods": Quantity(Fraction(1))}
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            out[name] = out[f"requests.{name}"] = requests[name]
        if name in limits:
            out[f"limits.{name}"] = limits[name]
    for name, value in requests.items():
        if name.startswith("hugepages-"):
            out[name] = out[f"requests.{name}"] = value
        if is_extended(name):
            out[f"requests.{name}"] = value
    return out


def _container_lists(c: Obj) -> tuple[dict[str, Quantity], dict[str, Quantity]]:
    resources = c.get("resources") or {}
    limits = _quantities(resources.get("limits"))
    requests = {**limits, **_quantities(resources.get("requests"))}  # requests default to limits (the API's defaulting)
    return requests, limits


def _pod_lists(pod: Obj) -> tuple[dict[str, Quantity], dict[str, Quantity]]:
    """The pod's effective requests and limits: app containers and sidecars summed, each init container's peak."""
    spec = pod.get("spec") or {}
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}
    for c in spec.get("containers") or []:
        r, lim = _container_lists(c)
        requests, limits = q.add_lists(requests, r), q.add_lists(limits, lim)
    sidecars_r: dict[str, Quantity] = {}
    sidecars_l: dict[str, Quantity] = {}
    for c in spec.get("initContainers") or []:
        r, lim = _container_lists(c)
        if c.get("restartPolicy") == "Always":
            sidecars_r, sidecars_l = q.add_lists(sidecars_r, r), q.add_lists(sidecars_l, lim)
            requests, limits = q.add_lists(requests, r), q.add_lists(limits, lim)
            continue
        for total, own, side in ((requests, r, sidecars_r), (limits, lim, sidecars_l)):
            for key, value in q.add_lists(own, side).items():
                if key not in total or value.value > total[key].value:
                    total[key] = value
    overhead = _quantities(spec.get("overhead"))
    return q.add_lists(requests, overhead), q.add_lists(limits, overhead)


def counts_compute(pod: Obj) -> bool:
    """QuotaV1Pod: a pod that has not ended (nor passed its deletion's grace period) counts for compute resources."""
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def pod_usage(pod: Obj) -> dict[str, Quantity]:
    usage = {"count/pods": Quantity(Fraction(1))}
    if counts_compute(pod):
        usage.update(_container_usage(*_pod_lists(pod)))
    return usage


# Core kinds a quota also counts by their bare name (`services: 10`), besides count/<resource>.
LEGACY_COUNTS = frozenset({"services", "configmaps", "secrets", "persistentvolumeclaims", "replicationcontrollers", "resourcequotas"})


def object_count_name(resource: Any) -> str:
    return f"count/{resource.key}"


def usage_of(resource: Any, obj: Obj) -> dict[str, Quantity]:
    """What one object of a kind takes of a quota."""
    if resource.kind == "Pod":
        return pod_usage(obj)
    usage = {object_count_name(resource): Quantity(Fraction(1))}
    if resource.key in LEGACY_COUNTS:
        usage[resource.key] = Quantity(Fraction(1))
    return usage


def matching(resource: Any, hard: dict[str, Quantity]) -> list[str]:
    """The quota's resource names an object of this kind is counted against."""
    if resource.kind != "Pod":
        return [name for name in hard if name == object_count_name(resource) or (name == resource.key and name in LEGACY_COUNTS)]
    return [name for name in hard if name in POD_RESOURCES or name.startswith("requests.hugepages-")
            or (name.startswith("requests.") and is_extended(name.removeprefix("requests.")))]


def constraints(required: list[str], pod: Obj) -> str | None:
    """The pod evaluator's Constraints: every container names the cpu and memory the quota limits."""
    needed = set(required) & COMPUTE
    missing: dict[str, set[str]] = {}
    spec = pod.get("spec") or {}
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        has = set(_container_usage(*_container_lists(c)))
        for name in needed - has:
            missing.setdefault(name, set()).add(c.get("name", ""))
    if not missing:
        return None
    return "must specify " + "; ".join(f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing))


def hard_of(quota: Obj) -> dict[str, Quantity]:
    return _quantities((quota.get("spec") or {}).get("hard"))


def used_in(store: Any, namespace: str, hard: dict[str, Quantity]) -> dict[str, Quantity]:
    """The quota controller's usage: every hard name, counted over the namespace's objects ("0" where none)."""
    used = {name: q.parse("0") for name in hard}
    for resource in store.resources.values():
        if not resource.namespaced:
            continue
        names = matching(resource, hard)
        if not names:
            continue
        for entry in store.entries(resource.key, namespace):
            usage = usage_of(resource, entry.obj)
            for name in names:
                if name in usage:
                    used[name] = used[name] + usage[name] if used[name].value else usage[name]
    return used


def status_for(store: Any, quota: Obj) -> Obj:
    """The status the quota controller writes: hard as the spec says, used as counted now."""
    hard = hard_of(quota)
    used = used_in(store, quota["metadata"].get("namespace", ""), hard)
    return {"hard": {k: str(v) for k, v in hard.items()}, "used": {k: str(used[k]) for k in hard}}


def check(store: Any, resource: Any, obj: Obj, namespace: str) -> str | None:
    """The ResourceQuota plugin on a create: the refusal's text (after `<kind> "<name>" is forbidden: `), or None."""
    quotas = sorted((e.obj for e in store.entries(QUOTAS, namespace)), key=lambda o: o["metadata"]["name"])
    if not quotas:
        return None
    usage = usage_of(resource, obj)
    pertinent = []
    for quota in quotas:
        hard = hard_of(quota)
        names = matching(resource, hard)
        if not names:
            continue
        if resource.kind == "Pod" and (why := constraints(names, obj)) is not None:
            return f"failed quota: {quota['metadata']['name']}: {why}"
        pertinent.append((quota, hard, names))
    for quota, hard, names in pertinent:
        requested = {name: usage[name] for name in names if name in usage and usage[name].sign != 0}
        if not requested:
            continue
        used = used_in(store, namespace, hard)
        exceeded = [name for name, value in requested.items() if (used[name] + value).value > hard[name].value]
        if exceeded:
            return (f"exceeded quota: {quota['metadata']['name']}, requested: {q.pretty({n: requested[n] for n in exceeded})}, "
                    f"used: {q.pretty({n: used[n] for n in exceeded})}, limited: {q.pretty({n: hard[n] for n in exceeded})}")
    return None


def sync_status(store: Any, namespace: str) -> None:
    """Write each of the namespace's quotas' status where it differs from what is counted now."""
    for entry in store.entries(QUOTAS, namespace):
        status = status_for(store, entry.obj)
        if entry.obj.get("status") != status:
            def put(obj: Obj, status: Obj = status) -> None:
                obj["status"] = status
            store.mutate(QUOTAS, namespace, entry.obj["metadata"]["name"], put)


class QuotaController:
    """Keeps every ResourceQuota's status.used true to the objects in its namespace, as kube-controller-manager's
    quota controller does (the admission plugin also writes it as it admits a pod: server/writing.py)."""

    DELAY = 0.05  # real seconds: a burst of changes makes one status write per quota

    def __init__(self, store: Any) -> None:
        self.store = store
        self._dirty: set[str] = set()
        self._handle: asyncio.TimerHandle | None = None

    def on_event(self, event: Any) -> None:
        resource = event.resource
        if not resource.namespaced or resource.key == "events":
            return
        namespace = event.obj["metadata"].get("namespace", "")
        if resource.key == QUOTAS:
            old = event.old or {}
            if event.type == "DELETED" or old.get("spec") == event.obj.get("spec") and event.type == "MODIFIED":
                return
        elif not self.store.entries(QUOTAS, namespace):
            return
        self._dirty.add(namespace)
        if self._handle is None:
            self._handle = asyncio.get_running_loop().call_later(self.DELAY, self.flush)

    def settle_all(self) -> None:
        """At start: every quota's status from what the store holds (a scenario's quotas may come without one)."""
        for namespace in sorted({e.obj["metadata"].get("namespace", "") for e in self.store.entries(QUOTAS)}):
            sync_status(self.store, namespace)

    def flush(self) -> None:
        self._handle = None
        dirty, self._dirty = self._dirty, set()
        for namespace in sorted(dirty):
            sync_status(self.store, namespace)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
