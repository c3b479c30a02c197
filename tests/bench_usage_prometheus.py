"""Benchmark of `gputui report --usage` over days of a big cluster's history (a script, not a test).

    python tests/bench_usage_prometheus.py --nodes 200 --days 30          # 1,600 GPUs, a month
    python tests/bench_usage_prometheus.py --nodes 1000 --days 7 --no-rules
    python tests/bench_usage_prometheus.py --nodes 50 --days 30 --replicate 20   # then the rules as 1,000 nodes hold them
    python tests/bench_usage_prometheus.py --nodes 50 --days 30 --replicate 20 --no-raw --by node --by model
    python tests/bench_usage_prometheus.py --smoke                       # 2 nodes, 2 hours (the test suite runs this)

A synthetic history is backfilled into Debian's `prometheus` with `promtool tsdb create-blocks-from openmetrics`:
`--nodes` nodes of 8 GPUs (H100 and A100 boards), each running jobs back to back in lanes of 8, 4, 2 or 1 GPUs,
a job lasting from 1 hour to 4 days (log-uniform) with up to 3 hours between jobs, over 30 namespaces and 12
teams; a sixth of the pods idle, a tenth stopping half way. The series' names and labels are the simulator's own
(gputui/sim/ksm.py's and gputui/sim/dcgm.py's expositions of each node and pod), their values the bench's: each
pod's `kube_pod_container_resource_requests` (its GPU resource only), `kube_pod_status_phase{phase="Running"}` (not
the four other phases, which no usage query reads) and `kube_pod_labels` while it runs; each node's
`kube_node_labels` and `kube_node_status_capacity`; each GPU's `DCGM_FI_DEV_GPU_UTIL`, naming the pod that holds
it, every `--scrape` seconds (default 300 s: the subqueries read one sample per series per step whatever the
scrape interval; a shorter one only adds chunks to decode and to backfill). Blocks span up to 162 h, as
Prometheus' compactor builds them for a retention of 70 days.

Then gputui's usage queries (kube/usage.py, as `report --usage --since Nd --by namespace|label:team|node|model`
asks them) run against the history's end, on the raw series, then (unless --no-rules) with `gputui
prometheus-rules --label team`' usage groups backfilled by `promtool tsdb create-blocks-from rules` (the fine group evaluated
every `--rule-interval` seconds, default the scrape interval: the queries read the same number of samples as
from 1-minute rules; the rules that read other rules in later passes, as promtool asks; the hourly group from
range queries, 17 s past each hour; `--no-label-rules`: without `--label team`, so that label:team joins the
per-pod rules to the pods' labels). Per grouping: the seconds until every figure is known, the samples Prometheus
read (`stats=all`: totalQueryableSamples, and peakSamples, the most held at once), the bytes of the answers, the
rows, and each query's seconds (the presence query first). By node and model, the rules are asked twice: `rules`,
with the grouping's own rules (the per-node and per-model GPUs allocated, the per-node hourly GPU-hours), and
`older`, as a rules file without them reads them (the presence query's answer for them dropped): by model, the peak
from the per-node rules joined to the nodes' models at each step; by node, the 1-minute rules at the window's step.
`--timeout` lets a query run past gputui's 60 s. Every pod of the history has a team and every node a model: a row
of no team or model (group "") is a wrong figure, and the bench ends in error. (2026-12-03, the second command
above, 2-core machine at load 1.7 to 2.3, the 1,000-node copies: by node 1.7 to 2.0 s, 17 to 18 s as an older file
reads them; by model 0.1 s, 12 s; the README's usage section has the rest.)

`--replicate K`: the rules' series that the long window's queries read (the hourly rules, the per-pod, per-node
and per-node-and-namespace GPUs allocated, the nodes' labels; when node is asked, the 1-minute GPU-hours per node
and namespace that `older` reads; the raw series and the other 1-minute GPU-hours only for the history's last two
hours, for the presence query) are dumped (`promtool tsdb dump`) and written K times into a Prometheus of their
own, nodes, pods, uids and GPUs named apart in each copy, the per-namespace, per-model and per-team rules once at K
times their value: what the rules would hold for K times the nodes, each running the same jobs. The same queries
are asked of it, and each figure checked to be K times the one cluster's (by node, each node's copies summed). (Backfilling
K times the raw history and evaluating the rules over it is what this spares: at 1,000 nodes and 30 days, some
200 million raw samples.)
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from collections.abc import Iterator
from typing import IO, Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gputui.kube import usage as u  # noqa: E402
from gputui.kube.prometheus import TIMEOUT  # noqa: E402
from gputui.sim.exporters import dcgm, ksm  # noqa: E402
from tests import prometheus as prom  # noqa: E402

GPUS = 8
MODELS = (("NVIDIA-H100-80GB-HBM3", "81559"), ("NVIDIA-A100-SXM4-80GB", "81920"))
LANES = ((8,), (4, 4), (4, 2, 2), (2, 2, 2, 2), (4, 2, 1, 1), (1,) * 8)
NAMESPACES, TEAMS = 30, 12
SHORTEST, LONGEST, LONGEST_GAP = 3600.0, 4 * 86400.0, 3 * 3600.0
ALLOWLIST = {"pods": ["team"], "nodes": ["nvidia.com/gpu.product"]}
KSM_KEPT = {"kube_pod_container_resource_requests": 'resource="nvidia_com_gpu"', "kube_pod_status_phase": 'phase="Running"',
            "kube_pod_labels": "", "kube_node_labels": "", "kube_node_status_capacity": ""}
GROUPINGS = ("namespace", "label:team", "node", "model")
LABELS = ("team",)  # prometheus-rules --label team: label:team reads rules of its own
COARSE_OFFSET = 17  # seconds past the hour that the hourly rules are evaluated at


@dataclass
class Job:
    pod: dict[str, Any]
    start: float
    end: float
    gpus: tuple[int, ...]  # the node's GPU indexes it holds
    util: float  # percent while it works
    stops: float | None  # when it stops working (0 % from then)


@dataclass
class Node:
    obj: dict[str, Any]
    jobs: list[Job] = field(default_factory=list)


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def plan(nodes: int, begin: float, end: float, seed: int = 25) -> list[Node]:
    """Every node and the jobs it ran over [begin, end)."""
    rng = random.Random(seed)
    out = []
    serial = 0
    for n in range(nodes):
        name = f"gpu-{n:04d}"
        product, memory = MODELS[n % len(MODELS)]
        node = Node({"kind": "Node", "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "nvidia.com/gpu.product": product, "nvidia.com/gpu.memory": memory,
            "nvidia.com/gpu.count": str(GPUS)}},
            "spec": {}, "status": {"capacity": {"cpu": "192", "memory": "2Ti", "pods": "110", "nvidia.com/gpu": str(GPUS)},
                                   "allocatable": {"cpu": "190", "memory": "1990Gi", "pods": "110", "nvidia.com/gpu": str(GPUS)}}})
        first = 0
        for size in rng.choice(LANES):
            gpus = tuple(range(first, first + size))
            first += size
            at = begin - rng.uniform(0, LONGEST)  # a job under way when the history begins
            while at < end:
                length = math.exp(rng.uniform(math.log(SHORTEST), math.log(LONGEST)))
                if at + length > begin:
                    serial += 1
                    ns = rng.randrange(NAMESPACES)
                    kind = rng.random()
                    pod = {"kind": "Pod", "metadata": {
                        "name": f"job-{serial:07d}-worker-0", "namespace": f"ml-{ns:02d}", "uid": str(uuid.UUID(int=rng.getrandbits(128))),
                        "labels": {"team": f"team-{ns % TEAMS:02d}", "job-name": f"job-{serial:07d}"}, "creationTimestamp": iso(at)},
                        "spec": {"nodeName": name, "containers": [{"name": "worker", "resources": {
                            "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": str(size)},
                            "limits": {"nvidia.com/gpu": str(size)}}}]},
                        "status": {"phase": "Running", "startTime": iso(at)}}
                    node.jobs.append(Job(pod, at, at + length, gpus, rng.uniform(0, 3) if kind < 1 / 6 else rng.uniform(40, 98),
                                         at + length / 2 if 1 / 6 <= kind < 1 / 6 + 0.1 else None))
                at += length + (rng.uniform(0, LONGEST_GAP) if rng.random() < 0.7 else 0)
        out.append(node)
    return out


def grid(start: float, end: float, begin: int, end_at: int, step: int) -> range:
    """The scrape times within [start, end) of the history [begin, end_at]."""
    first = max(begin, begin + math.ceil((start - begin) / step) * step)
    return range(first, min(end_at + 1, math.ceil(end)), step)


def kept(text: str) -> dict[str, list[str]]:
    """An exposition's lines (without their value) of the families and series the history keeps."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        name = line.split("{", 1)[0]
        if name in KSM_KEPT and KSM_KEPT[name] in line and line.endswith(" 1" if name == "kube_pod_status_phase" else ""):
            out.setdefault(name, []).append(line)
    return out


