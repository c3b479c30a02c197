"""Kueue (kueue.x-k8s.io/v1beta2): why a queued GPU job waits, and each ClusterQueue's GPU quota.

What is relied on, as Kueue 0.15 and later serve and write it (v1beta2; older Kueue serves only
v1beta1 and reads here as not installed):

- Workload: `spec.queueName` (a LocalQueue of its namespace), `spec.podSets[]` (`count`, `template`);
  `status.conditions` (metav1.Condition): `QuotaReserved` (False with the scheduler's message, e.g.
  `couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor
  h100, 4 more needed`), `Admitted`, `Evicted`, `Finished`; `status.admission.clusterQueue`.
- A pod's Workload: the one its label `kueue.x-k8s.io/prebuilt-workload-name` or
  `kueue.x-k8s.io/pod-group-name` names, else one whose ownerReferences hold the pod itself (the
  pod integration: a plain pod, gated by `kueue.x-k8s.io/admission` until admitted) or the pod's
  controller (a batch/v1 Job's pods; a Job waiting for admission is suspended and has none).
- LocalQueue: `spec.clusterQueue`; `status.pendingWorkloads`, `status.admittedWorkloads`.
- ClusterQueue: `spec.cohortName`, `spec.resourceGroups[].flavors[].resources[]` (`name`,
  `nominalQuota`, `borrowingLimit`); `status.flavorsReservation[].resources[].total` (the quota its
  workloads reserve: what the next one is measured against), `status.pendingWorkloads`,
  `status.reservingWorkloads`, `status.admittedWorkloads`, the `Active` condition.

Only GPU resources are kept (a queue's CPU and memory quotas are not shown), and only Workloads that
ask for a GPU and have not finished: memory follows the GPU workload.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .gpu import GpuResources
from .quantities import parse_count, parse_time
from .records import Pod, effective_requests
from .watch import ABSENT, FORBIDDEN, ResourceState

Obj = dict[str, Any]

API = "/apis/kueue.x-k8s.io/v1beta2"
PREBUILT_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
NOT_INSTALLED = "Kueue is not installed in this cluster (kueue.x-k8s.io/v1beta2 is not served)"


@dataclass(frozen=True, slots=True)
class Condition:
    status: bool
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Workload:
    namespace: str
    name: str
    queue: str  # spec.queueName
    cluster_queue: str  # status.admission.clusterQueue: where its quota is reserved; "" when none
    owners: tuple[tuple[str, str, str], ...]  # (kind, name, uid) of its ownerReferences
    gpu: dict[str, int]  # the GPUs its pod sets ask for, all pods together
    quota_reserved: Condition | None
    admitted: Condition | None
    evicted: Condition | None
    created: float | None

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    @property
    def is_admitted(self) -> bool:
        return self.admitted is not None and self.admitted.status


@dataclass(frozen=True, slots=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str
    pending: int | None  # None: Kueue has not reported a status
    admitted: int | None


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    name: str
    cohort: str
    quota: dict[str, int]  # per GPU resource: nominalQuota summed over flavors
    borrowing_limit: dict[str, int | None]  # per GPU resource, summed; None where some flavor sets none (no limit)
    used: dict[str, int] | None  # per GPU resource: flavorsReservation totals; None before Kueue reported them
    pending: int | None
    reserving: int | None
    admitted: int | None
    active: Condition | None

    def free(self, resource: str) -> int | None:
        """Nominal quota not reserved (0 while borrowing); None when the reservation is not known."""
        if self.used is None:
            return None
        return max(0, self.quota.get(resource, 0) - self.used.get(resource, 0))


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _condition(status: Obj, type_: str) -> Condition | None:
    for c in status.get("conditions") or ():
        if c.get("type") == type_:
            return Condition(c.get("status") == "True", str(c.get("reason") or ""), str(c.get("message") or ""))
    return None


def workload_from(obj: Obj, resources: GpuResources) -> Workload | None:
    """The Workload's record; None when it asks for no GPU or has finished."""
    spec, status, meta = obj.get("spec") or {}, obj.get("status") or {}, _meta(obj)
    finished = _condition(status, "Finished")
    if finished is not None and finished.status:
        return None
    gpu: dict[str, int] = {}
    for pod_set in spec.get("podSets") or ():
        count = int(pod_set.get("count") or 0)
        for name, n in resources.of(effective_requests((pod_set.get("template") or {}).get("spec") or {})).items():
            gpu[name] = gpu.get(name, 0) + n * count
    if not gpu:
        return None
    return Workload(
        namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""), queue=str(spec.get("queueName") or ""),
        cluster_queue=str((status.get("admission") or {}).get("clusterQueue") or ""),
        owners=tuple((str(r.get("kind") or ""), str(r.get("name") or ""), str(r.get("uid") or ""))
                     for r in meta.get("ownerReferences") or ()),
        gpu=gpu, quota_reserved=_condition(status, "QuotaReserved"), admitted=_condition(status, "Admitted"),
        evicted=_condition(status, "Evicted"), created=parse_time(meta.get("creationTimestamp")),
    )


