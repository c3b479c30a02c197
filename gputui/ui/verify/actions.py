"""The app's side of verification: the mix-in VerifyActions (marks, `v`, `V`, leftovers at connection)
and quitting (the signals that quit, waiting for the pods' deletion)."""
from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Callable, Iterable

from rich.text import Text
from textual import work
from textual.worker import Worker

from gputui.kube import verify as v
from gputui.kube.client import HttpError

from gputui.sanitize import clean
from ..table import Cell, haystack
from .confirm import ConfirmVerifyScreen
from .leftovers import LeftoversScreen
from .live import VerifyScreen
from .results import VerifyManyScreen
from .settings import READ_ONLY_MESSAGE, VERIFY_GROUP
from .words import _error_text

if TYPE_CHECKING:
    from textual.app import App

    from gputui.kube.config import Connection
    from gputui.kube.model import ClusterModel

    from ..table import KeyedTable
    from .settings import VerifySettings

    _AppBase = App[None]  # a part of GpuTuiApp: type-checked with Textual's App for a base
else:
    _AppBase = object

# Quit (deleting running verification pods first) on these rather than die: the terminal
# closing (an ssh session dropped) or a plain `kill`. Ctrl+C is a key inside the self.
STOP_TIMEOUT = v.DELETE_CONFIRM_TIMEOUT + 5.0  # how long quitting waits for the pods' deletion
MARK = "● "


class VerifyActions(_AppBase):
    """Mixed into GpuTuiApp: space marks nodes, `v` verifies the marked or selected ones, `V` every GPU
    node; at connection, leftovers of earlier runs are offered for deletion. Uses the app's connection,
    model, selected node and Nodes table; never creates anything in read-only mode."""

    # the app's, read here
    verify_settings: VerifySettings
    marked_nodes: set[str]
    model: ClusterModel | None
    conn: Connection | None
    context: str | None
    clock: Callable[[], float]
    if TYPE_CHECKING:
        @property
        def nodes_table(self) -> KeyedTable: ...  # self.py
        def _refresh_views(self, parts: Iterable[str] = ..., gathered: bool = False) -> None: ...  # ui/refresh.py

    # marks
    def action_mark_node(self) -> None:
        node = self.nodes_table.cursor_key
        if node is None:
            return
        self.marked_nodes ^= {node}
        self._refresh_views(("nodes",))

    def with_mark(self, name: str, cells: tuple[Text, ...]) -> tuple[Text, ...]:
        """A Nodes row as shown: marked nodes get a dot before their name."""
        if name not in self.marked_nodes:
            return cells
        marked = Cell(MARK, style="bold", full=haystack(cells[0]))
        marked.append_text(cells[0])
        return (marked, *cells[1:])

    # starting
    def _refused_read_only(self) -> bool:
        if self.verify_settings.read_only:
            self.notify(READ_ONLY_MESSAGE, title="verify", severity="warning", markup=False)
        return self.verify_settings.read_only

    def action_verify(self) -> None:
        if self._refused_read_only():
            return
        cursor = self.nodes_table.cursor_key  # the visible cursor row, never a row the filter hides
        nodes = sorted(self.marked_nodes) or ([cursor] if cursor else [])
        if not nodes:
            self.notify("no node selected: choose one in the Nodes pane", title="verify", markup=False)
            return
        self._plan_verification(nodes)

    def action_verify_all(self) -> None:
        if self._refused_read_only():
            return
        model = self.model
        nodes = [s.name for s in model.node_summaries() if s.gpu_node] if model is not None else []
        if not nodes:
            self.notify("no GPU nodes to verify", title="verify", markup=False)
            return
        self._plan_verification(nodes)

    @work(group="verify-plan", exclusive=True)
    async def _plan_verification(self, nodes: list[str]) -> None:
        """Read each node and plan its pod (API calls, off the widgets), then ask for confirmation."""
        conn = self.conn
        if conn is None:
            self.notify("not connected yet", title="verify", markup=False)
            return
        settings = self.verify_settings
        namespace = settings.namespace or conn.namespace
        results = await asyncio.gather(
            *(v.plan_verification(conn.api, node, settings.options, namespace, settings.rng) for node in nodes), return_exceptions=True
        )
        plans = []
        for node, result in zip(nodes, results, strict=True):
            if isinstance(result, v.Plan):
                plans.append(result)
            elif isinstance(result, Exception):
                self.notify(f"cannot verify {clean(node, 63)}: {clean(_error_text(result), 300)}", title="verify", severity="error", markup=False)
            else:
                raise result  # cancellation
        if plans:
            self.push_screen(ConfirmVerifyScreen(plans, self.context), lambda confirmed: self._confirmed(plans, confirmed))

    def _confirmed(self, plans: list[v.Plan], confirmed: bool | None) -> None:
        if not confirmed:
            self.notify("nothing created", title="verify", markup=False)
            return
        conn = self.conn
        if conn is None:
            self.notify("not connected: nothing created", title="verify", severity="error", markup=False)
            return
        self.marked_nodes.clear()
        self._refresh_views(("nodes",))
        if len(plans) == 1:
            self.push_screen(VerifyScreen(conn.api, plans[0], self.verify_settings.options, self.clock))
        else:
            self.push_screen(VerifyManyScreen(conn.api, plans, self.verify_settings))

    # quitting (the signals and a lost terminal: ui/session.py)
    def _verification_workers(self) -> list[Worker]:
        return [w for w in self.workers if w.group == VERIFY_GROUP and not w.is_finished]

    def verifications_running(self) -> bool:
        return bool(self._verification_workers())

    def interrupt_verification(self) -> bool:
        """ctrl+c on a running verification's screen cancels it (its pods deleted); True when it did."""
        screen = self.screen
        if isinstance(screen, (VerifyScreen, VerifyManyScreen)) and screen.running:
            screen.cancel()
            return True
        return False

    async def stop_verifications(self, timeout: float = STOP_TIMEOUT) -> None:
        """Cancel every running verification and wait (at most timeout) until their pods are deleted."""
        running = self._verification_workers()
        for worker in running:
            worker.cancel()
        if running:
            await asyncio.wait([asyncio.ensure_future(_finished(w)) for w in running], timeout=timeout)

    # leftovers of earlier runs
    @work(group="verify-leftovers", exclusive=True)
    async def check_leftovers(self) -> None:
        """Verification pods an earlier run left behind (found by label), offered for deletion."""
        conn = self.conn
        if conn is None:
            return
        try:
            found = await v.find_leftovers(conn.api, self.verify_settings.namespace or conn.namespace)
        except v.ApiError as error:
            if error.status != 403:  # not allowed to list pods: the panes already say so
                self.notify(f"could not look for leftover verification pods: {clean(str(error), 300)}", severity="warning", markup=False)
            return
        except (OSError, HttpError) as error:
            self.notify(f"could not look for leftover verification pods: {clean(_error_text(error), 300)}", severity="warning", markup=False)
            return
        if found:
            self.push_screen(LeftoversScreen(conn.api, found, self.clock(), read_only=self.verify_settings.read_only))


async def _finished(worker: Worker) -> None:
    with contextlib.suppress(Exception):
        await worker.wait()
