"""The main screen's panes. They show what they are given; they never call the API."""
from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Iterable

from rich.cells import chop_cells
from rich.text import Text
from textual.containers import Vertical
from textual.timer import Timer
from textual.widgets import Input, Log

from gputui.kube.logs import LogNote
from gputui.sanitize import clean, log_line

from . import keys

if TYPE_CHECKING:
    from typing_extensions import Self

LOG_LINES_KEPT = 2_000


class FollowingLog(Log):
    """A Log that keeps following its end when it is made smaller (a pane above it grows, the terminal
    shrinks): Log keeps its scroll offset then, and the last lines, new ones included, fell out of view.

    `w` wraps long lines at the log's width (Log has no wrap mode: its lines are then the wrapped rows,
    made again from the kept lines on a toggle or a new width); ← → scroll half a width, home / end
    jump to the first / last line (keys.LOG_KEYS)."""

    BINDINGS = keys.bindings(keys.LOG_KEYS)
    ROWS_PER_LINE_KEPT = 4  # wrapped: at most this many rows per kept line (the oldest line's first rows go)

    def __init__(self, *, max_lines: int | None = None, id: str | None = None) -> None:
        super().__init__(max_lines=max_lines, auto_scroll=True, id=id)
        self._at_end = True
        self._kept: deque[str] = deque(maxlen=max_lines)  # the lines as written, wrapped again from here
        self.wrapping = False
        self._wrap_width = 0  # the width the rows were wrapped at

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._at_end = new_value >= self.max_scroll_y

    def on_resize(self) -> None:
        if self.wrapping and self.scrollable_content_region.width != self._wrap_width:
            self._rewrite()
        if self._at_end:
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    def write_lines(self, lines: Iterable[str], scroll_end: bool | None = None) -> Self:
        written = [part for line in lines for part in line.splitlines()]  # as Log splits them
        self._kept.extend(written)
        if self.wrapping:
            written = [row for line in written for row in self._rows(line)]
        return super().write_lines(written, scroll_end)

    def clear(self) -> Self:
        self._kept.clear()
        return super().clear()

    def _rows(self, line: str) -> list[str]:
        return chop_cells(line, self._wrap_width) if line and self._wrap_width > 0 else [line]

    def _rewrite(self) -> None:
        """The kept lines written again: wrapped at the current width, or one line each."""
        at_end, fraction = self._at_end, self.scroll_y / max(1, self.max_scroll_y)
        kept = list(self._kept)
        self._wrap_width = self.scrollable_content_region.width
        if self._kept.maxlen is not None:
            self.max_lines = self._kept.maxlen * (self.ROWS_PER_LINE_KEPT if self.wrapping else 1)
        self._kept.clear()
        super().clear()  # Log's: a PluginLog's lines waiting to be written stay
        self.write_lines(kept, scroll_end=False)
        if at_end:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        else:
            self.scroll_to(y=round(fraction * self.max_scroll_y), animate=False, immediate=True)

    def action_toggle_wrap(self) -> None:
        self.wrapping = not self.wrapping
        self.scroll_to(x=0, animate=False, immediate=True)
        self._rewrite()

    def action_scroll_half(self, direction: int) -> None:
        self.scroll_relative(x=direction * max(1, self.scrollable_content_region.width // 2), animate=False, immediate=True)

    def action_first_line(self) -> None:
        self.scroll_to(x=0, y=0, animate=False, immediate=True)

    def action_last_line(self) -> None:
        self.scroll_to(x=0, animate=False, immediate=True)
        self.scroll_end(animate=False, immediate=True, x_axis=False)


class PluginLog(FollowingLog):
    """Container log lines, sanitised and bounded. Text stays text: Log never reads markup.

    `queue` collects lines as they stream in and writes them in one go at most
    every FLUSH_INTERVAL, so a burst costs one redraw; at most LOG_LINES_KEPT wait.
    """

    ALLOW_MAXIMIZE = True
    FLUSH_INTERVAL = 0.1

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(max_lines=LOG_LINES_KEPT, id=id)
        self._pending: deque[bytes | str] = deque(maxlen=LOG_LINES_KEPT)
        self._flush_timer: Timer | None = None

    def queue(self, raw: bytes | str) -> None:
        self._pending.append(raw)
        if self._flush_timer is None:
            self._flush_timer = self.set_timer(self.FLUSH_INTERVAL, self.flush)

    def flush(self) -> None:
        self._flush_timer = None
        if self._pending:
            self.add_lines(self._pending)
            self._pending.clear()

    def add_lines(self, raw_lines: Iterable[bytes | str]) -> None:
        self.write_lines([log_line(raw) for raw in raw_lines])

    def clear(self) -> "PluginLog":
        self._pending.clear()
        return super().clear()

    def show(self, line: bytes | LogNote) -> None:
        """A line from a LogFollower: the container's, or a note of gputui's own."""
        if isinstance(line, LogNote):
            self.add_note(line)
        else:
            self.queue(line)

    def add_note(self, note: str) -> None:
        """A line of gputui's own (stream switched, container restarted), set apart by its dashes."""
        self.flush()
        self.write_line(f"── {clean(note, 400)} ──")


class FilterBar(Input):
    """`/`: type to narrow the focused table; enter keeps the filter, esc clears it."""

    DEFAULT_CSS = """
    FilterBar { display: none; }
    FilterBar.-active { display: block; }
    """


class Pane(Vertical):
    """A bordered pane with a title and an in-place status line (errors, filters, modes)."""

    ALLOW_MAXIMIZE = True  # `l` fills the screen with the plugin pane, its title and pod line included

    def __init__(self, title: str, *, id: str) -> None:
        super().__init__(id=id, classes="pane")
        self.border_title = title
        self._title, self._status = title, ""

    # Setting a border title redraws the pane, even to the same text: set only changes.
    def set_title(self, title: str) -> None:
        if title != self._title:
            self._title = self.border_title = title

    def set_status(self, status: Text | str) -> None:
        text = status.plain if isinstance(status, Text) else status
        if text != self._status:
            self._status = self.border_subtitle = text
