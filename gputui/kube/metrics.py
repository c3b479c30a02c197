"""DCGM metrics: each exporter pod's `/metrics`, read through the API server's pod proxy.

Metrics cannot be watched, so they are polled, and only while someone wants
them: `release = poller.want()` (the UI, while it shows metrics; `nodes` to
narrow it), `release()` when done; `await poller.poll_once()` reads every
exporter once (`gputui report`).  Each node has at most one request in
flight, each request a timeout, and at most `concurrency` run at once.

`poller.start_background()` (the app, for the Nodes pane and the header) reads
every GPU node's exporter at the slow rate as well: each node once every
`background_interval` seconds, the node read longest ago first, and never more
than `reads_per_minute` reads a minute (a token bucket holding at most
`concurrency`): on a cluster with more GPU nodes than that, the reads go round
the nodes and each reading is older (`NodeMetrics.at` says how old).  A node
read by `want()` at the fast rate is not read again by the background.

Per node the poller keeps a `NodeMetrics`: the readings of the last good
scrape, or why there are none ("exporter not running on this node",
"forbidden: cannot get pods/proxy in namespace gpu-operator", a parse error),
and a utilisation history per GPU for sparklines.  Each good scrape's readings
also go to the callables in `poller.on_readings` (node, readings, time.time()):
kube/idle.py's samples.  Nothing here imports Textual.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

from .client import HttpError, Timeout, path
from .config import describe_network_error, status_message
from .dcgm import GpuReading, MetricsParseError, UtilisationHistory, parse_metrics
from .tasks import cancel_and_wait, set_within

if TYPE_CHECKING:
    from .client import Client

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 5.0
DEFAULT_BACKGROUND_INTERVAL = 60.0  # seconds between two background reads of one node
DEFAULT_READS_PER_MINUTE = 600  # at most this many background reads a minute, whatever the cluster's size
DEFAULT_CONCURRENCY = 8  # exporter reads at once (fast, background and poll_once together)
IDLE_LOOK = 10.0  # seconds between two looks at the targets while no node is due
EXPORTER_PORT = 9400  # dcgm-exporter's default listen port (DCGM_EXPORTER_LISTEN=:9400)
PARSE_IN_THREAD_OVER = 32 * 1024  # bytes of text: smaller scrapes are parsed on the loop


@dataclass(frozen=True)
class Exporter:
    """Where a node's metrics come from: its exporter pod, or why there is none to ask."""

    namespace: str | None = None
    pod: str | None = None
    unavailable: str | None = None  # set when there is no running exporter to ask


@dataclass(frozen=True)
class NodeMetrics:
    readings: tuple[GpuReading, ...] = ()  # of the last good scrape
    error: str | None = None  # why the last try gave no readings; None when they are current
    at: float | None = None  # time.time() of the last good scrape

    @property
    def current(self) -> bool:
        return self.error is None and self.at is not None


Targets = Callable[[], dict[str, Exporter]]  # node name -> its exporter


class ReadBudget:
    """A token bucket: at most `per_minute` reads a minute, `burst` of them at once after a quiet while
    (the background reads, and `gputui report`'s one read of each exporter)."""

    def __init__(self, per_minute: float, burst: int, clock: Callable[[], float]) -> None:
        self.rate = per_minute / 60.0  # reads a second
        self.capacity = float(max(1, min(burst, per_minute)))
        self._clock = clock
        self._tokens, self._filled_at = self.capacity, clock()

    def wait(self) -> float:
        """Seconds until a read may start; 0 when one may now."""
        now = self._clock()
        self._tokens, self._filled_at = min(self.capacity, self._tokens + (now - self._filled_at) * self.rate), now
        return 0.0 if self._tokens >= 1.0 else (1.0 - self._tokens) / self.rate

    def take(self) -> None:
        """A read starts (after wait() said 0)."""
        self._tokens -= 1.0

    async def acquire(self) -> None:
        """Wait until a read may start, and take it."""
        seconds = self.wait()
        if seconds > 0:
            await asyncio.sleep(seconds)  # the token is there then: wait() refills it
            self.wait()
        self.take()


