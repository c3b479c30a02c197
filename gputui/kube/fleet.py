"""The fleet: one cluster per kubeconfig context, each with its own connection, credentials, watches and
back-off, summarised as one row each.

    fleet = Fleet(["prod-a", "prod-b"], connector, max_live=8)
    await fleet.start()
    fleet.row("prod-a")            # ClusterRow: state, totals (None until known), problems, pending, stack
    fleet.take_dirty()             # the contexts whose rows changed since the last call (coalesced)
    await fleet.view("prod-b")     # (Connection, ClusterModel) once live: drilling into the cluster
    await fleet.stop()

At most `max_live` clusters are watched; the others are summarised from a fresh list every
`summary_interval` seconds, and viewing one makes it live in place of the least recently viewed.
One cluster that is unreachable, slow or refuses the credentials has its own state and never
holds the others back.

With a Prometheus that holds every cluster's series (`prometheus=`, kube/fleet_prometheus.py), the
rows are its clusters', refreshed every 30 s, and nothing is watched until a cluster is viewed: its
kubeconfig context (`cluster_contexts`, else the same name) is then watched live, its row from the
watch once known, and stays watched (at most `max_live`; beyond, the least recently viewed stops).
"""
from __future__ import annotations

import asyncio
import fnmatch
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Mapping

from . import gpu, verdicts
from .config import ConnectError, Connection, Forbidden, Unauthorized, check
from .model import NODES, PODS, ClusterModel
from .tasks import cancel_and_wait, set_within
from .watch import LIVE as WATCH_LIVE
from .watches import namespaces_to_try, scope_lines

if TYPE_CHECKING:
    from .fleet_prometheus import PrometheusFleet

log = logging.getLogger(__name__)

MAX_LIVE = 8
SUMMARY_INTERVAL = 180.0
SUMMARY_SYNC_TIMEOUT = 60.0
FIGURES_INTERVAL = 0.5  # seconds: a watched cluster's row figures are taken at most this often
BACKOFF = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)

CONNECTING, SYNCING, LIVE, SUMMARY = "connecting", "syncing", "live", "summary"
PROMETHEUS = "prometheus"  # the row's figures from Prometheus (kube/fleet_prometheus.py), `updated` the data's time
UNREACHABLE, UNAUTHORIZED, FORBIDDEN = "unreachable", "unauthorized", "forbidden"
TROUBLE = (UNREACHABLE, UNAUTHORIZED, FORBIDDEN)

Connector = Callable[[str], Awaitable[Connection]]


@dataclass(frozen=True)
class ClusterRow:
    """What the Fleet screen shows of one cluster. Figures are None while unknown (never 0)."""

    context: str
    state: str  # CONNECTING, SYNCING, LIVE, SUMMARY, or one of TROUBLE
    detail: str = ""  # the state's words: "connection refused", "pods: retrying (HTTP 500)"
    retry_at: float | None = None  # time.monotonic() of the next try, when in TROUBLE
    server_version: str = ""
    totals: dict[str, gpu.Usage] | None = None
    by_model: dict[str, gpu.Usage] = field(default_factory=dict)
    gpu_nodes: int | None = None
    problem_nodes: int | None = None
    worst: tuple[str, str] | None = None  # the worst problem's code and its node: ("not-ready", "h100-3")
    worst_subject: str | None = None  # what the worst problem names: a stuck state's age ("over 42m"), a taint's key
    unknown_nodes: int | None = None  # GPU nodes with no problem but a verdict not known (XIDs not read)
    lacks: tuple[str, ...] = ()  # the verdicts not known on some node: ("XIDs",) on a summarised row
    pending: int | None = None
    longest_wait: float | None = None  # seconds the longest-waiting GPU pod has waited
    stack: str | None = None  # the stack's kind and install: "gpu-operator", "device-plugin (helm)", "none"
    policy: str | None = None  # the ClusterPolicy's state, when there is one
    updated: float | None = None  # clock() when the figures were taken
    partial: str = ""  # pods readable in some namespaces only: "pods, events in namespace ml; cluster-wide forbidden"
    without: tuple[str, ...] = ()  # from Prometheus: what a live watch would show and the row cannot

    @property
    def known(self) -> bool:
        return self.totals is not None


