"""The simulated cluster's behaviour: the scheduler (scheduler.py), one kubelet per node (kubelet.py), and
kube-controller-manager's controllers (DaemonSets, ResourceClaims, quotas, namespaces, node lifecycle).

They react to store writes (Store.subscribe) and do their work in asyncio
tasks; `stop()` ends them all. Time runs `cluster.speed` times faster than
real time (1.0: an image pull takes about a second; tests use 20 or more).

Node annotation a scenario can set (comma-separated values):

    sim.gputui.io/fault: driver-broken   nvidia-smi exits 9 with the driver error; device-plugin
                                         containers fail to initialize NVML and crash-loop; the
                                         GPU Operator's driver container fails to load the module
                                         and crash-loops, and operands' *-validation init
                                         containers wait for it forever (Init:0/N)
    sim.gputui.io/fault: dcgm-broken     the DCGM exporter cannot start its host engine: it
                                         exits 1 and crash-loops
    sim.gputui.io/fault: image-pull      image pulls fail (ErrImagePull, then ImagePullBackOff),
                                         for images not already on the node
    sim.gputui.io/fault: runtime-hook    containers given GPUs fail to start: the NVIDIA runtime
                                         hook's nvidia-container-cli error (RunContainerError,
                                         or StartError/Failed with restartPolicy Never)
    sim.gputui.io/fault: kubelet-stopped the kubelet stops posting node status: the node lifecycle
                                         controller marks the node Unknown, taints it and evicts
                                         its pods (node_lifecycle.py)

Pod annotations:

    sim.gputui.io/run-seconds: "N"       app containers exit after N simulated seconds...
    sim.gputui.io/exit-code: "C"         ...with exit code C (default 0); with restartPolicy
                                         Always a non-zero code crash-loops with back-off

Without them a container runs until stopped; one whose command or args
contain `nvidia-smi` prints nvidia-smi's table for the devices it was given
and exits 0. Device plugins, GPU Operator operands and NFD write realistic
log lines (programs.py).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Coroutine

from .. import builders as b
from ..apiserver.deletion import NamespaceController
from .dra import CLAIMS, DRA_KEYS, ClaimController
from .kubelet import Kubelet
from .node_lifecycle import NodeLifecycleController
from ..apiserver.quota import QuotaController
from .daemonsets import DS_KEY, daemonset_status_for, owned_by
from .scheduler import Scheduler
from ..apiserver.store import Event, NotFound

Obj = dict[str, Any]

# The simulated components' log (`gputui sim` prints it on stderr): what each could not read and skipped.
log = logging.getLogger("gputui.sim")


class EventRecorder:
    """Writes core v1 Events; a repeat of the same event bumps count and lastTimestamp instead of adding one."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self._index: dict[tuple[str, ...], tuple[str, str]] | None = None
        self._serial = 0

    @staticmethod
    def _key(ev: Obj, same_message: bool) -> tuple[str, ...]:
        # By name rather than uid, so that events given in a scenario (whose uids may not match) are continued too;
        # a hit whose uid differs from a known one is a new object of the same name (checked in record).
        ref = ev.get("involvedObject") or {}
        source = ev.get("source") or {}
        return (ref.get("namespace", ""), ref.get("kind", ""), ref.get("name", ""), ref.get("fieldPath", ""),
                ev.get("reason", ""), source.get("component", ""), ev.get("message", "") if same_message else "")

    def _load(self) -> dict[tuple[str, ...], tuple[str, str]]:
        if self._index is None:
            self._index = {}
            for entry in self.store.entries("events"):
                ev = entry.obj
                ident = (ev["metadata"].get("namespace", ""), ev["metadata"]["name"])
                self._index[self._key(ev, True)] = ident
                if ev.get("reason") == "FailedScheduling":
                    self._index[self._key(ev, False)] = ident
        return self._index

    def record(self, involved: Obj, reason: str, message: str, *, kind: str = "Normal", component: str = "kubelet",
               host: str | None = None, field_path: str | None = None, same_message: bool = True) -> None:
        """same_message=False: a repeat with a new message updates the one event (as FailedScheduling does)."""
        index = self._load()
        self._serial += 1
        ev = b.event(involved, reason, message, kind=kind, component=component, host=host, field_path=field_path,
                     serial=self._serial)
        key = self._key(ev, same_message)
        existing = index.get(key)
        current = self.store.find("events", *existing) if existing is not None else None
        known_uid = ((current or {}).get("involvedObject") or {}).get("uid")
        if current is not None and (not known_uid or known_uid == ev["involvedObject"].get("uid")):
            now = b.rfc3339(b.utcnow())

            def bump(obj: Obj) -> None:
                obj["count"] = int(obj.get("count") or 1) + 1
                obj["lastTimestamp"] = now
                obj["message"] = message

            self.store.mutate("events", *existing, bump)  # type: ignore[misc]  # the store's key is (namespace, name) of a found event
            return
        created = self.store.create("events", ev)
        index[key] = (created["metadata"]["namespace"], created["metadata"]["name"])


SCHEDULER_INSTANCE = "default-scheduler-gputui-sim-control-plane"  # kube-scheduler's reportingInstance: its name and host