def write_history(nodes: list[Node], begin: int, end: int, step: int, out: IO[str]) -> int:
    """The OpenMetrics text of the history, family by family, series by series; the samples written."""
    samples = 0
    families: dict[str, list[tuple[str, range]]] = {name: [] for name in KSM_KEPT}  # constant series: line, times
    whole = range(begin, end + 1, step)
    for node in nodes:
        for name, lines in kept(ksm.exposition([node.obj], [], ALLOWLIST)).items():
            families[name] += [(line, whole) for line in lines]
        for job in node.jobs:
            times = grid(job.start, job.end, begin, end, step)
            for name, lines in kept(ksm.exposition([], [job.pod], ALLOWLIST)).items():
                families[name] += [(line, times) for line in lines]
    for name, series in families.items():
        out.write(f"# TYPE {name} gauge\n")
        for line, times in series:
            out.write("".join(f"{line} {t}\n" for t in times))
            samples += len(times)

    out.write("# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n")
    rng = random.Random(1)
    for node in nodes:
        # The exporter's labels of each GPU (no pod holds it), from the simulator's exporter.
        base = {}
        for line in dcgm.exposition(node.obj, [], float(begin)).splitlines():
            if line.startswith("DCGM_FI_DEV_GPU_UTIL{"):
                labels = line.split("{", 1)[1].rsplit("}", 1)[0]
                base[int(labels.split('gpu="', 1)[1].split('"', 1)[0])] = labels
        held: dict[int, list[Job]] = {gpu: [] for gpu in base}
        for job in node.jobs:
            for gpu in job.gpus:
                held[gpu].append(job)
        for gpu, labels in base.items():
            free_from = begin
            for job in sorted(held[gpu], key=lambda j: j.start):
                for t in grid(free_from, job.start, begin, end, step):
                    out.write(f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} 0 {t}\n")
                    samples += 1
                meta = job.pod["metadata"]
                line = f'DCGM_FI_DEV_GPU_UTIL{{{labels},container="worker",namespace="{meta["namespace"]}",pod="{meta["name"]}"}}'
                for t in grid(job.start, job.end, begin, end, step):
                    working = job.stops is None or t < job.stops
                    value = min(100, max(0, round(job.util + rng.uniform(-8, 8)))) if working else 0
                    out.write(f"{line} {value} {t}\n")
                    samples += 1
                free_from = max(free_from, job.end)
            for t in grid(free_from, end + 1, begin, end, step):
                out.write(f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} 0 {t}\n")
                samples += 1
    out.write("# EOF\n")
    return samples


