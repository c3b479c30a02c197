"""The one typed seam between the model and the screens: what a screen is given to draw.

The App owns the connection, the model and the context. After each coalesced refresh it calls
`show(model, context)` on the top screen when that screen is a ModelView; a screen that must draw
at once (when it is mounted, or after a key of its own) asks its host: `host(self).show_now(self)`.
No screen reads `app.model`, the app's clock or its selection: they come in the call
(tests/test_architecture.py checks it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from textual.dom import DOMNode

if TYPE_CHECKING:
    from gputui.kube.idle import IdleView
    from gputui.kube.model import ClusterModel


@dataclass(frozen=True, slots=True)
class ViewContext:
    """What a screen reads besides the model, as the app holds it at this refresh."""

    now: float  # the app's clock (wall-clock seconds): ages, `3m ago`
    width: int  # the terminal's columns
    selected_node: str | None  # the Nodes pane's cursor row
    namespaces: tuple[str, ...]  # the GPU pods shown (-n, the palette); (): every namespace
    idle: IdleView | None  # the pods' GPU use (ui/idle.py's tracker); None before the first figures
    all_nodes: bool = False  # the GPU pods pane shows every node's pods (`a`), not the selected node's


@runtime_checkable
class ModelView(Protocol):
    """A screen drawn from the model: the app calls show() after each coalesced refresh while it is on top."""

    def show(self, model: ClusterModel | None, context: ViewContext) -> None:
        """Draw from the model (None: not connected yet). Called only once the screen is mounted."""


@runtime_checkable
class ModelHost(Protocol):
    """The app, as a ModelView sees it."""

    def show_now(self, view: ModelView) -> None:
        """Call view.show() now, with the model and context of this moment."""


def host(node: DOMNode) -> ModelHost:
    """The app a screen runs in, as a ModelHost (GpuTuiApp; a test may give another)."""
    app = node.app
    if not isinstance(app, ModelHost):
        raise TypeError(f"{type(app).__name__} does not show the model (no show_now)")
    return app
