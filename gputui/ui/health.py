"""The Health view (`h`): bad GPUs, newest first, each with its node, its signals and how long they have been so, and
the pods on it with their owners and how that is known (gputui/kube/health.py); and the GPU pods pane's note for a
pod on a bad GPU (`on bad GPU: XID 79 3m ago`). The screen renders what the model holds."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable, Protocol

from rich.text import Text
from textual.binding import Binding

from gputui.kube import health
from gputui.kube.duration import human_duration
from gputui.kube.gpu import GpuPod

from . import render
from .page import ModelPage
from .seam import ViewContext

if TYPE_CHECKING:
    from textual.timer import Timer

    from gputui.kube.model import ClusterModel


def health_text(gpus: list[health.BadGpu], now: float, old_after: float, pods_known: bool, width: int = 10_000) -> Text:
    """The whole screen as one Text (pure); a signal's or pod's line longer than the page's `width` goes on under
    its own words, not at the margin."""
    room = width - render.PAGE_MARGIN
    out = Text(end="")
    out.append("Bad GPUs", style="bold")
    out.append(f", newest first (an XID unchanged for over {human_duration(old_after)} reads as old)\n\n", style=render.DIM_STYLE)
    if not pods_known:
        out.append("listing the pods…", style=render.DIM_STYLE)
        return out
    if not gpus:
        out.append("none: no XID, unhealthy device, device taint or health condition", style=render.DIM_STYLE)
        return out
    for bad in gpus:
        out.append_text(render.text(bad.node, style="bold", limit=63))
        out.append("  ")
        if bad.device:
            out.append_text(render.text(bad.device, limit=63))
        else:
            out.append("a GPU, which one unknown", style=render.DIM_STYLE)
        if bad.uuid and bad.uuid != bad.device:
            out.append("  ")
            out.append_text(render.text(bad.uuid, style=render.DIM_STYLE, limit=80))
        out.append("\n")
        for signal in bad.signals:
            out.append("    ")
            line = render.text(health.signal_words(signal, now), style=render.DIM_STYLE if signal.old else render.WARN_STYLE, limit=300)
            line.append(f"  [{signal.source}]", style=render.DIM_STYLE)
            render.append_hanging(out, line, 4, room)
            out.append("\n")
        if not bad.holders_known:
            out.append("    pods: cannot tell which (a node-level signal)\n", style=render.DIM_STYLE)
        elif not bad.holders:
            out.append("    no pod holds it\n", style=render.DIM_STYLE)
        for holder in bad.holders:
            out.append("    ")
            line = Text("pod ", end="")
            line.append_text(render.text(f"{holder.namespace}/{holder.name}", style="bold", limit=200))
            owned = ", ".join(x for x in (holder.owner, f"Workload {holder.workload}" if holder.workload else None) if x)
            if owned:
                line.append(" (")
                line.append_text(render.text(owned, limit=200))
                line.append(")")
            line.append(f"  by {', '.join(holder.how)}", style=render.DIM_STYLE)
            render.append_hanging(out, line, 4, room)
            out.append("\n")
        out.append("\n")
    out.rstrip()
    return out


class HealthScreen(ModelPage):
    """Bad GPUs and the work on them, redrawn from the model after each coalesced refresh."""

    BINDINGS = [Binding("h", "back", "Back", show=False)]
    PAGE_TITLE = "Health: bad GPUs"

    def body(self, model: ClusterModel | None, context: ViewContext) -> Text:
        if model is None:
            return Text("connecting…", style=render.DIM_STYLE)
        return health_text(model.bad_gpus(), model.clock(), model.xid_old_after, model.pods_known, context.width)


_SHORT = {health.POD_STATUS: "Unhealthy device", health.DRA_TAINT: "device taint"}  # an XID's text is short already


def pod_note(gpus: list[health.BadGpu], now: float) -> dict[tuple[str, str], Text]:
    """Per pod on a bad GPU, its GPU pods pane note: `on bad GPU: XID 79 3m ago` (its newest bad GPU's first signal)."""
    out: dict[tuple[str, str], Text] = {}
    for key, held in health.by_pod(gpus).items():
        signal = held[0].signals[0]
        shown = signal.to_json(now)
        when = health.age_words(shown["age_s"], shown["age_at_least_s"], signal.old)
        what = _SHORT.get(signal.source) or signal.text.split(" (", 1)[0]
        words = f"on bad GPU: {what}" + (f" {when}" if when else "")
        out[key] = render.text(words, style=render.DIM_STYLE if held[0].old else render.BAD_STYLE, limit=200)
    return out


def _shown(note: Text | None) -> tuple[str, str] | None:
    return None if note is None else (note.plain, str(note.style))


NOTES_INTERVAL = 1.0  # the bad GPUs are looked at again at most once a second, and only when an input changed


class HealthHost(Protocol):
    """The app, as the bad GPUs' notes need it."""

    @property
    def model(self) -> ClusterModel | None: ...
    def set_timer(self, delay: float, callback: Callable[[], object]) -> Timer: ...
    def request_refresh(self, *parts: str) -> None:
        """These parts of the screen redrawn at the next coalesced refresh."""


class BadGpuNotes:
    """The app's: the note of each GPU pod on a bad GPU. The notes are computed for every pod at once, when an input
    of the bad GPUs changed (a DCGM reading, a node, a DRA object, a pod: `input_changed`) and at most once a second;
    `changed` gives the pods whose note changed, the only rows redrawn."""

    def __init__(self, host: HealthHost) -> None:
        self._host = host
        self._notes: dict[tuple[str, str], Text] = {}
        self._notes_of: tuple[ClusterModel | None, float] = (None, float("-inf"))  # (model, monotonic time) the notes were computed for, at
        self._dirty = True
        self._due: Timer | None = None  # a timer for the next look, while one is too soon

    def input_changed(self) -> None:
        self._dirty = True

    def changed(self) -> set[tuple[str, str]]:
        """Look at the bad GPUs again if an input changed: the pods whose note appeared, changed or went. Too soon
        after the last look: a refresh of the pods when it is due."""
        model = self._host.model
        seen_model, at = self._notes_of
        if model is None or (not self._dirty and seen_model is model):
            return set()
        now = time.monotonic()
        if seen_model is model and now - at < NOTES_INTERVAL:
            if self._due is None:
                self._due = self._host.set_timer(NOTES_INTERVAL - (now - at), self._due_now)
            return set()
        self._dirty = False
        self._notes_of = (model, now)
        before, after = self._notes, pod_note(model.bad_gpus(), model.clock()) if model.pods_known else {}
        self._notes = after
        return {key for key in before.keys() | after.keys() if _shown(before.get(key)) != _shown(after.get(key))}

    def _due_now(self) -> None:
        self._due = None
        self._host.request_refresh("pods")

    def note(self, entry: GpuPod) -> Text | None:
        if entry.pod.node is None:
            return None
        return self._notes.get(entry.pod.key)
