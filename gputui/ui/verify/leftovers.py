"""Verification pods an earlier run left behind, offered for deletion."""
from __future__ import annotations

from typing import Any, Sequence

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputui.kube import verify as v
from gputui.kube.client import HttpError
from gputui.kube.quantities import parse_time

from .. import render
from gputui.sanitize import clean
from .settings import READ_ONLY_MESSAGE
from .words import _error_text


class LeftoversScreen(ModalScreen[None]):
    """Verification pods from an earlier run: d deletes them (not in read-only mode), esc keeps them."""

    DEFAULT_CSS = """
    LeftoversScreen { align: center middle; }
    LeftoversScreen > VerticalScroll {
        width: 100; max-width: 96%; height: auto; max-height: 80%;
        border: round $warning; background: $surface; padding: 0 1;
    }
    """
    BINDINGS = [Binding("d", "delete", "Delete them"), Binding("escape", "keep", "Keep them")]

    def __init__(self, api: Any, leftovers: Sequence[v.Leftover], now: float, *, read_only: bool) -> None:
        super().__init__()
        self.api = api
        self.leftovers = list(leftovers)
        self.now = now
        self.read_only = read_only
        self.deleting = False

    def compose(self) -> ComposeResult:
        with VerticalScroll() as box:
            box.border_title = "Verification pods left over from an earlier run"
            yield Static(self.body(), id="leftovers-body")

    def body(self, note: Text | None = None) -> Text:
        out = Text(f"{len(self.leftovers)} verification pod(s) still in the cluster (an earlier gputui was killed, "
                   "or could not confirm a deletion):\n", end="")
        for lo in self.leftovers:
            created = parse_time(lo.created)
            age = render.age(created, self.now) if created else "?"
            out.append("  ")
            out.append_text(render.text(f"{lo.namespace}/{lo.name}", style="bold", limit=200))
            out.append("  node ", style="dim")
            out.append_text(render.text(lo.node or "?", limit=100))
            out.append("  ")
            out.append_text(render.text(lo.status, limit=40))
            out.append(f"  {age} old\n", style="dim")
        out.append("\n")
        if note is not None:
            out.append_text(note)
        elif self.read_only:
            out.append("read-only mode: not deleting them; delete them with kubectl delete pod -n NAMESPACE NAME", style=render.WARN_STYLE)
            out.append("  · esc close", style="dim")
        else:
            out.append("d", style="bold")
            out.append(" delete them · ")
            out.append("esc", style="bold")
            out.append(" keep them")
        return out

    def action_delete(self) -> None:
        if self.read_only:
            self.notify(READ_ONLY_MESSAGE, severity="warning", markup=False)
            return
        if not self.deleting:
            self.deleting = True
            self.query_one("#leftovers-body", Static).update(self.body(Text("deleting…", style="bold")))
            self._delete()

    @work(group="verify-leftovers", exit_on_error=False)
    async def _delete(self) -> None:
        try:
            not_gone = await v.delete_leftovers(self.api, self.leftovers)
        except (OSError, HttpError) as error:
            self.app.notify(f"could not delete the leftover pods: {clean(_error_text(error), 300)}", severity="error", markup=False)
            self.deleting = False
            self.query_one("#leftovers-body", Static).update(self.body())
            return
        if not_gone:
            names = ", ".join(f"{lo.namespace}/{lo.name}" for lo in not_gone)
            self.app.notify(f"could not confirm deletion of: {clean(names, 1000)}", severity="error", markup=False)
        else:
            self.app.notify(f"deleted {len(self.leftovers)} leftover verification pod(s)", markup=False)
        self.dismiss(None)

    def action_keep(self) -> None:
        if not self.deleting:
            self.dismiss(None)