class Server:
    """Debian's prometheus on a data directory and nothing to scrape, keeping every block."""

    def __init__(self, workdir: Path) -> None:
        self.workdir, self.data = workdir, workdir / "data"
        self.data.mkdir(parents=True, exist_ok=True)
        (workdir / "prometheus.yml").write_text("global: {evaluation_interval: 1m}\nscrape_configs: []\n")
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self, lookback: float | None = None) -> None:
        """Started, with Prometheus' look-back (5 minutes) or `lookback` seconds."""
        port = prom.free_port()
        self.url = f"http://127.0.0.1:{port}"
        assert prom.BINARY is not None
        self.process = subprocess.Popen(
            [prom.BINARY, f"--config.file={self.workdir}/prometheus.yml", f"--storage.tsdb.path={self.data}",
             "--storage.tsdb.retention.time=3650d", f"--web.listen-address=127.0.0.1:{port}",
             *([f"--query.lookback-delta={round(lookback * 1000)}ms"] if lookback else [])],
            stdout=subprocess.DEVNULL, stderr=(self.workdir / "prometheus.log").open("a"))
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=5) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                time.sleep(0.02)
        raise SystemExit(f"prometheus did not start: {(self.workdir / 'prometheus.log').read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=60)
            self.process = None

    def series_at(self, at: int) -> int:
        query = urllib.parse.urlencode({"query": 'count({__name__=~".+"})', "time": at})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{query}", timeout=600) as resp:
            result = json.load(resp)["data"]["result"]
        return int(float(result[0]["value"][1])) if result else 0


class Counting(prom.WithoutRules):
    """gputui's client, keeping each answer's seconds, samples read, peak samples and bytes; the rules of `hidden` as
    a rules file older than them (none)."""

    def __init__(self, where: str, timeout: float = TIMEOUT, hidden: tuple[str, ...] = ()) -> None:
        super().__init__(where, hidden)
        self.timeout = timeout
        self.answers: list[tuple[float, int, int, int]] = []

    async def answer(self, expr: str, at: float, timeout: float = TIMEOUT, *, stats: bool = False) -> bytes:
        started = time.perf_counter()
        body = await super().answer(expr, at, self.timeout, stats=stats)
        samples = ((orjson.loads(body).get("data") or {}).get("stats") or {}).get("samples") or {}
        self.answers.append((time.perf_counter() - started, int(samples.get("totalQueryableSamples") or 0),
                             int(samples.get("peakSamples") or 0), len(body)))
        return body


async def ask(url: str, settings: u.UsageSettings, at: float, timeout: float = TIMEOUT, hidden: tuple[str, ...] = ()) -> dict[str, Any]:
    source = Counting(url, timeout, hidden)
    started = time.perf_counter()
    try:
        view = await u.usage(source, settings, now=at)
        error = None
    except u.UsageError as exc:
        view, error = None, str(exc)
    finally:
        await source.close()
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "samples": sum(a[1] for a in source.answers), "peak": max((a[2] for a in source.answers), default=0),
            "bytes": sum(a[3] for a in source.answers), "queries": [round(a[0], 2) for a in source.answers], "view": view, "error": error}


