"""ModelPage: a screen of text drawn from the model (Capacity, Idle GPUs), redrawn after each coalesced
refresh only when its text changed; `j`/`k` scroll, `esc` or `q` go back. A ModelView (seam.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from .seam import ViewContext, host

if TYPE_CHECKING:
    from gputui.kube.model import ClusterModel


class ModelPage(Screen[None]):
    DEFAULT_CSS = """
    ModelPage > VerticalScroll { padding: 0 1; }
    """
    BINDINGS = [
        Binding("escape,q", "back", "Back"),
        Binding("j", "scroll(1)", show=False),
        Binding("k", "scroll(-1)", show=False),
    ]
    PAGE_TITLE = ""

    def __init__(self) -> None:
        super().__init__()
        self._shown: Text | None = None

    def body(self, model: ClusterModel | None, context: ViewContext) -> Text:
        """The page's text from the model (None: not connected yet)."""
        raise NotImplementedError

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="page"):
            yield Static(id="page-body")
        yield Footer()

    def on_mount(self) -> None:
        self.title = self.PAGE_TITLE
        host(self).show_now(self)
        self.query_one("#page", VerticalScroll).focus()

    def show(self, model: ClusterModel | None, context: ViewContext) -> None:
        body = self.body(model, context)
        if body != self._shown:  # no redraw when nothing changed
            self._shown = body
            self.query_one("#page-body", Static).update(body)

    @property
    def text(self) -> str:
        """The page as plain text (tests)."""
        return self._shown.plain if self._shown is not None else ""

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_scroll(self, lines: int) -> None:
        self.query_one("#page", VerticalScroll).scroll_relative(y=lines, animate=False)
