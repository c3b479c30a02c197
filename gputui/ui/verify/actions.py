"""The app's side of verification: VerifyFlow (marks, `v`, `V`, leftovers at connection)
and quitting (the signals that quit, waiting for the pods' deletion)."""
from __future__ import annotations

import asyncio
import contextlib
from functools import partial
from typing import TYPE_CHECKING, Callable, Coroutine, Protocol, TypeVar

from rich.text import Text
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
    from textual.notifications import SeverityLevel
    from textual.screen import Screen, ScreenResultCallbackType
    from textual.widget import AwaitMount
    from textual.worker_manager import WorkerManager

    from gputui.kube.config import Connection
    from gputui.kube.model import ClusterModel

    from ..table import KeyedTable
    from .settings import VerifySettings

# Quit (deleting running verification pods first) on these rather than die: the terminal
# closing (an ssh session dropped) or a plain `kill`. Ctrl+C is a key inside the self.
STOP_TIMEOUT = v.DELETE_CONFIRM_TIMEOUT + 5.0  # how long quitting waits for the pods' deletion
MARK = "● "
R = TypeVar("R")


class VerifyHost(Protocol):
    """The app, as verification needs it."""

    @property
    def model(self) -> ClusterModel | None: ...
    @property
    def conn(self) -> Connection | None: ...
    @property
    def context(self) -> str | None: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def nodes_table(self) -> KeyedTable: ...
    @property
    def screen(self) -> Screen[object]: ...
    @property
    def workers(self) -> WorkerManager: ...
    def push_screen(self, screen: Screen[R], callback: ScreenResultCallbackType[R] | None = ...) -> AwaitMount: ...
    def notify(self, message: str, *, title: str = ..., severity: SeverityLevel = ..., timeout: float | None = ...,
               markup: bool = ...) -> None: ...
    def run_worker(self, work: Callable[[], Coroutine[None, None, None]], name: str | None = ..., group: str = ...,
                   description: str = ..., exit_on_error: bool = ..., start: bool = ..., exclusive: bool = ...) -> Worker[None]: ...
    def refresh_now(self, *parts: str) -> None:
        """These parts of the screen redrawn now."""


