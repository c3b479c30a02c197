"""What `enter` on a row of the main screen opens: RowDetails pushes a node's details screen (its DCGM exporter
read fast while it is shown) or a GPU pod's popup (its status, GPU-hours, why it waits, its events).

A pod's popup shows the events the model watches at once, then every event of the pod, listed as the popup
opens (the events watch keeps only why a pod waits); they may arrive before the popup is mounted
(screens.py's TextScreen.set_body keeps them; tests/ui/test_seams.py).
"""
from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Callable, Coroutine, Protocol

from rich.text import Text

from . import render
from .screens import NodeDetails, NodeDetailsScreen, TextScreen, node_details

if TYPE_CHECKING:
    from textual.screen import Screen
    from textual.widget import AwaitMount
    from textual.worker import Worker

    from gputui.kube.model import ClusterModel
    from gputui.kube.records import Event, Pod

    from .pods_pane import PodsPane
    from .seam import ViewContext


class DetailsHost(Protocol):
    """The app, as the details of a row need it."""

    @property
    def model(self) -> ClusterModel | None: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def pods_pane(self) -> PodsPane: ...
    def view_context(self, now: float | None = None) -> ViewContext:
        """What a screen reads besides the model, now."""
    def push_screen(self, screen: Screen[None]) -> AwaitMount: ...
    def run_worker(self, work: Callable[[], Coroutine[None, None, None]], name: str | None = ..., group: str = ...,
                   description: str = ..., exit_on_error: bool = ..., start: bool = ..., exclusive: bool = ...) -> Worker[None]: ...


class RowDetails:
    """The app's: `enter` on a Nodes row shows the node's details, on a GPU pods row the pod's popup."""

    def __init__(self, host: DetailsHost) -> None:
        self._host = host

    # a node
    def show_node(self, name: str) -> None:
        """The node's details screen."""
        self._host.push_screen(NodeDetailsScreen(name, on_show=lambda: self._want_node_metrics(name)))

    def _want_node_metrics(self, node: str) -> Callable[[], None]:
        """Poll the node's DCGM exporter until the returned release() is called (a details screen is shown)."""
        model = self._host.model
        if model is None:
            return lambda: None
        return model.metrics.want([node])

    def node_details(self, name: str) -> NodeDetails | None:
        """The node's details as its screen would show them now (tests)."""
        model = self._host.model
        return node_details(model, name, self._host.view_context().idle) if model is not None else None

    # a GPU pod
    def show_pod(self, key: str) -> None:
        """The popup of the pod of this GPU pods row (`namespace/name`); its every event listed as it opens."""
        namespace, _, name = key.partition("/")
        model = self._host.model
        pod = model.pod(namespace, name) if model is not None else None
        if model is None or pod is None:
            return
        screen = TextScreen("GPU pod", self._pod_text(pod, model.events_for("Pod", namespace, name), "listing its events…"))
        self._host.push_screen(screen)
        self._host.run_worker(partial(self._list_pod_events, screen, pod), "list_pod_events", group="pod-events", exclusive=True)

    def _pod_text(self, pod: Pod, events: list[Event], note: str | None = None) -> Text:
        shown = self._host.pods_pane.view.get(pod.key)
        body = Text(end="")
        body.append_text(render.pod_name(pod))
        body.append("\n")
        body.append_text(render.pod_status(pod))
        if shown is not None:
            body.append("\n")
            body.append_text(render.gpu_hours_words(shown[0], self._host.clock()))
        if shown is not None and shown[0].reason:
            body.append("\n\n")
            body.append_text(render.text(shown[0].reason, limit=10_000))
        if not events and note is None:
            body.append("\nno events", style="dim")
        for event_record in events[:10]:
            body.append("\n")
            body.append_text(render.event_line(event_record, self._host.clock()))
        if note:
            body.append("\n")
            body.append_text(render.text(note, style="dim", limit=300))
        return body

    async def _list_pod_events(self, screen: TextScreen, pod: Pod) -> None:
        """The pod's every event, listed as its details open: the events watch keeps only why a pod waits."""
        model = self._host.model
        if model is None:
            return
        try:
            events, note = await model.events_of(pod.namespace, pod.name, pod.uid or None), None
        except Exception as error:  # noqa: BLE001  (a 403, a lost connection: said, the watched events stay)
            events, note = model.events_for("Pod", pod.namespace, pod.name), f"events not listed: {str(error).splitlines()[0] if str(error) else type(error).__name__}"
        screen.set_body(self._pod_text(pod, events, note))  # shown whether the popup is mounted yet or not
