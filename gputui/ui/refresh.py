"""The coalesced refresh: how the live screen follows the cluster model.

Data flows one way: watch event -> model -> Change (counted, not rendered) ->
one coalesced refresh at most every REFRESH_INTERVAL -> keyed table deltas.
Widgets never call the API.

The Nodes pane (nodes_pane.py) gathers node summaries in time slices between yields to the
loop, the GPU pods pane (pods_pane.py) brings its rows up to date incrementally (only stale
pods, the rows on screen first); here is when: what is stale, the timer, the interval's
stretch under load, and ages that tick on their own every AGE_INTERVAL.
"""
from __future__ import annotations

import gc
import time
from functools import partial
from typing import TYPE_CHECKING, Callable, ContextManager, Coroutine, Iterable, Protocol

from textual.screen import Screen
from textual.timer import Timer
from textual.worker import Worker

from gputui.kube.model import DRA_KINDS, EVENTS, KUEUE_KINDS, METRICS, NODES, PODS, ClusterModel
from gputui.kube.tables import Change

from . import render
from .header import ClusterHeader
from .nodes_pane import NodesPane
from .plugin_pane import PluginPane
from .pods_pane import PodsPane, waiting  # noqa: F401  (waiting: tests/bench_soak.py imports it from here)
from .seam import ModelView, ViewContext

ALL_PARTS = frozenset({"header", "nodes", "pods", "plugin"})
HEALTH_INPUTS = frozenset({PODS, NODES, METRICS, *DRA_KINDS})  # what the bad GPUs, and the pods' notes of them, are made of
REFRESH_INTERVAL = 0.1  # at most ten refreshes a second, however fast events come
MAX_REFRESH_INTERVAL = 1.0
NODE_PARTS = frozenset({"header", "nodes"})
FILL_PAUSE = 0.02  # the pods table filled from scratch: one slice soon after the other (pods_pane.FILL_SECONDS)
AGE_INTERVAL = 5.0  # ages tick on their own; a cell is redrawn only when its text changes

if TYPE_CHECKING:
    from .health import BadGpuNotes


class RefreshHost(Protocol):
    """The app, as the coalesced refresh needs it: the model, the context, the parts it shows and the top screen."""

    @property
    def model(self) -> ClusterModel | None: ...
    @property
    def drawing(self) -> bool:
        """The main screen is up and the app is not ending: a refresh may draw."""
    @property
    def screen(self) -> Screen[object]: ...
    @property
    def cluster_header(self) -> ClusterHeader: ...
    @property
    def nodes_pane(self) -> NodesPane: ...
    @property
    def pods_pane(self) -> PodsPane: ...
    @property
    def plugin_pane(self) -> PluginPane: ...
    @property
    def bad_gpu_notes(self) -> BadGpuNotes: ...
    def view_context(self, now: float | None = None) -> ViewContext:
        """What a screen reads besides the model, now."""
    def follow_node_cursor(self) -> None:
        """The other panes follow the Nodes pane's visible cursor."""
    def batch_update(self) -> ContextManager[None]: ...
    def set_timer(self, delay: float, callback: Callable[[], object]) -> Timer: ...
    def run_worker(self, work: Callable[[], Coroutine[None, None, None]], name: str | None = ..., group: str = ...,
                   description: str = ..., exit_on_error: bool = ..., start: bool = ..., exclusive: bool = ...) -> Worker[None]: ...


