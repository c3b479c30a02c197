"""The Usage screen (`U`): GPU-hours per group over days, from the Prometheus the Idle GPUs view reads
(kube/usage.py): allocated, used, their ratio, idle, shared and the peak, with what the figures rest on.

`b` groups by namespace, node or GPU model in turn, `w` takes the next window (1 day, 7 days, 30 days);
each asks the app's UsageFeed (kube/usage.py) again, which asks Prometheus; the screen draws what the feed
holds after each coalesced refresh. Without a Prometheus it says what it needs.
The renderer is pure: figures in, Text out, every string from Prometheus through gputui.sanitize.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from rich.text import Text
from textual.binding import Binding

from gputui.kube.duration import human_duration
from gputui.kube.usage import UsageFeed, UsageSettings, UsageView, hours_text

from . import render
from .page import ModelPage
from .seam import ViewContext

if TYPE_CHECKING:
    from gputui.kube.model import ClusterModel

GROUPS = ("namespace", "node", "model")
WINDOWS = (86400.0, 7 * 86400.0, 30 * 86400.0)
HOW = ("the Usage screen reads GPU-hours from a Prometheus that scrapes kube-state-metrics and the DCGM exporters: "
       "--prometheus URL (or NAMESPACE/SERVICE:PORT), or [idle] prometheus in the config file")
NEEDS = "no Prometheus: " + HOW


def short(resource: str) -> str:
    """kube-state-metrics' resource name without NVIDIA's prefix: gpu, mig_1g_10gb, gpu_shared."""
    return resource.removeprefix("nvidia_com_")


def _hours(value: float | None) -> str:
    return "?" if value is None else hours_text(value)


def usage_text(view: UsageView | None, settings: UsageSettings, error: str | None = None, width: int = 120) -> Text:
    """The whole screen as one Text (pure)."""
    out = Text(end="")
    head = f"by {settings.by} · last {human_duration(settings.window)}"
    if error is not None:
        out.append(head + "\n\n", style=render.DIM_STYLE)
        out.append_text(render.text(error, style=render.WARN_STYLE, limit=400))
        return out
    if view is None:
        out.append(f"asking Prometheus… · {head}", style=render.DIM_STYLE)
        return out
    covered = ", ".join(f"{c + ': ' if c else ''}{human_duration(s)}" for c, s in sorted(view.covered_s.items())) or "nothing"
    out.append_text(render.text(f"Prometheus {view.source}", style="bold", limit=200))
    out.append(f" · {head}\ncovered: ", style=render.DIM_STYLE)
    out.append_text(render.text(covered, style=render.DIM_STYLE, limit=300))
    out.append(f" · {view.method_words} · GPU-hours\n", style=render.DIM_STYLE)
    for missing in view.missing:
        out.append_text(render.text(f"missing: {missing}", style=render.WARN_STYLE, limit=300))
        out.append("\n")
    out.append("\n")
    clusters = any(row.cluster for row in view.rows)
    numbers = [("ALLOC", 7), ("USED", 7), ("RATIO", 5), ("IDLE", 7), ("SHARED", 6), ("PEAK", 5)]
    rest = max(20, width - sum(w + 1 for _, w in numbers) - 1)
    resource_w = min(16, max([8, *(len(short(row.resource)) for row in view.rows)]))
    names = [("CLUSTER", (rest - resource_w) * 35 // 100)] if clusters else []
    names += [(settings.by.upper(), rest - resource_w - sum(w + 1 for _, w in names) - 1), ("RESOURCE", resource_w)]
    out.append(" ".join(t.ljust(w) for t, w in names) + " " + " ".join(t.rjust(w) for t, w in numbers) + "\n", style=render.DIM_STYLE)
    if not view.rows:
        out.append("no GPU was allocated in the window", style=render.DIM_STYLE)
    notes = []
    for row in view.rows:
        for (_, w), value in zip(names, [*([row.cluster or "?"] if clusters else []), row.group or "?", short(row.resource)], strict=True):
            cell = render.text(value, limit=253)
            cell.truncate(w, overflow="ellipsis", pad=True)
            out.append_text(cell)
            out.append(" ")
        ratio = "?" if row.ratio is None else f"{row.ratio * 100:.0f}%"
        values = [_hours(row.allocated_h), _hours(row.used_h), ratio, _hours(row.idle_h), _hours(row.shared_h), f"{row.peak:g}"]
        out.append(" ".join(v.rjust(w) for v, (_, w) in zip(values, numbers, strict=True)) + "\n")
        notes += [f"{row.group or '?'} {short(row.resource)}: {note}" for note in row.notes]
    for note in notes:
        line = render.text(note, style=render.DIM_STYLE, limit=300)
        line.truncate(width, overflow="ellipsis")
        out.append_text(line)
        out.append("\n")
    out.rstrip()
    return out


class UsageScreen(ModelPage):
    """GPU-hours per group from the app's UsageFeed, drawn after each coalesced refresh; asked again when
    opened and on `b`/`w` (the feed's answer brings the refresh)."""

    BINDINGS = [Binding("U", "back", "Back", show=False), Binding("b", "group_by", "Group by"), Binding("w", "window", "Window")]
    PAGE_TITLE = "Usage (GPU-hours)"

    def __init__(self, feed: UsageFeed) -> None:
        super().__init__()
        self.feed = feed

    def body(self, model: ClusterModel | None, context: ViewContext) -> Text:  # the feed's figures, not the cluster model's
        feed = self.feed
        error = NEEDS if feed.where is None else None if feed.error is None else f"{feed.error}; {HOW}"
        return usage_text(feed.view, feed.settings, error, context.width - 2)

    def on_mount(self) -> None:
        self.feed.ask()  # figures from now, in the grouping and window last chosen
        super().on_mount()

    def on_unmount(self) -> None:
        self.feed.release()

    def action_group_by(self) -> None:
        settings = self.feed.settings
        self.feed.ask(replace(settings, by=GROUPS[(GROUPS.index(settings.by) + 1) % len(GROUPS)]))

    def action_window(self) -> None:
        settings = self.feed.settings
        self.feed.ask(replace(settings, window=WINDOWS[(WINDOWS.index(settings.window) + 1) % len(WINDOWS)]))
