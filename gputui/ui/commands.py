"""The command palette (ctrl+p): switch context or namespace, jump to a node, toggle panes, the GPU stack, capacity, idle GPUs,
Kueue's queues, local GPUs."""
from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Callable, Iterator

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content
from textual.fuzzy import Matcher

from gputui.sanitize import clean

from . import keys
from .seam import ViewContext, host

if TYPE_CHECKING:
    from gputui.kube.model import ClusterModel

    from .app import GpuTuiApp

PANES = (("nodes", "Nodes"), ("pods", "GPU pods"), ("plugin", "Device plugin"))


class GpuCommands(Provider):
    """The app's commands, and what the model holds to act on (namespaces, nodes): a ModelView (seam.py),
    given the model each time the palette lists its commands."""

    _model: ClusterModel | None = None

    def show(self, model: ClusterModel | None, context: ViewContext) -> None:
        self._model = model

    @property
    def gputui(self) -> "GpuTuiApp":
        return self.app  # type: ignore[return-value]  # the provider's app is GpuTuiApp; Textual types it as App

    def _commands(self) -> Iterator[tuple[str, Callable[[], object], str]]:
        app = self.gputui
        for pane_id, title in PANES:
            yield f"Toggle pane: {title}", partial(app.main_layout.toggle_pane, pane_id), "show or hide the pane"
        host(app).show_now(self)
        model = self._model
        for key in keys.MAIN_KEYS:  # the screens, as their keys declare them
            if key.in_palette(model):
                yield key.palette, partial(app.call_later, app.run_action, key.action), key.help
        yield "Namespace: all", partial(app.set_namespace, None), "GPU pods of every namespace"
        if model is not None:
            for namespace in sorted({pod.namespace for pod in model.pods.records.values()}):
                yield f"Namespace: {clean(namespace, 63)}", partial(app.set_namespace, namespace), "only this namespace's GPU pods"
            for summary in model.node_summaries():
                yield f"Jump to node: {clean(summary.name, 63)}", partial(app.jump_to_node, summary.name), "select the node"
        fleet = app.fleet.contexts if app.fleet is not None else []
        for context in fleet:
            yield f"Open cluster: {clean(context, 80)}", partial(app.fleet_navigation.open_cluster, context), "this cluster of the fleet"
        for context in app.list_contexts():
            if context != app.context and context not in fleet:
                yield f"Switch context: {clean(context, 80)}", partial(app.switch_context, context), "reconnect to this kubeconfig context"

    async def discover(self) -> Hits:
        for title, callback, help_text in self._commands():
            if not title.startswith("Jump to node"):
                yield DiscoveryHit(Content(title), callback, text=title, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, callback, help_text in self._commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, _highlight(matcher, title), callback, text=title, help=help_text)


def _highlight(matcher: Matcher, title: str) -> Content:
    """Matcher.highlight reads its candidate as markup; titles hold cluster names, so style plain Content."""
    content = Content(title)
    _, offsets = matcher.fuzzy_search.match(matcher.query, title)
    for offset in offsets:
        content = content.stylize(matcher.match_style, offset, offset + 1)
    return content
