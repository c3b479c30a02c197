"""kube-controller-manager's node lifecycle controller and its taint-eviction controller, for the simulated cluster.

A node whose kubelet stops posting its status (the node annotation `sim.gputui.io/fault: kubelet-stopped`) is,
after the node monitor grace period, marked as the real controller marks it: every condition Unknown with reason
`NodeStatusUnknown` and message `Kubelet stopped posting node status.` (the heartbeat kept). A node that is not
Ready gets the `node.kubernetes.io/unreachable` taints (Ready Unknown) or `not-ready` ones (Ready False), NoSchedule
and NoExecute (with timeAdded), taken off once it is Ready again; each of its pods gets Ready=False and a
`NodeNotReady` event. The taint-eviction controller then deletes every pod that does not tolerate a NoExecute
taint, at once or when the toleration's tolerationSeconds have passed since the taint's timeAdded (300 s for the
tolerations DefaultTolerationSeconds gives every pod; a DaemonSet's pods tolerate them forever): a
DisruptionTarget condition, a `TaintManagerEviction` event and a graceful delete, which leaves the pod
Terminating, since no kubelet is there to finish it. A node whose kubelet comes back is Ready again.

Times are simulated seconds (the cluster's `speed`); `SimCluster.node_monitor_grace_period` (50 s, as in
1.34) and `node_monitor_period` (5 s) set them.
"""
from __future__ import annotations

import asyncio
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .. import builders as b
from ..apiserver.deletion import delete_stored
from .kubelet import node_faults
from .scheduler import tolerates
from ..apiserver.store import NotFound

if TYPE_CHECKING:
    from .controllers import Controllers

Obj = dict[str, Any]

COMPONENT = "node-controller"
STOPPED = "kubelet-stopped"  # the node fault: its kubelet no longer posts status
UNREACHABLE, NOT_READY = "node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"
NODE_CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
UNKNOWN_REASON, UNKNOWN_MESSAGE = "NodeStatusUnknown", "Kubelet stopped posting node status."
FINISHED = ("Succeeded", "Failed")


def ready_status(node: Obj) -> str | None:
    """The node's Ready condition status: True, False or Unknown; None when it has none (a scenario's node given
    without conditions is left alone: the real controller's start-up grace, never over)."""
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return str(cond.get("status") or "Unknown")
    return None


def _seconds_since(stamp: str | None, now: datetime) -> float:
    try:
        return (now - datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))).total_seconds()
    except ValueError:
        return 0.0