WRONG: list[str] = []  # figures the history says are wrong (main exits with them)


def report(by: str, how: str, r: dict[str, Any]) -> None:
    view = r["view"]
    if view is None:
        print(f"  {by:<11} {how:<5} failed after {r['seconds']:.2f} s: {r['error']}", flush=True)
        return
    allocated = sum(row.allocated_h for row in view.rows)
    print(f"  {by:<11} {how:<5} {r['seconds']:7.2f} s  {r['samples']:>12,} samples  peak {r['peak']:>10,}  {r['bytes'] / 1e3:8.1f} kB  "
          f"{len(view.rows):>5} rows  {allocated:>12,.0f} GPU-h  ({view.method_words}; per query {r['queries']} s)", flush=True)
    # Every pod of the history has a team and every node a model: a group "" holds GPUs the figures lost the group of.
    for row in view.rows:
        if by != "namespace" and row.group == "":
            WRONG.append(f"{by} {how} ({view.method_words}): a group \"\" of {row.resource}, {row.allocated_h:.2f} GPU-h, "
                         f"peak {row.peak:g}, though every pod has its team and every node its model")
            print(f"    WRONG: {WRONG[-1]}", flush=True)


def coarse_history(url: str, group: dict[str, Any], begin: int, end: int) -> str:
    """The hourly rules' samples over the history as OpenMetrics, from range queries at their interval (promtool
    2.42's `create-blocks-from rules` writes no block for a group evaluated every 30 minutes or more)."""
    step = int(u.COARSE_INTERVAL)
    # Past the hour by COARSE_OFFSET, as a Prometheus evaluates a group at an offset of its own: on the hour, each
    # evaluation's hour would hold a fine sample of the hour before too (Prometheus 2's ranges include their start).
    first = (begin // step + 1) * step + COARSE_OFFSET
    out = []
    typed = set()
    for rule in group["rules"]:
        if rule["record"] not in typed:  # one family per name, whatever the rules of that name (a label key's each)
            out.append(f"# TYPE {rule['record'].replace(':', '_')} gauge")  # the type line names no colon; the samples do
            typed.add(rule["record"])
        body = urllib.parse.urlencode({"query": rule["expr"], "start": first, "end": end, "step": step, "timeout": "600s"}).encode()
        with urllib.request.urlopen(f"{url}/api/v1/query_range", body, timeout=900) as resp:
            for series in json.load(resp)["data"]["result"]:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted({**series["metric"], **rule.get("labels", {})}.items()))
                out += [f"{rule['record']}{{{labels}}} {value} {t}" for t, value in series["values"]]
    return "\n".join(out) + "\n# EOF\n"


