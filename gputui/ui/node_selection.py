"""Which node the main screen is about: NodeSelection keeps the selected node (the Nodes pane's visible cursor
row) and whether the GPU pods pane shows that node's pods or every node's (`a`).

The selection follows the cursor: when it moves, when a filter hides the row it was on, when the rows change
(the refresh calls follow_cursor after drawing the Nodes pane). The GPU pods pane narrows to the selected node
and the device-plugin pane follows its plugin's log; `v` and `enter` act on it. The app puts both in the
ViewContext it gives every pane and screen (seam.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gputui.kube.config import Connection
    from gputui.kube.model import ClusterModel
    from gputui.kube.records import Pod

    from .plugin_pane import PluginPane
    from .table import KeyedTable


class SelectionHost(Protocol):
    """The app, as the selection needs it."""

    @property
    def model(self) -> ClusterModel | None: ...
    @property
    def conn(self) -> Connection | None: ...
    @property
    def drawing(self) -> bool:
        """The main screen is up and the app is not ending."""
    @property
    def nodes_table(self) -> KeyedTable: ...
    @property
    def plugin_pane(self) -> PluginPane: ...
    def request_refresh(self, *parts: str, soon: bool = ...) -> None:
        """These parts of the screen redrawn at the next coalesced refresh."""
    def refresh_now(self, *parts: str) -> None:
        """These parts of the screen redrawn now."""


class NodeSelection:
    """The app's: the selected node (`node`), and the GPU pods pane's scope (`all_nodes`, `a`)."""

    def __init__(self, host: SelectionHost) -> None:
        self._host = host
        self.node: str | None = None  # the Nodes pane's cursor row, as last followed
        self.all_nodes = False  # the pods pane follows the Nodes cursor; `a` shows every node's

    def highlighted(self, name: str | None) -> None:
        """The Nodes table's cursor moved onto this row."""
        if name is None or name == self.node or name != self._host.nodes_table.cursor_key:
            return  # a stale highlight: the cursor has moved on (a filter, a re-order)
        self._select(name)  # the pods' scope (`a`: all nodes) stays as the user put it

    def follow_cursor(self) -> None:
        """The selected node is the Nodes pane's visible cursor row: after a filter hides the
        row it was on, or the rows change, the other panes (and `v`, `enter`) follow the cursor."""
        if not self._host.drawing:
            return
        table = self._host.nodes_table
        key = table.cursor_key
        if key is None and not table.filter_text:
            return  # no rows yet (connecting, a context switch): nothing to follow
        if key != self.node:
            self._select(key)

    def jump_to(self, name: str) -> None:
        """The palette's "Jump to node": the Nodes cursor on it, the Nodes pane focused (the selection follows)."""
        table = self._host.nodes_table
        if name in table.shown_keys:
            table.move_cursor(row=table.row_index(name))
            table.focus()

    def toggle_all_pods(self) -> None:
        """`a`: the GPU pods of every node, or the selected node's again."""
        self.all_nodes = not self.all_nodes
        self._host.refresh_now("pods")

    def forget(self) -> None:
        """Another cluster comes: no node of this one is selected."""
        self.node = None

    def _select(self, name: str | None) -> None:
        self.node = name
        self._follow_plugin_of(name)
        # The cursor moves now; the narrowed pods and the plugin pane follow within
        # REFRESH_INTERVAL, once however fast the keys come.
        self._host.request_refresh("pods", "plugin")

    def _follow_plugin_of(self, node: str | None) -> None:
        """The plugin pane follows the selected node's plugin log, on this connection."""
        host = self._host
        conn = host.conn
        if node is None or conn is None or not host.drawing:
            host.plugin_pane.follow(node, None, lambda: None)  # not connected, or quitting: no log followed
            return

        def pod_of() -> Pod | None:
            model = host.model
            return model.plugin_pod(node) if model is not None and host.conn is conn else None

        host.plugin_pane.follow(node, conn.api, pod_of)