def _count(status: Obj, key: str) -> int | None:
    value = status.get(key)
    return value if isinstance(value, int) else None


def local_queue_from(obj: Obj) -> LocalQueue:
    meta, status = _meta(obj), obj.get("status") or {}
    return LocalQueue(str(meta.get("namespace") or ""), str(meta.get("name") or ""), str((obj.get("spec") or {}).get("clusterQueue") or ""),
                      _count(status, "pendingWorkloads"), _count(status, "admittedWorkloads"))


def cluster_queue_from(obj: Obj, resources: GpuResources) -> ClusterQueue:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    quota: dict[str, int] = {}
    limit: dict[str, int | None] = {}
    for group in spec.get("resourceGroups") or ():
        for flavor in group.get("flavors") or ():
            for r in flavor.get("resources") or ():
                name = str(r.get("name") or "")
                if name not in resources:
                    continue
                quota[name] = quota.get(name, 0) + parse_count(r.get("nominalQuota"))
                before = limit.get(name, 0)
                limit[name] = None if before is None or r.get("borrowingLimit") is None else before + parse_count(r["borrowingLimit"])
    used: dict[str, int] | None = None
    if isinstance(status.get("flavorsReservation"), list):
        used = {name: 0 for name in quota}
        for flavor in status["flavorsReservation"]:
            for r in flavor.get("resources") or ():
                name = str(r.get("name") or "")
                if name in resources:
                    used[name] = used.get(name, 0) + parse_count(r.get("total"))
    return ClusterQueue(
        name=str(_meta(obj).get("name") or ""), cohort=str(spec.get("cohortName") or spec.get("cohort") or ""), quota=quota,
        borrowing_limit=limit, used=used, pending=_count(status, "pendingWorkloads"), reserving=_count(status, "reservingWorkloads"),
        admitted=_count(status, "admittedWorkloads"), active=_condition(status, "Active"),
    )