def passes(rules: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The rules in the passes promtool asks for: a rule that reads another goes in a pass after that one's."""
    depth: dict[str, int] = {}
    for rule in rules:  # a rule reads only those before it in its group
        reads = [d for name, d in depth.items() if re.search(rf"(?<![\w:]){re.escape(name)}(?![\w:])", rule["expr"])]
        depth[rule["record"]] = 1 + max(reads, default=-1)
    return [[r for r in rules if depth[r["record"]] == n] for n in range(max(depth.values()) + 1)]


def backfill_rules(server: Server, workdir: Path, begin: int, end: int, rule_interval: int, labels: tuple[str, ...] = LABELS,
                   scrape: int = 0) -> float:
    """The usage groups of `gputui prometheus-rules --label` each of `labels`, evaluated over the history (its samples
    every `scrape` seconds): the fine group by promtool, in passes (a rule that reads another after it, as promtool
    asks), the hourly group from range queries. Returns the seconds it took.

    The passes evaluate at the same times (one file: promtool times a group's evaluations by its name and file) and,
    where the samples are no further apart than the rule interval, with a look-back of that interval less a
    millisecond: a rule reads an earlier pass's series of its own evaluation, not the one before. So a pod's per-pod
    series end as in a live Prometheus, which evaluates a group's rules one after another at one time, a series the
    evaluation no longer has ending there (its stale marker). With the 5-minute look-back, each pass would keep a pod's
    GPUs 5 minutes past the pass before it, its labels long gone from the label rules' look at them."""
    assert prom.PROMTOOL is not None
    fine, coarse = u.rule_groups(fine=float(rule_interval), labels=labels)[:2]
    lookback = rule_interval - 0.001 if scrape and rule_interval >= scrape else None
    started = time.perf_counter()
    server.stop()
    server.start(lookback)
    groups = [*({**fine, "rules": rules} for rules in passes(fine["rules"])), coarse]
    for n, group in enumerate(groups):
        out = workdir / f"rules-{n}"
        if group is coarse:
            (workdir / "coarse.om").write_text(coarse_history(server.url, coarse, begin, end))
            subprocess.run([prom.PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "-q", "--max-block-duration=162h",
                            str(workdir / "coarse.om"), str(out)], check=True, stdout=subprocess.DEVNULL)
        else:
            (workdir / "fine.yml").write_text(json.dumps({"groups": [group]}))
            subprocess.run([prom.PROMTOOL, "tsdb", "create-blocks-from", "rules", "-q", f"--url={server.url}", f"--start={begin}",
                            f"--end={end + 1}", f"--output-dir={out}", str(workdir / "fine.yml")], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        server.stop()
        for block in out.iterdir():
            shutil.move(str(block), server.data / block.name)
        server.start(lookback if n + 2 < len(groups) else None)  # a fine pass next; else the hourly group, the queries: as users run them
    return time.perf_counter() - started


# What the rules' queries over a long window read (kube/usage.py: the hourly rules by namespace, model, node and label,
# the per-pod, per-node and per-node-and-namespace GPUs allocated at the window's step, the nodes' models) and, over
# the last hours, what `coverage` and `pod_labels_at` read.
WHOLE = (u.R_ALLOCATED, u.R_POD_ALLOCATED, *u.R_POD_HOURS_1H.values(), u.R_POD_LABELS_1H, "kube_node_labels",
         u.R_GROUP_ALLOCATED["node"], *u.R_NODE_HOURS_1H.values())
# Per namespace, model and team: K copies are K times the value (the label's and the model's GPUs allocated for their peak).
SUMMED = (*u.R_HOURS_1H.values(), *u.R_LABEL_HOURS_1H.values(), u.R_LABEL_ALLOCATED, u.R_GROUP_ALLOCATED["model"])
LAST_HOURS = ("kube_pod_container_resource_requests", "kube_pod_status_phase", "DCGM_FI_DEV_GPU_UTIL", "kube_pod_labels",
              *u.R_HOURS.values(), *u.R_POD_HOURS.values(), *u.R_LABEL_HOURS.values())
SCALED = {*SUMMED, *u.R_LABEL_HOURS.values()}  # written once, K times their value
# What a rules file older than the per-node and per-model rules answers by node over a long window: the 1-minute
# GPU-hours per node and namespace at the window's step (copied whole when node is asked).
OLDER = ("group_rules_1m", "node_rules_1h")  # the presence query's names of those rules
OLDER_BY_NODE = tuple(u.R_HOURS.values())
DUMPED = re.compile(r'^\{(.*)\} (\S+) (\d+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def dump(data: Path, names: tuple[str, ...], begin: int, end: int) -> Iterator[tuple[dict[str, str], list[tuple[str, int]]]]:
    """Each series of `names` in [begin, end] (seconds) as promtool tsdb dump writes them: labels, (value, ms) samples."""
    assert prom.PROMTOOL is not None
    match = "{__name__=~\"" + "|".join(re.escape(n) for n in names) + "\"}"
    with subprocess.Popen([prom.PROMTOOL, "tsdb", "dump", f"--match={match}", f"--min-time={begin * 1000}", f"--max-time={end * 1000}",
                           str(data)], stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        current: tuple[str, dict[str, str], list[tuple[str, int]]] | None = None
        for line in proc.stdout:
            m = DUMPED.match(line.rstrip("\n"))
            if m is None:
                continue
            if current is None or current[0] != m[1]:
                if current is not None:
                    yield current[1], current[2]
                current = (m[1], dict(LABEL.findall(m[1])), [])
            current[2].append((m[2], int(m[3])))
        if current is not None:
            yield current[1], current[2]
    if proc.returncode:
        raise SystemExit(f"promtool tsdb dump failed ({proc.returncode})")


def copy_of(labels: dict[str, str], i: int, nodes: int) -> dict[str, str]:
    """The labels of the i-th copy of the cluster: its nodes (and their GPUs), pods and uids named apart."""
    if i == 0:
        return labels
    out = dict(labels)
    for key in ("node", "Hostname", "hostname", "kubernetes_io_hostname", "label_kubernetes_io_hostname"):
        if key in out and out[key].startswith("gpu-"):
            out[key] = f"gpu-{i * nodes + int(out[key][4:]):04d}"
    for key in ("pod", "uid", "UUID"):
        if out.get(key):
            out[key] = f"{out[key]}-c{i:02d}"
    return out


def write_copies(data: Path, out: IO[str], k: int, nodes: int, begin: int, end: int, by_node: bool) -> int:
    """K copies of the rule-path series (WHOLE, SUMMED over the history, LAST_HOURS over its last two hours; when
    `by_node`, OLDER_BY_NODE over the history) as OpenMetrics; the samples written."""
    samples = 0
    whole, last = (WHOLE + OLDER_BY_NODE, tuple(n for n in LAST_HOURS if n not in OLDER_BY_NODE)) if by_node else (WHOLE, LAST_HOURS)
    for names, since in ((whole, begin), (SUMMED, begin), (last, end - 7200)):
        by_name: dict[str, list[tuple[dict[str, str], list[tuple[str, int]]]]] = {}
        for labels, values in dump(data, names, since, end):
            by_name.setdefault(labels["__name__"], []).append((labels, values))
        for name, series in by_name.items():
            out.write(f"# TYPE {name.replace(':', '_')} gauge\n")  # the type line names no colon; the samples do
            copies = [0] if name in SCALED else range(k)
            scale = k if name in SCALED else 1
            for labels, values in series:
                for i in copies:
                    text = ",".join(f'{key}="{value}"' for key, value in copy_of(labels, i, nodes).items() if key != "__name__")
                    out.write("".join(f"{name}{{{text}}} {float(v) * scale if scale != 1 else v} {ms / 1000:.3f}\n" for v, ms in values))
                    samples += len(values)
    out.write("# EOF\n")
    return samples


def since(window: int) -> str:
    """The window as `report --usage --since` takes it: 30d, 2h, 1d12h."""
    days, rest = divmod(window, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    return "".join(f"{n}{unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "m"), (seconds, "s")) if n) or "0s"


def rules_settings(args: argparse.Namespace, window: int, by: str, rule_interval: int) -> u.UsageSettings:
    """What the queries on the rules ask. The smoke's window is hours, not days: it reads the hourly rules, as a
    window of a day or more does."""
    coarse_after = min(u.COARSE_AFTER, window) if args.smoke else u.COARSE_AFTER
    return u.UsageSettings(window=window, by=by, fine_interval=float(rule_interval), coarse_after=coarse_after)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--scrape", type=int, default=300, help="seconds between the history's samples")
    parser.add_argument("--rule-interval", type=int, default=0, help="the fine rules' interval (default: --scrape)")
    parser.add_argument("--no-rules", action="store_true")
    parser.add_argument("--by", action="append", choices=GROUPINGS, help="the groupings asked (default: all four)")
    parser.add_argument("--workdir", help="keep the data here (default: a temporary directory)")
    parser.add_argument("--smoke", action="store_true", help="2 nodes, 2 hours")
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help=f"each query's (default gputui's, {TIMEOUT:g} s)")
    parser.add_argument("--no-raw", action="store_true", help="ask the rules only")
    parser.add_argument("--no-label-rules", action="store_true",
                        help="the rules without the team label's own (no --label team): label:team joins the per-pod rules to the pods' labels")
    parser.add_argument("--replicate", type=int, default=0, metavar="K",
                        help="then K copies of what the rules' queries read (K times --nodes), asked again (every grouping)")
    args = parser.parse_args()
    if args.smoke:
        args.nodes, args.days = 2, 2 / 24  # a node of each model; the hourly rules read all the same
    if prom.BINARY is None or prom.PROMTOOL is None:
        raise SystemExit(prom.MISSING)
    rule_interval = args.rule_interval or args.scrape
    window = int(args.days * 86400)
    end = int(time.time()) // args.scrape * args.scrape
    begin = end - window
    with tempfile.TemporaryDirectory(prefix="gputui-bench-usage-") as tmp:
        workdir = Path(args.workdir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        nodes = plan(args.nodes, begin, end)
        pods = sum(len(n.jobs) for n in nodes)
        history = workdir / "history.om"
        with history.open("w") as out:
            samples = write_history(nodes, begin, end, args.scrape, out)
        written = time.perf_counter() - started
        print(f"history: {args.nodes} nodes, {args.nodes * GPUS} GPUs, {pods:,} pods over {since(window)}, a sample every "
              f"{args.scrape} s: {samples:,} samples, {history.stat().st_size / 1e9:.2f} GB of OpenMetrics in {written:.0f} s", flush=True)
        started = time.perf_counter()
        server = Server(workdir / "prometheus")
        subprocess.run([prom.PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "-q", "--max-block-duration=162h",
                        str(history), str(server.data)], check=True, stdout=subprocess.DEVNULL)
        history.unlink()
        print(f"backfill (promtool tsdb create-blocks-from openmetrics): {time.perf_counter() - started:.0f} s, "
              f"{sum(f.stat().st_size for f in server.data.rglob('*') if f.is_file()) / 1e6:.0f} MB of blocks", flush=True)
        server.start()
        try:
            print(f"Prometheus: {server.series_at(end):,} series at the history's end", flush=True)
            groupings = args.by or list(GROUPINGS)
            print(f"report --usage --since {since(window)}, at the history's end ({args.timeout:g} s query timeout):", flush=True)
            for by in [] if args.no_raw else groupings:
                report(by, "raw", asyncio.run(ask(server.url, u.UsageSettings(window=window, by=by, use_rules=False), end, args.timeout)))
            if not args.no_rules:
                took = backfill_rules(server, workdir, begin, end, rule_interval, () if args.no_label_rules else LABELS, args.scrape)
                print(f"rules backfilled (promtool tsdb create-blocks-from rules, fine every {rule_interval} s): {took:.0f} s, "
                      f"{len(list(server.data.iterdir()))} entries in the data directory", flush=True)
                views = {}
                for by, how in variants(groupings):
                    r = asyncio.run(ask(server.url, rules_settings(args, window, by, rule_interval), end, args.timeout,
                                        OLDER if how == "older" else ()))
                    report(by, how, r)
                    views[(by, how)] = r["view"]
        finally:
            server.stop()
        if args.replicate and not args.no_rules:
            replicated(server, workdir, args, views, begin, end, window, rule_interval)
    if WRONG:
        raise SystemExit("wrong figures:\n" + "\n".join(WRONG))


FIGURES = ("allocated_h", "used_h", "measured_h", "idle_h", "shared_h", "peak")


def variants(groupings: list[str]) -> list[tuple[str, str]]:
    """Each grouping from the rules; by node and model also as a rules file older than their own rules reads them
    ("older": without OLDER)."""
    return [(by, how) for by in groupings for how in ("rules", "older") if how == "rules" or by in ("node", "model")]


def replicated(server: Server, workdir: Path, args: argparse.Namespace, views: dict[tuple[str, str], Any], begin: int, end: int,
               window: int, rule_interval: int) -> None:
    """The rules' series the long window's queries read, K times over (nodes, pods and GPUs named apart; the
    per-namespace and per-model hourly rules K times their value) in a Prometheus of their own, asked again: each
    figure K times the one cluster's."""
    k = args.replicate
    started = time.perf_counter()
    copies = workdir / "copies.om"
    with copies.open("w") as out:
        samples = write_copies(server.data, out, k, args.nodes, begin, end, any(by == "node" for by, _ in views))
    written = time.perf_counter() - started
    twin = Server(workdir / "copies")
    subprocess.run([prom.PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "-q", "--max-block-duration=162h",
                    str(copies), str(twin.data)], check=True, stdout=subprocess.DEVNULL)
    size = copies.stat().st_size
    copies.unlink()
    print(f"{k} copies of the rules' series the queries read ({k * args.nodes} nodes, {k * args.nodes * GPUS} GPUs; the raw series "
          f"only for their last two hours): {samples:,} samples, {size / 1e9:.2f} GB of OpenMetrics in {written:.0f} s, "
          f"backfilled in {time.perf_counter() - started - written:.0f} s", flush=True)
    twin.start()
    try:
        print(f"Prometheus: {twin.series_at(end):,} series at the history's end", flush=True)
        for (by, how), view in views.items():
            if view is None:
                continue
            r = asyncio.run(ask(twin.url, rules_settings(args, window, by, rule_interval), end, args.timeout, OLDER if how == "older" else ()))
            report(by, how, r)
            if r["view"] is None:
                continue
            one = {(row.group, row.resource): row for row in view.rows}
            many: dict[tuple[str, str], dict[str, float | None]] = {}  # by node, each copy's node summed into the first copy's
            for row in r["view"].rows:
                group = f"gpu-{int(row.group[4:]) % args.nodes:04d}" if by == "node" else row.group
                sums = many.setdefault((group, row.resource), {})
                for name in FIGURES:
                    a, b = getattr(row, name), sums.get(name, 0.0)
                    sums[name] = None if a is None or b is None else a + b
            assert set(one) == set(many), (by, set(one) ^ set(many))
            for key, sums in many.items():
                for name, a in sums.items():
                    b = getattr(one[key], name)
                    assert (a is None) == (b is None) and (a is None or math.isclose(a, k * b, rel_tol=1e-6, abs_tol=1e-6)), (by, key, name, a, b)
            print(f"    each figure {k} times the one cluster's" + (" (each node's copies summed)" if by == "node" else ""), flush=True)
    finally:
        twin.stop()


if __name__ == "__main__":
    main()
