"""The GPU pods pane: a widget that owns its columns, its rows (panes.pod_row, rebuilt through a RowCache when
what a row reads changes), the pods it shows and which of them are stale. Rows are brought up to date
incrementally (only stale pods, the rows on screen first, a slice at a time); the refresh scheduler
(refresh.py) notes what changed and says when: it calls show(model, context).
"""
from __future__ import annotations

import time
from typing import Callable, Iterable, Protocol

from rich.text import Text
from textual.app import ComposeResult

from gputui.kube import gpu
from gputui.kube.model import PODS, ClusterModel
from gputui.sanitize import clean

from . import render
from .names import DistinctNames, safe_parts, showing
from .nodes_pane import table_status
from .panes import pod_columns, pod_row, widths
from .seam import ViewContext
from .table import KeyedTable, RowCache, matches
from .widgets import Pane

POD_ROWS_SECONDS = 0.005  # GPU-pod rows are brought up to date for at most this long per refresh; the rest next time
FILL_SECONDS = 0.015  # the pods table filled from scratch: longer slices, one soon after the other
FAILING_STATUSES = ("Error", "Failed", "OOMKilled", "ContainerCannotRun", "CreateContainerError", "Unknown", "Evicted")

PodKey = tuple[str, str]


class Request(Protocol):
    """The refresh scheduler's: these parts shown again at its next refresh (soon: a table being filled)."""

    def __call__(self, *parts: str, soon: bool = False) -> None: ...


def waiting(entry: gpu.GpuPod) -> bool:
    """Work held back: a GPU pod not bound to a node, or one failing wherever it runs (crash loops, image pulls)."""
    pod = entry.pod
    if pod.finished:
        return pod.phase == "Failed"
    return pod.node is None or pod.status.endswith("BackOff") or pod.status in FAILING_STATUSES


