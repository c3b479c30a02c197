"""ClusterModel: nodes, the pods that matter, their events and daemonsets, kept
live by one reflector each, with the GPU summary on top.

    model = ClusterModel(conn.api)
    unsubscribe = model.subscribe(on_change)   # on_change(Change) per applied event
    await model.start(); await model.wait_synced()
    model.node_summaries(); model.totals(); model.gpu_pods(node="n1"); model.fit()
    await model.stop()

Kept pods (keep.py): those with a GPU request that are not finished, the GPU stack's
own pods (every device-plugin install style, GPU Operator operands, NFD),
unfinished pods that mount the kubelet's device-plugin directory (device
plugins gputui does not know by name), and pods labelled
app.kubernetes.io/managed-by=gputui. Everything else is dropped
as it is read, so memory follows the GPU workload, not the cluster size.
Events are kept for nodes and kept pods only, a bounded number per object
(any pod's until the pods are listed, in every namespace read: then pruned).
The server filters first (SELECTORS): finished pods and the events no screen
shows without asking never come; a pod's other events are listed on demand
(`events_of`). A kind forbidden cluster-wide is read in the namespaces given
(`namespaces`), and `scope(kind)` says so (watches.py).

The GPU stack: ClusterPolicies (`nvidia.com/v1`), DaemonSets and the
`resource.k8s.io/v1` kinds (ResourceSlices, ResourceClaims, DeviceClasses)
are watched too; a kind the cluster does not serve (no CRD, an older cluster:
found through discovery, kube/discovery.py, or a 404) or forbids is simply
empty, its state saying so.  On top:
`stack()` (which install, ClusterPolicy state), per GPU node the component
matrix, DRA devices with their holders, DRA-held GPUs counted as allocated,
and the verdicts component-failing, several-plugins and xid-errors in the
node's problems; `cluster_problems()` has operator-not-ready.  DCGM metrics
come from `model.metrics` (a MetricsPoller: `want()` / `poll_once()`, and
`start_background()` for every GPU node at the slow rate).  Node conditions
set by GPU health monitors and unusual taints on GPU nodes are verdicts too
(health-condition, tainted); every node's problems come worst first.
Kueue's Workloads, LocalQueues and ClusterQueues are optional kinds too: `kueue()` (kube/kueue.py);
a pending GPU pod's reason starts with why Kueue holds its Workload back.

Listeners are called synchronously, once per watch event that changes what
the model keeps (an update that changes nothing a record holds, such as a
heartbeat or an annotation, is not passed on), with a
Change(kind, key); key None means "all of this kind" (after a full list),
kind "state" reports a resource's state and kind "metrics" a node's new
DCGM readings (key: the node). They must be cheap: the UI coalesces.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable

from . import compute_domains, dcgm, dra, fit, gpu, health, kueue, stack, stuck
from .metrics import (
    DEFAULT_BACKGROUND_INTERVAL, DEFAULT_CONCURRENCY, DEFAULT_INTERVAL, DEFAULT_READS_PER_MINUTE, Exporter, MetricsPoller,
    NodeMetrics,
)
from .discovery import DISCOVERY_INTERVAL, Discovery
from .keep import Keep
from .records import DaemonSet, Event, Node, Obj, Pod, daemonset_from, event_from, node_from
from .stack import ComponentState, MigConfig
from .tables import BaseTable, Change, DaemonSetTable, EventTable, Listener, NodeTable, PodTable, Table
from .turns import Turns
from .watch import ABSENT, FORBIDDEN, SYNCING, Reflector, ResourceState
from .watches import Liveness, Scope, Watches, namespaced

if TYPE_CHECKING:
    from .client import Client

log = logging.getLogger(__name__)

NODES, PODS, EVENTS, DAEMONSETS = "nodes", "pods", "events", "daemonsets"
CLUSTERPOLICIES, RESOURCESLICES, RESOURCECLAIMS, DEVICECLASSES = "clusterpolicies", "resourceslices", "resourceclaims", "deviceclasses"
WORKLOADS, LOCALQUEUES, CLUSTERQUEUES = "workloads", "localqueues", "clusterqueues"
COMPUTEDOMAINS, GPUCLUSTERS = "computedomains", "gpuclusters"
COLLECTIONS = {  # what each reflector lists and watches, cluster-wide
    NODES: "/api/v1/nodes",
    PODS: "/api/v1/pods",
    EVENTS: "/api/v1/events",
    DAEMONSETS: "/apis/apps/v1/daemonsets",
    CLUSTERPOLICIES: "/apis/nvidia.com/v1/clusterpolicies",
    RESOURCESLICES: "/apis/resource.k8s.io/v1/resourceslices",
    RESOURCECLAIMS: "/apis/resource.k8s.io/v1/resourceclaims",
    DEVICECLASSES: "/apis/resource.k8s.io/v1/deviceclasses",
    WORKLOADS: f"{kueue.API}/workloads",
    LOCALQUEUES: f"{kueue.API}/localqueues",
    CLUSTERQUEUES: f"{kueue.API}/clusterqueues",
    COMPUTEDOMAINS: f"{compute_domains.API}/computedomains",
    GPUCLUSTERS: "/apis/nvidia.com/v1alpha1/gpuclusters",  # the GPU Operator's DRA-based stack (v26.x), beside no ClusterPolicy
}
DRA_KINDS = (RESOURCESLICES, RESOURCECLAIMS, DEVICECLASSES)
KUEUE_KINDS = (WORKLOADS, LOCALQUEUES, CLUSTERQUEUES)
ALL_KINDS = (NODES, PODS, EVENTS, DAEMONSETS, CLUSTERPOLICIES, GPUCLUSTERS, *DRA_KINDS, *KUEUE_KINDS, COMPUTEDOMAINS)
STATE = "state"
METRICS = "metrics"
AGED = "aged"  # a node's summary made again because time passed: a state became stuck, or its age's words changed
# What the server sends, one cluster-wide watch per field selector (kube-apiserver's selectable fields):
# pods that may still hold a GPU (the GPU stack's namespaces are read whole, see watches.py); the events
# the screens show without asking (a node's; why a pod waits). A pod's other events are listed when its
# details open (events_of). None: no selector.
UNFINISHED_PODS = "status.phase!=Succeeded,status.phase!=Failed"
NODE_EVENTS = "involvedObject.kind=Node"
SCHEDULING_EVENTS = "involvedObject.kind=Pod,reason=FailedScheduling"
SELECTORS: dict[str, tuple[str | None, ...]] = {PODS: (UNFINISHED_PODS,), EVENTS: (NODE_EVENTS, SCHEDULING_EVENTS)}
NAMESPACED = (PODS, EVENTS, DAEMONSETS)  # read namespace by namespace when forbidden cluster-wide


@dataclass(slots=True)
class DraView:
    """What Dynamic Resource Allocation adds, derived from the three DRA tables."""

    devices: dict[str | None, list[dra.DraDevice]]  # per node (None: not tied to one), with holders
    usage: dict[str, dict[str, gpu.Usage]]  # per node: DeviceClass -> its devices, those a claim could get, allocated
    holdings: dict[tuple[str, str], tuple[dra.ClaimHold, ...]]  # per pod (namespace, name): what its claims hold
    classes: dra.ClassDevices  # per DeviceClass selecting NVIDIA GPU devices, its pools


def _nonempty(items: tuple[Any, ...]) -> tuple[Any, ...] | None:
    return items or None


def _collect_and_freeze() -> None:
    gc.collect()
    gc.freeze()


class ClusterModel:
    def __init__(
        self,
        api: Client,
        *,
        resources: gpu.GpuResources = gpu.GpuResources(),
        kinds: Iterable[str] = ALL_KINDS,
        events_per_object: int = 30,
        events_limit: int = 5000,
        metrics_interval: float = DEFAULT_INTERVAL,
        metrics_timeout: float = 4.0,
        metrics_background_interval: float = DEFAULT_BACKGROUND_INTERVAL,
        metrics_reads_per_minute: int = DEFAULT_READS_PER_MINUTE,
        metrics_concurrency: int = DEFAULT_CONCURRENCY,
        metrics_unavailable: str | None = None,
        namespaces: Iterable[str] = (),
        selectors: dict[str, tuple[str | None, ...]] = SELECTORS,
        liveness: Liveness = Liveness(),
        discovery_interval: float = DISCOVERY_INTERVAL,
        xid_old_after: float = health.DEFAULT_XID_OLD_AFTER,
        stuck_settings: stuck.StuckSettings | None = None,
        clock: Callable[[], float] = time.time,
        **reflector_options: Any,
    ) -> None:
        """namespaces: where to read pods, events and DaemonSets when their cluster-wide list is
        forbidden (watches.namespaces_to_try). selectors: the field selectors of each kind's watches.
        xid_old_after: seconds after which an unchanged XID reads as old; stuck_settings: how long MIG changes and driver
        upgrades may take before they are stuck; clock: the time for these ages (tests move it)."""
        self.api = api
        self.resources = resources
        self._listeners: list[Listener] = []
        self._summaries: dict[str, gpu.NodeSummary] = {}
        self.summary_generation = 0  # see _forget_summary
        self._summaries_known = (False, False)  # (pods_known, stack_known) the cached summaries were made with
        self._stack: stack.Stack | None = None
        self._dra: DraView | None = None
        self._kueue: kueue.Kueue | None = None
        self._fit: tuple[int, dict[str, fit.ResourceFit]] | None = None  # (summary_generation, fit) of fit()
        self._froze_gc = False
        # Why no exporter is read at all (a cluster served from a dump: "not in the dump"); None: read them.
        self._metrics_unavailable = metrics_unavailable

        self.keep = Keep(resources, pod_kept=lambda key: key in self.pods.records, pods_listed=self._pods_listed)
        self.nodes = NodeTable(NODES, node_from, self._notify)
        self.pods = PodTable(PODS, self.keep.pod, self._notify, on_node_dirty=self._node_dirty)
        self.events = EventTable(EVENTS, self.keep.event, self._notify, per_object=events_per_object, limit=events_limit)
        self.daemonsets = DaemonSetTable(DAEMONSETS, daemonset_from, self._notify)
        # ClusterPolicies stay raw (a cluster has one or two); DRA objects become their parsed devices,
        # allocations, and the extended resource a DeviceClass stands for (classes without one are not kept).
        self.cluster_policies: Table[Obj] = Table(CLUSTERPOLICIES, lambda obj: obj, self._notify)
        self.gpu_clusters: Table[Obj] = Table(GPUCLUSTERS, lambda obj: obj, self._notify)
        self.resource_slices = Table(RESOURCESLICES, lambda obj: _nonempty(tuple(dra.parse_slices([obj]))), self._notify)
        self.resource_claims: Table[dra.Claim] = Table(RESOURCECLAIMS, dra.claim_from, self._notify)
        self.compute_domains: Table[compute_domains.ComputeDomain] = Table(COMPUTEDOMAINS, compute_domains.domain_from, self._notify)
        self.device_classes = Table(DEVICECLASSES, dra.device_class_from, self._notify)
        self.metrics = MetricsPoller(
            api, self._exporters, self._metrics_updated, interval=metrics_interval, timeout=metrics_timeout,
            concurrency=metrics_concurrency, background_interval=metrics_background_interval,
            reads_per_minute=metrics_reads_per_minute,
        )
        self.clock = clock
        self.xid_old_after = xid_old_after
        self.xids = health.XidMemory(clock)
        self.metrics.on_readings.append(self.xids.record)
        self.stuck_settings = stuck_settings or stuck.StuckSettings()
        self.states_seen = stuck.StateMemory(clock)  # when each MIG, upgrade or cordon state was first seen
        self._due: dict[str, float] = {}  # node -> when its summary is made again (a state becomes stuck, its age moves)
        self._due_timer: asyncio.TimerHandle | None = None

        tables: dict[str, BaseTable[Any, Any]] = {
            NODES: self.nodes,
            PODS: self.pods,
            EVENTS: self.events,
            DAEMONSETS: self.daemonsets,
            CLUSTERPOLICIES: self.cluster_policies,
            GPUCLUSTERS: self.gpu_clusters,
            RESOURCESLICES: self.resource_slices,
            RESOURCECLAIMS: self.resource_claims,
            DEVICECLASSES: self.device_classes,
            WORKLOADS: Table(WORKLOADS, lambda obj: kueue.workload_from(obj, resources), self._notify),
            LOCALQUEUES: Table(LOCALQUEUES, kueue.local_queue_from, self._notify),
            CLUSTERQUEUES: Table(CLUSTERQUEUES, lambda obj: kueue.cluster_queue_from(obj, resources), self._notify),
            COMPUTEDOMAINS: self.compute_domains,
        }
        self.tables = tables
        wanted = set(kinds)
        self.watches = Watches(
            api, tables, COLLECTIONS, [kind for kind in tables if kind in wanted], selectors=selectors, namespaced_kinds=NAMESPACED,
            namespaces=namespaces, on_state=self._state_changed, options=reflector_options, liveness=liveness,
            discovery=Discovery(api, discovery_interval),
        )
        self.reflectors: dict[str, Reflector] = self.watches.primary  # per kind, its (first) cluster-wide reflector

    # -- lifecycle -------------------------------------------------------------
    async def start(self) -> None:
        self.watches.start()

    def unreadable(self) -> list[tuple[str, str, str]]:
        """Objects skipped because no record could be built from them: (kind, namespace/name, why)."""
        out = []
        for kind, table in self.tables.items():
            for key, why in table.unreadable.items():
                name = "/".join(part for part in key if part) if isinstance(key, tuple) else str(key)
                out.append((kind, name, why))
        return sorted(out)

    def all_running(self) -> bool:
        """Every reflector's task is alive (the watchdog restarts one that is not)."""
        return self.watches.all_running()

    async def stop(self) -> None:
        if self._due_timer is not None:
            self._due_timer.cancel()
            self._due_timer = None
        await self.metrics.stop()
        await self.watches.stop()

    async def __aenter__(self) -> "ClusterModel":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def wait_synced(self, timeout: float | None = None, kinds: Iterable[str] | None = None) -> bool:
        """Wait until every resource (or those of `kinds`) has been listed once or found forbidden
        or not served. Returns False on timeout (the states then say why)."""
        if not await self.watches.wait_settled(self.reflectors if kinds is None else kinds, timeout):
            return False
        if kinds is None and not self._froze_gc:
            # The records live long: keep the cyclic GC from scanning them again and again.
            # That takes a full collection first: done once the caller yields, not before
            # the first summary.
            self._froze_gc = True
            asyncio.get_running_loop().call_soon(_collect_and_freeze)
        return True

    # -- change feed -------------------------------------------------------------
    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call listener(Change) after every applied change; returns the unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _notify(self, change: Change) -> None:
        if change.kind in (CLUSTERPOLICIES, GPUCLUSTERS) or (change.kind == DAEMONSETS and (change.key is None or self.daemonsets.stack_changed)):
            self.daemonsets.stack_changed = False
            self._stack = None
            self._forget_summary()  # every node's component matrix depends on the stack
            self._read_stack_namespaces()
            self.metrics.targets_changed()
        elif change.kind in DRA_KINDS:
            self._dra = None
            self._forget_summary()
        elif change.kind in KUEUE_KINDS:
            self._kueue = None  # node figures do not depend on Kueue
        elif change.kind == COMPUTEDOMAINS:
            for domain in self.compute_domains.records.values():  # a status that appears from now on began now
                self.states_seen.seen("computedomain " + domain.key, "status", domain.status)
        elif change.kind == NODES:
            self._forget_summary(change.key if isinstance(change.key, str) else None)
            changed = [self.nodes.records.get(change.key)] if isinstance(change.key, str) else self.nodes.records.values()
            for record in changed:
                if record is not None:
                    stuck.observe(record, self.states_seen)  # a state that appears from now on began now
            if change.key is None:
                self.metrics.targets_changed()
        elif change.kind == PODS:
            if change.key is None:
                self._forget_summary()
                self.metrics.targets_changed()
                if self._pods_listed():  # not at one namespace's list end while another's pods are still to come
                    self.events.prune(self.keep.event_matters)
            elif isinstance(change.key, tuple) and change.key not in self.pods.records:
                self.events.drop_object(("Pod", *change.key))
        for listener in tuple(self._listeners):
            try:
                listener(change)
            except Exception:
                log.exception("model listener failed")

    def _state_changed(self, state: ResourceState) -> None:
        if state.resource in KUEUE_KINDS:
            self._kueue = None  # it says which of its kinds are known
        if state.resource in (PODS, DAEMONSETS):
            # The plugin verdict and the component matrix depend on whether these are known;
            # a watch that merely starts again (every few minutes) changes neither.
            known = (self.pods_known, self.stack_known)
            if known != self._summaries_known:
                self._summaries_known = known
                self._forget_summary()
                self.metrics.targets_changed()
        self._notify(Change(STATE, state.resource))

    def _read_stack_namespaces(self) -> None:
        """The GPU stack's own pods are read whole where the pods watch leaves finished ones out: the
        Operator's validator pods end Succeeded or Failed, and the stack's states read them."""
        if PODS in self.reflectors and self.reflectors[PODS].field_selector:
            found = self.stack()
            self.watches.read_whole(PODS, sorted({ds.namespace for ds in found.daemonsets} | {found.namespace or ""} - {""}))

    def _node_dirty(self, node: str | None) -> None:
        if node:
            self._forget_summary(node)

    def _forget_summary(self, node: str | None = None) -> None:
        """Drop a node's cached summary (None: every node's). summary_generation moves with
        each drop of a computed summary: while it stands still, node_summaries() is unchanged."""
        if node is None:
            self._summaries.clear()
        elif self._summaries.pop(node, None) is None:
            return  # not computed since the last drop, which moved the generation already
        self.summary_generation += 1

    def _metrics_updated(self, node: str) -> None:
        self._forget_summary(node)  # xid-errors
        self._notify(Change(METRICS, node))

    # -- queries -----------------------------------------------------------------
    @property
    def states(self) -> dict[str, ResourceState]:
        """Per kind, its reflectors' state (watches.Watches.state)."""
        return {kind: self.watches.state(kind) for kind in self.reflectors}

    def scope(self, kind: str) -> Scope:
        """What the kind's watches cover: the cluster, or (forbidden cluster-wide) some namespaces."""
        return self.watches.scope(kind)

    def partial_scopes(self) -> list[Scope]:
        """The kinds read in some namespaces only: figures computed from them are not complete."""
        return [scope for kind in NAMESPACED if kind in self.reflectors and (scope := self.scope(kind)).partial]

    def _pods_listed(self) -> bool:
        return PODS in self.reflectors and self.watches.state(PODS).synced

    def _known(self, kind: str) -> bool:
        """Listed cluster-wide, and neither forbidden nor unserved: an empty table then means none exist."""
        return kind in self.reflectors and self.watches.complete(kind)

    @property
    def pods_known(self) -> bool:
        """Every pod the selectors select is listed (those that may hold a GPU). A GPU stack namespace read whole
        (its finished pods too, for stack_known) after they were holds meanwhile the records it took over."""
        return PODS in self.reflectors and self.watches.complete(PODS, whole=False)

    @property
    def stack_known(self) -> bool:
        """Pods and DaemonSets are readable: the component matrix can be trusted."""
        return self._known(PODS) and self._known(DAEMONSETS)

    def node(self, name: str) -> Node | None:
        return self.nodes.records.get(name)

    def pod(self, namespace: str, name: str) -> Pod | None:
        return self.pods.records.get((namespace, name))

    def pods_on_node(self, node: str) -> list[Pod]:
        """The kept pods bound to the node (GPU pods and GPU-stack pods)."""
        records = self.pods.records
        return sorted((records[k] for k in self.pods.by_node.get(node, ())), key=lambda p: (p.namespace, p.name))

    def summary(self, node: str) -> gpu.NodeSummary | None:
        cached = self._summaries.get(node)
        if cached is not None:
            return cached
        record = self.nodes.records.get(node)
        if record is None:
            return None
        pods = self.pods_on_node(node)
        here: stack.NodeStack | None = None
        problems: list[gpu.Problem] = []
        if self.stack_known and gpu.has_nvidia_gpus(record):
            here = stack.node_stack(self.stack(), record, pods)
            problems = stack.node_problems(record, here.components)
        measured = self.metrics.node(node)
        if measured is not None:
            problems += dcgm.xid_problems(measured.readings)
        now = self.clock()
        findings = stuck.node_findings(record, self.states_seen, now, self.stuck_settings)
        problems += [f.problem for f in findings if f.problem is not None]
        self._set_due(node, min((f.due for f in findings if f.due is not None), default=None))
        view = self.dra_view()
        exporter = here.components.get("dcgm-exporter") if here else None
        summary = gpu.summarize_node(
            record, pods, self.resources, pods_known=self.pods_known,
            pods_unknown=self._pods_unknown(), xids_unknown=self._xids_unknown(exporter, measured),
            dra=view.usage.get(node), dra_devices=tuple(view.devices.get(node, ())),
            components=here.components if here else None, stack_problems=problems,
            plugin_pods=here.plugin_pods if here else None, plugin_needed=not here or stack.plugin_expected(here.components),
            plugins=here.plugins if here else (),
        )
        cordon = stuck.cordon_words(record)
        if cordon is not None:  # whose cordon it is, where a component says it made it
            summary.problems[:] = [gpu.Problem(p.code, cordon) if p.code == gpu.Verdict.CORDONED else p for p in summary.problems]
        self._summaries[node] = summary
        return summary

    def _set_due(self, node: str, due: float | None) -> None:
        """Make the node's summary again at `due` (the model's clock): a state on its way to stuck, a stuck one's age."""
        if due is None:
            self._due.pop(node, None)
            return
        self._due[node] = due
        self._schedule_due()

    def _schedule_due(self) -> None:
        """One timer, for the soonest due node."""
        if self._due_timer is not None:
            self._due_timer.cancel()
            self._due_timer = None
        if not self._due:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a summary made outside one): recheck_due() by hand
        self._due_timer = loop.call_later(max(0.5, min(self._due.values()) - self.clock()), self.recheck_due)

    def recheck_due(self) -> None:
        """Forget the summaries whose states' time has come (a MIG change now stuck, an age to move on), and say so."""
        now = self.clock()
        for node in [n for n, due in self._due.items() if due <= now]:
            del self._due[node]
            self._forget_summary(node)
            self._notify(Change(AGED, node))
        self._schedule_due()

    def _pods_unknown(self) -> gpu.Unknown | None:
        """Why the pods are not known (None: they are): the plugin verdict waits for them."""
        if self.pods_known:
            return None
        state = self.watches.state(PODS) if PODS in self.reflectors else None
        if state is not None and not state.synced and state.phase == SYNCING:
            return gpu.Unknown(gpu.PLUGIN_INPUT, "pods not listed yet", pending=True)
        return gpu.Unknown(gpu.PLUGIN_INPUT, "pods cannot all be read", pending=False)

    def _xids_unknown(self, exporter: stack.ComponentState | None, measured: NodeMetrics | None) -> gpu.Unknown | None:
        """Why a node's XIDs are not known although a DCGM exporter runs there (None: read, or no
        exporter to read: then no XID verdict is given at all)."""
        if exporter is None or exporter.state != stack.RUNNING or not exporter.pod:
            return None
        if self._metrics_unavailable is not None:
            return gpu.Unknown(gpu.XID_INPUT, self._metrics_unavailable, pending=False)
        if measured is None or (measured.at is None and measured.error is None):
            return gpu.Unknown(gpu.XID_INPUT, "DCGM not read yet", pending=True)
        if measured.at is None:
            return gpu.Unknown(gpu.XID_INPUT, f"DCGM not read: {measured.error}", pending=False)
        return None

    def node_summaries(self) -> list[gpu.NodeSummary]:
        """Every node, GPU nodes first, then by name."""
        out = [self.summary(name) for name in self.nodes.records]
        return sorted((s for s in out if s is not None), key=lambda s: (not s.gpu_node, s.name))

    async def node_summaries_in_turns(self) -> list[gpu.NodeSummary]:
        """node_summaries(), giving the event loop its turns (turns.py), for code that shares the loop with
        a UI: after a full list, summarising costs about 0.1 ms a node. Each summary is right as of its turn."""
        out = []
        turns = Turns()
        for name in list(self.nodes.records):
            summary = self.summary(name)
            if summary is not None:
                out.append(summary)
            if turns.due():
                await turns.take()
        return sorted(out, key=lambda s: (not s.gpu_node, s.name))

    def totals(self) -> dict[str, gpu.Usage]:
        return gpu.totals(self.node_summaries())

    def fit(self) -> dict[str, fit.ResourceFit] | None:
        """What fits where, per GPU resource (kube/fit.py); None while nodes or pods are not known."""
        if not (self.pods_known and self._known(NODES)):
            return None
        if self._fit is None or self._fit[0] != self.summary_generation:
            fits = fit.cluster_fit(self.node_summaries(), self.dra_view().classes)
            self._fit = (self.summary_generation, fits)
        return self._fit[1]

    def plugin_pod(self, node: str) -> Pod | None:
        summary = self.summary(node)
        return summary.plugin if summary else None

    async def events_of(self, namespace: str, name: str, uid: str | None = None) -> list[Event]:
        """Every event about one pod, listed now (the watch keeps only why a pod waits), newest first,
        as `kubectl describe pod` selects them; the client's ApiError when the list fails (403...)."""
        fields = f"involvedObject.kind=Pod,involvedObject.namespace={namespace},involvedObject.name={name}"
        params = {"fieldSelector": fields + (f",involvedObject.uid={uid}" if uid else ""), "resourceVersion": "0"}
        body = await self.api.json("GET", namespaced(COLLECTIONS[EVENTS], namespace), params=params)
        events = []
        for item in body.get("items") or []:
            try:
                events.append(event_from(item))
            except (AttributeError, TypeError, ValueError):
                continue  # one malformed event: the others still show
        return sorted(events, key=lambda e: e.last or 0.0, reverse=True)

    def events_for(self, kind: str, namespace: str, name: str) -> list[Event]:
        """Kept events about one object, newest first."""
        mine = self.events.by_object.get((kind, namespace, name), {})
        return sorted(mine.values(), key=lambda e: e.last or 0.0, reverse=True)

    def gpu_pods(self, node: str | None = None, namespace: str | None = None) -> list[gpu.GpuPod]:
        """Pods holding or waiting for GPUs (not finished), by namespace and name."""
        if node is not None:
            candidates: Iterable[Pod] = self.pods_on_node(node)
        else:
            candidates = self.pods.records.values()
        out = []
        for pod in candidates:
            if namespace is not None and pod.namespace != namespace:
                continue
            entry = self.gpu_pod(pod)
            if entry is not None:
                out.append(entry)
        out.sort(key=lambda g: (g.pod.namespace, g.pod.name))
        return out

    def gpu_pod(self, pod: Pod, events: Iterable[Event] | None = None) -> gpu.GpuPod | None:
        """The pod as a GPU pod (its requests and what its DRA claims hold), None if it is none.
        A pending one's reason ends with why its GPUs fit no node now (fit.pending_line), when they do not."""
        if events is None:
            events = self.events_for("Pod", pod.namespace, pod.name) if pod.node is None else ()
        waiting = self._waiting_claims(pod) if pod.node is None and pod.claims else []
        claimed, asks = dra.waiting_asks(waiting, self._gpu_class)
        entry = gpu.gpu_pod(pod, self.resources, events, self.dra_view().holdings.get((pod.namespace, pod.name), ()), claimed, asks)
        if entry is not None and pod.node is None and not pod.gates and (fits := self.fit()) is not None:
            line = fit.pending_line(self.resources.of(pod.requests), fits)
            if waiting and all(self._known(kind) for kind in (*DRA_KINDS, NODES)):
                line = "; ".join(filter(None, (line, self._claim_line(waiting))))
            if line:
                entry.reason = f"{entry.reason} · {line}" if entry.reason else line
        if entry is not None and pod.node is None and (workload := self.kueue().workload_of(pod)) is not None:
            held = self.kueue().waiting(workload)  # before what the gates or the scheduler say
            if held:
                entry.reason = f"{held} · {entry.reason}" if entry.reason else held
        return entry

    def _waiting_claims(self, pod: Pod) -> list[dra.Claim]:
        """The pod's ResourceClaims that are listed and not allocated yet."""
        claims = (self.resource_claims.records.get((pod.namespace, name)) for name in pod.claims)
        return [c for c in claims if c is not None and not c.allocated]

    def _gpu_class(self, name: str) -> bool:
        """A DeviceClass of NVIDIA's GPU devices: one selecting some (a row of the pools), or one whose selectors name
        the driver (while it publishes none)."""
        classes = self.dra_view().classes
        if name in classes.unknown or any(p.device_class == name for p in classes.pools):
            return True
        device_class = self.device_classes.records.get(("", name))
        return device_class is not None and any(dra.NVIDIA_GPU_DRIVER in s for s in device_class.selectors)

    def _claim_line(self, claims: list[dra.Claim]) -> str | None:
        """Which pools lack what for these unallocated claims (fit.claim_line)."""
        classes = {c.name: c for c in self.device_classes.records.values()}
        devices = [d for held in self.dra_view().devices.values() for d in held]
        return fit.claim_line(claims, classes, devices, self.nodes.records)

    def waiting_on_claims(self) -> set[tuple[str, str]]:
        """The pods not on a node that name ResourceClaims (their rows change with the claims and the pools)."""
        return {pod.key for pod in self.pods.records.values() if pod.claims and pod.node is None}

    def kueue(self) -> kueue.Kueue:
        """Kueue's queues and GPU Workloads (none where it is not installed: kueue_state() says)."""
        if self._kueue is None:
            workloads, local_queues, cluster_queues = (self.tables[kind].records.values() for kind in KUEUE_KINDS)
            known = (self._known(WORKLOADS), self._known(LOCALQUEUES), self._known(CLUSTERQUEUES))
            self._kueue = kueue.Kueue(workloads, local_queues, cluster_queues, known=known)
        return self._kueue

    def kueue_state(self) -> str | None:
        """None when Kueue's kinds are listed; kueue.NOT_INSTALLED, or what keeps them unknown."""
        return kueue.state(self.states, KUEUE_KINDS)

    def dra_pod_keys(self) -> set[tuple[str, str]]:
        """The pods some allocated DRA claim is reserved for."""
        return set(self.dra_view().holdings)

    def daemonset(self, namespace: str, name: str) -> DaemonSet | None:
        return self.daemonsets.records.get((namespace, name))

    # -- the GPU stack ---------------------------------------------------------------
    def stack(self) -> stack.Stack:
        """Which stack the cluster runs (from DaemonSets and ClusterPolicies); kind "none" until they are read."""
        if self._stack is None:
            policies = [*self.cluster_policies.records.values(), *self.gpu_clusters.records.values()]
            self._stack = stack.detect_stack(self.daemonsets.records.values(), policies, self.resources)
        return self._stack

    def cluster_policy_state(self) -> str:
        """One line: the ClusterPolicy's state, or why it is not known ("none", "unknown (forbidden: ...)")."""
        policy = self.stack().cluster_policy
        if policy is not None:
            return policy.state
        reflector = self.reflectors.get(CLUSTERPOLICIES)
        if reflector is None or not reflector.state.synced and reflector.state.phase not in (FORBIDDEN, ABSENT):
            return "unknown"
        if reflector.state.phase == FORBIDDEN:
            return f"unknown ({reflector.state.describe()})"
        return "none"  # listed (or no CRD): there is none

    def cluster_problems(self) -> list[gpu.Problem]:
        """Cluster-wide verdicts: operator-not-ready, compute-domain-not-ready."""
        domains = [v.finding.problem for v in self.domain_views() if v.finding.problem is not None]
        return [*stack.cluster_problems(self.stack(), self.clock()), *domains]

    def domain_views(self) -> list[compute_domains.DomainView]:
        """Every ComputeDomain, with the nodes its channel claims are on that did not join and its verdict; a
        domain on its way to stuck has the model look again when it comes due."""
        on_nodes: dict[str, set[str]] = {}
        for claim in self.resource_claims.records.values():
            for allocation in claim.allocations:
                if allocation.domain and allocation.node:
                    on_nodes.setdefault(allocation.domain, set()).add(allocation.node)
        now, after = self.clock(), self.stuck_settings.domain_after
        views = [compute_domains.view(d, on_nodes.get(d.uid, ()), self.states_seen, now, after)
                 for d in sorted(self.compute_domains.records.values(), key=lambda d: d.key)]
        for v in views:
            self._set_due("computedomain " + v.domain.key, v.finding.due)
        return views

    def components(self, node: str) -> dict[str, ComponentState]:
        """The node's column of the component matrix ({} for a non-GPU node or while pods/DaemonSets are unknown)."""
        summary = self.summary(node)
        return summary.components if summary else {}

    def component_matrix(self) -> dict[str, dict[str, ComponentState]]:
        """Per GPU node (in node_summaries' order), its components."""
        return {s.name: s.components for s in self.node_summaries() if s.components}

    def mig_config(self, node: str) -> MigConfig | None:
        record = self.nodes.records.get(node)
        return stack.mig_config(record) if record else None

    def dra_view(self) -> DraView:
        if self._dra is None:
            devices = [d for slice_devices in self.resource_slices.records.values() for d in slice_devices]
            allocations = [a for claim in self.resource_claims.records.values() for a in claim.allocations]
            by_node = dra.attach_holders(devices, allocations)
            classes = dra.class_devices(self.device_classes.records.values(), [d for held in by_node.values() for d in held])
            usage: dict[str, dict[str, gpu.Usage]] = {}
            for pool in classes.pools:
                if pool.node is not None:  # a tainted free device is not allocatable: a claim does not get it
                    row = usage.setdefault(pool.node, {}).setdefault(pool.device_class, gpu.Usage())
                    row.add(gpu.Usage(capacity=pool.devices, allocatable=pool.allocated + pool.free, allocated=pool.allocated))
            self._dra = DraView(by_node, usage, dra.pod_holdings(allocations), classes)
        return self._dra

    def bad_gpus(self, node: str | None = None) -> list[health.BadGpu]:
        """Every GPU some signal calls unhealthy (of one node, if given), newest first, with the pods on it (kube/health.py)."""
        names = [node] if node is not None and node in self.nodes.records else [] if node is not None else list(self.nodes.records)
        readings = {name: state.readings for name in names if (state := self.metrics.node(name)) is not None}
        kueue_now = self.kueue()

        def owners(pod: Pod) -> tuple[str | None, str | None]:
            workload = kueue_now.workload_of(pod)
            return (f"{pod.owner[0]} {pod.owner[1]}" if pod.owner else None), (workload.name if workload else None)

        return health.bad_gpus([self.nodes.records[name] for name in names], self.pods_on_node, readings, self.dra_view().devices,
                               self.xids, owners, now=self.clock(), old_after=self.xid_old_after)

    def gpu_health(self, node: str) -> list[health.GpuHealth]:
        """Each GPU of the node and its health, `?` with why where no signal tells (health.node_gpu_health)."""
        record, summary = self.nodes.records.get(node), self.summary(node)
        if record is None or summary is None:
            return []
        return health.node_gpu_health(record, summary.facts.count, self.bad_gpus(node), self.metrics.node(node),
                                      self.dra_view().devices.get(node, ()), self.clock(),
                                      None if self.pods_known else "the pods (their devices' health) are not listed yet")

    def dra_devices(self, node: str) -> list[dra.DraDevice]:
        return list(self.dra_view().devices.get(node, ()))

    # -- DCGM metrics ------------------------------------------------------------------
    def node_metrics(self, node: str) -> NodeMetrics | None:
        """The node's DCGM readings or why there are none; None for a node without GPUs or before the first poll."""
        return self.metrics.node(node)

    def _exporters(self) -> dict[str, Exporter]:
        """Per GPU node, its running DCGM exporter pod, or why it has none (the poller's targets)."""
        out: dict[str, Exporter] = {}
        for summary in self.node_summaries():
            if not summary.gpu_node:
                continue
            exporter = summary.components.get("dcgm-exporter")
            if exporter is None:
                out[summary.name] = Exporter(unavailable="exporter unknown until pods and DaemonSets are listed")
            elif exporter.state == stack.RUNNING and exporter.pod and self._metrics_unavailable is not None:
                out[summary.name] = Exporter(unavailable=self._metrics_unavailable)
            elif exporter.state == stack.RUNNING and exporter.pod:
                namespace, name = exporter.pod.split("/", 1)
                out[summary.name] = Exporter(namespace, name)
            elif exporter.state == stack.NOT_EXPECTED:
                out[summary.name] = Exporter(unavailable="no DCGM exporter on this node")
            else:
                out[summary.name] = Exporter(unavailable=f"exporter not running on this node ({exporter.describe()})")
        return out
