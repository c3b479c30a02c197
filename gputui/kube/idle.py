"""Idle allocated GPUs: how much each pod that holds GPUs has used them over a window.

Per pod: its GPUs' mean and peak use over the window (`DCGM_FI_DEV_GPU_UTIL`, or
`DCGM_FI_PROF_GR_ENGINE_ACTIVE` on MIG, as attributed by the exporter's pod
labels), its framebuffer used now, and how long it has been idle: the time since
the last sample at or above the threshold on any of its GPUs (0 while the latest
is at or above it). Where no sample in what is covered reached the threshold the
pod has been idle at least that long (`idle_at_least`).

A pod that shares its GPUs with other pods (time-slicing or MPS replicas, a
`nvidia.com/gpu.shared` resource, and another pod on the node holding the same
resource) has no figures of its own (`shared`): a shared GPU's use is all its
pods' together, dcgm-exporter names one of them on it (or, with virtual GPUs,
each with the whole GPU's figures), and which GPU each pod got is not known.

Two sources, in this order:

- a Prometheus that scrapes the exporters (`settings.prometheus`: a service
  `NS/NAME:PORT` reached through the API server's service proxy, or an
  http(s):// URL), asked one PromQL query per refresh for the whole cluster;
- else gputui's own samples of the exporters (`SampleStore`, fed by the model's
  exporter reads), in memory and, when `settings.history` names a file, in a
  small SQLite file, so that a window survives restarts.

    tracker = IdleTracker(api, settings, scope=context)
    unhook = tracker.follow(model.metrics)     # every exporter reading becomes samples
    await tracker.open()                       # the history file's samples, if any
    view = await tracker.refresh(holders(model))   # IdleView: source, window, covered, per pod
    unhook(); await tracker.close()

No Textual here; every SQLite call runs in a thread, off the event loop.
"""
from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import orjson

from .client import Client
from .duration import human_duration
from .prometheus import Prometheus, PrometheusError
from .gpu import GPU, gpu_facts

if TYPE_CHECKING:
    from .dcgm import GpuReading
    from .gpu import GpuPod
    from .metrics import MetricsPoller
    from .model import ClusterModel
    from .records import Pod

DEFAULT_WINDOW = 3600.0  # seconds
DEFAULT_THRESHOLD = 5.0  # percent: below it a GPU is idle
DEFAULT_PROMETHEUS = "monitoring/prometheus-k8s:9090"  # kube-prometheus' service
PROMETHEUS, EXPORTERS = "prometheus", "exporters"
STALE_AFTER = 300.0  # a sample stands for at most this long (Prometheus' staleness): a longer gap is not covered
MAX_SAMPLES = 240  # per pod and GPU over the window: samples closer together are thinned
MAX_SERIES = 20_000  # pod and GPU pairs kept; the one not sampled for longest is forgotten first
PROMETHEUS_TIMEOUT = 10.0
PROMETHEUS_RETRY = 300.0  # a Prometheus that did not answer is asked again after this long
SCHEMA_VERSION = 1
APPLICATION_ID = 0x67707574  # "gput": PRAGMA application_id of gputui's history files, what marks one ours
COLUMNS = ("scope", "t", "namespace", "pod", "device", "util", "fb_used")  # the samples table's
SCHEMA = ("CREATE TABLE samples (scope TEXT NOT NULL, t REAL NOT NULL, namespace TEXT NOT NULL, "
          "pod TEXT NOT NULL, device TEXT NOT NULL, util REAL NOT NULL, fb_used REAL)",
          "CREATE INDEX samples_by_time ON samples (scope, t)")
SQLITE_MAGIC = b"SQLite format 3\x00"
SLICE = 500  # pods' figures worked out between two yields to the event loop


class HistoryError(Exception):
    """The history file cannot be used; the message is one line naming it."""


@dataclass(frozen=True)
class IdleSettings:
    window: float = DEFAULT_WINDOW
    threshold: float = DEFAULT_THRESHOLD
    prometheus: str | None = DEFAULT_PROMETHEUS  # "NS/NAME:PORT", an http(s):// URL, or None: the exporters' samples only
    history: str | None = None  # a SQLite file keeping the exporters' samples