class PodsPane(Pane):
    """The GPU pods of the selected node (or of every node, `a`), the work held back first: a ModelView (seam.py).

    request(*parts, soon=): the scheduler's, to be shown again (the rest of a slice, names cut again, the
    header's pending words); note: a pod's note (on a bad GPU, or its GPU use); changed_notes: the pods
    whose note changed since the last look."""

    def __init__(self, request: Request, note: Callable[[gpu.GpuPod], Text | None],
                 changed_notes: Callable[[], set[PodKey]], *, id: str = "pods") -> None:  # id: Textual's word
        super().__init__("GPU pods", id=id)
        self._request, self._note, self._changed_notes = request, note, changed_notes
        self.narrow = False
        self.widths: dict[str, int] = widths(pod_columns(False))
        self._cells: RowCache[PodKey] = RowCache(pod_row)
        self._names = DistinctNames()  # where pod names are cut so that no two rows read alike
        self._new_names: list[PodKey] = []  # rows added since _names last heard
        # GPU pods shown or showable: key -> (GpuPod, pod_row's inputs, cells).
        self.view: dict[PodKey, tuple[gpu.GpuPod, tuple, tuple]] = {}
        self.stale: set[PodKey] | None = None  # the pods to look at again; None: every pod
        self._pending: set[PodKey] = set()  # GPU pods in view waiting for a node: their reasons end with the fit
        self._fit_seen: tuple[int, object] = (-1, None)  # (summary_generation, model.fit()) when the pending rows were last looked at
        self.filling = False  # rebuilding every row (start, layout, relist): slices follow each other soon
        self._scope: tuple | None = None  # (all nodes?, node, namespaces) of the rows the table was given
        self._needle = ""  # the filter (casefolded) the rows were cut for
        self._filter_hits: set[PodKey] = set()  # the GPU pods the filter matches, on any node
        self.pending_words = ""  # the header's `3 GPU pods pending, longest 12m`, from the rows

    def compose(self) -> ComposeResult:
        yield KeyedTable(id="pods-table")

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#pods-table", KeyedTable)

    def set_layout(self, narrow: bool, width: int) -> None:
        columns = pod_columns(narrow, width)
        self.narrow, self.widths = narrow, widths(columns)
        self.table.set_columns(columns)
        self.rebuild_rows()

    # -- what is stale ---------------------------------------------------------------------------
    def rebuild_rows(self) -> None:
        """Every row built again when next shown (a new layout or theme, another cluster)."""
        self.stale = None

    def forget(self) -> None:
        self.rebuild_rows()
        self.table.show([])

    def note_stale(self, key: object) -> None:
        """A pod changed (None: any pod may have)."""
        if key is None:
            self.stale = None
        elif self.stale is not None:
            self.stale.add(key)  # type: ignore[arg-type]  # a pod's key, once the change is known to be a pod's

    def note_all(self) -> None:
        """Every row looked at again (ages, new figures of the pods' use), a slice at a time."""
        if self.stale is not None:
            self.stale.update(self.view)

    def holders(self) -> Iterable[PodKey]:
        """The pods shown holding devices through claims."""
        return (key for key, shown in self.view.items() if shown[0].claims)

    def note_pending(self) -> None:
        """A pending pod's reason starts with why Kueue holds it."""
        if self.stale is not None:
            self.stale.update(self._pending)

    # -- drawing ---------------------------------------------------------------------------------
    def show(self, model: ClusterModel | None, context: ViewContext) -> None:
        """Bring the rows up to date. Only stale pods are looked at again, the rows on screen first, for at
        most POD_ROWS_SECONDS (the rest next time: an event storm never blocks the loop, and what is shown
        stays current; a table filled from scratch goes on soon); a row is rebuilt only when what it shows
        changed, and the table is given only those rows unless the set of rows changed."""
        if model is None:
            return
        now, table = context.now, self.table
        view = self.view
        stale = self.stale
        self.stale = later = set()  # what this slice leaves, and what changes meanwhile
        noted = self._changed_notes()  # a new XID, taint or condition: the rows of the pods on that GPU
        if stale is not None:
            stale.update(noted)
        records = model.pods.records
        regroup = stale is None  # the rows shown are other pods, or in another order
        if stale is None:
            view.clear()
            self._cells.clear()
            self._names = DistinctNames(self.widths["pod"])
            self._pending.clear()
            stale = set(records)
            self.filling = True
            self._filter_hits.clear()
        elif self._pending and model.summary_generation != self._fit_seen[0]:
            fits = model.fit()  # a pending pod's reason says where its GPUs would fit: when that changes, so does the row
            if fits != self._fit_seen[1]:
                stale.update(self._pending)
            self._fit_seen = (model.summary_generation, fits)
        needle = table.filter_text.casefold()
        if needle != self._needle:  # every GPU pod searched; each name cut again to show the match
            self._needle = needle
            stale.update(view)
            self._filter_hits = {key for key, (_, _, cells) in view.items() if needle and matches(cells, needle)}
        narrow = self.narrow
        changed: dict[PodKey, tuple] = {}
        gone: list[PodKey] = []
        deadline = time.perf_counter() + (FILL_SECONDS if self.filling else POD_ROWS_SECONDS)
        ordered = self._visible_first(stale)
        for n, key in enumerate(ordered):
            if n % 16 == 0 and n and time.perf_counter() > deadline:
                later.update(ordered[n:])
                self._request("pods", soon=self.filling)
                break
            pod = records.get(key)
            events = model.events_for("Pod", *key) if pod is not None and pod.node is None else ()
            entry = model.gpu_pod(pod, events) if pod is not None else None
            shown = view.get(key)
            if entry is None:
                self._pending.discard(key)
                self._cells.forget(key)
                if shown is not None:
                    del view[key]
                    gone.append(key)
                    regroup = True
                continue
            if entry.pod.node is None:
                self._pending.add(key)
            else:
                self._pending.discard(key)
            if shown is None or shown[0].pod.node != entry.pod.node or waiting(shown[0]) != waiting(entry):
                regroup = True  # a new row, or one that moves in or out of a node's view or of the waiting rows
            if shown is None:
                self._new_names.append(key)
            differ, keep = showing(*safe_parts(*key), self.widths["pod"], needle, self._names.differ_at.get(key))
            inputs = (entry, render.age(entry.pod.created, now), narrow, self.widths, self._note(entry),
                      differ, keep, render.gpu_hours(entry, now) if "hours" in self.widths else "")
            cells = self._cells.cells(key, *inputs)
            if shown is None or cells is not shown[2]:
                changed[key] = cells
            view[key] = (entry, inputs, cells)
        else:
            self.filling = False
        self._filter_hits.difference_update(gone)
        if needle:
            for key, cells in changed.items():
                if matches(cells, needle):
                    self._filter_hits.add(key)
                else:
                    self._filter_hits.discard(key)
        recut = self._names.update(self._new_names, gone)  # rows that now read alike, or no longer: cut again
        self._new_names = []
        if recut:
            later.update(key for key in recut if key in view)
            self._request("pods")
        all_nodes, selected, namespaces = context.all_nodes, context.selected_node, context.namespaces
        node = None if all_nodes else selected
        scope = (all_nodes, node, namespaces)
        if regroup or scope != self._scope:
            self._scope = scope
            table.show(self._rows(model, node, context))
        elif changed:
            table.update_rows({f"{key[0]}/{key[1]}": cells for key, cells in changed.items()})
        where = "all nodes" if all_nodes else f"node {clean(selected, 60)}" if selected else "no node selected"
        title = f"GPU pods · {where}"
        if namespaces:
            title += f" · ns {clean(', '.join(namespaces), 100)}"
        held = sum(1 for key, (entry, _, _) in view.items() if waiting(entry) and (not namespaces or key[0] in namespaces))
        if held:
            title += f" · {held} pending or failing first"
        self.set_title(title)
        self.set_status(self._status_line(model, context))
        words = self._pending_text(model, now)
        if words != self.pending_words:
            self.pending_words = words
            self._request("header")

    def _pending_text(self, model: ClusterModel, now: float) -> str:
        """`3 GPU pods pending, longest 12m`: waiting work, in the header whatever the panes show."""
        records = model.pods.records
        created = [pod.created for key in self._pending if (pod := records.get(key)) is not None and not pod.finished]
        if not created:
            return ""
        known = [c for c in created if c is not None]
        longest = f", longest {render.age(min(known), now)}" if known else ""
        return f"{len(created)} GPU pod{'s' if len(created) != 1 else ''} pending{longest}"

    def _visible_first(self, keys: set[PodKey]) -> list[PodKey]:
        """The pods' keys, those of the rows on screen first."""
        on_screen = [key for key in (tuple(row.split("/", 1)) for row in self.table.visible_keys()) if key in keys]
        if not on_screen:
            return list(keys)
        first = set(on_screen)
        return on_screen + [key for key in keys if key not in first]

    def _rows(self, model: ClusterModel, node: str | None, context: ViewContext) -> list[tuple[str, tuple]]:
        """The table's rows: first the work held back, whatever the scope (pending pods, the longest
        waiting first, then failing ones: their NODE cell says where they are, `<none>` or another node),
        then every GPU pod or the selected node's, by namespace and name."""
        if node is None and not context.all_nodes:
            return []
        view, namespaces = self.view, context.namespaces
        held = sorted((key for key, (entry, _, _) in view.items() if waiting(entry)),
                      key=lambda key: (view[key][0].pod.node is not None, view[key][0].pod.created or 0.0, key))
        first = set(held)
        scoped = view.keys() if node is None else [key for key in model.pods.by_node.get(node, ()) if key in view]
        return [
            (f"{key[0]}/{key[1]}", view[key][2])
            for key in [*held, *sorted(key for key in scoped if key not in first)]
            if not namespaces or key[0] in namespaces
        ]

    def _rows_in_scope(self, model: ClusterModel, context: ViewContext) -> int:
        """The rows that are in the pane's scope: on the selected node (the work held back shown
        above them is not), or every row for all nodes."""
        if context.all_nodes:
            return self.table.row_count
        namespaces = context.namespaces
        on_node = model.pods.by_node.get(context.selected_node or "", ())
        return sum(1 for key in on_node if key in self.view and (not namespaces or key[0] in namespaces))

    def _matches_elsewhere(self, context: ViewContext) -> int:
        """GPU pods the filter matches outside the pane's node scope (`a` shows them)."""
        if context.all_nodes:
            return 0
        table, namespaces = self.table, context.namespaces
        return sum(1 for key in self._filter_hits
                   if not table.wants(f"{key[0]}/{key[1]}") and (not namespaces or key[0] in namespaces))

    def _status_line(self, model: ClusterModel, context: ViewContext) -> str:
        table, namespaces = self.table, context.namespaces
        parts = table_status(model, PODS, table, elsewhere=self._matches_elsewhere(context) if table.filter_text else 0)
        if not table.filter_text and self._rows_in_scope(model, context) == 0 and (model.pods_known or model.scope(PODS).partial):
            among = "" if not namespaces else " in this namespace" if len(namespaces) == 1 else " in these namespaces"
            if not model.pods_known:  # read in some namespaces only
                among += f" (read in {clean(', '.join(model.scope(PODS).readable), 100)} only)"
            if context.all_nodes:
                parts.append("no GPU pods" + among)
            elif context.selected_node:
                parts.append("no GPU pods on this node" + among)
            else:
                parts.append("no node selected")
        return " · ".join(parts)
