"""The Usage screen (`U`): GPU-hours per group over days, from the Prometheus the Idle GPUs view reads
(kube/usage.py): allocated, used, their ratio, idle, shared and the peak, with what the figures rest on.

`b` groups by namespace, node or GPU model in turn, `w` takes the next window (1 day, 7 days, 30 days);
each asks Prometheus again (two queries). Without a Prometheus it says what it needs.
The renderer is pure: figures in, Text out, every string from Prometheus through gputui.sanitize.
"""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.binding import Binding

from gputui.kube.config import ConnectError
from gputui.kube.duration import human_duration
from gputui.kube.usage import Prometheus, UsageError, UsageSettings, UsageView, hours_text, usage

from . import render
from .page import ModelPage

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
    """GPU-hours per group from Prometheus; asked when opened and on `b`/`w`."""

    BINDINGS = [Binding("U", "back", "Back", show=False), Binding("b", "group_by", "Group by"), Binding("w", "window", "Window")]
    PAGE_TITLE = "Usage (GPU-hours)"

    def __init__(self, where: str | None, api: Any = None) -> None:
        super().__init__()
        self.where, self.api = where, api
        self.settings = UsageSettings(window=WINDOWS[1])
        self.view: UsageView | None = None
        self.error: str | None = None if where else NEEDS

    def body(self) -> Text:
        return usage_text(self.view, self.settings, self.error, self.app.size.width - 2)

    def on_mount(self) -> None:
        super().on_mount()
        self._ask()

    def _ask(self) -> None:
        if self.where:
            self.view, self.error = None, None
            self._draw()
            self.run_worker(self._query(self.settings), group="usage", exclusive=True)

    async def _query(self, settings: UsageSettings) -> None:
        try:
            source = Prometheus(self.where or "", self.api)
            try:
                view = await usage(source, settings)
            finally:
                await source.close()
        except (UsageError, ConnectError) as exc:
            self.error = f"{exc}; {HOW}"
        else:
            if settings == self.settings:
                self.view = view
        self._draw()

    def action_group_by(self) -> None:
        self.settings = UsageSettings(window=self.settings.window, by=GROUPS[(GROUPS.index(self.settings.by) + 1) % len(GROUPS)])
        self._ask()

    def action_window(self) -> None:
        self.settings = UsageSettings(window=WINDOWS[(WINDOWS.index(self.settings.window) + 1) % len(WINDOWS)], by=self.settings.by)
        self._ask()
