"""DCGM metrics: each exporter pod's `/metrics`, read through the API server's pod proxy.

Metrics cannot be watched, so they are polled, and only while someone wants
them: `release = poller.want()` (the UI, while it shows metrics; `nodes` to
narrow it), `release()` when done; `await poller.poll_once()` reads every
exporter once (`gputui report`).  Each node has at most one request in
flight, each request a timeout, and at most `concurrency` run at once.

Per node the poller keeps a `NodeMetrics`: the readings of the last good
scrape, or why there are none ("exporter not running on this node",
"forbidden: cannot get pods/proxy in namespace gpu-operator", a parse error),
and a utilisation history per GPU for sparklines.  Nothing here imports Textual.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

from .client import path
from .config import describe_network_error, status_message
from .dcgm import GpuReading, MetricsParseError, UtilisationHistory, parse_metrics

if TYPE_CHECKING:
    from .client import Client

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 5.0
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
        concurrency: int = 16,
        history_samples: int = 60,
    ) -> None:
        self.api = api
        self.targets = targets
        self.on_update = on_update
        self.interval = interval
        self.timeout = timeout
        self.port = port
        self.history = UtilisationHistory(samples=history_samples)
        self.scrapes = 0  # requests answered (any status), for tests and the UI's status line
        self._states: dict[str, NodeMetrics] = {}
        self._in_flight: set[str] = set()
        self._limit = asyncio.Semaphore(concurrency)
        self._demands: list[frozenset[str] | None] = []  # None: every node
        self._wanted = asyncio.Event()
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

        return release

    def _wanted_nodes(self) -> frozenset[str] | None:
        if any(d is None for d in self._demands):
            return None
        return frozenset().union(*self._demands)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wanted.wait()
            started = loop.time()
            try:
                await self.poll_once(self._wanted_nodes())
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001  (a bug in one round must not end polling)
                log.exception("DCGM metrics round failed")
            await asyncio.sleep(max(0.0, self.interval - (loop.time() - started)))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    # -- polling -------------------------------------------------------------------
    async def poll_once(self, nodes: Iterable[str] | None = None) -> None:
        """Read every exporter once (or those of `nodes`); nodes already being read are skipped."""
        targets = self.targets()
        if nodes is not None:
            wanted = set(nodes)
            targets = {n: t for n, t in targets.items() if n in wanted}
        for gone in [n for n in self._states if n not in targets and nodes is None]:
            del self._states[gone]
        mine = []
        for node, exporter in targets.items():
            if exporter.unavailable is not None or exporter.pod is None:
                self._set(node, NodeMetrics(error=exporter.unavailable or "no DCGM exporter on this node"))
            elif node not in self._in_flight:
                mine.append((node, exporter))
        # Marked now, not when each job starts, so that a concurrent round sees them.
        self._in_flight.update(node for node, _ in mine)
        try:
            await asyncio.gather(*(self._poll(node, exporter) for node, exporter in mine))
        finally:
            self._in_flight.difference_update(node for node, _ in mine)

    async def _poll(self, node: str, exporter: Exporter) -> None:
        async with self._limit:
            readings, error = await self._scrape(exporter)
        if error is None:
            self.history.record(readings)
            self._set(node, NodeMetrics(tuple(readings), None, time.time()))
        else:
            previous = self._states.get(node) or NodeMetrics()
            self._set(node, NodeMetrics(previous.readings, error, previous.at))

    async def _scrape(self, exporter: Exporter) -> tuple[list[GpuReading], str | None]:
        """(readings, None), or ([], why not) in one line."""
        import aiohttp  # noqa: PLC0415

        namespace, pod = exporter.namespace or "", exporter.pod or ""
        try:
            url = path("v1", "pods", f"{pod}:{self.port}", namespace=namespace, sub="proxy/metrics")
            resp = await self.api.request("GET", url, timeout=aiohttp.ClientTimeout(total=self.timeout), accept="text/plain, */*")
            async with resp:
                body = await resp.read()
        except asyncio.TimeoutError:
            return [], f"exporter {namespace}/{pod} did not answer within {self.timeout:g} s"
        except (aiohttp.ClientError, OSError) as exc:
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
