"""Verification in the app: `v` checks the selected (or marked) nodes against their real GPUs.

`v` plans a pod per node (gputui.kube.verify), a confirmation screen shows the
exact pod spec, then a live screen follows one node (phase, events, logs,
elapsed time, verdict) or a table follows several. Each screen runs the
verification in a worker of the VERIFY_GROUP group that drives
`gputui.kube.verify`; cancelling that worker (esc, ctrl+c, leaving the
screen, quitting) deletes the pod, and `VerifyActions.stop_verifications`
lets the app wait for those deletions before it closes its connection.

Updates from the model are only buffered here; a timer draws them at most
every FLUSH_INTERVAL (log lines and events in batches, never one message per
line). Everything from the cluster is shown as Text or Log lines, never markup.
"""
from __future__ import annotations

import asyncio
import contextlib
import random
import signal
from dataclasses import dataclass, field
from typing import Any, Sequence

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Log, Static
from textual.worker import Worker, WorkerState

from gputui.kube import verify as v
from gputui.kube.config import describe_network_error
from gputui.kube.records import parse_time

from . import render
from .sanitize import clean
from .screens import TextScreen
from .table import Column, KeyedTable
from .widgets import Pane, PluginLog

VERIFY_GROUP = "verify"  # workers that own a verification pod
READ_ONLY_MESSAGE = "read-only mode: verification creates a pod, disabled"
# Quit (deleting running verification pods first) on these rather than die: the terminal
# closing (an ssh session dropped) or a plain `kill`. Ctrl+C is a key inside the app.
QUIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
FLUSH_INTERVAL = 0.1
STOP_TIMEOUT = v.DELETE_CONFIRM_TIMEOUT + 5.0  # how long quitting waits for the pods' deletion
DEFAULT_CONCURRENCY = 4
MARK = "● "

STAGE_WORDS = {
    v.CREATING: "creating the pod",
    v.WAITING: "waiting for the pod to start",
    v.RUNNING: "nvidia-smi running",
    v.JUDGING: "judging the output",
    v.DELETING: "deleting the pod",
    v.DONE: "done",
}
CODE_WORDS = {
    v.UNSCHEDULABLE: "unschedulable",
    v.IMAGE_PULL: "image pull failed",
    v.RUNTIME: "container runtime could not inject the GPU",
    v.NVIDIA_SMI: "nvidia-smi failed",
    v.TIMEOUT: "timed out",
    v.POD_FAILED: "pod failed",
    v.FORBIDDEN: "not allowed",
    v.API_ERROR: "API error",
}


@dataclass(frozen=True)
class VerifySettings:
    """What `v` creates: the pod's options (read-only among them), its namespace, how many at once."""

    options: v.VerifyOptions = field(default_factory=v.VerifyOptions)
    namespace: str | None = None  # None: the context's namespace
    concurrency: int = DEFAULT_CONCURRENCY
    rng: random.Random | None = None  # the pod names' random suffixes (fixed in tests)

    @property
    def read_only(self) -> bool:
        return self.options.read_only


def _error_text(error: BaseException) -> str:
    import aiohttp  # noqa: PLC0415  (loaded by then: connecting imports it; the app starts without)

    if isinstance(error, (OSError, aiohttp.ClientError)):
        return describe_network_error(error)
    return str(error) or type(error).__name__


def kubectl_delete(namespace: str, name: str) -> str:
    return f"kubectl delete pod -n {namespace} {name}"


# -- the app's keys ---------------------------------------------------------------


