"""Idle allocated GPUs in the app: the Idle GPUs screen (`i`), the words the pod rows and node details
use, and the app's IdleFigures, which keeps the figures fresh (kube/idle.py's IdleTracker).

The tracker takes every exporter reading the model makes (the background reads, the details node's
fast ones) as samples. IdleFigures asks it for the figures: from Prometheus (one query) every
IDLE_REFRESH seconds, from the samples after each read (at most once every IDLE_COALESCE seconds),
a slice of the pods at a time; the screen follows.
Renderers are pure: figures in, Text out, every cluster string through gputui.sanitize.
"""
from __future__ import annotations

import asyncio
import contextlib
from functools import partial
from typing import TYPE_CHECKING, Callable, Coroutine, Protocol

from rich.text import Text
from textual.binding import Binding

from gputui.kube.duration import human_duration
from gputui.kube.idle import PROMETHEUS, SLICE, HistoryError, IdleSettings, IdleTracker, IdleView, PodIdle, holders
from gputui.kube.model import METRICS
from gputui.kube.tasks import set_within

from . import render
from .names import DistinctNames, cut_name, safe_parts
from .page import ModelPage
from .seam import ViewContext

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel
    from textual.worker import Worker

    from gputui.kube.config import Connection
    from gputui.kube.gpu import GpuPod
    from gputui.kube.idle import Holder
    from gputui.kube.metrics import NodeMetrics
    from gputui.kube.model import ClusterModel

IDLE_REFRESH = 10.0  # seconds between two Prometheus queries (and looks at the samples while no read comes)
IDLE_COALESCE = 2.0  # the samples' figures are worked out at most every 2 s, however fast the reads come
SHOWN = 500  # pods listed on the screen; the rest are counted
PENDING = "…"  # figures awaited
SHARED_WORDS, SHARED_COMPACT = "shared GPU: use not split among its pods", "shared GPU"  # idle.PodIdle.shared


def memory(mib: float | None) -> str:
    if mib is None:
        return "-"
    return f"{mib / 1024:.1f} GiB" if mib >= 1024 else f"{mib:.0f} MiB"


def idle_words(pod: PodIdle | None, compact: bool = False) -> Text:
    """A pod's use in a few words: `idle ≥12m, mean 0%` or `in use, mean 62%`; `no samples yet` (compact: `…`);
    `shared GPU: use not split` for a pod on a GPU other pods use too (compact: `shared GPU`)."""
    if pod is not None and pod.shared:
        return Text(SHARED_COMPACT if compact else SHARED_WORDS, style=render.DIM_STYLE, end="")
    if pod is None or not pod.known:
        words = PENDING if compact else (pod.why if pod is not None and pod.why else "no samples yet")
        return render.text(words, style=render.DIM_STYLE, limit=100)
    mean = f"{pod.mean_util:.0f}%" if pod.mean_util is not None else "?"
    if pod.idle_s:
        out = Text(f"idle {pod.idle_for}", style=render.WARN_STYLE, end="")
        out.append(f" · {mean}" if compact else f", mean {mean}", style=render.DIM_STYLE)
        return out
    return Text(f"in use · {mean}" if compact else f"in use, mean {mean}", style=render.DIM_STYLE, end="")


def row_note(view: IdleView | None, entry: GpuPod, metrics: NodeMetrics | None) -> Text | None:
    """What a bound GPU pod's row says of its use (its REASON cell is free); None where nothing is to be
    known: a pending pod, or a node whose exporter is not read and no source has figures for it."""
    pod = entry.pod
    if pod.node is None or entry.reason:
        return None
    figures = view.pod(pod.namespace, pod.name) if view is not None else None
    if figures is not None and (figures.known or figures.shared):
        return idle_words(figures, compact=True)
    if metrics is not None and metrics.current:
        return idle_words(None, compact=True)  # its exporter is read: samples are on their way
    return None