class SeriesRecorder:
    """Writes events.k8s.io/v1 Events as client-go's tools/events broadcaster does (kube-scheduler's): a repeat of
    an isomorphic event (same regarding object, reason, action and reporter: not its note) becomes a `series`
    (count from 2, lastObservedTime), keeping the first note; core v1 readers see the same objects (event_views.py)."""

    KEY = "events.events.k8s.io"

    def __init__(self, store: Any, controller: str, instance: str) -> None:
        self.store, self.controller, self.instance = store, controller, instance
        self._known: dict[tuple[str, ...], tuple[str, str]] = {}

    def record(self, regarding: Obj, reason: str, note: str, *, action: str, kind: str = "Normal") -> None:
        meta = regarding["metadata"]
        ref = {"apiVersion": regarding.get("apiVersion", "v1"), "kind": regarding.get("kind", "Pod"), "name": meta["name"],
               "namespace": meta.get("namespace", ""), "uid": meta.get("uid", ""), "resourceVersion": meta.get("resourceVersion", "")}
        key = (ref["namespace"], ref["kind"], ref["name"], ref["uid"], reason, action, kind)
        now = b.utcnow()
        stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # a MicroTime
        known = self._known.get(key)
        if known is not None and self.store.find(self.KEY, *known) is not None:
            def repeat(event: Obj) -> None:
                series = event.get("series") or {"count": 1}
                event["series"] = {"count": int(series.get("count") or 1) + 1, "lastObservedTime": stamp}

            self.store.mutate(self.KEY, *known, repeat)
            return
        namespace = ref["namespace"] or "default"
        event = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
                 "metadata": {"name": f"{meta['name']}.{int(now.timestamp() * 1e9):x}", "namespace": namespace},
                 "eventTime": stamp, "reportingController": self.controller, "reportingInstance": self.instance,
                 "action": action, "reason": reason, "regarding": ref, "note": note, "type": kind}
        created = self.store.create(self.KEY, event)
        self._known[key] = (namespace, created["metadata"]["name"])


class DaemonSetController:
    """Keeps each DaemonSet's status true to its pods and the nodes, as they change. A status given in a scenario
    stays until something it depends on changes (one of its pods, a node, its spec)."""

    DELAY = 0.05  # real seconds: changes in one burst make one status write per DaemonSet

    def __init__(self, store: Any) -> None:
        self.store = store
        self._dirty: set[tuple[str, str]] = set()
        self._handle: asyncio.TimerHandle | None = None

    def on_event(self, event: Event) -> None:
        key = event.resource.key
        if key == "nodes":
            self._mark(e.obj["metadata"] for e in self.store.entries(DS_KEY))
        elif key == "pods":
            namespace = event.obj["metadata"].get("namespace", "")
            states = [o for o in (event.obj, event.old) if o is not None]
            self._mark(e.obj["metadata"] for e in self.store.entries(DS_KEY, namespace)
                       if any(owned_by(e.obj, o) for o in states))
        elif key == DS_KEY and event.type != "DELETED":
            old = event.old or {}
            if (event.type == "ADDED" or (old.get("metadata") or {}).get("generation") != event.obj["metadata"].get("generation")
                    or old.get("spec") != event.obj.get("spec")):
                self._mark([event.obj["metadata"]])

    def _mark(self, metas: Any) -> None:
        for meta in metas:
            self._dirty.add((meta.get("namespace", ""), meta["name"]))
        if self._dirty and self._handle is None:
            self._handle = asyncio.get_running_loop().call_later(self.DELAY, self.flush)

    def flush(self) -> None:
        self._handle = None
        dirty, self._dirty = self._dirty, set()
        if not dirty:
            return
        nodes = [e.obj for e in self.store.entries("nodes")]
        for namespace, name in sorted(dirty):
            try:
                entry = self.store.get_entry(DS_KEY, namespace, name)
            except NotFound:
                continue
            pods = [e.obj for e in self.store.entries("pods", namespace)]
            status = daemonset_status_for(entry.obj, pods, nodes)
            if entry.obj.get("status") != status:
                def put(ds: Obj, status: Obj = status) -> None:
                    ds["status"] = status
                self.store.mutate(DS_KEY, namespace, name, put)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