class NodeLifecycleController:
    def __init__(self, controllers: "Controllers") -> None:
        self.controllers = controllers
        self.store = controllers.store
        self._stopped_since: dict[str, float] = {}  # node -> loop time its kubelet stopped posting
        self._lost: set[str] = set()  # nodes this controller marked Unknown
        self._evicted: set[str] = set()  # uids of pods already evicted
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    @property
    def _cluster(self) -> Any:
        return self.controllers.cluster

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="node-lifecycle-controller")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def on_event(self, event: Any) -> None:
        """A node changed, or a pod came onto one: a pass soon rather than at the next period."""
        if event.resource.key == "nodes" or (event.type == "ADDED" and (event.obj.get("spec") or {}).get("nodeName")):
            self._wake.set()

    async def _loop(self) -> None:
        while True:
            self.sync()
            period = float(getattr(self._cluster, "node_monitor_period", 5.0)) / self.controllers.speed
            try:  # asyncio.timeout, not 3.11's wait_for, which can lose the stop's cancellation
                async with asyncio.timeout(period):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            await asyncio.sleep(0)  # a burst of writes: one pass

    def sync(self) -> None:
        """One monitoring pass over every node (monitorNodeHealth, then the taint-eviction controller's view)."""
        pods_by_node: dict[str, list[Obj]] = {}
        for entry in self.store.entries("pods"):
            spec = entry.obj.get("spec")
            node = spec.get("nodeName") if isinstance(spec, dict) else None
            if isinstance(node, str) and node:
                pods_by_node.setdefault(node, []).append(entry.obj)
        for entry in self.store.entries("nodes"):
            name = entry.obj["metadata"]["name"]
            try:
                self._sync_node(entry.obj, pods_by_node.get(name, []))
            except NotFound:
                continue
            except Exception as error:  # noqa: BLE001  (a node it cannot read is skipped; the others are watched)
                self.controllers.skip("node-lifecycle-controller", f"node {name}", error)

    def _sync_node(self, node: Obj, pods: list[Obj]) -> None:
        name = node["metadata"]["name"]
        loop_now = asyncio.get_running_loop().time()
        speed = self.controllers.speed
        if STOPPED in node_faults(node):
            since = self._stopped_since.setdefault(name, loop_now)
            grace = float(getattr(self._cluster, "node_monitor_grace_period", 50.0))
            if ready_status(node) not in ("Unknown", None) and (loop_now - since) * speed >= grace:
                node = self.store.mutate("nodes", "", name, _mark_unknown)
                self._lost.add(name)
                self.controllers.events.record(node, "NodeNotReady", f"Node {name} status is now: NodeNotReady", component=COMPONENT)
        else:
            self._stopped_since.pop(name, None)
            if name in self._lost:  # its kubelet posts again
                self._lost.discard(name)
                node = self.store.mutate("nodes", "", name, _mark_ready)
        ready = ready_status(node)
        if ready is None:
            return
        wanted = [] if ready == "True" else [NOT_READY if ready == "False" else UNREACHABLE]
        taints = (node.get("spec") or {}).get("taints") or []
        if sorted({t.get("key") for t in taints if t.get("key") in (UNREACHABLE, NOT_READY)}) != wanted or \
                any(not any(t.get("key") == key and t.get("effect") == effect for t in taints)
                    for key in wanted for effect in ("NoSchedule", "NoExecute")):
            node = self.store.mutate("nodes", "", name, lambda n: _set_taints(n, wanted))
        if ready == "True":
            return
        now = b.utcnow()
        no_execute = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") == "NoExecute"]
        for pod in pods:
            if (pod.get("status") or {}).get("phase") in FINISHED:
                continue
            self._mark_not_ready(pod)
            due = _eviction_due(pod, no_execute, now, speed)
            if due and not pod["metadata"].get("deletionTimestamp") and pod["metadata"].get("uid") not in self._evicted:
                self._evict(pod)

    def _mark_not_ready(self, pod: Obj) -> None:
        """MarkPodsNotReady: the pod's Ready condition False, and a NodeNotReady event about it."""
        conditions = (pod.get("status") or {}).get("conditions") or []
        if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            return
        stamp = b.rfc3339(b.utcnow())

        def not_ready(p: Obj) -> None:
            for cond in (p.get("status") or {}).get("conditions") or []:
                if cond.get("type") == "Ready" and cond.get("status") != "False":
                    cond["status"] = "False"
                    cond["lastTransitionTime"] = stamp

        meta = pod["metadata"]
        updated = self.store.mutate("pods", meta.get("namespace", ""), meta["name"], not_ready)
        self.controllers.events.record(updated, "NodeNotReady", "Node is not ready", kind="Warning", component=COMPONENT)

    def _evict(self, pod: Obj) -> None:
        """The taint-eviction controller's delete: DisruptionTarget, the event, a graceful delete."""
        meta = pod["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        self._evicted.add(meta.get("uid", ""))
        stamp = b.rfc3339(b.utcnow())

        def disruption(p: Obj) -> None:
            conditions = [c for c in (p.get("status") or {}).get("conditions") or [] if c.get("type") != "DisruptionTarget"]
            conditions.append(b.pod_condition("DisruptionTarget", "True", stamp, "DeletionByTaintManager",
                                              "Taint manager: deleting due to NoExecute taint"))
            p.setdefault("status", {})["conditions"] = conditions

        current = self.store.mutate("pods", namespace, name, disruption)
        self.controllers.events.record(current, "TaintManagerEviction", f"Marking for deletion Pod {namespace}/{name}",
                                       component="taint-eviction-controller")
        delete_stored(self.store, self.controllers.logs, self.store.resource("pods"), current)


def _eviction_due(pod: Obj, taints: list[Obj], now: datetime, speed: float) -> bool:
    """Whether the taint-eviction controller deletes the pod now: a NoExecute taint it does not tolerate, or the
    shortest tolerationSeconds among the tolerations it uses passed since the taint was added."""
    if not taints:
        return False
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    for taint in taints:
        used = [t for t in tolerations if tolerates([t], taint)]
        if not used:
            return True
        bounded = [t.get("tolerationSeconds") for t in used]
        if all(isinstance(s, int) for s in bounded):  # one without tolerationSeconds tolerates it forever
            if _seconds_since(taint.get("timeAdded"), now) * speed >= max(0, min(bounded)):
                return True
    return False


def _mark_unknown(node: Obj) -> None:
    """tryUpdateNodeHealth: every condition the kubelet posts, Unknown; the heartbeat stays the kubelet's last."""
    stamp = b.rfc3339(b.utcnow())
    status = node.setdefault("status", {})
    conditions = status.setdefault("conditions", [])
    known = {c.get("type"): c for c in conditions}
    for kind in NODE_CONDITIONS:
        cond = known.get(kind)
        if cond is None:
            conditions.append({"type": kind, "status": "Unknown", "reason": "NodeStatusNeverUpdated",
                               "message": "Kubelet never posted node status.", "lastHeartbeatTime": stamp,
                               "lastTransitionTime": stamp})
        elif cond.get("status") != "Unknown":
            cond.update(status="Unknown", reason=UNKNOWN_REASON, message=UNKNOWN_MESSAGE, lastTransitionTime=stamp)


def _mark_ready(node: Obj) -> None:
    """What the kubelet posts once it is back."""
    stamp = b.rfc3339(b.utcnow())
    posted = {"MemoryPressure": ("False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
              "DiskPressure": ("False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
              "PIDPressure": ("False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
              "Ready": ("True", "KubeletReady", "kubelet is posting ready status")}
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") in posted:
            status, reason, message = posted[cond["type"]]
            cond.update(status=status, reason=reason, message=message, lastHeartbeatTime=stamp, lastTransitionTime=stamp)


def _set_taints(node: Obj, wanted: list[str]) -> None:
    """The controller's taints: those of `wanted` (NoSchedule and NoExecute, the latter with timeAdded), no other."""
    spec = node.setdefault("spec", {})
    taints = [t for t in spec.get("taints") or [] if t.get("key") not in (UNREACHABLE, NOT_READY) or t.get("key") in wanted]
    for key in wanted:
        if not any(t.get("key") == key and t.get("effect") == "NoSchedule" for t in taints):
            taints.append({"key": key, "effect": "NoSchedule"})
        if not any(t.get("key") == key and t.get("effect") == "NoExecute" for t in taints):
            taints.append({"key": key, "effect": "NoExecute", "timeAdded": b.rfc3339(b.utcnow())})
    if taints:
        spec["taints"] = taints
    else:
        spec.pop("taints", None)