async def figures(context: str, model: ClusterModel, now: float) -> dict[str, Any]:
    """A cluster's row figures from its model; the GPU figures only once nodes and pods are listed.
    The node summaries are computed in turns: ten clusters listed at once must not hold the UI's loop."""
    out: dict[str, Any] = {"partial": "; ".join(scope_lines(model.partial_scopes()))}
    stack_known = model.stack_known
    if stack_known:
        stack = model.stack()
        out["stack"] = f"{stack.kind} ({stack.install})" if stack.install and stack.install != "operator" else stack.kind
        out["policy"] = stack.cluster_policy.state if stack.cluster_policy else None
    if not (model.pods_known and model.states[NODES].synced):
        return out  # partial: other namespaces' pods may hold any of the GPUs, so no figure passes as complete
    summaries = await model.node_summaries_in_turns()
    gpu_nodes = [s for s in summaries if s.gpu_node]
    with_problems = [s for s in gpu_nodes if s.problems]
    # the same verdicts as the cluster's own screen: XIDs read in the background; not `ok` while unknown
    not_known = [s for s in gpu_nodes if s.unknown]
    worst = min(((gpu.by_severity(s.problems)[0], s.name) for s in with_problems),
                key=lambda item: verdicts.rank(item[0].code),
                default=None)
    by_model: dict[str, gpu.Usage] = {}
    for s in gpu_nodes:
        if s.facts.product:
            for resource, usage in s.usage.items():
                by_model.setdefault(gpu.model_key(s.facts.product, resource), gpu.Usage()).add(usage)
    # Only the unbound pods are looked at closely: this runs once a second for each cluster that changed.
    unbound = (model.gpu_pod(pod) for pod in model.pods.records.values() if pod.node is None and not pod.finished)
    waiting = [g.pod.created for g in unbound if g is not None]
    known_since = [created for created in waiting if created is not None]
    out.update(
        totals=gpu.totals(summaries),
        by_model=dict(sorted(by_model.items())),
        gpu_nodes=len(gpu_nodes),
        problem_nodes=len(with_problems),
        worst=(worst[0].code, worst[1]) if worst else None,
        worst_subject=worst[0].subject if worst else None,
        unknown_nodes=sum(1 for s in not_known if not s.problems),
        lacks=tuple(sorted({u.what for s in not_known for u in s.unknown})),
        pending=len(waiting),
        longest_wait=max(now - created for created in known_since) if known_since else None,
        updated=now,
    )
    return out


def watch_state(model: ClusterModel) -> tuple[str, str]:
    """(state, detail) of a watched cluster from its required kinds' states."""
    states = model.states
    for kind in (NODES, PODS):
        state = states[kind]
        if state.phase != WATCH_LIVE:
            return state.phase, f"{kind}: {state.describe()}"  # syncing, retrying, forbidden, absent
    return LIVE, ""


def trouble(error: ConnectError) -> str:
    if isinstance(error, Unauthorized):
        return UNAUTHORIZED
    if isinstance(error, Forbidden):
        return FORBIDDEN
    return UNREACHABLE


class FleetError(Exception):
    """The contexts asked for cannot be chosen (a name the kubeconfig lacks, a glob that matches none)."""


def choose_contexts(available: list[str], wanted: Iterable[str]) -> list[str]:
    """The kubeconfig's contexts that `wanted` names (exact names or globs such as `prod-*`), in
    kubeconfig order, each once."""
    chosen: set[str] = set()
    for pattern in wanted:
        matches = [name for name in available if fnmatch.fnmatchcase(name, pattern)]
        if not matches:
            known = ", ".join(available) or "none"
            what = "matches no context" if any(c in pattern for c in "*?[") else "is not a context"
            raise FleetError(f"{pattern!r} {what} in the kubeconfig (contexts: {known})")
        chosen.update(matches)
    return [name for name in available if name in chosen]