class VerifyActions:
    """Mixed into GpuTuiApp: space marks nodes, `v` verifies the marked or selected ones, `V` every GPU
    node; at connection, leftovers of earlier runs are offered for deletion. Uses the app's connection,
    model, selected node and Nodes table; never creates anything in read-only mode."""

    verify_settings: VerifySettings
    marked_nodes: set[str]

    # marks
    def action_mark_node(self) -> None:
        app: Any = self
        node = app.nodes_table.cursor_key
        if node is None:
            return
        app.marked_nodes ^= {node}
        app._refresh_views(("nodes",))

    def with_mark(self, name: str, cells: tuple[Text, ...]) -> tuple[Text, ...]:
        """A Nodes row as shown: marked nodes get a dot before their name."""
        if name not in self.marked_nodes:
            return cells
        return (Text(MARK, style="bold", end="") + cells[0], *cells[1:])

    # starting
    def _refused_read_only(self) -> bool:
        if self.verify_settings.read_only:
            self.notify(READ_ONLY_MESSAGE, title="verify", severity="warning", markup=False)  # type: ignore[attr-defined]
        return self.verify_settings.read_only

    def action_verify(self) -> None:
        app: Any = self
        if self._refused_read_only():
            return
        nodes = sorted(self.marked_nodes) or ([app.selected_node] if app.selected_node else [])
        if not nodes:
            app.notify("no node selected: choose one in the Nodes pane", title="verify", markup=False)
            return
        self._plan_verification(nodes)

    def action_verify_all(self) -> None:
        app: Any = self
        if self._refused_read_only():
            return
        model = app.model
        nodes = [s.name for s in model.node_summaries() if s.gpu_node] if model is not None else []
        if not nodes:
            app.notify("no GPU nodes to verify", title="verify", markup=False)
            return
        self._plan_verification(nodes)

    @work(group="verify-plan", exclusive=True)
    async def _plan_verification(self, nodes: list[str]) -> None:
        """Read each node and plan its pod (API calls, off the widgets), then ask for confirmation."""
        app: Any = self
        conn = app.conn
        if conn is None:
            app.notify("not connected yet", title="verify", markup=False)
            return
        settings = self.verify_settings
        namespace = settings.namespace or conn.namespace
        results = await asyncio.gather(
            *(v.plan_verification(conn.api, node, settings.options, namespace, settings.rng) for node in nodes), return_exceptions=True
        )
        plans = []
        for node, result in zip(nodes, results):
            if isinstance(result, v.Plan):
                plans.append(result)
            elif isinstance(result, Exception):
                app.notify(f"cannot verify {clean(node, 63)}: {clean(_error_text(result), 300)}", title="verify", severity="error", markup=False)
            else:
                raise result  # cancellation
        if plans:
            app.push_screen(ConfirmVerifyScreen(plans), lambda confirmed: self._confirmed(plans, confirmed))

    def _confirmed(self, plans: list[v.Plan], confirmed: bool | None) -> None:
        app: Any = self
        if not confirmed:
            app.notify("nothing created", title="verify", markup=False)
            return
        conn = app.conn
        if conn is None:
            app.notify("not connected: nothing created", title="verify", severity="error", markup=False)
            return
        self.marked_nodes.clear()
        app._refresh_views(("nodes",))
        if len(plans) == 1:
            app.push_screen(VerifyScreen(conn.api, plans[0], self.verify_settings.options, app.clock))
        else:
            app.push_screen(VerifyManyScreen(conn.api, plans, self.verify_settings))

    # quitting
    def on_mount(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in QUIT_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
                loop.add_signal_handler(sig, self._quit_on_signal)

    def on_unmount(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in QUIT_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)

    def _quit_on_signal(self) -> None:
        app: Any = self
        app.call_later(app.action_quit)

    def _verification_workers(self) -> list[Worker]:
        app: Any = self
        return [w for w in app.workers if w.group == VERIFY_GROUP and not w.is_finished]

    def verifications_running(self) -> bool:
        return bool(self._verification_workers())

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
        import aiohttp  # noqa: PLC0415

        app: Any = self
        conn = app.conn
        if conn is None:
            return
        try:
            found = await v.find_leftovers(conn.api, self.verify_settings.namespace or conn.namespace)
        except v.ApiError as error:
            if error.status != 403:  # not allowed to list pods: the panes already say so
                app.notify(f"could not look for leftover verification pods: {clean(str(error), 300)}", severity="warning", markup=False)
            return
        except (OSError, aiohttp.ClientError) as error:
            app.notify(f"could not look for leftover verification pods: {clean(_error_text(error), 300)}", severity="warning", markup=False)
            return
        if found:
            app.push_screen(LeftoversScreen(conn.api, found, app.clock(), read_only=self.verify_settings.read_only))


async def _finished(worker: Worker) -> None:
    with contextlib.suppress(Exception):
        await worker.wait()


# -- confirmation -----------------------------------------------------------------


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

    def __init__(self, plans: Sequence[v.Plan]) -> None:
        super().__init__()
        self.plans = list(plans)

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
        """The first plan's manifest as YAML: literal text, line by line made safe."""
        lines = self.plans[0].to_yaml().rstrip("\n").split("\n")
        return Text("\n".join(clean(line, 2000) for line in lines), end="")

    def _head(self) -> Text:
        out = Text(end="")
        if len(self.plans) == 1:
            plan = self.plans[0]
            out.append("Node ")
            out.append_text(render.text(plan.node, style="bold", limit=253))
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
                out.append(f": {clean(plan.namespace, 63)}/{clean(plan.name, 63)} asking for {plan.count} {clean(plan.resource, 100)}")
        for plan in self.plans:
            for obstacle in plan.obstacles:
                out.append("\n" if out else "")
                out.append("likely to fail: ", style=render.WARN_STYLE)
                out.append_text(render.text(obstacle, limit=300))
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


# -- rendering a verdict ----------------------------------------------------------


def verdict_text(verdict: v.Verdict, node_labels: dict[str, str] | None = None, *, pod_created: bool = True) -> Text:
    """PASS with what nvidia-smi saw and how it compares with GFD, or FAIL with the reason; the pod's fate last.
    pod_created: whether the pod ever existed (a refused create leaves nothing to delete)."""
    out = Text(end="")
    if verdict.passed:
        out.append("PASS", style="bold green")
        out.append("  ")
        report = verdict.report
        if report is not None:
            models = ", ".join(report.models) or "?"
            summary = f"{len(report.gpus)} x {models} · driver {report.driver or '?'} · CUDA {report.cuda or '?'}"
            if report.migs:
                summary += f" · {len(report.migs)} MIG device(s)"
            out.append_text(render.text(summary, style="bold", limit=400))
        out.append(f"  ({verdict.count} {clean(verdict.resource or '?', 100)})", style="dim")
        if verdict.mismatches:
            out.append("\n")
            out.append("disagrees with the node's GPU Feature Discovery labels:", style=render.WARN_STYLE)
            for mismatch in verdict.mismatches:
                out.append("\n  • ")
                out.append_text(render.text(mismatch, limit=400))
        elif node_labels is not None and "nvidia.com/gpu.product" not in node_labels:
            out.append("\nno GPU Feature Discovery labels on the node to compare with", style="dim")
        else:
            out.append("\nagrees with the node's GPU Feature Discovery labels", style="dim")
    else:
        if verdict.code == v.CANCELLED:
            out.append("CANCELLED", style=render.WARN_STYLE)
        elif verdict.code in v.CHECK_NOT_MADE:
            out.append("NOT CHECKED", style=render.BAD_STYLE)
        else:
            out.append("FAIL", style=render.BAD_STYLE)
        words = CODE_WORDS.get(verdict.code)
        if words:
            out.append(f"  {words}", style="bold")
        out.append("\n")
        out.append_text(render.text(verdict.reason, limit=4000))
    out.append("\n")
    out.append_text(pod_fate(verdict, pod_created))
    return out


def pod_fate(verdict: v.Verdict, created: bool = True) -> Text:
    if verdict.leftover:
        namespace, _, name = verdict.leftover.partition("/")
        out = Text("could not confirm deletion of pod ", style=render.BAD_STYLE, end="")
        out.append_text(render.text(verdict.leftover, style=render.BAD_STYLE, limit=200))
        out.append(": delete it by hand: ", style=render.BAD_STYLE)
        out.append_text(render.text(kubectl_delete(namespace, name), limit=300))
        return out
    if not created:
        return Text("no pod was created", style="dim", end="")
    out = Text("✓ pod ", style=render.OK_STYLE, end="")
    out.append_text(render.text(f"{verdict.namespace}/{verdict.pod}", limit=200))
    out.append(" deleted", style=render.OK_STYLE)
    return out


def _event_line(event: v.PodEvent) -> str:
    count = f" (x{event.count})" if event.count > 1 else ""
    return clean(f"{event.type:<7} {event.reason}: {event.message}{count}", 2000)


def _elapsed(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


# -- one node, live ---------------------------------------------------------------


class VerifyScreen(Screen[None]):
    """One node's verification, live: stage and phase, elapsed time, events, logs, then the verdict.

    esc or ctrl+c while it runs cancels it (the pod is deleted, and the screen says so); esc afterwards goes back.
    """

    DEFAULT_CSS = """
    VerifyScreen #verify-head { height: auto; padding: 0 1; }
    VerifyScreen #verify-events { height: 9; }
    VerifyScreen #verify-logs { height: 1fr; min-height: 5; }
    VerifyScreen #verify-verdict { height: auto; max-height: 12; }
    VerifyScreen Log { height: 1fr; padding: 0 1; }
    VerifyScreen #verify-verdict-text { padding: 0 1; }
    """
    BINDINGS = [
        Binding("escape", "escape", "Cancel / back"),
        Binding("ctrl+c", "interrupt", "Cancel", show=False),
    ]

    def __init__(self, api: Any, plan: v.Plan, options: v.VerifyOptions, clock: Any) -> None:
        super().__init__()
        self.api = api
        self.plan = plan
        self.options = options
        self.clock = clock
        self.stage = v.CREATING
        self.status = ""
        self.verdict: v.Verdict | None = None
        self.error: str | None = None  # the worker failed unexpectedly
        self.cancelling = False
        self.pod_created = False  # a deletion was started: the pod may have existed
        self.events: list[v.PodEvent] = []
        self.log_line_count = 0
        self._pending_events: list[v.PodEvent] = []
        self._pending_lines: list[str] = []
        self._started = 0.0
        self._ended: float | None = None
        self._shown_head: Text | None = None
        self._shown_verdict: Text | None = None
        self._worker: Worker | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="verify-head")
        with Pane("Events", id="verify-events"):
            yield Log(max_lines=500, id="verify-events-log")
        with Pane("Logs · nvidia-smi", id="verify-logs"):
            yield PluginLog(id="verify-log")
        with Pane("Verdict", id="verify-verdict"):
            yield Static(Text("no verdict yet", style="dim"), id="verify-verdict-text")
        yield Footer()

    def on_mount(self) -> None:
        self._started = self.clock()
        self.title = f"verify {clean(self.plan.node, 63)}"
        self._flush()
        self.set_interval(FLUSH_INTERVAL, self._flush)
        self._worker = self._run()

    @work(group=VERIFY_GROUP, exit_on_error=False)
    async def _run(self) -> None:
        await v.run_plan(self.api, self.plan, self.options, self._take_update)

    @property
    def running(self) -> bool:
        return self.verdict is None and self.error is None

    @property
    def finished(self) -> bool:
        """The verdict (or the error) is on screen."""
        return self._shown_verdict is not None

    def _take_update(self, update: v.Update) -> None:
        """From the model, inside the worker: keep it, draw later (the screen may be closing)."""
        self.stage = update.stage
        self.status = update.status or self.status
        self.pod_created |= update.stage == v.DELETING
        self._pending_events.extend(update.events)
        self._pending_lines.extend(update.log_lines)
        if update.verdict is not None:
            self.verdict = update.verdict
            self._ended = self.clock()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker is self._worker and event.state == WorkerState.ERROR and self.verdict is None:
            self.error = _error_text(event.worker.error) if event.worker.error else "unknown error"
            self._ended = self.clock()
            self._flush()

    def _flush(self) -> None:
        if self._pending_events:
            self.events.extend(self._pending_events)
            self.query_one("#verify-events-log", Log).write_lines([_event_line(e) for e in self._pending_events])
            self._pending_events.clear()
        if self._pending_lines:
            self.log_line_count += len(self._pending_lines)
            self.query_one("#verify-log", PluginLog).add_lines(self._pending_lines)
            self._pending_lines.clear()
        head = self._head()
        if head != self._shown_head:
            self._shown_head = head
            self.query_one("#verify-head", Static).update(head)
        if self._shown_verdict is None and (self.verdict is not None or self.error is not None):
            if self.verdict is not None:
                body = verdict_text(self.verdict, dict(self.plan.node_labels), pod_created=self.pod_created)
            else:
                body = Text("ERROR ", style=render.BAD_STYLE, end="") + render.text(
                    f"the verification stopped unexpectedly: {self.error}", limit=2000
                )
            self._shown_verdict = body
            self.query_one("#verify-verdict-text", Static).update(body)

    def _head(self) -> Text:
        plan = self.plan
        out = Text(end="")
        out.append("Verify node ", style="bold")
        out.append_text(render.text(plan.node, style="bold", limit=253))
        out.append("  pod ", style="dim")
        out.append_text(render.text(f"{plan.namespace}/{plan.name}", limit=200))
        out.append("  asks for ", style="dim")
        out.append_text(render.text(f"{plan.count} {plan.resource}", limit=120))
        out.append("  image ", style="dim")
        out.append_text(render.text(self.options.image, limit=200))
        out.append("\n")
        stage = "cancelling: deleting the pod" if self.cancelling and self.running else STAGE_WORDS.get(self.stage, self.stage)
        out.append(stage, style="bold" if self.running else "")
        if self.status:
            out.append("  phase ", style="dim")
            out.append_text(render.text(self.status, limit=60))
        end = self._ended if self._ended is not None else self.clock()
        out.append(f"  elapsed {_elapsed(end - self._started)}", style="dim")
        out.append(f"  timeout {self.options.timeout:g}s", style="dim")
        hint = "esc cancels (the pod is deleted)" if self.running else "esc back"
        out.append(f"  · {hint}", style="dim")
        return out

    def cancel(self) -> None:
        if self.running and self._worker is not None and not self.cancelling:
            self.cancelling = True
            self._worker.cancel()
            self._flush()

    def action_escape(self) -> None:
        if self.running:
            self.cancel()
        else:
            self.app.pop_screen()

    def action_interrupt(self) -> None:
        if self.running:
            self.cancel()
        else:
            self.app.action_help_quit()

    @property
    def text(self) -> str:
        """Head and verdict as plain text (tests)."""
        head = self._shown_head.plain if self._shown_head else ""
        verdict = self._shown_verdict.plain if self._shown_verdict else ""
        return f"{head}\n{verdict}"


# -- several nodes ----------------------------------------------------------------


RESULT_COLUMNS = [
    Column("node", "NODE"),
    Column("progress", "PROGRESS", 28),
    Column("time", "TIME", 7),
    Column("result", "RESULT", 11),
    Column("detail", "DETAIL"),
]


class VerifyManyScreen(Screen[None]):
    """Several nodes at once (at most `concurrency` pods at a time) in a results table; enter shows a node's verdict."""

    DEFAULT_CSS = """
    VerifyManyScreen #many-head { height: auto; padding: 0 1; }
    VerifyManyScreen #many-results { height: 1fr; }
    """
    BINDINGS = [
        Binding("escape", "escape", "Cancel / back"),
        Binding("ctrl+c", "interrupt", "Cancel", show=False),
    ]

    def __init__(self, api: Any, plans: Sequence[v.Plan], settings: VerifySettings) -> None:
        super().__init__()
        self.api = api
        self.plans = list(plans)
        self.settings = settings
        self.latest: dict[str, v.Update] = {}
        self.verdicts: dict[str, v.Verdict] = {}
        self.created: set[str] = set()  # nodes whose pod may have existed (a deletion was started)
        self.finished = False
        self.error: str | None = None
        self.cancelling = False
        self._dirty = True
        self._worker: Worker | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="many-head")
        with Pane("Results", id="many-results"):
            yield KeyedTable(id="many-table")
        yield Footer()

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#many-table", KeyedTable)

    def on_mount(self) -> None:
        self.title = f"verify {len(self.plans)} nodes"
        self.table.set_columns(RESULT_COLUMNS)
        self._flush()
        self.set_interval(FLUSH_INTERVAL, self._flush)
        self.table.focus()
        self._worker = self._run()

    @work(group=VERIFY_GROUP, exit_on_error=False)
    async def _run(self) -> None:
        try:
            await v.run_plans(self.api, self.plans, self.settings.options, self._take_update, self.settings.concurrency)
        finally:
            self.finished = True
            self._dirty = True

    def _take_update(self, update: v.Update) -> None:
        self.latest[update.node] = update
        if update.stage == v.DELETING:
            self.created.add(update.node)
        if update.verdict is not None:
            self.verdicts[update.node] = update.verdict
        self._dirty = True

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker is self._worker and event.state == WorkerState.ERROR:
            self.error = _error_text(event.worker.error) if event.worker.error else "unknown error"
            self._dirty = True

    def _flush(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        self.table.show([(plan.node, self._row(plan)) for plan in self.plans])
        self.query_one("#many-head", Static).update(self._head())

    def _row(self, plan: v.Plan) -> tuple[Text, ...]:
        update = self.latest.get(plan.node)
        verdict = self.verdicts.get(plan.node)
        node = render.text(plan.node, limit=63)
        if verdict is not None:
            if verdict.passed:
                result = Text("PASS", style="bold green", end="")
            elif verdict.code == v.CANCELLED:
                result = Text("CANCELLED", style=render.WARN_STYLE, end="")
            else:
                result = Text("FAIL", style=render.BAD_STYLE, end="")
            fate = "NOT DELETED" if verdict.leftover else ("pod deleted" if plan.node in self.created else "no pod created")
            progress = Text(fate, style=render.BAD_STYLE if verdict.leftover else "dim", end="")
            detail = render.text(verdict.reason, limit=300)
            elapsed = Text(_elapsed(verdict.elapsed), end="")
        elif update is not None:
            words = STAGE_WORDS.get(update.stage, update.stage) + (f" ({update.status})" if update.status else "")
            progress = render.text(words, limit=60)
            result = Text("…", style="dim", end="")
            detail = Text("", end="")
            elapsed = Text(_elapsed(update.elapsed), end="")
        else:
            progress = Text("queued" if not self.finished else "not started", style="dim", end="")
            result, detail, elapsed = Text("", end=""), Text("", end=""), Text("", end="")
        return (node, progress, elapsed, result, detail)

    def _head(self) -> Text:
        passed = sum(vd.passed for vd in self.verdicts.values())
        failed = len(self.verdicts) - passed
        out = Text(end="")
        out.append(f"Verify {len(self.plans)} nodes", style="bold")
        out.append(f", {self.settings.concurrency} at a time", style="dim")
        out.append(f"  {passed} passed", style=render.OK_STYLE if passed else "dim")
        out.append(f"  {failed} not passed", style=render.BAD_STYLE if failed else "dim")
        running = sum(1 for node, u in self.latest.items() if node not in self.verdicts)
        if running:
            out.append(f"  {running} running")
        out.append("\n")
        if self.error:
            out.append_text(render.text(f"stopped unexpectedly: {self.error}", style=render.BAD_STYLE, limit=500))
            out.append("\n")
        if not self.finished:
            out.append("cancelling: deleting the pods" if self.cancelling else "esc cancels (the pods are deleted)", style="dim")
            return out
        leftovers = [vd.leftover for vd in self.verdicts.values() if vd.leftover]
        if leftovers:
            out.append("could not confirm deletion of: ", style=render.BAD_STYLE)
            out.append_text(render.text(", ".join(leftovers), limit=2000))
            out.append(" (delete them by hand)", style=render.BAD_STYLE)
        else:
            out.append("✓ every verification pod was deleted", style=render.OK_STYLE)
        out.append("  · enter: a node's verdict · esc back", style="dim")
        return out

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        node = event.row_key.value
        verdict = self.verdicts.get(node or "")
        if verdict is None:
            return
        plan = next(p for p in self.plans if p.node == node)
        body = verdict_text(verdict, dict(plan.node_labels), pod_created=verdict.node in self.created)
        self.app.push_screen(TextScreen(f"verdict · {clean(verdict.node, 63)}", body))

    def cancel(self) -> None:
        if not self.finished and self._worker is not None and not self.cancelling:
            self.cancelling = True
            self._dirty = True
            self._worker.cancel()

    def action_escape(self) -> None:
        if not self.finished:
            self.cancel()
        else:
            self.app.pop_screen()

    def action_interrupt(self) -> None:
        if not self.finished:
            self.cancel()
        else:
            self.app.action_help_quit()


# -- leftovers --------------------------------------------------------------------


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
        import aiohttp  # noqa: PLC0415

        try:
            not_gone = await v.delete_leftovers(self.api, self.leftovers)
        except (OSError, aiohttp.ClientError) as error:
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
