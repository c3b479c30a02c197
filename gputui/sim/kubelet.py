"""The simulated kubelets: one per node, running the pods bound to it.

A kubelet of a Ready node starts its pods (image pulls, init containers, then
the app containers, with the kubelet's events), keeps full container
statuses, restarts crashing containers with back-off, enforces
activeDeadlineSeconds, hands GPU devices to containers as the device plugin
would, and finishes deletions. A NotReady node's kubelet does nothing. See
controllers.py for the node faults and pod annotations that steer it.

Each pod is run by a PodRunner (pod_runner.py); a container's state and what its
program sees are in containers.py.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from . import builders as b
from . import programs
from .dra import claim_devices
from .nvidia_smi import NodeGpus
from .pod_runner import PodRunner
from .store import Event

if TYPE_CHECKING:
    from .controllers import Controllers

Obj = dict[str, Any]

FAULT_ANNOTATION = "sim.gputui.io/fault"


def node_faults(node: Obj) -> frozenset[str]:
    value = ((node.get("metadata") or {}).get("annotations") or {}).get(FAULT_ANNOTATION, "")
    return frozenset(f.strip() for f in value.split(",") if f.strip())


def _idle(pod: Obj) -> bool:
    """A running pod whose containers all just run (no output, no timers): it needs no task."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if status.get("phase") != "Running" or spec.get("activeDeadlineSeconds") or spec.get("initContainers"):
        return False
    statuses = {s.get("name"): s for s in status.get("containerStatuses") or []}
    for c in spec.get("containers") or []:
        if "running" not in ((statuses.get(c.get("name")) or {}).get("state") or {}):
            return False
        if programs.program_for(pod, c, init=False) is not programs.forever:
            return False
    return True