class Controllers:
    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.store = cluster.store
        self.logs = cluster.logs
        self.events = EventRecorder(self.store)
        self.scheduler_events = SeriesRecorder(self.store, "default-scheduler", SCHEDULER_INSTANCE)
        self.scheduler = Scheduler(self)
        self.daemonsets = DaemonSetController(self.store)
        self.claims = ClaimController(self.store)
        self.quotas = QuotaController(self.store)
        self.namespaces = NamespaceController(self.store, self.logs)
        self.node_lifecycle = NodeLifecycleController(self)
        self.kubelets: dict[str, Kubelet] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._running = False
        self._subscribed = False
        self.skipped: list[str] = []  # what the components logged they skipped, oldest first (the last 100)

    def skip(self, component: str, what: str, error: BaseException) -> None:
        """A component met an object it cannot read: it says so in its log (once) and goes on without it."""
        line = f"{component}: skipped {what}: malformed ({type(error).__name__}: {error})"
        if line in self.skipped:
            return
        self.skipped = [*self.skipped[-99:], line]
        log.warning("%s", line)

    def guarded(self, component: str, event: Event, handle: Callable[[Event], None]) -> None:
        """handle(event), or, when the object breaks it, a line in the component's log."""
        try:
            handle(event)
        except Exception as error:  # noqa: BLE001  (no object may stop a simulated component)
            self.skip(component, _shown(event.resource.kind.lower(), event.obj), error)

    @property
    def speed(self) -> float:
        return max(float(getattr(self.cluster, "speed", 1.0) or 1.0), 1e-3)

    async def sleep(self, sim_seconds: float) -> None:
        await asyncio.sleep(max(0.0, sim_seconds) / self.speed)

    def track(self, coro: Coroutine[Any, Any, Any], component: str = "controller", what: str = "a task") -> None:
        """Run a coroutine as a task that stop() will wait for; an error in it goes to the component's log."""
        task = asyncio.create_task(coro)
        self._tasks.add(task)

        def done(task: asyncio.Task[Any]) -> None:
            self._tasks.discard(task)
            if not task.cancelled() and task.exception() is not None:
                self.skip(component, what, task.exception())  # type: ignore[arg-type]  # not None: checked

        task.add_done_callback(done)

    def start(self) -> None:
        self._running = True
        if not self._subscribed:
            self.store.subscribe(self._on_event)
            self._subscribed = True
        by_node: dict[str, list[Obj]] = {}
        for entry in self.store.entries("pods"):
            node = (entry.obj.get("spec") or {}).get("nodeName")
            if node:
                by_node.setdefault(node, []).append(entry.obj)
        for index, entry in enumerate(self.store.entries("nodes")):
            kubelet = self._add_kubelet(entry.obj, index)
            if kubelet is None:
                continue
            for pod in by_node.get(kubelet.name, []):
                spec = pod["spec"]
                for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
                    kubelet.images.add(c.get("image", ""))
        self.claims.settle_all()
        self.quotas.settle_all()
        self.namespaces.settle_all()
        self.scheduler.start()
        for kubelet in self.kubelets.values():
            kubelet.sync_all(by_node.get(kubelet.name, []))
        self.node_lifecycle.start()

    def _add_kubelet(self, node: Obj, index: int | None = None) -> Kubelet | None:
        """The node's kubelet; None (and a line in the log) when the node cannot be read."""
        name = node["metadata"]["name"]
        try:
            kubelet = Kubelet(self, node, len(self.kubelets) if index is None else index)
        except Exception as error:  # noqa: BLE001  (a malformed node has no kubelet; the others run)
            self.skip("kubelet", f"node {name}", error)
            return None
        self.kubelets[name] = kubelet
        return kubelet

    def _on_event(self, event: Event) -> None:
        if not self._running:
            return
        key = event.resource.key
        self.guarded("resourcequota-controller", event, self.quotas.on_event)
        self.guarded("namespace-controller", event, self.namespaces.on_event)
        if key in ("nodes", "pods", DS_KEY):
            self.guarded("daemonset-controller", event, self.daemonsets.on_event)
        if key in ("nodes", "pods"):
            self.guarded("node-lifecycle-controller", event, self.node_lifecycle.on_event)
        if key == "nodes":
            self.guarded("kubelet", event, self._on_node)
            self.guarded("kube-scheduler", event, self.scheduler.on_event)
        elif key in DRA_KEYS:
            if key == CLAIMS:
                self.guarded("resourceclaim-controller", event, self.claims.on_event)
            self.guarded("kube-scheduler", event, self.scheduler.on_event)
        elif key == "pods":
            self.guarded("resourceclaim-controller", event, self.claims.on_event)
            self.guarded("kube-scheduler", event, self.scheduler.on_event)
            spec = event.obj.get("spec")
            node = spec.get("nodeName") if isinstance(spec, dict) else None
            kubelet = self.kubelets.get(node) if isinstance(node, str) else None
            if kubelet is not None:
                self.guarded(f"kubelet {kubelet.name}", event, kubelet.on_pod)

    def _on_node(self, event: Event) -> None:
        name = event.obj["metadata"]["name"]
        if event.type == "DELETED":
            kubelet = self.kubelets.pop(name, None)
            if kubelet is not None:
                self.track(kubelet.stop(), f"kubelet {name}", f"node {name}")
        elif name in self.kubelets:
            self.kubelets[name].on_node(event.obj)
        else:
            kubelet = self._add_kubelet(event.obj)
            if kubelet is not None:
                kubelet.sync_all()

    async def stop(self) -> None:
        self._running = False
        self.daemonsets.stop()
        self.quotas.stop()
        self.namespaces.stop()
        await self.node_lifecycle.stop()
        await self.scheduler.stop()
        await asyncio.gather(*(k.stop() for k in self.kubelets.values()), return_exceptions=True)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _shown(kind: str, obj: Any) -> str:
    """'pod default/p1' for the log."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    namespace = meta.get("namespace")
    return f"{kind} {namespace + '/' if namespace else ''}{meta.get('name', '?')}"
