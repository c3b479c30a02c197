"""The confirmation before anything is created: the node(s) and the exact pod spec."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from .. import render
from gputui.sanitize import clean

if TYPE_CHECKING:
    from gputui.kube import verify as v


def obstacle_line(node: str, obstacle: str) -> Text:
    """`likely to fail: node h100-2 is cordoned`, `likely to fail on node h100-2: only 1 nvidia.com/gpu free
    on the node`: every warning names its node, once."""
    out = Text("likely to fail", style=render.WARN_STYLE, end="")
    if not obstacle.startswith(f"node {node} "):
        out.append(" on node ", style=render.WARN_STYLE)
        out.append_text(render.text(node, style="bold", limit=253))
    out.append(": ", style=render.WARN_STYLE)
    out.append_text(render.text(obstacle, limit=300))
    return out


class ConfirmVerifyScreen(ModalScreen[bool]):
    """The node(s) and the exact pod spec, before anything is created: y creates, n or esc does not."""

    DEFAULT_CSS = """
    ConfirmVerifyScreen { align: center middle; }
    ConfirmVerifyScreen > Vertical {
        width: 100; max-width: 96%; height: 90%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    ConfirmVerifyScreen #confirm-head, ConfirmVerifyScreen #confirm-foot { height: auto; }
    ConfirmVerifyScreen #confirm-spec { height: 1fr; border: round $panel-lighten-2; }
    """
    BINDINGS = [
        Binding("y,enter", "confirm", "Create the pod"),
        Binding("n,escape", "cancel", "Cancel"),
        Binding("j", "scroll_down", show=False),
        Binding("k", "scroll_up", show=False),
    ]

    def __init__(self, plans: Sequence[v.Plan], context: str | None = None) -> None:
        super().__init__()
        self.plans = list(plans)
        self.context = context  # named in capitals: nobody verifies on production by mistake

    def compose(self) -> ComposeResult:
        first = self.plans[0]
        with Vertical() as box:
            box.border_title = "Verify nodes" if len(self.plans) > 1 else "Verify node"
            yield Static(self._head(), id="confirm-head")
            with VerticalScroll(id="confirm-spec") as spec:
                spec.border_title = f"pod {clean(first.namespace, 63)}/{clean(first.name, 63)}"
                yield Static(self.spec_text(), id="confirm-yaml")
            yield Static(self._foot(), id="confirm-foot")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#confirm-spec", VerticalScroll).focus()

    def spec_text(self) -> Text:
        """The first plan's manifests as YAML (its ResourceClaim first, through DRA): literal text, line by line made safe."""
        lines = self.plans[0].to_yaml().rstrip("\n").split("\n")
        return Text("\n".join(clean(line, 2000) for line in lines), end="")

    def _head(self) -> Text:
        out = Text(end="")
        out.append("Cluster ")
        out.append_text(render.text((self.context or "in-cluster").upper(), style="bold reverse", limit=253))
        out.append("\n")
        if len(self.plans) == 1:
            plan = self.plans[0]
            out.append("Node ")
            out.append_text(render.text(plan.node, style="bold", limit=253))
            if plan.claim is not None:
                out.append(f": gputui will create this ResourceClaim, for {plan.count} device(s) of DeviceClass ")
                out.append_text(render.text(plan.resource, style="bold", limit=100))
                out.append(" (Dynamic Resource Allocation), and this pod using it, run nvidia-smi in it and delete both when done.")
            else:
                out.append(f": gputui will create this pod, asking for {plan.count} ")
                out.append_text(render.text(plan.resource, style="bold", limit=100))
                out.append(", run nvidia-smi in it and delete it when done.")
        else:
            out.append(f"{len(self.plans)} nodes: gputui will create one pod on each (this one, and the same on the others), "
                       "run nvidia-smi in it and delete it when done.")
        return out

    def _foot(self) -> Text:
        out = Text(end="")
        if len(self.plans) > 1:
            out.append("and the same on:", style="dim")
            for plan in self.plans[1:]:
                out.append("\n  ")
                out.append_text(render.text(plan.node, style="bold", limit=63))
                out.append(f": {clean(plan.namespace, 63)}/{clean(plan.name, 63)} asking for {plan.count} {clean(plan.resource, 100)}"
                           + (" through a ResourceClaim of the same name" if plan.claim is not None else ""))
        for plan in self.plans:
            for obstacle in plan.obstacles:
                out.append("\n" if out else "")
                out.append_text(obstacle_line(plan.node, obstacle))
        out.append("\n" if out else "")
        out.append("y", style="bold")
        out.append(" create · ")
        out.append("n", style="bold")
        out.append(" / ")
        out.append("esc", style="bold")
        out.append(" cancel (nothing is created)")
        return out

    def action_confirm(self) -> None:
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)

    def action_scroll_down(self) -> None:
        self.query_one("#confirm-spec", VerticalScroll).scroll_down(animate=False)

    def action_scroll_up(self) -> None:
        self.query_one("#confirm-spec", VerticalScroll).scroll_up(animate=False)
