"""The Device plugin pane: its info line (the selected node's plugin pod, redrawn with the
rest of the screen) and its log, followed across container restarts and pod replacements.

The refresh tells the log follower (kube/logs.py) that the plugin pod changed (its uid, name
or restart count); the follower never polls the API for it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from rich.text import Text
from textual import work
from textual.widget import Widget
from textual.widgets import Static

from gputui.kube import gpu
from gputui.kube.config import Connection
from gputui.kube.logs import LogFollower, LogSource
from gputui.kube.model import PODS, ClusterModel

from . import render
from gputui.sanitize import clean
from .widgets import Pane, PluginLog

PLUGIN_LOG_TAIL = 50
W = TypeVar("W", bound=Widget)

if TYPE_CHECKING:
    from textual.app import App

    _AppBase = App[None]  # a part of GpuTuiApp: type-checked with Textual's App for a base
else:
    _AppBase = object


class DevicePluginPane(_AppBase):
    """Mixed into GpuTuiApp: the device-plugin pane of the selected node. Uses the app's model,
    connection, selected node and main-screen widgets."""

    # the app's, read here
    model: ClusterModel | None
    conn: Connection | None
    selected_node: str | None
    _main_ready: bool
    if TYPE_CHECKING:
        def _main(self, selector: str, expect_type: type[W]) -> W: ...
        @property
        def plugin_log(self) -> PluginLog: ...

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._plugin_identity: tuple[str, str, int] | None = None
        self._plugin_follower: LogFollower | None = None  # the selected node's plugin log, while followed
        self._plugin_info: Text | None = None

    def follow_plugin_of(self, node: str | None) -> None:
        """Another node is selected: its plugin's info line and log, from scratch (None: no node, no log)."""
        self._plugin_identity = None
        self._plugin_info = None
        if node is None:
            self.workers.cancel_group(self, "plugin-log")
            self.plugin_log.clear()
        else:
            self._follow_plugin_logs(node)

    # -- the info line ---------------------------------------------------------------------
    def _refresh_plugin(self, model: ClusterModel, now: float) -> None:
        pane = self._main("#plugin", Pane)
        node = self.selected_node
        pod = model.plugin_pod(node) if node else None
        identity = (pod.uid, pod.name, pod.restarts) if pod else None
        if identity != self._plugin_identity:
            self._plugin_identity = identity
            if self._plugin_follower is not None:
                self._plugin_follower.changed()
        pane.set_title(f"Device plugin · {clean(node, 60)}" if node else "Device plugin")
        if pod is None:
            known = model.pods_known
            message = "no device-plugin pod on this node" if known else model.states[PODS].describe() if PODS in model.states else "pods are not watched"
            self._show_plugin_info(Text(message if node else "no node selected", style="dim"))
            pane.set_status("")
            return
        line = render.pod_name(pod)
        line.append("  ")
        ready = gpu.pod_is_ready(pod)
        line.append("ready" if ready else "not ready", style=render.OK_STYLE if ready else render.BAD_STYLE)
        line.append(f"  restarts {pod.restarts}", style=render.BAD_STYLE if gpu.crash_looping(pod) else "")
        line.append(f"  age {render.age(pod.created, now)}", style="dim")
        container = gpu.plugin_container(pod)
        if container and len(pod.containers) > 1:
            line.append("  container ", style="dim")
            line.append_text(render.text(container, limit=60))
        self._show_plugin_info(line)
        pane.set_status(render.clean(pod.status, 40) if not ready else "")

    def _show_plugin_info(self, line: Text) -> None:
        # Only when it changed: an update lays the whole screen out again, every table redrawn.
        if self._plugin_info != line:
            self._plugin_info = line
            self._main("#plugin-info", Static).update(line)

    # -- the device-plugin log stream -------------------------------------------------------
    @work(exclusive=True, group="plugin-log")
    async def _follow_plugin_logs(self, node: str) -> None:
        """Stream the node's plugin logs: last lines, then follow; onto the next instance
        when the container restarts or the pod is replaced (kube/logs.py's LogFollower).
        Cancelled when the node changes."""
        conn = self.conn
        if not self._main_ready or not self.is_running or conn is None:
            return  # started just as the app quits: its screens may be gone already

        def source() -> LogSource | None:
            model = self.model
            pod = model.plugin_pod(node) if model is not None and self.conn is conn else None
            return LogSource(pod.namespace, pod.name, gpu.plugin_container(pod), pod.uid, pod.restarts) if pod is not None else None

        log = self.plugin_log
        log.clear()
        self._plugin_follower = follower = LogFollower(conn.api, source, tail=PLUGIN_LOG_TAIL)
        try:
            async for line in follower.lines():
                log.show(line)
        finally:
            if self._plugin_follower is follower:
                self._plugin_follower = None
