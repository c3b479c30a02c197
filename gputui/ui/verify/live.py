"""One node's verification, live: stage and phase, elapsed time, events, logs, then the verdict.

Updates from the model are only buffered here; a timer draws them at most
every FLUSH_INTERVAL (log lines and events in batches, never one message per
line). Everything from the cluster is shown as Text or Log lines, never markup.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual.worker import Worker, WorkerState

from gputui.kube import verify as v

from .. import render
from gputui.sanitize import clean
from ..seam import ViewContext, host
from ..widgets import FollowingLog, Pane, PluginLog
from .settings import FLUSH_INTERVAL, VERIFY_GROUP
from .words import STAGE_WORDS, _elapsed, _error_text, _event_line, known_problems, verdict_text

if TYPE_CHECKING:
    from gputui.kube.model import ClusterModel


class VerifyScreen(Screen[None]):
    """One node's verification, live: stage and phase, elapsed time, events, logs, then the verdict.

    esc or ctrl+c while it runs cancels it (the pod is deleted, and the screen says so); esc afterwards goes back.
    api: the connection's, that runs the verification; the model (what is known of the node's GPUs, under the
    verdict) comes through show() (a ModelView, seam.py).
    """

    DEFAULT_CSS = """
    VerifyScreen #verify-head { height: auto; padding: 0 1; }
    VerifyScreen #verify-events { height: 9; }
    VerifyScreen #verify-logs { height: 1fr; min-height: 5; }
    VerifyScreen #verify-verdict { height: auto; max-height: 12; }
    VerifyScreen Log { height: 1fr; padding: 0 1; }
    VerifyScreen #verify-verdict-text { padding: 0 1; }
    """
    BINDINGS = [Binding("escape", "escape", "Cancel / back")]  # ctrl+c: the app's (cancels while running, else quits)

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
        self._model: ClusterModel | None = None  # as last shown

    def compose(self) -> ComposeResult:
        yield Static(id="verify-head")
        with Pane("Events", id="verify-events"):
            yield FollowingLog(max_lines=500, id="verify-events-log")
        with Pane("Logs · nvidia-smi", id="verify-logs"):
            yield PluginLog(id="verify-log")
        with Pane("Verdict", id="verify-verdict"):
            yield Static(Text("no verdict yet", style="dim"), id="verify-verdict-text")
        yield Footer()

    def on_mount(self) -> None:
        self._started = self.clock()
        self.title = f"verify {clean(self.plan.node, 63)}"
        host(self).show_now(self)
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
            self.query_one("#verify-events-log", FollowingLog).write_lines([_event_line(e) for e in self._pending_events])
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
                body = verdict_text(self.verdict, dict(self.plan.node_labels), pod_created=self.pod_created, known=self._known_problems())
            else:
                body = Text("ERROR ", style=render.BAD_STYLE, end="") + render.text(
                    f"the verification stopped unexpectedly: {self.error}", limit=2000
                )
            self._shown_verdict = body
            self.query_one("#verify-verdict-text", Static).update(body)

    def show(self, model: ClusterModel | None, context: ViewContext) -> None:
        self._model = model  # read when the verdict comes (_flush, on its own timer)

    def _known_problems(self) -> Text | None:
        model = self._model
        if model is None:
            return None
        return known_problems((gpu for gpu in model.bad_gpus() if gpu.node == self.plan.node), model.clock())

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

    @property
    def text(self) -> str:
        """Head and verdict as plain text (tests)."""
        head = self._shown_head.plain if self._shown_head else ""
        verdict = self._shown_verdict.plain if self._shown_verdict else ""
        return f"{head}\n{verdict}"
