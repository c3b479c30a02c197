"""How the main screen is laid out: MainLayout fits the header and panes to the terminal's width (narrow
under NARROW_WIDTH columns), shows or hides a pane (the palette's "Toggle pane"), and fills the screen with
the device-plugin log (`l`; `l` or esc back, the focus returning to the pane it left).

Each pane lays out its own columns (set_layout); here is when, and the main screen's `-narrow` class that the
stylesheet reads. A new layout builds every row again.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from textual.widget import Widget

if TYPE_CHECKING:
    from textual.screen import Screen

    from .header import ClusterHeader
    from .nodes_pane import NodesPane
    from .plugin_pane import PluginPane
    from .pods_pane import PodsPane

NARROW_WIDTH = 100  # columns: under it, the narrow layout (fewer, shorter columns; the panes stacked)


class LayoutHost(Protocol):
    """The app, as the main screen's layout needs it."""

    @property
    def main_screen(self) -> Screen[object]:
        """The main screen, whichever screen is on top."""
    @property
    def screen(self) -> Screen[object]: ...
    @property
    def focused(self) -> Widget | None: ...
    @property
    def drawing(self) -> bool:
        """The main screen is up and the app is not ending."""
    @property
    def cluster_header(self) -> ClusterHeader: ...
    @property
    def nodes_pane(self) -> NodesPane: ...
    @property
    def pods_pane(self) -> PodsPane: ...
    @property
    def plugin_pane(self) -> PluginPane: ...
    def redraw_all(self) -> None:
        """Every row built again, and every part drawn now."""
    def refresh_now(self, *parts: str) -> None:
        """These parts of the screen redrawn now."""


class MainLayout:
    """The app's: the width the main screen is laid out for, its panes shown or hidden, the log full screen."""

    def __init__(self, host: LayoutHost) -> None:
        self._host = host
        self.laid_out: tuple[bool, int] | None = None  # (narrow, width) the columns were laid out for
        self.narrow: bool | None = None  # None: not laid out yet
        self._focus_before_logs: Widget | None = None

    def apply(self, width: int) -> None:
        """The header and panes laid out for this width (nothing done when it is the width they have)."""
        narrow = width < NARROW_WIDTH
        if (narrow, width) == self.laid_out:
            return
        host = self._host
        self.laid_out = (narrow, width)
        self.narrow = narrow
        host.main_screen.set_class(narrow, "-narrow")
        host.cluster_header.narrow = narrow
        host.nodes_pane.set_layout(narrow, width)
        host.pods_pane.set_layout(narrow, width)
        host.redraw_all()

    def resized(self, width: int) -> None:
        """The terminal is this wide now."""
        if not self._host.drawing:
            return
        self.apply(width)
        self._host.refresh_now("header")

    def toggle_pane(self, pane_id: str) -> None:
        """The palette's "Toggle pane": the pane (`nodes`, `pods`, `plugin`) hidden, or shown again."""
        pane = self._host.main_screen.query_one(f"#{pane_id}", Widget)
        pane.set_class(not pane.has_class("-hidden"), "-hidden")

    def toggle_logs(self) -> None:
        """`l`: the device-plugin log fills the screen, or no longer."""
        host = self._host
        if host.screen.maximized is not None:
            self._minimize()
        else:
            self._focus_before_logs = host.focused
            log = host.plugin_pane.plugin_log
            host.screen.maximize(log)
            log.focus()

    def escape_logs(self) -> bool:
        """Esc while a widget fills the screen: back to the panes. False: none did."""
        if self._host.screen.maximized is None:
            return False
        self._minimize()
        return True

    def _minimize(self) -> None:
        """Back from the full-screen log: focus returns to the pane it left."""
        self._host.screen.minimize()
        before, self._focus_before_logs = self._focus_before_logs, None
        if before is not None and before.is_attached and before.focusable:
            before.focus()