@dataclass(frozen=True)
class PodIdle:
    """One pod's figures; None where there are no samples."""

    namespace: str
    name: str
    node: str | None
    gpus: int
    idle_s: float | None
    idle_at_least: bool  # no sample reached the threshold in what is covered: idle at least idle_s
    mean_util: float | None
    peak_util: float | None
    fb_used_mib: float | None
    covered_s: float
    shared: bool = False  # on a GPU other pods use at the same time: its use cannot be split among them
    why: str | None = None  # why there are no figures, when known (`no DCGM exporter on this node`)

    @property
    def known(self) -> bool:
        return self.idle_s is not None

    @property
    def idle_for(self) -> str:
        """`12m`, `≥12m` (idle for all that is covered), `0s` for a GPU in use: the app's words and the report's."""
        return idle_for(self.idle_s, self.idle_at_least)

    def to_json(self) -> dict[str, Any]:
        def whole(value: float | None) -> int | None:
            return None if value is None else int(round(value))

        return {
            "namespace": self.namespace, "name": self.name, "node": self.node, "gpus": self.gpus,
            "idle_s": whole(self.idle_s), "mean_util": None if self.mean_util is None else round(float(self.mean_util), 1),
            "peak_util": None if self.peak_util is None else round(float(self.peak_util), 1), "fb_used_mib": whole(self.fb_used_mib),
            "idle_at_least": self.idle_at_least, "why": self.why,
        }


def idle_for(idle_s: float | None, at_least: bool) -> str:
    """`12m`, `≥12m` (idle for all the samples cover, and maybe longer), `0s` for a GPU in use."""
    return ("≥" if at_least else "") + human_duration(idle_s or 0)


def worst_first(pod: PodIdle) -> tuple:
    """Idle GPU-seconds first, then idle time, then the least used; pods without samples last."""
    if pod.idle_s is None:
        return (1, 0.0, 0.0, 0.0, pod.namespace, pod.name)
    return (0, -pod.gpus * pod.idle_s, -pod.idle_s, pod.mean_util or 0.0, pod.namespace, pod.name)


@dataclass(frozen=True)
class IdleView:
    source: str  # PROMETHEUS or EXPORTERS
    window_s: float
    covered_s: float  # how much of the window the figures rest on
    pods: tuple[PodIdle, ...]  # worst first
    at: float  # time.time() of the figures
    note: str | None = None  # why Prometheus is not the source, when one was looked for
    _index: dict[tuple[str, str], PodIdle] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {(p.namespace, p.name): p for p in self.pods})  # frozen: set once here

    def pod(self, namespace: str, name: str) -> PodIdle | None:
        return self._index.get((namespace, name))

    def to_json(self) -> dict[str, Any]:
        """The report's `idle`: exactly the contract's keys."""
        return {"source": self.source, "window_s": int(self.window_s), "covered_s": int(round(self.covered_s)),
                "pods": [p.to_json() for p in self.pods]}


@dataclass(frozen=True)
class Holder:
    """A pod bound to a node holding GPUs, as the model knows it."""

    namespace: str
    name: str
    node: str | None
    gpus: int
    shared: bool = False  # holds a GPU that other pods hold too (see the module docstring)
    unread: str | None = None  # why its node's GPUs are not read (`no DCGM exporter on this node`)


def holders(model: ClusterModel, namespaces: Iterable[str] = (), pods: Iterable[Pod] | None = None) -> list[Holder]:
    """The model's pods bound to a node that hold GPUs (of `namespaces`, when given; of `pods`, when given:
    the UI takes them a slice at a time)."""
    wanted = set(namespaces)
    out = []
    for pod in model.pods.records.values() if pods is None else pods:
        if pod.node is None or (wanted and pod.namespace not in wanted):
            continue
        entry = model.gpu_pod(pod, ())
        if entry is not None:
            # A device held only through DRA (a MIG device of its own class) is counted by its claims.
            held = sum(entry.gpu.values()) or sum(len(hold.devices) for hold in entry.claims)
            metrics = model.node_metrics(pod.node)
            unread = _unread(metrics.error) if metrics is not None and metrics.at is None and metrics.error else None
            out.append(Holder(pod.namespace, pod.name, pod.node, held, _shares_gpus(model, entry), unread))
    return out


def _unread(error: str) -> str:
    """Why a node's GPUs are not read, in a few words for a pod's row."""
    if error.startswith("no DCGM exporter"):
        return "no exporter on this node"
    return "exporter not running" if error.startswith("exporter not running") else error


