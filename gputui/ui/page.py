"""ModelPage: a screen of text drawn from the model (Capacity, Idle GPUs), redrawn after each coalesced
refresh only when its text changed; `j`/`k` scroll, `esc` or `q` go back."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static


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

    def body(self) -> Text:
        """The page's text from the model now."""
        raise NotImplementedError

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="page"):
            yield Static(id="page-body")
        yield Footer()

    def on_mount(self) -> None:
        self.title = self.PAGE_TITLE
        self._draw()
        self.query_one("#page", VerticalScroll).focus()

    def refresh_from_model(self) -> None:
        self._draw()

    def _draw(self) -> None:
        body = self.body()
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