class VerifyFlow:
    """The app's: space marks nodes, `v` verifies the marked or selected ones, `V` every GPU node; at
    connection, leftovers of earlier runs are offered for deletion. Uses the app's connection, model and
    Nodes table; never creates anything in read-only mode."""

    def __init__(self, host: VerifyHost, settings: VerifySettings) -> None:
        self._host = host
        self.settings = settings
        self.marked: set[str] = set()  # space in the Nodes pane: `v` verifies these

    # marks
    def mark(self) -> None:
        """Space: the Nodes pane's cursor row marked, or no longer."""
        node = self._host.nodes_table.cursor_key
        if node is None:
            return
        self.marked ^= {node}
        self._host.refresh_now("nodes")

    def with_mark(self, name: str, cells: tuple[Text, ...]) -> tuple[Text, ...]:
        """A Nodes row as shown: marked nodes get a dot before their name."""
        if name not in self.marked:
            return cells
        marked = Cell(MARK, style="bold", full=haystack(cells[0]))
        marked.append_text(cells[0])
        return (marked, *cells[1:])

    # starting
    def _refused_read_only(self) -> bool:
        if self.settings.read_only:
            self._host.notify(READ_ONLY_MESSAGE, title="verify", severity="warning", markup=False)
        return self.settings.read_only

    def verify_chosen(self) -> None:
        """`v`: the marked nodes, else the Nodes pane's cursor row."""
        if self._refused_read_only():
            return
        cursor = self._host.nodes_table.cursor_key  # the visible cursor row, never a row the filter hides
        nodes = sorted(self.marked) or ([cursor] if cursor else [])
        if not nodes:
            self._host.notify("no node selected: choose one in the Nodes pane", title="verify", markup=False)
            return
        self._plan(nodes)

    def verify_all(self) -> None:
        """`V`: every GPU node."""
        if self._refused_read_only():
            return
        model = self._host.model
        nodes = [s.name for s in model.node_summaries() if s.gpu_node] if model is not None else []
        if not nodes:
            self._host.notify("no GPU nodes to verify", title="verify", markup=False)
            return
        self._plan(nodes)

    def _plan(self, nodes: list[str]) -> None:
        self._host.run_worker(partial(self._plan_verification, nodes), "plan_verification", group="verify-plan", exclusive=True)

    async def _plan_verification(self, nodes: list[str]) -> None:
        """Read each node and plan its pod (API calls, off the widgets), then ask for confirmation."""
        host = self._host
        conn = host.conn
        if conn is None:
            host.notify("not connected yet", title="verify", markup=False)
            return
        settings = self.settings
        namespace = settings.namespace or conn.namespace
        results = await asyncio.gather(
            *(v.plan_verification(conn.api, node, settings.options, namespace, settings.rng) for node in nodes), return_exceptions=True
        )
        plans = []
        for node, result in zip(nodes, results, strict=True):
            if isinstance(result, v.Plan):
                plans.append(result)
            elif isinstance(result, Exception):
                host.notify(f"cannot verify {clean(node, 63)}: {clean(_error_text(result), 300)}", title="verify", severity="error", markup=False)
            else:
                raise result  # cancellation
        if plans:
            host.push_screen(ConfirmVerifyScreen(plans, host.context), lambda confirmed: self._confirmed(plans, confirmed))

    def _confirmed(self, plans: list[v.Plan], confirmed: bool | None) -> None:
        host = self._host
        if not confirmed:
            host.notify("nothing created", title="verify", markup=False)
            return
        conn = host.conn
        if conn is None:
            host.notify("not connected: nothing created", title="verify", severity="error", markup=False)
            return
        self.marked.clear()
        host.refresh_now("nodes")
        if len(plans) == 1:
            host.push_screen(VerifyScreen(conn.api, plans[0], self.settings.options, host.clock))
        else:
            host.push_screen(VerifyManyScreen(conn.api, plans, self.settings))

    # quitting (the signals and a lost terminal: ui/session.py)
    def _workers(self) -> list[Worker]:
        return [w for w in self._host.workers if w.group == VERIFY_GROUP and not w.is_finished]

    def running(self) -> bool:
        return bool(self._workers())

    def interrupt(self) -> bool:
        """ctrl+c on a running verification's screen cancels it (its pods deleted); True when it did."""
        screen = self._host.screen
        if isinstance(screen, (VerifyScreen, VerifyManyScreen)) and screen.running:
            screen.cancel()
            return True
        return False

    async def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Cancel every running verification and wait (at most timeout) until their pods are deleted."""
        running = self._workers()
        for worker in running:
            worker.cancel()
        if running:
            await asyncio.wait([asyncio.ensure_future(_finished(w)) for w in running], timeout=timeout)

    # leftovers of earlier runs
    def check_leftovers(self) -> None:
        """Verification pods an earlier run left behind (found by label), offered for deletion."""
        self._host.run_worker(self._check_leftovers, "check_leftovers", group="verify-leftovers", exclusive=True)

    async def _check_leftovers(self) -> None:
        host = self._host
        conn = host.conn
        if conn is None:
            return
        try:
            found = await v.find_leftovers(conn.api, self.settings.namespace or conn.namespace)
        except v.ApiError as error:
            if error.status != 403:  # not allowed to list pods: the panes already say so
                host.notify(f"could not look for leftover verification pods: {clean(str(error), 300)}", severity="warning", markup=False)
            return
        except (OSError, HttpError) as error:
            host.notify(f"could not look for leftover verification pods: {clean(_error_text(error), 300)}", severity="warning", markup=False)
            return
        if found:
            host.push_screen(LeftoversScreen(conn.api, found, host.clock(), read_only=self.settings.read_only))


async def _finished(worker: Worker) -> None:
    with contextlib.suppress(Exception):
        await worker.wait()