class Member:
    """One cluster of the fleet: watched (`live`) or summarised now and then."""

    def __init__(self, fleet: "Fleet", context: str, live: bool) -> None:
        self.fleet = fleet
        self.context = context
        self.live = live
        self.viewed = 0.0  # time.monotonic() when last viewed
        self.conn: Connection | None = None
        self.model: ClusterModel | None = None
        self.row = ClusterRow(context, CONNECTING)
        self.ready = asyncio.Event()  # set while conn and model are up (live members)
        self._stale = asyncio.Event()  # the model changed since the row's figures were taken
        self._task: asyncio.Task | None = None
        self._unsubscribe: Callable[[], None] | None = None

    def start(self) -> None:
        run = self._watch if self.live else self._summarise
        self._task = asyncio.get_running_loop().create_task(run(), name=f"gputui-fleet-{self.context}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait([task])
        await self._close()

    async def _close(self) -> None:
        self.ready.clear()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        model, conn, self.model, self.conn = self.model, self.conn, None, None
        if model is not None:
            await model.stop()
        if conn is not None:
            await conn.close()

    def _set(self, **changes: Any) -> None:
        values = {**self.row.__dict__, **changes}
        self.row = ClusterRow(**values)
        self.fleet.dirty.add(self.context)

    async def _open(self) -> tuple[Connection, str]:
        conn = await self.fleet.connector(self.context)
        try:
            version = await check(conn)
        except BaseException:
            await conn.close()
            raise
        return conn, version

    async def _watch(self) -> None:
        """Connect (with back-off), then keep a model of the cluster (its reflectors retry on their own)
        and the row's figures."""
        failures = 0
        while self.model is None:
            try:
                self.conn, version = await self._open()
            except ConnectError as error:
                delay = BACKOFF[min(failures, len(BACKOFF) - 1)]
                failures += 1
                self._set(state=trouble(error), detail=str(error), retry_at=time.monotonic() + delay)
                await asyncio.sleep(delay)
                continue
            self.model = self.fleet.model_of(self.conn)
            self._unsubscribe = self.model.subscribe(lambda change: self._stale.set())
            await self.model.start()
            if self.model.metrics.background_interval > 0:
                self.model.metrics.start_background()  # XIDs: the row counts what the cluster's screen does
            self._set(state=SYNCING, detail="", retry_at=None, server_version=version)
            self.ready.set()
        await self._keep_figures(self.model)

    async def _keep_figures(self, model: ClusterModel) -> None:
        """Take the row's figures again after each change, at most once every FIGURES_INTERVAL."""
        while True:
            await self._stale.wait()
            self._stale.clear()
            self._set(**await figures(self.context, model, self.fleet.clock()))
            await asyncio.sleep(FIGURES_INTERVAL)

    async def _summarise(self) -> None:
        """A fresh list every summary_interval: connect, sync once, take the figures, close."""
        while True:
            try:
                conn, version = await self._open()
            except ConnectError as error:
                self._set(state=trouble(error), detail=str(error), retry_at=time.monotonic() + self.fleet.summary_interval)
            else:
                try:
                    async with self.fleet.model_of(conn) as model:
                        synced = await model.wait_synced(SUMMARY_SYNC_TIMEOUT, kinds=(NODES, PODS))
                        state, detail = (SUMMARY, "") if synced else watch_state(model)
                        self._set(state=state, detail=detail, retry_at=None, server_version=version,
                                  **await figures(self.context, model, self.fleet.clock()))
                finally:
                    await conn.close()
            await asyncio.sleep(self.fleet.summary_interval)

    def current(self) -> ClusterRow:
        """The row now: a watched cluster's state from its model's watches, its figures as last taken."""
        model = self.model
        if not self.live or model is None:
            return self.row
        state, detail = watch_state(model)
        if (state, detail) != (self.row.state, self.row.detail):
            self.row = ClusterRow(**{**self.row.__dict__, "state": state, "detail": detail})
        return self.row


class Fleet:
    def __init__(
        self, contexts: Iterable[str], connector: Connector, *, max_live: int = MAX_LIVE,
        summary_interval: float = SUMMARY_INTERVAL, resources: gpu.GpuResources | None = None,
        model_options: dict[str, Any] | None = None, clock: Callable[[], float] = time.time,
        namespaces: Iterable[str] = (), configured_namespaces: Iterable[str] = (),
        prometheus: PrometheusFleet | None = None, cluster_contexts: Mapping[str, str] | None = None,
    ) -> None:
        """namespaces (-n) and configured_namespaces (the config file's): where each cluster's pods are
        read when they cannot be listed cluster-wide, with its context's namespace, as for one cluster.
        prometheus: the rows from there, `contexts` only opened when viewed; cluster_contexts: a cluster
        label's value -> its context, where the names differ."""
        self.connector = connector
        self.namespaces = tuple(namespaces)
        self.configured_namespaces = tuple(configured_namespaces)
        self.max_live = max(1, max_live)
        self.summary_interval = summary_interval
        self.resources = resources or gpu.GpuResources()
        self.model_options = model_options or {}
        self.clock = clock
        self.dirty: set[str] = set()
        self.prometheus = prometheus
        self.cluster_contexts = dict(cluster_contexts or {})
        self._contexts = list(dict.fromkeys(contexts))
        self.members = {} if prometheus else {name: Member(self, name, live=i < self.max_live) for i, name in enumerate(self._contexts)}
        self._poll: asyncio.Task | None = None

    @property
    def contexts(self) -> list[str]:
        return list(self._contexts)

    def context_for(self, key: str) -> str | None:
        """The kubeconfig context a row opens (its cluster's, from Prometheus), None when there is none."""
        if self.prometheus is None:
            return key if key in self.members else None
        context = self.cluster_contexts.get(key, key)
        return context if context in self._contexts else None

    def has(self, context: str | None) -> bool:
        """Whether the fleet watches (or would, once viewed) this context."""
        return context is not None and context in self.members or (self.prometheus is not None and context in self._contexts)

    def model_of(self, conn: Connection) -> ClusterModel:
        return ClusterModel(conn.api, resources=self.resources,
                            namespaces=namespaces_to_try(self.namespaces, conn.namespace, self.configured_namespaces), **self.model_options)

    async def start(self) -> None:
        if self.prometheus is not None:
            self._poll = asyncio.get_running_loop().create_task(self.prometheus.run(), name="gputui-fleet-prometheus")
        for member in self.members.values():
            member.start()

    async def stop(self) -> None:
        if self._poll is not None:
            self._poll.cancel()
            await asyncio.gather(self._poll, return_exceptions=True)
            self._poll = None
        await asyncio.gather(*(member.stop() for member in self.members.values()))
        if self.prometheus is not None:
            await self.prometheus.close()

    def row(self, key: str) -> ClusterRow:
        """A row by its key: a context, or with Prometheus a cluster label's value."""
        if self.prometheus is None:
            return self.members[key].current()
        return next(row for row in self.rows() if row.context == key)

    def rows(self) -> list[ClusterRow]:
        """Every row: Prometheus' clusters (a viewed one's from its watch once known), then the contexts
        viewed that Prometheus does not know."""
        if self.prometheus is None:
            return [member.current() for member in self.members.values()]
        out, shown = [], set()
        for key, row in self.prometheus.rows.items():
            member = self.members.get(self.cluster_contexts.get(key, key))
            watched = member.current() if member is not None else None
            if member is not None and watched is not None and watched.known:
                shown.add(member.context)
                row = ClusterRow(**{**watched.__dict__, "context": key})
            out.append(row)
        out += [member.current() for context, member in self.members.items() if context not in shown and context not in self.prometheus.rows]
        return out

    def take_dirty(self) -> set[str]:
        dirty, self.dirty = self.dirty, set()
        return dirty

    def live_count(self) -> int:
        return sum(1 for member in self.members.values() if member.live)

    async def view(self, context: str, timeout: float | None = None) -> tuple[Connection, ClusterModel] | None:
        """Make the cluster live (the least recently viewed live one is summarised instead when the
        cap is reached) and return its connection and model once connected; None on timeout."""
        member = self.members.get(context)
        if member is None:  # with Prometheus: watched from its first view on
            member = self.members[context] = Member(self, context, live=False)
        member.viewed = time.monotonic()
        if not member.live:
            live = [m for m in self.members.values() if m.live]
            if len(live) >= self.max_live:
                await self._switch(min(live, key=lambda m: m.viewed), live=False)
            await self._switch(member, live=True)
        if not await set_within(member.ready, timeout):
            return None
        assert member.conn is not None and member.model is not None
        return member.conn, member.model

    async def _switch(self, member: Member, live: bool) -> None:
        await member.stop()
        if not live and self.prometheus is not None:
            del self.members[member.context]  # its row from Prometheus again
            return
        member.live = live
        member.start()
