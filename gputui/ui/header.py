"""The header: the alarms (XIDs, health conditions) first, never cut; context, server, watch states; then the
cluster's GPU totals and the work held back. Two lines, packed again for the terminal's width.

A ModelView (seam.py): the refresh scheduler (refresh.py) calls show(model, context) once the Nodes pane's
summaries are gathered; what it says of the connection (context, user, server, dump) is the app's, asked
through `about`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from rich.text import Text
from textual.widgets import Static

from gputui.kube import gpu
from gputui.kube.model import PODS, ClusterModel
from gputui.kube.quantities import TAKEN_GLOSS
from gputui.kube.tables import unreadable_line
from gputui.kube.watch import RETRYING, SYNCING
from gputui.kube.watches import scope_lines
from gputui.sanitize import clean

from . import render
from .nodes_pane import WATCH_OK, allocation_basis
from .seam import ViewContext


@dataclass(frozen=True, slots=True)
class About:
    """What the header says of the connection besides the model (the app's)."""

    context: str | None  # the kubeconfig context; None: in-cluster
    acting_as: str  # kubeconfig `as:` or --as; "" none
    server_version: str  # "" until asked
    dump_paths: tuple[str, ...]  # --from: the dump's files; the header never says `live`
    dump_taken: str  # --from: when it was taken


class ClusterHeader(Static):
    """Context, server, watch states and GPU totals: two lines of Text.

    about: the app's connection, as it is now; summaries: the Nodes pane's, as last gathered;
    pending: the GPU pods pane's `3 GPU pods pending, longest 12m`."""

    def __init__(self, about: Callable[[], About], summaries: Callable[[], list[gpu.NodeSummary]], pending: Callable[[], str],
                 *, id: str = "header") -> None:  # id: Textual's word
        super().__init__(id=id)
        self._about, self._summaries, self._pending = about, summaries, pending
        self.shown: Text | None = None  # what is on screen: no update when nothing changed
        self.narrow = False
        self._alarms: list[Text] = []  # render.health_parts: XIDs, health conditions
        self.readings: list[Text] = []  # and the DCGM readings' age (it ticks)

    def show(self, model: ClusterModel | None, context: ViewContext) -> None:
        about, narrow = self._about(), self.narrow
        if model is not None:
            summaries = self._summaries()
            self._alarms, self.readings = render.health_parts(summaries, model.node_metrics, context.now)
        alarms, readings = (self._alarms, self.readings) if model is not None else ([], [])
        first = [*alarms, Text("gputui", style="bold", end="")]
        dump_at = len(first)
        if about.dump_paths:
            first += dump_parts(about, spare=0)
        else:
            first.append(render.labelled("context ", render.text(about.context or "in-cluster", limit=60)))
        if about.acting_as:  # kubeconfig `as:` or --as: what the cluster lets this user do is what shows
            first.append(render.labelled("as ", render.text(about.acting_as, limit=60)))
        if about.server_version:
            first.append(render.labelled("server ", render.text(about.server_version, limit=30)))
        namespaces = context.namespaces
        if namespaces:
            label = "namespace " if len(namespaces) == 1 else "namespaces "
            first.append(render.labelled(label, render.text(", ".join(namespaces), limit=100)))
        if model is None:
            first.append(Text("connecting…", style="dim", end=""))
            totals: list[Text] = []
        width = max(20, context.width - 2)
        if model is not None:
            # The watch states end the first line, cut to fit (the panes' status lines have them whole):
            # the totals, or why they are unknown, must keep their line.
            states = watch_states(model, dumped=bool(about.dump_paths))
            room = width - sum(part.cell_len + (3 if narrow else 2) for part in first)
            if states.cell_len > room and about.dump_paths:  # the dump's path and gloss give way to the states
                first[dump_at:dump_at + 2] = dump_parts(about, spare=states.cell_len - room)
                room = width - sum(part.cell_len + (3 if narrow else 2) for part in first)
            if states.cell_len > room:
                states.truncate(max(24, room), overflow="ellipsis")
            first.append(states)
            mark, basis = allocation_basis(model)
            totals = render.totals_parts(gpu.totals(summaries), compact=narrow, unknown=mark, basis=basis)
            pending = self._pending()
            if pending:  # waiting work, right after the main total: never the part cut off
                totals.insert(min(1, len(totals)), Text(pending, style=render.WARN_STYLE, end=""))
            totals += readings  # the DCGM readings' age
        if narrow:
            lines = render.pack(first + totals, width)
        else:
            lines = render.pack(first, width, sep="  ") + render.pack(totals, width)
        content = Text("\n", end="").join(render.at_most(lines, 2, width))
        if content != self.shown:
            self.shown = content
            self.update(content)


def dump_parts(about: About, spare: int) -> list[Text]:
    """`dump of PATH` and when it was taken, `spare` cells shorter if they can be: the time's gloss left out,
    then the path cut from its start (its last folders name it best)."""
    path = clean(", ".join(about.dump_paths), 60)
    taken = about.dump_taken
    if spare > 0 and taken.endswith(TAKEN_GLOSS):
        taken, spare = taken.removesuffix(TAKEN_GLOSS), spare - len(TAKEN_GLOSS)
    if spare > 0 and len(path) > 16:
        keep = max(16, len(path) - spare)
        path = path if keep >= len(path) else "…" + path[len(path) - keep + 1:]
    return [render.labelled("dump of ", Text(path, end="")), Text(taken, style="dim", end="")]


def watch_states(model: ClusterModel, dumped: bool = False) -> Text:
    """`watches live` (`objects as dumped, not live` on a dump), or the watches that are not:
    `pods retrying in 4 s: connection refused`."""
    troubled = [(kind, state) for kind, state in model.states.items() if state.phase not in WATCH_OK]
    out = Text(end="")
    out.append("objects " if dumped else "watches ", style="dim")  # a style of its own: `live` is not dimmed with it
    # Kinds forbidden cluster-wide and read in some namespaces, first (pods: allocation_basis says it, on the totals' line).
    for line in scope_lines(scope for scope in model.partial_scopes() if scope.kind != PODS):
        out += render.text(line, style=render.WARN_STYLE, limit=200) + Text(" · ", style="dim")
    unreadable = unreadable_line(model.unreadable())
    if not troubled and model.all_running() and dumped:
        out.append("as dumped, not live")
    elif not troubled and model.all_running():
        out.append("live", style=render.OK_STYLE)
    elif not troubled:
        out.append("restarting", style=render.WARN_STYLE)  # a watch ended; the model's watchdog starts it again
    else:
        parts = []
        retrying = [(kind, state) for kind, state in troubled if state.phase == RETRYING and state.error]
        errors = {state.error_words() for _, state in retrying}
        if len(retrying) > 1 and len(errors) == 1:
            # The connection is down: every watch fails alike. Said once, with the soonest try.
            waits = [w for _, state in retrying if (w := state.retry_in()) is not None]
            error = errors.pop()
            # A rejected credential is not a connection that comes back by itself: said as it is.
            words = (error if error.startswith("unauthorized") else f"reconnecting: {error}") + (
                f", next try in {min(waits):.0f} s" if waits and min(waits) >= 1 else "")
            parts.append(render.text(words, style=render.BAD_STYLE, limit=120))
            troubled = [(kind, state) for kind, state in troubled if (kind, state) not in retrying]
        for kind, state in troubled:
            style = render.WARN_STYLE if state.phase == SYNCING else render.BAD_STYLE
            parts.append(Text(f"{kind} ", end="") + render.text(state.describe(), style=style, limit=80))
        out += render.joined(parts)
    if unreadable:
        out += Text(" · ", style="dim") + render.text(unreadable, style=render.BAD_STYLE, limit=100)
    return out