def _sharing_resources(model: ClusterModel, entry: GpuPod) -> set[str]:
    """The resources the pod holds that are replicas of a GPU: `*.shared`, or `nvidia.com/gpu` on a node whose GPUs
    GPU Feature Discovery says are time-sliced or shared by MPS (`nvidia.com/gpu.replicas` over 1)."""
    node = model.node(entry.pod.node) if entry.pod.node else None
    replicas = gpu_facts(node).replicas if node is not None else None
    return {name for name in entry.gpu if name.endswith(".shared") or (name == GPU and (replicas or 1) > 1)}


def _shares_gpus(model: ClusterModel, entry: GpuPod) -> bool:
    """Another pod on the node holds replicas of the same resource: the two may be on one GPU."""
    sharing = _sharing_resources(model, entry)
    if not sharing:
        return False
    for other in model.gpu_pods(entry.pod.node):
        if (other.pod.namespace, other.pod.name) != (entry.pod.namespace, entry.pod.name) and sharing & set(other.gpu):
            return True
    return False


# -- one GPU's figures -------------------------------------------------------------------

@dataclass(frozen=True)
class DeviceFigures:
    mean: float
    peak: float
    idle_from: float | None  # None: the latest sample is at or above the threshold
    exact: bool  # idle_from is the last sample at or above the threshold (else: the first of an idle run)
    fb_used: float | None
    covered: float  # seconds up to the latest sample
    latest: float  # time of the latest sample: the stretch from it to now is covered too, up to STALE_AFTER


Sample = tuple[float, float, float | None]  # (time, percent used, framebuffer MiB)


def device_figures(samples: Sequence[Sample], threshold: float, stale_after: float = STALE_AFTER) -> DeviceFigures | None:
    """One GPU's figures from its samples in the window, oldest first (None without any). The mean weighs
    each stretch between two samples by its length (a GPU read faster for a while counts no more); a gap
    longer than stale_after is not covered, nor is what happened in it known."""
    if not samples:
        return None
    area = span = 0.0
    for (t0, u0, _), (t1, u1, _) in zip(samples, samples[1:], strict=False):
        if t1 - t0 <= stale_after:
            area += (u0 + u1) / 2 * (t1 - t0)
            span += t1 - t0
    mean = area / span if span > 0 else sum(u for _, u, _ in samples) / len(samples)
    last_t, last_u, fb = samples[-1]
    idle_from, exact = None, False
    if last_u < threshold:
        idle_from = last_t
        for (t0, u0, _), (t1, _, _) in zip(reversed(samples[:-1]), reversed(samples[1:]), strict=True):
            if t1 - t0 > stale_after:
                break
            idle_from = t0
            if u0 >= threshold:
                exact = True
                break
    return DeviceFigures(mean, max(u for _, u, _ in samples), idle_from, exact, fb, span, last_t)


def pod_figures(holder: Holder, devices: Sequence[DeviceFigures], now: float, stale_after: float = STALE_AFTER) -> PodIdle:
    """A pod's figures from its GPUs': idle while every GPU is, the mean of their means, the highest peak,
    their framebuffers summed; none for a pod on shared GPUs (their use is not its own)."""
    if not devices or holder.shared:
        return PodIdle(holder.namespace, holder.name, holder.node, holder.gpus, None, False, None, None, None, 0.0, holder.shared,
                       None if holder.shared else holder.unread)
    if any(d.idle_from is None for d in devices):
        idle_s, at_least = 0.0, False
    else:
        latest = max(devices, key=lambda d: d.idle_from or 0.0)
        idle_s, at_least = max(0.0, now - (latest.idle_from or now)), not latest.exact
    fbs = [d.fb_used for d in devices if d.fb_used is not None]
    covered = max(d.covered + (now - d.latest if 0 <= now - d.latest <= stale_after else 0.0) for d in devices)
    return PodIdle(holder.namespace, holder.name, holder.node, holder.gpus, idle_s, at_least,
                   sum(d.mean for d in devices) / len(devices), max(d.peak for d in devices), sum(fbs) if fbs else None, covered)


# -- gputui's own samples ------------------------------------------------------------------

SeriesKey = tuple[str, str, str]  # (namespace, pod, device key)


