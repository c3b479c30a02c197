"""The simulated kubelets: one per node, running the pods bound to it.

A kubelet of a Ready node starts its pods (image pulls, init containers, then
the app containers, with the kubelet's events), keeps full container
statuses, restarts crashing containers with back-off, enforces
activeDeadlineSeconds, hands GPU devices to containers as the device plugin
would (and, as KEP-4680's ResourceHealthStatus has it, writes each container's
`allocatedResourcesStatus`: its devices and their health, Unhealthy on a GPU
the node's `sim.gputui.io/unhealthy-gpus` names), and finishes deletions.
A pod that merely runs (no task of its own) gets that status written only once
one of its devices is unhealthy, to keep big clusters cheap. A NotReady node's kubelet does nothing. See
controllers.py for the node faults and pod annotations that steer it.

Each pod is run by a PodRunner (pod_runner.py); a container's state and what its
program sees are in containers.py.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from .. import builders as b
from . import programs
from .dra import claim_devices
from .nvidia_smi import NodeGpus
from .pod_runner import PodRunner
from ..apiserver.store import Event, NotFound

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
        self.idle_pods: dict[str, tuple[str, str]] = {}  # uid -> (namespace, name) of pods held without a runner
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
            try:
                self.sync_pod(pod)
            except Exception as error:  # noqa: BLE001  (a pod it cannot read is skipped; the node's others run)
                meta = pod.get("metadata") or {}
                self.controllers.skip(f"kubelet {self.name}", f"pod {meta.get('namespace')}/{meta.get('name')}", error)

    def on_node(self, node: Obj) -> None:
        was_ready = self.ready
        was_unhealthy = self.gpus.unhealthy_gpus
        self.node = node
        self.gpus = NodeGpus(node)
        self.faults = node_faults(node)
        if self.ready and was_ready and self.gpus.unhealthy_gpus != was_unhealthy:
            self.controllers.track(self._health_changed())
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
                ctr.plugin_devices = {}
                for resource, n in b.container_requests(ctr.spec).items():
                    if resource in given:
                        start = 0 if ctr.init else offset.get(resource, 0)
                        ctr.plugin_devices[resource] = given[resource][start:start + int(n)]
                        ctr.devices += ctr.plugin_devices[resource]
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
                # A running pod keeps the devices it was given (the kubelet's checkpoint), healthy or not since.
                free = [d for d in self.gpus.devices(resource) if d not in taken]
                for device in free[: max(0, int(count) - held)]:
                    taken[device] = uid
                self.idle_pods[uid] = (pod["metadata"].get("namespace", ""), pod["metadata"]["name"])
        if self.gpus.unhealthy_gpus:
            self.controllers.track(self._idle_health_later(uid))

    async def _idle_health_later(self, uid: str) -> None:
        """After the write being handed round now (a write from inside a store listener would reach the
        other listeners before it)."""
        self._write_idle_health(uid)

    # -- device health (KEP-4680) --------------------------------------------
    def device_health(self, devices: dict[str, list[str]]) -> list[Obj]:
        """A container's `allocatedResourcesStatus` for its device-plugin devices (resource -> device ids)."""
        return [{"name": resource, "resources": [{"resourceID": d, "health": "Unhealthy" if self.gpus.is_unhealthy(d) else "Healthy"}
                                                 for d in ids]}
                for resource, ids in sorted(devices.items()) if ids]

    def _split(self, containers: list[Obj], given: dict[str, list[str]]) -> dict[str, dict[str, list[str]]]:
        """The pod's devices per app container, in the containers' order, as Allocate hands them out."""
        offset: dict[str, int] = {}
        out: dict[str, dict[str, list[str]]] = {}
        for container in containers:
            for resource, n in b.container_requests(container).items():
                if resource in given:
                    start = offset.get(resource, 0)
                    out.setdefault(container.get("name", ""), {})[resource] = given[resource][start:start + int(n)]
                    offset[resource] = start + int(n)
        return out

    def _write_idle_health(self, uid: str) -> None:
        """Write the health of a runner-less pod's devices into its container statuses, when it changed."""
        key = self.idle_pods.get(uid)
        if key is None:
            return
        given = {r: [d for d, owner in taken.items() if owner == uid] for r, taken in self.allocated.items()}
        try:
            pod = self.store.get("pods", *key)
        except NotFound:
            self.idle_pods.pop(uid, None)
            return
        per_container = self._split((pod.get("spec") or {}).get("containers") or [], given)

        def change(obj: Obj) -> None:
            for status in (obj.get("status") or {}).get("containerStatuses") or []:
                devices = per_container.get(status.get("name", ""))
                if devices:
                    status["allocatedResourcesStatus"] = self.device_health(devices)

        wanted = {name: self.device_health(devices) for name, devices in per_container.items()}
        shown = {s.get("name", ""): s.get("allocatedResourcesStatus") for s in (pod.get("status") or {}).get("containerStatuses") or []}
        if any(shown.get(name) != health for name, health in wanted.items() if name in shown):
            self.store.mutate("pods", *key, change)

    async def _health_changed(self) -> None:
        """The plugin's health of some GPU changed: the pods holding devices say so again."""
        for runner in list(self.runners.values()):
            if any(ctr.plugin_devices for ctr in runner.apps):
                try:
                    runner.publish()
                except NotFound:
                    continue
        for uid in list(self.idle_pods):
            self._write_idle_health(uid)

    def release(self, runner: PodRunner) -> None:
        self.release_uid(runner.uid)

    def release_uid(self, uid: str) -> None:
        self.idle_pods.pop(uid, None)
        for taken in self.allocated.values():
            for device in [d for d, owner in taken.items() if owner == uid]:
                del taken[device]

    async def stop(self) -> None:
        runners = list(self.runners.values())
        self.runners.clear()
        await asyncio.gather(*(r.stop() for r in runners), return_exceptions=True)