class RefreshScheduler:
    """The app's: consumes the model's change feed (`on_change`), notes what is stale and redraws it in one
    coalesced refresh (`request`, `draw`): the header (header.py), the Nodes pane (nodes_pane.py: gathered, then
    `show(model, context)`), the GPU pods pane (pods_pane.py), the device-plugin pane's info line (plugin_pane.py),
    each through `show(model, context)`, and the top screen through the same call when it is a ModelView (seam.py).
    It renders nothing itself: it keeps what is stale, the timer and the interval's stretch under load."""

    def __init__(self, host: RefreshHost) -> None:
        self._host = host
        self._flush_timer: Timer | None = None
        self._changes = 0
        self.refreshes = 0  # coalesced refreshes done (tests and the benchmark read it)
        self._stale: set[str] = set()
        self._refresh_cost = 0.0  # seconds the last coalesced refresh took
        self._gathering = False  # node summaries being gathered (see _gather_nodes)
        self.freeze_pending = False  # the model has synced: freeze the tables' rows once they are filled

    def rebuild_rows(self) -> None:
        """Every row built again at the next refresh (a new layout or theme)."""
        self._host.nodes_pane.rebuild_rows()
        self._host.pods_pane.rebuild_rows()

    def forget_cluster(self) -> None:
        """Another cluster comes: no row of this one is kept, and its node summaries are gathered afresh."""
        self.rebuild_rows()
        self._host.nodes_pane.forget()
        self._host.pods_pane.forget()

    @property
    def pods_filling(self) -> bool:
        """The pods pane fills its table from scratch (tests/bench_*.py wait for the first full picture)."""
        return self._host.pods_pane.filling

    def redraw_pod_rows(self) -> None:
        """Every GPU pod's row looked at again at the next refresh (new figures of their use), which is asked for."""
        self._host.pods_pane.note_all()
        self.request("pods")

    def age_tick(self) -> None:
        """Every AGE_INTERVAL: the ages shown move on."""
        host = self._host
        host.pods_pane.note_all()  # their ages: looked at like any change, a slice at a time
        host.bad_gpu_notes.input_changed()  # the notes' ages (`on bad GPU: XID 79 3m ago`)
        self.request("pods", "plugin")
        if host.cluster_header.readings:
            self.request("header")  # the DCGM readings' age
        states = host.model.states if host.model is not None else {}
        if any(s.stale_since is not None or not s.synced for kind, s in states.items() if kind in render.ALLOCATION_KINDS):
            self.request("header", "nodes")  # `as of 2m ago` ages too, and `listing… 15 s` counts

    # -- the change feed -------------------------------------------------------------------
    def on_change(self, change: Change) -> None:
        """Called by the model once per applied event: note what is stale, refresh later."""
        host = self._host
        pods = host.pods_pane
        self._changes += 1
        if change.kind in HEALTH_INPUTS:
            host.bad_gpu_notes.input_changed()  # the pods on a bad GPU are looked at again at the next refresh of the pods
        if change.kind == PODS:
            pods.note_stale(change.key)
            if host.model is not None and host.model.summary_generation == host.nodes_pane.generation:
                self.request("pods", "plugin")  # no node summary changed: the nodes stay as they are
                return
        elif change.kind == EVENTS:
            if change.key is None:
                pods.note_stale(None)
            elif isinstance(change.key, tuple) and change.key[0] == "Pod":  # (kind, namespace, name): a pending pod's reason
                pods.note_stale(change.key[1:])
            self.request("pods")
            return
        elif change.kind in DRA_KINDS and host.model is not None and (stale := pods.stale) is not None:
            # What a pod holds through its claims: the rows of the holders, before and after.
            stale.update(pods.holders())
            stale.update(host.model.dra_pod_keys())
            stale.update(host.model.waiting_on_claims())  # a pending pod's claims: which pool lacks what
        elif change.kind in KUEUE_KINDS:
            pods.note_pending()  # a pending pod's reason starts with why Kueue holds it
        self.request(*ALL_PARTS)

    def request(self, *parts: str, soon: bool = False) -> None:
        """Mark parts of the screen stale; one refresh within REFRESH_INTERVAL redraws them.
        Under an event storm the interval stretches so that refreshing takes at most
        a quarter of the loop's time, whatever the cluster's size. soon: a table being
        filled goes on after FILL_PAUSE."""
        self._stale.update(parts)
        if self._flush_timer is None:
            delay = FILL_PAUSE if soon else min(MAX_REFRESH_INTERVAL, max(REFRESH_INTERVAL, 3 * self._refresh_cost))
            self._flush_timer = self._host.set_timer(delay, self._flush_refresh)

    def _flush_refresh(self) -> None:
        self._flush_timer = None
        started = time.perf_counter()
        parts, self._stale = self._stale, set()
        node_parts = parts & NODE_PARTS
        self.draw(parts - node_parts)
        self._refresh_cost = time.perf_counter() - started
        self._freeze_if_filled()
        if node_parts:
            if self._gathering:
                self._stale |= node_parts  # the gathering under way is followed by another
            else:
                self._gathering = True
                self._host.run_worker(partial(self._gather_nodes, node_parts), "gather_nodes", group="nodes")

    async def _gather_nodes(self, parts: frozenset[str] | set[str]) -> None:
        """The Nodes pane's summaries gathered in slices (NodesPane.gather), then the parts drawn from them."""
        host = self._host
        try:
            model = host.model
            if model is None or not await host.nodes_pane.gather(model, still=lambda: host.model is model):
                return
            tick = time.perf_counter()
            self.draw(parts, gathered=True)
            self._refresh_cost = max(self._refresh_cost, time.perf_counter() - tick)
        finally:
            self._gathering = False
            if self._stale & NODE_PARTS:
                self.request()
            self._freeze_if_filled()

    def freeze_when_filled(self) -> None:
        """The model has synced: its tables' rows are moved out of the cyclic GC's way once they are filled."""
        self.freeze_pending = True
        self._freeze_if_filled()  # the tables may be filled already: no refresh may follow on an idle cluster

    def _freeze_if_filled(self) -> None:
        """Once, when the tables first show the synced cluster: keep what they hold (tens of
        thousands of cells on a big cluster) out of the cyclic GC's way, as the model does
        with its records. Scanned, a full collection stalls the app for 100-200 ms, and
        under an event storm CPython starts one every second or two."""
        host = self._host
        model = host.model
        if not self.freeze_pending or model is None or self._gathering or host.pods_pane.filling:
            return
        pods_rebuilt = host.pods_pane.stale is None
        if pods_rebuilt or host.nodes_pane.generation != model.summary_generation:
            # not filled yet: looked at again after the refresh that fills it (an idle cluster sends no event to wait for)
            self.request("pods" if pods_rebuilt else "nodes")
            return
        self.freeze_pending = False
        gc.collect()
        gc.freeze()

    # -- rendering ---------------------------------------------------------------------
    def draw(self, parts: Iterable[str] = ALL_PARTS, gathered: bool = False) -> None:
        """Redraw the given parts and every stale one, now (gathered: the Nodes pane's summaries are fresh)."""
        host = self._host
        if not host.drawing:
            return  # not mounted yet, or shutting down (workers may still run while the screens close)
        parts = self._stale.union(parts)
        self._stale.clear()
        self.refreshes += 1
        model = host.model
        context = host.view_context()
        with host.batch_update():
            if model is None:
                host.cluster_header.show(None, context)
                return
            if "nodes" in parts or "header" in parts:
                nodes = host.nodes_pane
                if not gathered:
                    nodes.gather_now(model)
                host.cluster_header.show(model, context)  # from the summaries just gathered
                if "nodes" in parts:
                    nodes.show(model, context)
                    host.follow_node_cursor()
            if "pods" in parts:
                host.pods_pane.show(model, context)
            if "plugin" in parts:
                host.plugin_pane.show(model, context)
            screen = host.screen  # details, stack, component logs…: the top screen, when drawn from the model
            # A screen pushed but not yet composed has nothing to update: its on_mount draws it.
            if isinstance(screen, ModelView) and screen.is_mounted:
                screen.show(model, context)