class SampleStore:
    """Samples per pod and GPU over the window, bounded (MAX_SAMPLES each, MAX_SERIES in all), optionally
    kept in a SQLite file (`open`, `flush`)."""

    def __init__(self, window: float, threshold: float, *, history: str | None = None, scope: str = "",
                 stale_after: float = STALE_AFTER, max_series: int = MAX_SERIES) -> None:
        self.window, self.threshold, self.stale_after = window, threshold, stale_after
        self.spacing = window / MAX_SAMPLES  # closer samples are thinned, unless they cross the threshold
        self.history, self.scope, self.max_series = history, scope, max_series
        self.history_path = history
        self._series: OrderedDict[SeriesKey, deque[Sample]] = OrderedDict()
        self._by_pod: dict[tuple[str, str], set[str]] = {}
        self._figures: dict[SeriesKey, DeviceFigures | None] = {}  # per series, until it changes
        self._unwritten: list[tuple[str, float, str, str, str, float, float | None]] = []
        self._db: Any = None  # the history file's sqlite3.Connection
        self._db_lock = asyncio.Lock()
        self.changed = asyncio.Event()  # set by each sample taken (the UI's figures follow)

    def __len__(self) -> int:
        return len(self._series)

    def add(self, readings: Iterable[GpuReading], at: float) -> None:
        """A scrape's readings: one sample per pod each device is attributed to."""
        for reading in readings:
            if reading.util is None:
                continue
            for holder in reading.pods:
                namespace, _, pod = holder.rpartition("/")
                self._add((namespace, pod, reading.key), (at, reading.util, reading.fb_used_mib), write=True)

    def _add(self, key: SeriesKey, sample: Sample, *, write: bool) -> None:
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = deque(maxlen=2 * MAX_SAMPLES)  # thinned to half of it, unless use keeps crossing the threshold
            self._by_pod.setdefault(key[:2], set()).add(key[2])
            while len(self._series) > self.max_series:
                self._forget(next(iter(self._series)))
        else:
            self._series.move_to_end(key)
        self._figures.pop(key, None)
        self.changed.set()
        if series:
            last = series[-1]
            if sample[0] <= last[0]:
                return  # not newer: a reading out of order
            if sample[0] - last[0] < self.spacing and (sample[1] >= self.threshold) == (last[1] >= self.threshold):
                series[-1] = (last[0], last[1], sample[2])  # thinned: the framebuffer is the latest
                return
        series.append(sample)
        while series and series[0][0] < sample[0] - self.window:
            series.popleft()
        if write and self.history is not None:
            self._unwritten.append((self.scope, sample[0], key[0], key[1], key[2], sample[1], sample[2]))

    def _forget(self, key: SeriesKey) -> None:
        del self._series[key]
        self._figures.pop(key, None)
        devices = self._by_pod.get(key[:2])
        if devices is not None:
            devices.discard(key[2])
            if not devices:
                del self._by_pod[key[:2]]

    def figures(self, holder: Holder, now: float) -> PodIdle:
        """The pod's figures over the window up to now. Each GPU's are worked out again only when it
        got a sample or one left the window: a refresh costs little more than a look per pod."""
        start = now - self.window
        devices = []
        for device in sorted(self._by_pod.get((holder.namespace, holder.name), ())):
            key = (holder.namespace, holder.name, device)
            series = self._series[key]
            while series and series[0][0] < start:
                series.popleft()
                self._figures.pop(key, None)
            if key not in self._figures:
                self._figures[key] = device_figures(list(series), self.threshold, self.stale_after)
            figures = self._figures[key]
            if figures is not None:
                devices.append(figures)
        return pod_figures(holder, devices, now, self.stale_after)

    # -- the history file --------------------------------------------------------------
    async def open(self) -> None:
        """Open (or create, 0600) the history file and take its samples of the window; HistoryError if it cannot be used."""
        if self.history is None:
            return
        async with self._db_lock:
            rows = await asyncio.to_thread(self._open_db, time.time() - self.window)
        for _, t, namespace, pod, device, util, fb in sorted(rows, key=lambda r: r[1]):
            self._add((namespace, pod, device), (t, util, fb), write=False)

    def _open_db(self, since: float) -> list[tuple]:
        import sqlite3  # noqa: PLC0415  (only with a history file: 8 ms of every report's start otherwise)

        path = Path(self.history or "").expanduser()
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)  # SQLite gives its journal the file's mode
            try:
                header = os.read(fd, 100)
            finally:
                os.close(fd)
            if header:  # a file of our own, or refused before SQLite writes a byte of it
                _check_ours(path, header)
            db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            try:
                _take(db, path)
                rows = db.execute("SELECT * FROM samples WHERE scope = ? AND t >= ?", (self.scope, since)).fetchall()
            except BaseException:
                db.close()
                raise
        except sqlite3.DatabaseError as exc:
            raise HistoryError(f"history {path}: not a gputui history file ({exc})") from None
        except OSError as exc:
            raise HistoryError(f"history {path}: cannot open it: {exc.strerror or exc}") from None
        self._db = db
        return rows

    async def flush(self, now: float) -> None:
        """Write the samples taken since the last flush and drop this scope's older than the window."""
        if self._db is None:
            return
        rows, self._unwritten = self._unwritten, []
        async with self._db_lock:
            await asyncio.to_thread(self._write, rows, now - self.window)

    def _write(self, rows: list[tuple], before: float) -> None:
        import sqlite3  # noqa: PLC0415

        db = self._db
        if db is None:
            return
        try:
            with db:
                db.execute("BEGIN")
                db.executemany("INSERT INTO samples VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
                db.execute("DELETE FROM samples WHERE scope = ? AND t < ?", (self.scope, before))
        except sqlite3.Error as exc:
            self._db, self.history = None, None  # in memory only from now on
            db.close()
            raise HistoryError(f"history {self.history_path}: cannot write it: {exc}") from None

    async def close(self) -> None:
        await self.flush(time.time())
        if self._db is not None:
            db, self._db = self._db, None
            async with self._db_lock:
                await asyncio.to_thread(db.close)


def _not_ours(path: Path, why: str) -> HistoryError:
    return HistoryError(f"history {path}: not a gputui history file ({why})")


def _check_ours(path: Path, header: bytes) -> None:
    """HistoryError unless the existing file is a gputui history: marked by APPLICATION_ID, or written
    before the mark (schema 1: gputui's samples table and nothing else). Only read, through the file's
    header and a read-only connection: a file that is not ours is left as it was, byte for byte."""
    import sqlite3  # noqa: PLC0415

    if len(header) < 100 or not header.startswith(SQLITE_MAGIC):
        raise _not_ours(path, "not an SQLite database")
    user_version, application_id = int.from_bytes(header[60:64], "big"), int.from_bytes(header[68:72], "big")
    if application_id == APPLICATION_ID:
        if user_version != SCHEMA_VERSION:
            raise HistoryError(f"history {path}: written by another gputui (schema {user_version})")
        return
    if application_id != 0:
        raise _not_ours(path, f"an SQLite database of another application: application_id {application_id:#x}")
    if user_version not in (0, SCHEMA_VERSION):
        raise _not_ours(path, f"an SQLite database with user_version {user_version}")
    try:
        with contextlib.closing(sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)) as db:
            _check_unmarked(db, path)
    except sqlite3.DatabaseError as exc:
        raise _not_ours(path, str(exc)) from None


