"""Running one pod on its node (see kubelet.py): image pulls, init containers, then the app containers,
with the kubelet's events and full container statuses; restarts with back-off, activeDeadlineSeconds, deletion."""
from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .. import builders as b
from . import programs
from .containers import RUNTIME_HOOK_ERROR, Container, ProgramContext, Stopped, registry_error
from ..apiserver.store import NotFound

if TYPE_CHECKING:
    from .kubelet import Kubelet

Obj = dict[str, Any]

MAX_BACKOFF = b.MAX_BACKOFF  # seconds, as the kubelet caps CrashLoopBackOff and ImagePullBackOff


def _parse_time(stamp: str | None) -> datetime | None:
    if not stamp:
        return None
    try:
        return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


class PodRunner:
    """Runs one pod on its node, from its stored state, until it ends or is deleted."""

    def __init__(self, kubelet: "Kubelet", pod: Obj) -> None:
        self.kubelet = kubelet
        self.pod = pod
        meta = pod["metadata"]
        self.namespace, self.name, self.uid = meta["namespace"], meta["name"], meta.get("uid", "")
        spec = pod["spec"]
        self.restart_policy = spec.get("restartPolicy", "Always")
        status = pod.get("status") or {}
        self.inits = [Container(c, True) for c in spec.get("initContainers") or []]
        self.apps = [Container(c, False) for c in spec.get("containers") or []]
        if any(not c.sidecar for c in self.inits):
            for ctr in self.apps:
                ctr.state = {"waiting": {"reason": "PodInitializing"}}
        self._load(status.get("initContainerStatuses") or [], self.inits)
        self._load(status.get("containerStatuses") or [], self.apps)
        self.start_time = status.get("startTime")
        self.failure: tuple[str, str] | None = None  # pod-level (reason, message), e.g. DeadlineExceeded
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.main: asyncio.Task[None] | None = None
        self.terminating = False

    @staticmethod
    def _load(statuses: list[Obj], containers: list[Container]) -> None:
        by_name = {s.get("name"): s for s in statuses}
        for ctr in containers:
            s = by_name.get(ctr.name)
            if not s:
                continue
            ctr.state = s.get("state") or ctr.state
            ctr.last_state = s.get("lastState") or {}
            ctr.restarts = s.get("restartCount", 0)
            ctr.ready = bool(s.get("ready"))
            ctr.started = bool(s.get("started"))
            ctr.ran = "running" in ctr.state or "terminated" in ctr.state or bool(ctr.last_state)
            if (ctr.state.get("waiting") or {}).get("reason") == "CrashLoopBackOff":
                # A crash-looping container has run, whatever its status lacks (lastState, restartCount,
                # containerID), and stays broken: nothing in the simulator fixes what made it crash.
                ctr.ran = True
                last = ctr.last_state.get("terminated") or {}
                code = last.get("exitCode")
                ctr.crash_code = code if isinstance(code, int) and not isinstance(code, bool) and code != 0 else 1
                ctr.crash_message = last.get("message") if isinstance(last.get("message"), str) else None
                # Waiting out the back-off of its restartCount; the next one is twice as long.
                ctr.backoff, ctr.backoff_at = b.crash_loop_backoff(ctr.restarts), time.monotonic()
            ctr.pulled = ctr.ran

    # -- status ----------------------------------------------------------
    def phase(self) -> str:
        if self.failure:
            return "Failed"
        for ctr in self.inits:
            if ctr.sidecar:
                continue
            if ctr.exit_code == 0:
                continue
            if ctr.exit_code is not None and self.restart_policy == "Never":
                return "Failed"
            return "Pending"
        if all(c.exit_code is not None for c in self.apps):
            return "Succeeded" if all(c.exit_code == 0 for c in self.apps) else "Failed"
        if any(c.running or c.ran for c in self.apps):
            return "Running"
        return "Pending"

    def status(self, old: Obj) -> Obj:
        now = b.rfc3339(b.utcnow())
        phase = self.phase()
        old_conditions = {c.get("type"): c for c in old.get("conditions") or []}

        def cond(kind: str, ok: bool, reason: str | None = None, message: str | None = None) -> Obj:
            value = "True" if ok else "False"
            prev = old_conditions.get(kind)
            since = prev["lastTransitionTime"] if prev and prev.get("status") == value else now
            return b.pod_condition(kind, value, since, None if ok else reason, None if ok else message)

        initialized = all(c.exit_code == 0 or (c.sidecar and c.started) for c in self.inits)
        waiting_inits = [c.name for c in self.inits if not (c.exit_code == 0 or (c.sidecar and c.started))]
        unready = [c.name for c in self.apps if not c.ready]
        finished = phase in ("Succeeded", "Failed")
        ready_reason = "PodCompleted" if phase == "Succeeded" else "PodFailed" if finished else "ContainersNotReady"
        ready_message = None if finished else f"containers with unready status: [{' '.join(unready)}]"
        sandbox = not finished
        conditions = [
            cond("PodReadyToStartContainers", sandbox),
            cond("Initialized", initialized, "ContainersNotInitialized",
                 f"containers with incomplete status: [{' '.join(waiting_inits)}]"),
            cond("Ready", not unready and not finished, ready_reason, ready_message),
            cond("ContainersReady", not unready and not finished, ready_reason, ready_message),
            old_conditions.get("PodScheduled") or b.pod_condition("PodScheduled", "True", now),
        ]
        host_ip = b.node_ip(self.kubelet.node)
        status: Obj = {
            "phase": phase,
            "conditions": conditions,
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "qosClass": old.get("qosClass") or b.qos_class(self.pod["spec"]["containers"]),
            "startTime": self.start_time or now,
            "containerStatuses": [self._container_status(c) for c in self.apps],
        }
        if self.inits:
            status["initContainerStatuses"] = [self._container_status(c) for c in self.inits]
        if old.get("podIP") or any(c.ran for c in self.inits + self.apps):
            ip = old.get("podIP") or (host_ip if self.pod["spec"].get("hostNetwork") else self.kubelet.next_pod_ip())
            status["podIP"] = ip
            status["podIPs"] = [{"ip": ip}]
        if self.failure:
            status["reason"], status["message"] = self.failure
        return status

    def _container_status(self, ctr: Container) -> Obj:
        s: Obj = {
            "image": b.full_image(ctr.spec["image"]),
            "imageID": b.image_id(ctr.spec["image"]) if ctr.pulled else "",
            "lastState": ctr.last_state,
            "name": ctr.name,
            "ready": ctr.ready,
            "restartCount": ctr.restarts,
            "started": ctr.started,
            "state": ctr.state,
        }
        if ctr.ran:
            s["containerID"] = self._container_id(ctr)
        if ctr.plugin_devices:
            s["allocatedResourcesStatus"] = self.kubelet.device_health(ctr.plugin_devices)
        return s

    def _container_id(self, ctr: Container) -> str:
        return b.container_id(self.namespace, self.name, ctr.name, ctr.restarts)

    def publish(self) -> None:
        """Write the pod's status as this runner sees it; raises NotFound when the pod is gone."""
        def change(pod: Obj) -> None:
            pod["status"] = self.status(pod.get("status") or {})
        self.pod = self.kubelet.store.mutate("pods", self.namespace, self.name, change)

    def event(self, reason: str, message: str, kind: str = "Normal", ctr: Container | None = None) -> None:
        field_path = None
        if ctr is not None:
            field_path = f"spec.{'initContainers' if ctr.init else 'containers'}{{{ctr.name}}}"
        self.kubelet.controllers.events.record(self.pod, reason, message, kind=kind, component="kubelet",
                                               host=self.kubelet.name, field_path=field_path)

    # -- running ---------------------------------------------------------
    def start(self) -> None:
        self.main = asyncio.create_task(self._run(), name=f"pod {self.namespace}/{self.name}")

    async def _run(self) -> None:
        try:
            if self.phase() in ("Succeeded", "Failed"):
                return
            if not self.kubelet.assign_devices(self):
                return
            if self.start_time is None:
                self.start_time = b.rfc3339(b.utcnow())
                self.publish()
            deadline = self.pod["spec"].get("activeDeadlineSeconds")
            if deadline:
                self.spawn("__deadline__", self._deadline(float(deadline)))
            await self._init_phase()
            for ctr in self.apps:
                if ctr.running:
                    self.spawn(ctr.name, self._supervise(ctr, adopted=True))
                elif ctr.exit_code is None or self._restarts(ctr, ctr.exit_code):
                    if not ctr.ran or "CrashLoopBackOff" not in str(ctr.state):
                        if not await self._launch(ctr):
                            continue
                        self.spawn(ctr.name, self._supervise(ctr, adopted=False))
                    else:
                        self.spawn(ctr.name, self._supervise(ctr, adopted=False, crashed=True))
            await self._wait_containers()
        except NotFound:
            self.kubelet.forget(self)
        except Stopped:
            pass
        except Exception as error:  # noqa: BLE001  (the kubelet goes on with its other pods)
            self.kubelet.controllers.skip(f"kubelet {self.kubelet.name}", f"pod {self.namespace}/{self.name}", error)

    def spawn(self, key: str, coro: Any) -> None:
        self.tasks[key] = asyncio.create_task(coro, name=f"{self.namespace}/{self.name}/{key}")

    async def _wait_containers(self) -> None:
        apps = [t for k, t in self.tasks.items() if k != "__deadline__" and not k.startswith("init:")]
        if apps:
            await asyncio.gather(*apps, return_exceptions=True)
        if self.phase() in ("Succeeded", "Failed") and not self.terminating:
            for task in list(self.tasks.values()):
                task.cancel()
            self.kubelet.release(self)

    async def _init_phase(self) -> None:
        for ctr in self.inits:
            if ctr.sidecar:
                if ctr.running:
                    self.spawn(f"init:{ctr.name}", self._supervise(ctr, adopted=True))
                    continue
                if await self._launch(ctr):
                    self.spawn(f"init:{ctr.name}", self._supervise(ctr, adopted=False))
                    continue
                raise Stopped
            while ctr.exit_code != 0:
                if not await self._launch(ctr):
                    raise Stopped
                code = await self._execute(ctr, b.utcnow())
                self._terminate(ctr, code)
                if code == 0:
                    self.publish()
                    break
                if self.restart_policy == "Never":
                    self.publish()
                    self.kubelet.release(self)
                    raise Stopped
                await self._backoff(ctr)  # publishes the exit

    async def _supervise(self, ctr: Container, *, adopted: bool, crashed: bool = False) -> None:
        """Run the container's program; restart it per restartPolicy with back-off."""
        try:
            started = _parse_time((ctr.state.get("running") or {}).get("startedAt")) if adopted else None
            if crashed:
                await self._replay_last_run(ctr)
                await self._backoff(ctr, already_waiting=True)
                if not await self._launch(ctr):
                    return
            while True:
                code = await self._execute(ctr, started or b.utcnow())
                started = None
                self._terminate(ctr, code)
                if not self._restarts(ctr, code):
                    self.publish()
                    return
                await self._backoff(ctr)
                if not await self._launch(ctr):
                    return
        except NotFound:
            return

    async def _replay_last_run(self, ctr: Container) -> None:
        """Write the log of the run that crashed before this kubelet started (adopted CrashLoopBackOff),
        as the current and previous instances, so `kubectl logs [--previous]` show why it crashes."""
        last = ctr.last_state.get("terminated") or {}
        started = _parse_time(last.get("startedAt")) or b.utcnow()
        for _ in range(2):
            try:
                # asyncio.timeout, not wait_for: wait_for can swallow a stop()'s cancellation that arrives as the
                # program ends, and the task then sleeps out its back-off (a simulator stopped at once hung).
                async with asyncio.timeout(0.5):
                    await self._execute(ctr, started, instant=True)
            except TimeoutError:
                return

    def _restarts(self, ctr: Container, code: int) -> bool:
        if ctr.sidecar:
            return True
        return self.restart_policy == "Always" or (self.restart_policy == "OnFailure" and code != 0)

    async def _execute(self, ctr: Container, started: datetime, *, instant: bool = False) -> int:
        ctx = ProgramContext(self, ctr, started, instant=instant)
        program = programs.program_for(self.pod, ctr.spec, init=ctr.init)
        if ctr.crash_code is not None:
            program = programs.crashing(program, ctr.crash_code, ctr.crash_message)
        self.kubelet.logs.append(self.namespace, self.name, ctr.name, b"")  # a new log instance for this run
        try:
            return await program(ctx)
        finally:
            self.kubelet.logs.end(self.namespace, self.name, ctr.name)

    def _terminate(self, ctr: Container, code: int, reason: str | None = None) -> None:
        running = ctr.state.get("running") or {}
        ctr.state = b.terminated_state(code, reason or ("Completed" if code == 0 else "Error"),
                                       running.get("startedAt", b.rfc3339(b.utcnow())), b.rfc3339(b.utcnow()),
                                       self._container_id(ctr))
        ctr.ready = False
        ctr.started = False

    async def _backoff(self, ctr: Container, already_waiting: bool = False) -> None:
        """Before a container that exited starts again, as the kubelet's doBackOff: without a back-off entry (its
        first exit, or one after it ran 10 minutes) it starts again at once, its entry set to 10 s; else it waits
        in CrashLoopBackOff for the entry's time, which then doubles (5 minutes at most). already_waiting: its
        waiting state is shown already (adopted in CrashLoopBackOff, or RunContainerError)."""
        now = time.monotonic()
        if ctr.backoff is None or (now - ctr.backoff_at) * self.kubelet.controllers.speed > 2 * MAX_BACKOFF:
            ctr.backoff, ctr.backoff_at = b.INITIAL_BACKOFF, now
            if not already_waiting:
                self.publish()  # the exit as the kubelet saw it; the restart follows at once
            ctr.restarts += 1
            return
        delay = ctr.backoff
        if not already_waiting:
            ctr.last_state = ctr.state
            ctr.state = {"waiting": {"reason": "CrashLoopBackOff",
                                     "message": b.back_off_message(delay, ctr.name, self.name, self.namespace, self.uid)}}
            self.publish()
            self.event("BackOff", f"Back-off restarting failed container {ctr.name} in pod {self.name}_{self.namespace}({self.uid})",
                       "Warning", ctr)
        await self.kubelet.controllers.sleep(delay)
        ctr.backoff, ctr.backoff_at = min(2 * delay, MAX_BACKOFF), time.monotonic()
        ctr.restarts += 1

    async def _launch(self, ctr: Container) -> bool:
        """Pull, create and start the container. False when it cannot start and will not (restartPolicy Never)."""
        ctl = self.kubelet.controllers
        image = ctr.spec["image"]
        always_pull = ctr.spec.get("imagePullPolicy") == "Always"
        if not always_pull and (ctr.pulled or image in self.kubelet.images):
            ctr.pulled = True
            self.event("Pulled", f'Container image "{image}" already present on machine', ctr=ctr)
        else:
            await self._pull(ctr)
        await ctl.sleep(0.2)
        if "runtime-hook" in self.kubelet.faults and self._wants_gpu(ctr):
            self.event("Created", f"Created container {ctr.name}", ctr=ctr)
            self.event("Failed", f"Error: {RUNTIME_HOOK_ERROR}", "Warning", ctr)
            # The container was created and never ran: an empty log that has ended.
            self.kubelet.logs.append(self.namespace, self.name, ctr.name, b"")
            self.kubelet.logs.end(self.namespace, self.name, ctr.name)
            ctr.ran = True
            ctr.last_state = ctr.state if "terminated" in ctr.state else ctr.last_state
            now = b.rfc3339(b.utcnow())
            term = b.terminated_state(128, "StartError", "1970-01-01T00:00:00Z", now, self._container_id(ctr), RUNTIME_HOOK_ERROR)
            if not self._restarts(ctr, 128):
                ctr.state = term
                self.publish()
                return False
            ctr.last_state = term
            ctr.state = {"waiting": {"reason": "RunContainerError", "message": RUNTIME_HOOK_ERROR}}
            self.publish()
            await self._backoff(ctr, already_waiting=True)
            return await self._launch(ctr)
        self.event("Created", f"Created container {ctr.name}", ctr=ctr)
        await ctl.sleep(0.1)
        if ctr.ran and "terminated" in ctr.state:
            ctr.last_state = ctr.state
        ctr.ran = True
        ctr.state = {"running": {"startedAt": b.rfc3339(b.utcnow())}}
        ctr.started = True
        ctr.ready = not ctr.init or ctr.sidecar
        self.event("Started", f"Started container {ctr.name}", ctr=ctr)
        self.publish()
        return True

    async def _pull(self, ctr: Container) -> None:
        """Pull the image; on a node whose registry is unreachable, fail and back off as the kubelet does, forever."""
        ctl = self.kubelet.controllers
        image = ctr.spec["image"]
        attempt = 0
        while True:
            self.event("Pulling", f'Pulling image "{image}"', ctr=ctr)
            await ctl.sleep(1.0)
            if "image-pull" not in self.kubelet.faults:
                break
            error = registry_error(image)
            self.event("Failed", f'Failed to pull image "{image}": {error}', "Warning", ctr)
            self.event("Failed", "Error: ErrImagePull", "Warning", ctr)
            ctr.state = {"waiting": {"reason": "ErrImagePull", "message": error}}
            self.publish()
            await ctl.sleep(1.0)
            self.event("BackOff", f'Back-off pulling image "{image}"', ctr=ctr)
            self.event("Failed", "Error: ImagePullBackOff", "Warning", ctr)
            ctr.state = {"waiting": {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{image}"'}}
            self.publish()
            await ctl.sleep(min(10.0 * 2 ** attempt, MAX_BACKOFF))
            attempt += 1
        ctr.pulled = True
        self.kubelet.images.add(image)
        size = 100_000_000 + int(b.digest("size", image, length=6), 16) * 64
        self.event("Pulled", f'Successfully pulled image "{image}" in 1.2s (1.2s including waiting). Image size: {size} bytes.',
                   ctr=ctr)

    @staticmethod
    def _wants_gpu(ctr: Container) -> bool:
        return bool(ctr.devices) or any(b.is_gpu_resource(r) for r in b.container_requests(ctr.spec))

    async def _deadline(self, seconds: float) -> None:
        started = _parse_time(self.start_time) or b.utcnow()
        elapsed = (b.utcnow() - started).total_seconds()
        await self.kubelet.controllers.sleep(max(0.0, seconds - elapsed))
        if self.phase() in ("Succeeded", "Failed") or self.terminating:
            return
        message = "Pod was active on the node longer than the specified deadline"
        for key, task in list(self.tasks.items()):
            if key != "__deadline__":
                task.cancel()
        for ctr in self.inits + self.apps:
            if ctr.running:
                self._terminate(ctr, 137, "Error")
                self.kubelet.logs.end(self.namespace, self.name, ctr.name)
            elif "waiting" in ctr.state:
                ctr.state = b.terminated_state(137, "Error", b.rfc3339(b.utcnow()), b.rfc3339(b.utcnow()), self._container_id(ctr))
        self.failure = ("DeadlineExceeded", message)
        self.event("DeadlineExceeded", message, "Warning")
        try:
            self.publish()
        except NotFound:
            pass
        self.kubelet.release(self)
        if self.main is not None:
            self.main.cancel()

    async def terminate(self, grace: float) -> None:
        """The pod is being deleted: stop its containers, then remove it after a short grace."""
        self.terminating = True
        if self.main is not None:
            self.main.cancel()
        for task in self.tasks.values():
            task.cancel()
        for ctr in self.inits + self.apps:
            if ctr.running:
                self.event("Killing", f"Stopping container {ctr.name}", ctr=ctr)
                self._terminate(ctr, 0)
            self.kubelet.logs.end(self.namespace, self.name, ctr.name)
        # Stopped containers give their devices back before the pod's terminal phase lets the scheduler reuse them.
        self.kubelet.release(self)
        try:
            self.publish()
        except NotFound:
            pass
        await self.kubelet.controllers.sleep(min(grace, 1.0))
        try:
            self.kubelet.store.delete("pods", self.namespace, self.name)
        except NotFound:
            pass
        self.kubelet.logs.forget_pod(self.namespace, self.name)
        self.kubelet.forget(self)

    async def stop(self) -> None:
        """Cancel every task of this pod (the node went away or the simulator stops); state stays as stored."""
        tasks = [t for t in [self.main, *self.tasks.values()] if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