def source_line(view: IdleView | None, settings: IdleSettings) -> Text:
    threshold = f"idle: under {settings.threshold:g} %"
    if view is None:
        return Text(f"looking for figures… · window {human_duration(settings.window)} · {threshold}", style=render.DIM_STYLE, end="")
    source = f"Prometheus {settings.prometheus}" if view.source == PROMETHEUS else "gputui's samples of the DCGM exporters"
    out = Text(source, style="bold", end="")
    window = human_duration(view.window_s)
    if any(p.known for p in view.pods):
        out.append(f" · {human_duration(view.covered_s)} of the last {window} covered · {threshold}", style=render.DIM_STYLE)
    else:
        out.append(f" · no samples yet · window {window} · {threshold}", style=render.DIM_STYLE)
    return out


def idle_text(view: IdleView | None, settings: IdleSettings, width: int = 120) -> Text:
    """The whole screen as one Text (pure): the pods holding GPUs, worst first."""
    out = Text(end="")
    out.append_text(source_line(view, settings))
    if view is not None and view.note:
        out.append("\n")
        out.append_text(render.text(view.note, style=render.WARN_STYLE, limit=300))
    out.append("\n\n")
    if view is None:
        out.rstrip()  # in place
        return out
    wide = width >= 100
    numbers = [("GPUS", 4), ("IDLE FOR", 9), ("MEAN", 5), *([("PEAK", 5)] if wide else []), ("MEMORY", 10)]
    rest = max(24, width - 4 - sum(w + 1 for _, w in numbers) - 3)
    names = [("POD", rest * 45 // 100), ("NAMESPACE", rest * 25 // 100), ("NODE", rest - rest * 45 // 100 - rest * 25 // 100)]
    out.append(" ".join(title.ljust(w) for title, w in names) + " " + " ".join(title.rjust(w) for title, w in numbers) + "\n",
               style=render.DIM_STYLE)
    if not view.pods:
        out.append("no pod holds GPUs", style=render.DIM_STYLE)
    shown = view.pods[:SHOWN]
    pod_width = names[0][1]
    alike = DistinctNames(pod_width + 1)  # two replicas cut alike read apart, as in the GPU pods pane
    alike.update((("", pod.name) for pod in shown), ())
    for pod in shown:
        name = cut_name("", safe_parts("", pod.name)[1], pod_width + 1, alike.differ_at.get(("", pod.name)))[1][1:]
        out.append(name.ljust(pod_width) + " ")
        for (_, w), value in zip(names[1:], (pod.namespace, pod.node or "-"), strict=True):
            cell = render.text(value, limit=253)
            cell.truncate(w, overflow="ellipsis", pad=True)
            out.append_text(cell)
            out.append(" ")
        if not pod.known:
            out.append(f"{pod.gpus:>4} ")
            why = render.text(SHARED_WORDS if pod.shared else pod.why or "no samples yet", style=render.DIM_STYLE, limit=100)
            under = sum(w + 1 for _, w in names) + 5  # the IDLE FOR column: a long why goes on under itself
            render.append_hanging(out, why, used=under, width=width - 4, indent=under)
            out.append("\n")
            continue
        values = [f"{pod.gpus}", pod.idle_for, _percent(pod.mean_util), *([_percent(pod.peak_util)] if wide else []), memory(pod.fb_used_mib)]
        for i, ((_, w), value) in enumerate(zip(numbers, values, strict=True)):
            out.append(value.rjust(w) + ("" if i == len(values) - 1 else " "), style=render.WARN_STYLE if i == 1 and pod.idle_s else "")
        out.append("\n")
    if len(view.pods) > SHOWN:
        out.append(f"+{len(view.pods) - SHOWN} more pods", style=render.DIM_STYLE)
    out.rstrip()
    return out


def _percent(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f}%"


class IdleScreen(ModelPage):
    """The pods holding GPUs, the idle longest first; redrawn after each coalesced refresh."""

    BINDINGS = [Binding("i", "back", "Back", show=False)]
    PAGE_TITLE = "Idle GPUs"

    def __init__(self, settings: IdleSettings) -> None:
        super().__init__()
        self.settings = settings

    def body(self, model: ClusterModel | None, context: ViewContext) -> Text:
        if model is None:
            return Text("connecting…", style=render.DIM_STYLE)
        if not model.pods_known and not (context.idle and context.idle.pods):
            return Text("listing the pods…", style=render.DIM_STYLE)  # "no pod holds GPUs" would be a guess
        return idle_text(context.idle, self.settings, context.width - 2)


class IdleHost(Protocol):
    """The app, as the idle figures need it."""

    @property
    def model(self) -> ClusterModel | None: ...
    @property
    def conn(self) -> Connection | None: ...
    def run_worker(self, work: Callable[[], Coroutine[None, None, None]], name: str | None = ..., group: str = ...,
                   description: str = ..., exit_on_error: bool = ..., start: bool = ..., exclusive: bool = ...) -> Worker[None]: ...
    def notify(self, message: str, *, title: str = ..., severity: SeverityLevel = ..., timeout: float | None = ...,
               markup: bool = ...) -> None: ...
    def redraw_pod_rows(self) -> None:
        """Every GPU pod's row looked at again at the next coalesced refresh."""


class IdleFigures:
    """The app's: the tracker of the connected model and its latest figures (`view`, None before the first)."""

    def __init__(self, host: IdleHost, settings: IdleSettings) -> None:
        self._host = host
        self.settings = settings
        self.view: IdleView | None = None
        self._tracker: IdleTracker | None = None
        self._worker: Worker[None] | None = None

    def note(self, entry: GpuPod) -> Text | None:
        """What a GPU pod's row says of its use."""
        model = self._host.model
        metrics = model.node_metrics(entry.pod.node) if model is not None and entry.pod.node else None
        return row_note(self.view, entry, metrics)

    def start(self) -> None:
        """Follow the connected model's exporter reads and keep the figures fresh, until stop()."""
        model, conn = self._host.model, self._host.conn
        if model is None or conn is None:
            return
        self.view = None
        tracker = self._tracker = IdleTracker(conn.api, self.settings, scope=conn.server)
        self._worker = self._host.run_worker(partial(self._follow, model, tracker), "follow_idle", group="idle", exclusive=True)

    async def stop(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.cancel()
        tracker, self._tracker = self._tracker, None
        if tracker is not None:
            with contextlib.suppress(HistoryError):
                await tracker.close()

    async def _follow(self, model: ClusterModel, tracker: IdleTracker) -> None:
        try:
            await tracker.open()
        except HistoryError as error:
            self._host.notify(f"{error}; the samples are kept in memory only", severity="warning", timeout=15, markup=False)
            tracker.store.history = None  # nothing to write
        unhook = tracker.follow(model.metrics)
        # An exporter's state changing (known once the DaemonSets are, not running, gone) changes its pods' words too:
        # the figures follow it as they follow the samples.
        woken = tracker.store.changed
        unsubscribe = model.subscribe(lambda change: woken.set() if change.kind == METRICS else None)
        try:
            await model.wait_synced(30, kinds=("pods",))  # figures for the pods there are, not for none
            while True:
                tracker.store.changed.clear()
                try:
                    self.view = await tracker.refresh(await self._holders(model))
                except HistoryError as error:  # the store keeps the samples in memory from now on
                    self._host.notify(f"{error}; the samples are kept in memory only", severity="warning", timeout=15, markup=False)
                self.changed()
                if self.view is not None and self.view.source == PROMETHEUS:
                    await asyncio.sleep(IDLE_REFRESH)
                    continue
                await set_within(tracker.store.changed, IDLE_REFRESH)  # the samples' figures follow the reads
                await asyncio.sleep(IDLE_COALESCE)
        finally:
            unhook()
            unsubscribe()

    @staticmethod
    async def _holders(model: ClusterModel) -> list[Holder]:
        """kube/idle.py's holders, a slice of the pods at a time between yields to the loop."""
        pods, out = list(model.pods.records.values()), []
        for start in range(0, len(pods), SLICE):
            if start:
                await asyncio.sleep(0)
            out.extend(holders(model, pods=pods[start:start + SLICE]))
        return out

    def changed(self) -> None:
        """New figures: the pod rows and the top screen follow (the coalesced refresh)."""
        self._host.redraw_pod_rows()