def _check_unmarked(db: Any, path: Path) -> None:
    """An unmarked database is ours when it holds gputui's samples table (and its index) and nothing else."""
    names = {name: kind for kind, name in db.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")}
    others = sorted(name for name, kind in names.items() if kind == "table" and name != "samples")
    if others:
        raise _not_ours(path, f"it holds tables of its own: {', '.join(others)}")
    if "samples" not in names:
        raise _not_ours(path, "an SQLite database without gputui's samples table")
    columns = tuple(row[1] for row in db.execute("PRAGMA table_info(samples)"))
    extra = sorted(name for name, kind in names.items() if kind != "table" and name != "samples_by_time")
    if columns != COLUMNS or extra:
        raise _not_ours(path, "its samples table is not gputui's")


def _take(db: Any, path: Path) -> None:
    """Under the database's write lock: a new (empty) file gets the schema and the mark, one written before
    the mark gets the mark; anything else changed since _check_ours looked is refused, untouched."""
    db.execute("BEGIN IMMEDIATE")
    try:
        application_id = db.execute("PRAGMA application_id").fetchone()[0]
        user_version = db.execute("PRAGMA user_version").fetchone()[0]
        if application_id == APPLICATION_ID:
            if user_version != SCHEMA_VERSION:
                raise HistoryError(f"history {path}: written by another gputui (schema {user_version})")
            db.execute("COMMIT")
            return
        if application_id != 0 or user_version not in (0, SCHEMA_VERSION):
            raise _not_ours(path, f"an SQLite database of another application: application_id {application_id:#x}")
        elif db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
            for statement in SCHEMA:
                db.execute(statement)
        else:
            _check_unmarked(db, path)
            db.execute("CREATE INDEX IF NOT EXISTS samples_by_time ON samples (scope, t)")
        db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


# -- Prometheus ----------------------------------------------------------------------------

FULL_UTIL = 'DCGM_FI_DEV_GPU_UTIL{GPU_I_ID=""}'
MIG_ACTIVE = 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{GPU_I_ID!=""}'  # a ratio 0..1
STAT_LABEL = "gputui_stat"


def promql(window: float, threshold: float, step: float) -> str:
    """One query for the whole cluster: every GPU series' mean, peak, latest use, last time at or above the
    threshold, first time in the window and latest framebuffer, told apart by the label gputui_stat."""
    w, s = f"{int(window)}s", f"{max(1, int(step))}s"
    stats = {
        "mean": f"avg_over_time({FULL_UTIL}[{w}]) or 100 * avg_over_time({MIG_ACTIVE}[{w}])",
        "peak": f"max_over_time({FULL_UTIL}[{w}]) or 100 * max_over_time({MIG_ACTIVE}[{w}])",
        "last": f"{FULL_UTIL} or 100 * {MIG_ACTIVE}",  # none when the series is stale: the GPU's use now is not known
        "busy_at": f"max_over_time(timestamp({FULL_UTIL} >= {threshold:g})[{w}:{s}])"
                   f" or max_over_time(timestamp({MIG_ACTIVE} >= {threshold / 100:g})[{w}:{s}])",
        "first": f"min_over_time(timestamp({FULL_UTIL})[{w}:{s}]) or min_over_time(timestamp({MIG_ACTIVE})[{w}:{s}])",
        "fb": "DCGM_FI_DEV_FB_USED",
    }
    return " or ".join(f'label_replace(({expr}), "{STAT_LABEL}", "{name}", "", "")' for name, expr in stats.items())


def _attributed(labels: dict[str, str]) -> tuple[str, str] | None:
    """The workload pod of a series: the exporter's labels, renamed exported_* by a Prometheus whose target has its own."""
    pod = labels.get("exported_pod") or labels.get("pod")
    namespace = labels.get("exported_namespace") or labels.get("namespace")
    return (namespace, pod) if pod and namespace else None


def parse_answer(body: bytes, now: float, window: float, threshold: float) -> dict[tuple[str, str], list[DeviceFigures]]:
    """Prometheus' answer to `promql` as figures per (namespace, pod); ValueError with the reason if it is not one."""
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ValueError("the answer is not JSON") from None
    if not isinstance(answer, dict) or answer.get("status") != "success":
        raise ValueError(str((answer or {}).get("error") or "the answer is not a success") if isinstance(answer, dict) else "not a Prometheus answer")
    stats: dict[tuple[str, str, str, str], dict[str, float]] = {}
    for item in (answer.get("data") or {}).get("result") or []:
        labels = item.get("metric") or {}
        owner = _attributed(labels)
        try:
            value = float(item["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        if owner is None or math.isnan(value) or not labels.get("UUID"):
            continue
        device = (*owner, labels["UUID"], labels.get("GPU_I_ID", ""))
        stats.setdefault(device, {}).setdefault(labels.get(STAT_LABEL, ""), value)  # several scrape jobs: the first
    out: dict[tuple[str, str], list[DeviceFigures]] = {}
    for (namespace, pod, _, _), found in sorted(stats.items()):
        if not all(k in found for k in ("mean", "peak", "last")):
            continue  # no sample in the window, or none now (a stale series): its use now is not known
        # The subqueries look every `step` seconds: a series younger than that has no first time yet, and
        # use since their last look none either; both count from now (covered 0 s, idle at least 0 s).
        first = max(found.get("first", now), now - window)
        busy_at = found.get("busy_at")
        if found["last"] >= threshold:
            idle_from, exact = None, False
        elif busy_at is not None and busy_at >= first:
            idle_from, exact = busy_at, True
        elif found["peak"] >= threshold:
            idle_from, exact = now, False
        else:
            idle_from, exact = first, False
        out.setdefault((namespace, pod), []).append(
            DeviceFigures(found["mean"], found["peak"], idle_from, exact, found.get("fb"), max(0.0, now - first), now))
    return out


class PrometheusSource:
    """Where Prometheus answers (kube/prometheus.py's client): a service through the API server's proxy, or a URL."""

    def __init__(self, api: Client, where: str) -> None:
        self.where = where
        try:
            self.prometheus = Prometheus(where, api)
        except PrometheusError:
            raise ValueError(f"prometheus {where!r}: expected NAMESPACE/SERVICE[:PORT] or an http(s):// URL") from None
        self.describe = f"Prometheus {where}"
        self.retry_at = 0.0  # loop time before which a failed Prometheus is not asked again

    @property
    def requests(self) -> int:
        return self.prometheus.requests

    @property
    def absent(self) -> bool:
        """The last answer was 404: no such service (or path)."""
        return self.prometheus.absent

    async def query(self, now: float, window: float, threshold: float) -> dict[tuple[str, str], list[DeviceFigures]]:
        """Every pod's GPUs' figures; ValueError with one line saying why there are none."""
        step = max(1.0, window / 360)
        try:
            body = await self.prometheus.answer(promql(window, threshold, step), now, PROMETHEUS_TIMEOUT - 5)
        except PrometheusError as exc:
            raise ValueError(str(exc)) from None
        try:
            return parse_answer(body, now, window, threshold)
        except ValueError as exc:
            raise ValueError(f"{self.describe}: {exc}") from None

    async def close(self) -> None:
        await self.prometheus.close()


# -- the tracker ---------------------------------------------------------------------------

class IdleTracker:
    """The source in use and the latest figures (`view`)."""

    def __init__(self, api: Client, settings: IdleSettings = IdleSettings(), *, scope: str = "", clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.clock = clock
        self.store = SampleStore(settings.window, settings.threshold, history=settings.history, scope=scope)
        self.prometheus = PrometheusSource(api, settings.prometheus) if settings.prometheus else None
        self.view: IdleView | None = None
        self.note: str | None = None  # why the last refresh did not use Prometheus
        self._lock = asyncio.Lock()

    def follow(self, poller: MetricsPoller) -> Callable[[], None]:
        """Take every reading the poller makes as samples, until the returned unhook() is called."""
        def take(node: str, readings: Sequence[GpuReading], at: float) -> None:
            self.store.add(readings, at)

        poller.on_readings.append(take)
        # Read slowly (the config's [metrics] interval), a node's samples are further apart: not gaps.
        self.store.stale_after = max(STALE_AFTER, 2 * poller.background_interval)

        def unhook() -> None:
            if take in poller.on_readings:
                poller.on_readings.remove(take)

        return unhook

    async def open(self) -> None:
        await self.store.open()

    async def refresh(self, pods: Iterable[Holder]) -> IdleView:
        """The figures of these pods now: from Prometheus when it answers, else from the samples."""
        pods = list(pods)
        async with self._lock:
            now = self.clock()
            settings, view = self.settings, None
            source = self.prometheus
            loop = asyncio.get_running_loop()
            if source is not None and loop.time() >= source.retry_at:
                try:
                    found = await source.query(now, settings.window, settings.threshold)
                    figures = await _sliced(pods, lambda p: pod_figures(p, found.get((p.namespace, p.name), []), now))
                    view = IdleView(PROMETHEUS, settings.window, max([0.0, *(f.covered_s for f in figures)]),
                                    tuple(sorted(figures, key=worst_first)), now)
                    self.note = None
                except ValueError as exc:
                    source.retry_at = loop.time() + PROMETHEUS_RETRY
                    self.note = f"{exc}; using gputui's own exporter samples"
            if view is None:
                figures = await _sliced(pods, lambda p: self.store.figures(p, now))
                view = IdleView(EXPORTERS, settings.window, max([0.0, *(f.covered_s for f in figures)]),
                                tuple(sorted(figures, key=worst_first)), now, self.note)
            self.view = view
            await self.store.flush(now)
            return view

    async def close(self) -> None:
        await self.store.close()
        if self.prometheus is not None:
            await self.prometheus.close()


async def _sliced(pods: list[Holder], figures: Callable[[Holder], PodIdle]) -> list[PodIdle]:
    """Every pod's figures, yielding to the event loop between slices (tens of thousands of pods)."""
    out: list[PodIdle] = []
    for start in range(0, len(pods), SLICE):
        if start:
            await asyncio.sleep(0)
        out.extend(figures(p) for p in pods[start:start + SLICE])
    return out