class Kubelet:
    def __init__(self, controllers: "Controllers", node: Obj, index: int) -> None:
        self.controllers = controllers
        self.store = controllers.store
        self.logs = controllers.logs
        self.name = node["metadata"]["name"]
        self.index = index
        self.node = node
        self.gpus = NodeGpus(node)
        self.faults = node_faults(node)
        self.runners: dict[tuple[str, str], PodRunner] = {}
        self.terminations: set[asyncio.Task[None]] = set()
        self.allocated: dict[str, dict[str, str]] = {}  # resource -> device id -> pod uid
        self._ip_slot = 0
        self.images: set[str] = set()  # images present on the node (filled by Controllers from the pods it ran)

    @property
    def ready(self) -> bool:
        return b.node_is_ready(self.node)

    def next_pod_ip(self) -> str:
        """An address from the node's podCIDR (scenario pods use the low ones)."""
        self._ip_slot += 1
        cidr = (self.node.get("spec") or {}).get("podCIDR") or f"10.244.{self.index}.0/24"
        prefix = cidr.split("/")[0].rsplit(".", 1)[0]
        return f"{prefix}.{100 + self._ip_slot % 150}"

    # -- reacting to the store ------------------------------------------
    def sync_all(self, pods: list[Obj] | None = None) -> None:
        """Take up the node's pods (all of them, or those given) from their stored state."""
        if not self.ready:
            return
        if pods is None:
            pods = [e.obj for e in self.store.entries("pods") if (e.obj.get("spec") or {}).get("nodeName") == self.name]
        for pod in pods:
            self.sync_pod(pod)

    def on_node(self, node: Obj) -> None:
        was_ready = self.ready
        self.node = node
        self.gpus = NodeGpus(node)
        self.faults = node_faults(node)
        if self.ready and not was_ready:
            self.sync_all()
        elif was_ready and not self.ready:
            for runner in list(self.runners.values()):
                self.controllers.track(runner.stop())
            self.runners.clear()
            self.allocated.clear()

    def on_pod(self, event: Event) -> None:
        pod = event.obj
        key = (pod["metadata"].get("namespace", ""), pod["metadata"]["name"])
        if event.type == "DELETED":
            self.release_uid(pod["metadata"].get("uid", ""))
            runner = self.runners.pop(key, None)
            if runner is not None and not runner.terminating:
                self.controllers.track(runner.stop())
            if runner is None or not runner.terminating:
                self.logs.forget_pod(*key)
            return
        if self.ready:
            self.sync_pod(pod)

    def sync_pod(self, pod: Obj) -> None:
        meta = pod["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        runner = self.runners.get(key)
        if runner is not None and runner.uid != meta.get("uid"):
            return  # an old incarnation is still finishing
        if meta.get("deletionTimestamp"):
            if runner is None:
                runner = PodRunner(self, self.store.get("pods", *key))
                self.runners[key] = runner
            if not runner.terminating:
                grace = float(meta.get("deletionGracePeriodSeconds", 30) or 0)
                self.controllers.track(runner.terminate(grace))
            return
        if runner is None and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            if _idle(pod):
                # A running pod with nothing to do: no task; just hold its devices (keeps 100k-pod clusters cheap).
                self._reserve(pod)
                return
            runner = PodRunner(self, self.store.get("pods", *key))
            self.runners[key] = runner
            runner.start()

    def forget(self, runner: PodRunner) -> None:
        self.release(runner)
        key = (runner.namespace, runner.name)
        if self.runners.get(key) is runner:
            del self.runners[key]

    # -- devices ----------------------------------------------------------
    def assign_devices(self, runner: PodRunner) -> bool:
        """Give the pod's containers GPU devices, as the device plugin's Allocate does.

        False (and the pod Failed with UnexpectedAdmissionError) when the node has too few free.
        """
        wanted = {r: int(n) for r, n in b.pod_requests(runner.pod).items() if b.is_gpu_resource(r) and n > 0}
        given: dict[str, list[str]] = {}
        for resource, count in wanted.items():
            taken = self.allocated.setdefault(resource, {})
            mine = [d for d, uid in taken.items() if uid == runner.uid]
            free = [d for d in self.gpus.healthy_devices(resource) if d not in taken]
            if len(mine) < count and len(free) < count - len(mine):
                runner.failure = ("UnexpectedAdmissionError",
                                  f"Allocate failed due to requested number of devices unavailable for {resource}. "
                                  f"Requested: {count}, Available: {len(free)}, which is unexpected")
                for ctr in runner.apps:
                    ctr.state = {"waiting": {"reason": "ContainerCreating"}}
                runner.event("UnexpectedAdmissionError", runner.failure[1], "Warning")
                runner.publish()
                self.release(runner)
                return False
            for device in free[: max(0, count - len(mine))]:
                taken[device] = runner.uid
                mine.append(device)
            given[resource] = mine
        for ctr_list in (runner.inits, runner.apps):
            offset: dict[str, int] = {}
            for ctr in ctr_list:
                ctr.devices = []
                for resource, n in b.container_requests(ctr.spec).items():
                    if resource in given:
                        start = 0 if ctr.init else offset.get(resource, 0)
                        ctr.devices += given[resource][start:start + int(n)]
                        offset[resource] = start + int(n)
                # Devices of the claims the container names, as the DRA driver's kubelet plugin prepares them.
                claimed = claim_devices(self.store, runner.pod, ctr.spec)
                if claimed:
                    ctr.devices += self.gpus.add_dra_devices([d for _, _, d in claimed])
        return True

    def _reserve(self, pod: Obj) -> None:
        uid = pod["metadata"].get("uid", "")
        for resource, count in b.pod_requests(pod).items():
            if b.is_gpu_resource(resource) and count > 0:
                taken = self.allocated.setdefault(resource, {})
                held = sum(1 for owner in taken.values() if owner == uid)
                free = [d for d in self.gpus.healthy_devices(resource) if d not in taken]
                for device in free[: max(0, int(count) - held)]:
                    taken[device] = uid

    def release(self, runner: PodRunner) -> None:
        self.release_uid(runner.uid)

    def release_uid(self, uid: str) -> None:
        for taken in self.allocated.values():
            for device in [d for d, owner in taken.items() if owner == uid]:
                del taken[device]

    async def stop(self) -> None:
        runners = list(self.runners.values())
        self.runners.clear()
        await asyncio.gather(*(r.stop() for r in runners), return_exceptions=True)