class MetricsPoller:
    def __init__(
        self,
        api: Client,
        targets: Targets,
        on_update: Callable[[str], None] = lambda node: None,
        *,
        interval: float = DEFAULT_INTERVAL,
        timeout: float = 4.0,
        port: int = EXPORTER_PORT,
        concurrency: int = DEFAULT_CONCURRENCY,
        history_samples: int = 60,
        background_interval: float = DEFAULT_BACKGROUND_INTERVAL,
        reads_per_minute: int = DEFAULT_READS_PER_MINUTE,
    ) -> None:
        self.api = api
        self.targets = targets
        self.on_update = on_update
        self.interval = interval
        self.timeout = timeout
        self.port = port
        self.concurrency = concurrency
        self.background_interval = background_interval
        self.reads_per_minute = reads_per_minute
        self.history = UtilisationHistory(samples=history_samples)
        self.on_readings: list[Callable[[str, list[GpuReading], float], None]] = []  # called with each good scrape
        self.scrapes = 0  # requests answered (any status), for tests and the UI's status line
        self.requests = 0  # requests sent (answered or not)
        self.bytes_read = 0  # bytes of the answers' bodies
        self.background_reads = 0  # requests sent by the background reads
        self._states: dict[str, NodeMetrics] = {}
        self._in_flight: set[str] = set()
        self._attempted: dict[str, float] = {}  # node -> loop time its last read started (any caller)
        self._limit = asyncio.Semaphore(concurrency)
        self._background: asyncio.Task[None] | None = None
        self._demands: list[frozenset[str] | None] = []  # None: every node
        self._wanted = asyncio.Event()
        self._look = asyncio.Event()  # set when the targets may have changed: the background reads look at once
        self._task: asyncio.Task[None] | None = None

    # -- what the UI reads ------------------------------------------------------
    def node(self, name: str) -> NodeMetrics | None:
        """The node's metrics, or None before the first try."""
        return self._states.get(name)

    def series(self, reading: GpuReading) -> list[float]:
        """The GPU's recent utilisation, oldest first."""
        return self.history.series(reading.key)

    # -- demand -------------------------------------------------------------------
    @property
    def wanted(self) -> bool:
        return bool(self._demands)

    def want(self, nodes: Iterable[str] | None = None) -> Callable[[], None]:
        """Poll every `interval` seconds (every node, or these) until the returned release() is called."""
        demand = None if nodes is None else frozenset(nodes)
        self._demands.append(demand)
        self._wanted.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="gputui-dcgm-poller")
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._demands.remove(demand)
                if not self._demands:
                    self._wanted.clear()
                self._look.set()  # the nodes left to the fast reads are the background's again

        return release

    def _wanted_nodes(self) -> frozenset[str] | None:
        wanted: frozenset[str] = frozenset()
        for demand in self._demands:
            if demand is None:
                return None
            wanted |= demand
        return wanted

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wanted.wait()
            started = loop.time()
            try:
                await self.poll_once(self._wanted_nodes())
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("DCGM metrics round failed")
            await asyncio.sleep(max(0.0, self.interval - (loop.time() - started)))

    async def stop(self) -> None:
        tasks, self._task, self._background = (self._task, self._background), None, None
        await cancel_and_wait(tasks)

    # -- background reads ----------------------------------------------------------
    @property
    def background_running(self) -> bool:
        return self._background is not None and not self._background.done()

    def read_budget(self) -> ReadBudget:
        """The reads a minute the config file allows, `concurrency` at once after a quiet while."""
        return ReadBudget(self.reads_per_minute, self.concurrency, asyncio.get_running_loop().time)

    def targets_changed(self) -> None:
        """The model learnt something the targets depend on (an exporter, the stack, a kind now known)."""
        self._look.set()

    def start_background(self) -> None:
        """Read every GPU node's exporter at the slow rate, within the budget, until stop()."""
        if not self.background_running:
            self._background = asyncio.create_task(self._run_background(), name="gputui-dcgm-background")

    def _background_nodes(self, targets: Iterable[str]) -> list[str]:
        """The nodes no screen wants at the fast rate (want()): those the fast loop reads are never the background's
        too, however long their reads take."""
        fast = self._wanted_nodes()
        return [] if fast is None else [node for node in targets if node not in fast]

    def _due(self, targets: dict[str, Exporter], now: float) -> list[str]:
        """Nodes whose exporter can be asked and that were not read for background_interval, longest ago first;
        not those read at the fast rate."""
        never = -float("inf")
        due = [
            node for node in self._background_nodes(targets)
            if targets[node].unavailable is None and targets[node].pod is not None and node not in self._in_flight
            and now - self._attempted.get(node, never) >= self.background_interval
        ]
        due.sort(key=lambda node: (self._attempted.get(node, never), node))
        return due

    async def _run_background(self) -> None:
        loop = asyncio.get_running_loop()
        budget = self.read_budget()
        running: set[asyncio.Task[None]] = set()
        try:
            while True:
                looked = loop.time()
                self._look.clear()
                try:  # one look at the targets serves many reads: they are a pass over every node
                    targets = self.targets()
                    self._note_unavailable(targets, forget_gone=True)
                    due = self._due(targets, looked)
                except Exception:
                    log.exception("DCGM background look failed")
                    targets, due = {}, []
                if not due:
                    # Worked out as _due tells (a sum instead could make a node not due yet wait 0 s, which is
                    # dropped: uvloop's clock counts whole milliseconds, so that happens). A read in flight past
                    # its node's interval wakes the loop as it ends (_ended).
                    waits = [self.background_interval - (looked - self._attempted[n]) for n in self._background_nodes(targets)
                             if n in self._attempted]
                    await set_within(self._look, min([IDLE_LOOK, *(w for w in waits if w > 0)]))
                    continue
                for node in due:
                    while True:
                        if (seconds := budget.wait()) > 0:
                            await asyncio.sleep(seconds)
                        elif len(running) >= self.concurrency:
                            await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                        else:
                            break
                    if loop.time() - looked > IDLE_LOOK:
                        break  # look again: exporters come and go
                    if (node in self._in_flight or loop.time() - self._attempted.get(node, -float("inf")) < self.background_interval
                            or not self._background_nodes((node,))):
                        continue  # read meanwhile, or wanted meanwhile at the fast rate (the details screen)
                    budget.take()
                    self.background_reads += 1
                    self._in_flight.add(node)
                    task = asyncio.create_task(self._background_read(node, targets[node]), name=f"gputui-dcgm-{node}")
                    running.add(task)
                    task.add_done_callback(running.discard)
                await asyncio.sleep(0)
        finally:
            for task in running:
                task.cancel()

    async def _background_read(self, node: str, exporter: Exporter) -> None:
        try:
            await self._poll(node, exporter)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("DCGM background read of %s failed", node)
        finally:
            self._ended([node])

    def _ended(self, nodes: Iterable[str]) -> None:
        """The reads of `nodes` ended. One that took longer than the background interval is due again at once,
        and the background loop, waiting for the next node to come due, is woken for it (else it would sleep
        until IDLE_LOOK)."""
        now = asyncio.get_running_loop().time()
        for node in nodes:
            self._in_flight.discard(node)
            if now - self._attempted.get(node, now) >= self.background_interval:
                self._look.set()

    def _note_unavailable(self, targets: dict[str, Exporter], *, forget_gone: bool) -> None:
        """Nodes without an exporter to ask get the reason as their state, without a request."""
        if forget_gone:
            for gone in [n for n in self._states if n not in targets]:
                del self._states[gone]
            for gone in [n for n in self._attempted if n not in targets]:
                del self._attempted[gone]
        for node, exporter in targets.items():
            if exporter.unavailable is not None or exporter.pod is None:
                self._set(node, NodeMetrics(error=exporter.unavailable or "no DCGM exporter on this node"))

    # -- polling -------------------------------------------------------------------
    async def poll_once(self, nodes: Iterable[str] | None = None) -> None:
        """Read every exporter once (or those of `nodes`); nodes already being read are skipped."""
        targets = self.targets()
        if nodes is not None:
            wanted = set(nodes)
            targets = {n: t for n, t in targets.items() if n in wanted}
        self._note_unavailable(targets, forget_gone=nodes is None)
        mine = [
            (node, exporter) for node, exporter in targets.items()
            if exporter.unavailable is None and exporter.pod is not None and node not in self._in_flight
        ]
        # Marked now, not when each job starts, so that a concurrent round sees them.
        self._in_flight.update(node for node, _ in mine)
        try:
            await asyncio.gather(*(self._poll(node, exporter) for node, exporter in mine))
        finally:
            self._ended(node for node, _ in mine)

    async def _poll(self, node: str, exporter: Exporter) -> None:
        async with self._limit:
            self._attempted[node] = asyncio.get_running_loop().time()
            readings, error = await self._scrape(exporter)
        if error is None:
            self.history.record(readings)
            at = time.time()
            for listener in list(self.on_readings):
                listener(node, readings, at)
            self._set(node, NodeMetrics(tuple(readings), None, at))
        else:
            previous = self._states.get(node) or NodeMetrics()
            self._set(node, NodeMetrics(previous.readings, error, previous.at))

    async def _scrape(self, exporter: Exporter) -> tuple[list[GpuReading], str | None]:
        """(readings, None), or ([], why not) in one line."""
        namespace, pod = exporter.namespace or "", exporter.pod or ""
        try:
            url = path("v1", "pods", f"{pod}:{self.port}", namespace=namespace, sub="proxy/metrics")
            self.requests += 1
            resp = await self.api.request("GET", url, timeout=Timeout(total=self.timeout), accept="text/plain, */*")
            async with resp:
                body = await resp.read()
            self.bytes_read += len(body)
        except asyncio.TimeoutError:
            return [], f"exporter {namespace}/{pod} did not answer within {self.timeout:g} s"
        except (HttpError, OSError) as exc:
            return [], describe_network_error(exc)
        self.scrapes += 1
        if resp.status == 403:
            return [], f"forbidden: cannot get pods/proxy in namespace {namespace}"
        if resp.status != 200:
            return [], f"exporter {namespace}/{pod} unreachable: {status_message(body)} ({resp.status})"
        text = body.decode("utf-8", "replace")
        try:
            if len(body) > PARSE_IN_THREAD_OVER:
                readings = await asyncio.to_thread(parse_metrics, text)
            else:
                readings = parse_metrics(text)
        except MetricsParseError as exc:
            return [], f"exporter {namespace}/{pod}: {exc}"
        if not readings:
            return [], f"exporter {namespace}/{pod} reports no GPU"
        return readings, None

    def _set(self, node: str, state: NodeMetrics) -> None:
        if self._states.get(node) != state:
            self._states[node] = state
            self.on_update(node)