class Kueue:
    """The three kinds' records, indexed: a pod's Workload, a Workload's ClusterQueue, a ClusterQueue's LocalQueues.
    known: whether each kind (Workloads, LocalQueues, ClusterQueues) was listed whole: an empty list then means none."""

    def __init__(self, workloads: Iterable[Workload], local_queues: Iterable[LocalQueue], cluster_queues: Iterable[ClusterQueue],
                 known: tuple[bool, bool, bool] = (True, True, True)) -> None:
        self.workloads_known, self.local_queues_known, self.cluster_queues_known = known
        self.workloads = sorted(workloads, key=lambda w: w.key)
        self.local_queues = sorted(local_queues, key=lambda q: (q.namespace, q.name))
        self.cluster_queues = sorted(cluster_queues, key=lambda q: q.name)
        self._by_name = {w.key: w for w in self.workloads}
        self._by_owner: dict[tuple[str, str, str], Workload] = {}  # (namespace, owner kind, owner name)
        for w in self.workloads:
            for kind, name, _uid in w.owners:
                self._by_owner.setdefault((w.namespace, kind, name), w)
        self._queues = {(q.namespace, q.name): q for q in self.local_queues}

    def workload_of(self, pod: Pod) -> Workload | None:
        named = pod.labels.get(PREBUILT_LABEL) or pod.labels.get(GROUP_LABEL)
        if named:
            return self._by_name.get((pod.namespace, named))
        own = self._by_owner.get((pod.namespace, "Pod", pod.name))
        if own is not None and any(kind == "Pod" and name == pod.name and uid in ("", pod.uid) for kind, name, uid in own.owners):
            return own
        return self._by_owner.get((pod.namespace, *pod.owner)) if pod.owner else None

    def cluster_queue_of(self, workload: Workload) -> str:
        """Where the Workload is (or would be) admitted: its admission, else its LocalQueue's ClusterQueue ("" when unknown)."""
        if workload.cluster_queue:
            return workload.cluster_queue
        queue = self._queues.get((workload.namespace, workload.queue))
        return queue.cluster_queue if queue is not None else ""

    def waiting(self, workload: Workload) -> str | None:
        """Why Kueue holds the Workload back, one line naming its ClusterQueue and itself; None once admitted."""
        if workload.is_admitted:
            return None
        cq = self.cluster_queue_of(workload)
        where = f"ClusterQueue {cq}" if cq else f"LocalQueue {workload.queue or '(none)'}"
        reserved = workload.quota_reserved
        state = "quota reserved, not admitted" if reserved is not None and reserved.status else "queued"
        return f"{state} in Kueue {where}: {why(workload)} (Workload {workload.namespace}/{workload.name})"

    def pending(self, cluster_queue: str | None = None) -> list[Workload]:
        """The GPU Workloads not admitted (of one ClusterQueue), oldest first."""
        waiting = [w for w in self.workloads if not w.is_admitted and (cluster_queue is None or self.cluster_queue_of(w) == cluster_queue)]
        return sorted(waiting, key=lambda w: (w.created or 0.0, w.key))

    def local_queues_of(self, cluster_queue: str) -> list[LocalQueue]:
        return [q for q in self.local_queues if q.cluster_queue == cluster_queue]

    def to_json(self) -> dict[str, Any]:
        """The report's `queues`; a list is None when its kind was not listed whole."""
        return {
            "cluster_queues": None if not self.cluster_queues_known else [{
                "name": q.name, "cohort": q.cohort or None,
                "gpu": {r: {"quota": n, "borrowing_limit": q.borrowing_limit.get(r), "used": None if q.used is None else q.used.get(r, 0),
                            "free": q.free(r)} for r, n in q.quota.items()},
                "pending": q.pending, "reserving": q.reserving, "admitted": q.admitted,
            } for q in self.cluster_queues],
            "local_queues": None if not self.local_queues_known else [
                {"namespace": q.namespace, "name": q.name, "cluster_queue": q.cluster_queue, "pending": q.pending, "admitted": q.admitted}
                for q in self.local_queues],
            "pending_workloads": None if not self.workloads_known else [
                {"namespace": w.namespace, "name": w.name, "queue": w.queue, "cluster_queue": self.cluster_queue_of(w) or None,
                 "gpu": dict(w.gpu), "reason": why(w)} for w in self.pending()],
        }


def why(workload: Workload) -> str:
    """What Kueue says of a Workload not admitted: the QuotaReserved condition's message (its Admitted one
    once quota is reserved: admission checks), `evicted: ...` first when it was evicted."""
    reserved, admitted = workload.quota_reserved, workload.admitted
    if reserved is not None and reserved.status:
        words = (admitted.message or admitted.reason) if admitted is not None else "admission checks pending"
    else:
        words = (reserved.message or reserved.reason) if reserved is not None else "not tried yet (no condition)"
    if workload.evicted is not None and workload.evicted.status:
        words = f"evicted: {workload.evicted.message or workload.evicted.reason}; {words}"
    return words


def state(states: Mapping[str, ResourceState], kinds: Iterable[str]) -> str | None:
    """None when Kueue's kinds are all listed; NOT_INSTALLED when none is served; else what keeps them unknown
    (`workloads forbidden: ...`, `clusterqueues syncing`)."""
    watched = [(kind, states[kind]) for kind in kinds if kind in states]
    if not watched or all(s.phase == ABSENT for _, s in watched):
        return NOT_INSTALLED
    troubled = [f"{kind} {s.describe()}" for kind, s in watched if s.phase == FORBIDDEN or (not s.synced and s.phase != ABSENT)]
    return "; ".join(troubled) or None
