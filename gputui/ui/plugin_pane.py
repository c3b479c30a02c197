"""The Device plugin pane: its info line (the selected node's plugin pod, redrawn with the
rest of the screen) and its log, followed across container restarts and pod replacements.

The refresh tells the log follower (kube/logs.py) that the plugin pod changed (its uid, name
or restart count); the follower never polls the API for it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.widgets import Static

from gputui.kube import gpu
from gputui.kube.logs import LogFollower, LogSource
from gputui.kube.model import PODS, ClusterModel

from . import render
from gputui.sanitize import clean
from .seam import ViewContext
from .widgets import Pane, PluginLog

PLUGIN_LOG_TAIL = 50

if TYPE_CHECKING:
    from gputui.kube.client import Client
    from gputui.kube.records import Pod


class PluginPane(Pane):
    """The device-plugin pane of the selected node: a ModelView (seam.py) for its info line, and its log,
    followed by a worker of its own from the node the app says (follow)."""

    def __init__(self, *, id: str = "plugin") -> None:  # id: Textual's word
        super().__init__("Device plugin", id=id)
        self._identity: tuple[str, str, int] | None = None
        self._follower: LogFollower | None = None  # the selected node's plugin log, while followed
        self._info: Text | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="plugin-info")
        yield PluginLog(id="plugin-log")

    @property
    def plugin_log(self) -> PluginLog:
        return self.query_one("#plugin-log", PluginLog)

    def follow(self, node: str | None, api: Client | None, pod_of: Callable[[], Pod | None]) -> None:
        """Another node is selected: its plugin's info line and log, from scratch (None: no node, no log;
        api None: not connected, no log followed). pod_of: the node's plugin pod now, on this connection."""
        self._identity = None
        self._info = None
        if node is None:
            self.workers.cancel_group(self, "plugin-log")
            self.plugin_log.clear()
        elif api is None:
            self.workers.cancel_group(self, "plugin-log")  # the log shown stays until a node's is followed
        else:
            self._follow_logs(api, pod_of)

    # -- the info line ---------------------------------------------------------------------
    def show(self, model: ClusterModel | None, context: ViewContext) -> None:
        if model is None:
            return
        node = context.selected_node
        pod = model.plugin_pod(node) if node else None
        identity = (pod.uid, pod.name, pod.restarts) if pod else None
        if identity != self._identity:
            self._identity = identity
            if self._follower is not None:
                self._follower.changed()
        self.set_title(f"Device plugin · {clean(node, 60)}" if node else "Device plugin")
        if pod is None:
            known = model.pods_known
            message = "no device-plugin pod on this node" if known else model.states[PODS].describe() if PODS in model.states else "pods are not watched"
            self._show_info(Text(message if node else "no node selected", style="dim"))
            self.set_status("")
            return
        line = render.pod_name(pod)
        line.append("  ")
        ready = gpu.pod_is_ready(pod)
        line.append("ready" if ready else "not ready", style=render.OK_STYLE if ready else render.BAD_STYLE)
        line.append(f"  restarts {pod.restarts}", style=render.BAD_STYLE if gpu.crash_looping(pod) else "")
        line.append(f"  age {render.age(pod.created, context.now)}", style="dim")
        container = gpu.plugin_container(pod)
        if container and len(pod.containers) > 1:
            line.append("  container ", style="dim")
            line.append_text(render.text(container, limit=60))
        self._show_info(line)
        self.set_status(render.clean(pod.status, 40) if not ready else "")

    def _show_info(self, line: Text) -> None:
        # Only when it changed: an update lays the whole screen out again, every table redrawn.
        if self._info != line:
            self._info = line
            self.query_one("#plugin-info", Static).update(line)

    # -- the device-plugin log stream -------------------------------------------------------
    @work(exclusive=True, group="plugin-log")
    async def _follow_logs(self, api: Client, pod_of: Callable[[], Pod | None]) -> None:
        """Stream the node's plugin logs: last lines, then follow; onto the next instance
        when the container restarts or the pod is replaced (kube/logs.py's LogFollower).
        Cancelled when the node changes."""

        def source() -> LogSource | None:
            pod = pod_of()
            return LogSource(pod.namespace, pod.name, gpu.plugin_container(pod), pod.uid, pod.restarts) if pod is not None else None

        log = self.plugin_log
        log.clear()
        self._follower = follower = LogFollower(api, source, tail=PLUGIN_LOG_TAIL)
        try:
            async for line in follower.lines():
                log.show(line)
        finally:
            if self._follower is follower:
                self._follower = None
