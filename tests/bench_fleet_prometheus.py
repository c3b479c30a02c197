"""Benchmark of the fleet from Prometheus (a script, not a test), beside today's re-lists.

    python tests/bench_fleet_prometheus.py                       # 200 clusters of 50 nodes and 200 pods each
    python tests/bench_fleet_prometheus.py --clusters 200 --nodes 100 --pods 400
    python tests/bench_fleet_prometheus.py --smoke               # 3 clusters of 5 nodes (the test suite runs this)
    python tests/bench_fleet_prometheus.py --federated-rules --nodes 1000 --pods 20000   # the README's topology
    python tests/bench_fleet_prometheus.py --federated-rules --usage-rules --nodes 1000 --pods 20000   # and the usage rules

One simulated cluster (gputui.sim.scenarios.generated: realistic pods, a fifth of them asking for GPUs, two nodes in five
with 8 GPUs) is written as kube-state-metrics writes it (gputui.sim.exporters.ksm, with every GPU's DCGM XID series), and
served `--clusters` times by one exporter, each copy with its own `cluster` label, as a federating Prometheus
holds them; Debian's prometheus scrapes it once. Then, side by side:

- Prometheus: the fleet's rows (kube/fleet_prometheus.py, two queries on the raw series), the seconds until every
  row is known (median of the refreshes), the samples Prometheus read per refresh (its own count: `stats=all`'s
  totalQueryableSamples) and the bytes of its answers; then the same with gputui's recording rules loaded (the
  fleet's group of `gputui prometheus-rules`, evaluated every 30 s): the refresh, and the rules' own evaluation;
- today's re-list: one copy of the same cluster served by the simulator, summarised as the fleet does every 180 s
  for each cluster it does not watch (connect, list nodes and pods and the rest, take the row's figures): its
  seconds and the bytes the API server sent, and both times the number of clusters.

`--federated-rules` measures the topology the README recommends instead, which fits this machine at 1,000 nodes
and 20,000 pods a cluster where 200 copies of the raw series do not: the cluster's series in a Prometheus of its own
(`external_labels: {cluster: c000}`) with the fleet's rules loaded, every 30 s: the rules' evaluation (its
/api/v1/rules evaluationTime, `--evaluations` of them, and prometheus_rule_group_last_duration_seconds) and its
series; then what its real `/federate?match[]={__name__=~"gputui:fleet_.+"}` answers, served `--clusters` times,
each copy relabelled, to a global Prometheus scraping it as federation does (honor_labels, honor_timestamps false);
the fleet's refresh with the rules against that one; beside it, the same re-list as above. With `--usage-rules`,
that cluster's Prometheus also holds each GPU's utilisation naming the pod that holds it (the simulator's exporter)
and the pods' `team` label, and evaluates `gputui prometheus-rules --label team`'s usage groups (the hourly one every
minute, so that it runs within the bench: its ranges still an hour, holding only the run's minutes): each group's
evaluation time and its slowest rules. (2026-12-03, 2-core machine at load 2 to 3: the 1-minute group 2.74 s an
evaluation at 1,000 nodes and 2,150 GPU pods, the hourly one 0.17 s.)
"""
from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aiohttp import web  # noqa: E402

from gputui.kube import fleet as f  # noqa: E402
from gputui.kube.config import connect  # noqa: E402
from gputui.kube.fleet_prometheus import R_HEALTH, FleetQueries, PrometheusFleet  # noqa: E402
from gputui.kube.model import NODES, PODS  # noqa: E402
from gputui.kube.prometheus import Prometheus  # noqa: E402
from gputui.sim import SimCluster  # noqa: E402
from gputui.sim.scenarios import generated as synthetic  # noqa: E402
from gputui.kube import usage as u  # noqa: E402
from gputui.sim.exporters import dcgm  # noqa: E402
from gputui.sim.exporters.ksm import exposition  # noqa: E402
from tests import prometheus as prom  # noqa: E402

RELIST_INTERVAL = f.SUMMARY_INTERVAL
USAGE_LABELS = ("team",)  # --usage-rules: `gputui prometheus-rules --label team`'s usage groups


USAGE_FAMILIES = ("DCGM_FI_DEV_GPU_UTIL{", "DCGM_FI_PROF_GR_ENGINE_ACTIVE{")  # what the usage rules read of the exporters


def one_cluster(nodes: int, pods: int, usage: bool = False) -> tuple[list[dict], str]:
    """The objects, and what kube-state-metrics and the DCGM exporters would serve for them (series lines); with
    `usage`, the pods' `team` label too and each GPU's utilisation, naming the pod that holds it (the simulator's
    exporter: what the usage rules read)."""
    objects = synthetic.generate(nodes, pods)
    node_objs = [o for o in objects if o["kind"] == "Node"]
    pod_objs = [o for o in objects if o["kind"] == "Pod"]
    allowlist = {"nodes": ["nvidia.com/gpu.product"], **({"pods": list(USAGE_LABELS)} if usage else {})}
    text = exposition(node_objs, pod_objs, allowlist)
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    on_node: dict[str, list[dict]] = {}
    for pod in pod_objs:
        on_node.setdefault(pod["spec"].get("nodeName") or "", []).append(pod)
    for node in node_objs:
        gpus = int(node["status"].get("capacity", {}).get("nvidia.com/gpu", "0"))
        name = node["metadata"]["name"]
        lines += [f'DCGM_FI_DEV_XID_ERRORS{{gpu="{i}",UUID="GPU-{name}-{i}",Hostname="{name}"}} 0' for i in range(gpus)]
        if usage and gpus:
            lines += [line for line in dcgm.exposition(node, on_node.get(name, []), time.time()).splitlines() if line.startswith(USAGE_FAMILIES)]
    return objects, "\n".join(lines)


def fleet_text(series: str, clusters: int) -> bytes:
    """The series once per cluster, each line with its cluster label first."""
    parts = [re.sub(r"^(\w+)\{", rf'\1{{cluster="c{i:03d}",', series, flags=re.M) for i in range(clusters)]
    return ("\n".join(parts) + "\n").encode()


async def serve(body: bytes) -> tuple[web.AppRunner, str]:
    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = prom.free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, f"127.0.0.1:{port}"


async def refreshes_of(url: str, clusters: int, refreshes: int, use_rules: bool) -> dict:
    source = Prometheus(url)
    fleet = PrometheusFleet(source, FleetQueries(use_rules=use_rules))
    times, samples, answers = [], [], []
    try:
        for _ in range(refreshes):
            before_samples, before_bytes = source.samples, source.bytes
            started = time.perf_counter()
            rows = await fleet.refresh()
            times.append(time.perf_counter() - started)
            samples.append(source.samples - before_samples)
            answers.append(source.bytes - before_bytes)
            assert fleet.error is None and len(rows) == clusters and all(r.totals is not None for r in rows.values()), fleet.error
            assert fleet.method == ("recording rules" if use_rules else "raw series")
    finally:
        await fleet.close()
    return {"seconds": statistics.median(times), "samples": statistics.median(samples), "bytes": statistics.median(answers),
            "row": next(iter(rows.values()))}


def api(url: str, path: str) -> dict:
    with urllib.request.urlopen(f"{url}{path}", timeout=30) as resp:
        return json.load(resp)["data"]


async def from_prometheus(series: str, clusters: int, refreshes: int, workdir: Path, interval: str, rule_interval: str) -> dict:
    """Every cluster's series scraped every `interval` (a scrape that fails marks them all stale: the rules then
    record nothing until the next), the fleet's rules evaluated every `rule_interval`, and read as a refresh does."""
    body = fleet_text(series, clusters)
    runner, target = await serve(body)
    config = f"""  - job_name: federated
    honor_labels: true
    scrape_timeout: {interval}
    static_configs: [{{targets: ["{target}"]}}]
"""
    rules = json.dumps({"groups": [FleetQueries().rules(interval=rule_interval)]})
    try:
        async with prom.running(workdir, config, interval=interval, rules=rules) as server:
            await server.until(lambda: len(server.ask("count by (cluster) (kube_node_info)")) == clusters
                               and len(server.ask("count by (cluster) (gputui:fleet_health)")) == clusters, "the first scrape and rules", timeout=600)
            raw = await refreshes_of(server.url, clusters, refreshes, use_rules=False)
            recorded = await refreshes_of(server.url, clusters, refreshes, use_rules=True)
            group = next(g for g in api(server.url, "/api/v1/rules")["groups"] if g["name"] == "gputui-fleet")
            series_count = api(server.url, "/api/v1/status/tsdb")["headStats"]["numSeries"]
    finally:
        await runner.cleanup()
    return {"raw": raw, "rules": recorded, "evaluation": group["evaluationTime"], "series": series_count, "scraped": len(body)}


async def relist(objects: list[dict], workdir: Path) -> dict:
    """One cluster summarised as the fleet does for each cluster it does not watch."""
    async with SimCluster(objects, run_controllers=False) as sim:
        kubeconfig = str(sim.kubeconfig_path)
        before = sim.api_counts.bytes_sent + sim.api_counts.get_bytes
        started = time.perf_counter()
        conn = await connect(kubeconfig, None)
        try:
            fleet = f.Fleet([], lambda context: connect(kubeconfig, context))
            async with fleet.model_of(conn) as model:
                assert await model.wait_synced(600, kinds=(NODES, PODS))
                row = await f.figures("one", model, time.time())
        finally:
            await conn.close()
        seconds = time.perf_counter() - started
        return {"seconds": seconds, "bytes": sim.api_counts.bytes_sent + sim.api_counts.get_bytes - before, "row": row}


FLEET_RULES = '{__name__=~"gputui:fleet_.+"}'


async def rule_evaluations(server: prom.Prometheus, count: int, name: str = "gputui-fleet") -> list[float]:
    """The group's next `count` evaluation times once the fleet group's output holds a row (Prometheus' /api/v1/rules
    evaluationTime, each a new lastEvaluation)."""
    await server.until(lambda: len(server.ask(f"count by (cluster) ({R_HEALTH})")) == 1, "the first scrape and rules", timeout=900)
    seen: dict[str, float] = {}
    first = None
    while len(seen) < count:
        group = next(g for g in api(server.url, "/api/v1/rules")["groups"] if g["name"] == name)
        if first is None:
            first = group["lastEvaluation"]  # maybe the evaluation that found no series yet: not counted
        elif group["lastEvaluation"] != first:
            seen[group["lastEvaluation"]] = group["evaluationTime"]
        await asyncio.sleep(1)
    return list(seen.values())[:count]


def slowest_rules(url: str, name: str, count: int = 5) -> list[tuple[str, float]]:
    """The group's `count` rules that took longest at its last evaluation (each rule's evaluationTime), slowest first."""
    group = next(g for g in api(url, "/api/v1/rules")["groups"] if g["name"] == name)
    rules = [(rule["name"] + "".join(f"{{{k}={v}}}" for k, v in (rule.get("labels") or {}).items()), rule["evaluationTime"]) for rule in group["rules"]]
    return sorted(rules, key=lambda rule: -rule[1])[:count]


def federate(url: str, match: str) -> str:
    """The text a federating Prometheus scrapes: /federate?match[]=..."""
    with urllib.request.urlopen(f"{url}/federate?" + urllib.parse.urlencode({"match[]": match}), timeout=60) as resp:
        return resp.read().decode()


def last_duration(url: str, group: str) -> float:
    """prometheus_rule_group_last_duration_seconds of a rule group, from Prometheus' own /metrics."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    found = re.search(rf'^prometheus_rule_group_last_duration_seconds{{rule_group="[^"]*;{group}"}} (\S+)$', text, re.M)
    assert found, "no prometheus_rule_group_last_duration_seconds"
    return float(found.group(1))


def federated_copies(federation: str, clusters: int) -> bytes:
    """What /federate answered for one cluster (each series with its `cluster="c000"` external label), once per
    cluster, each copy relabelled, the copies of a series together."""
    lines = [line for line in federation.splitlines() if line and not line.startswith("#")]
    assert lines and all(line.count('cluster="c000"') == 1 for line in lines), federation[:2000]
    return ("\n".join(line.replace('cluster="c000"', f'cluster="c{i:03d}"') for line in lines for i in range(clusters)) + "\n").encode()


def usage_groups() -> list[dict]:
    """`gputui prometheus-rules --label team`'s usage groups, the hourly one evaluated every minute (its ranges an hour
    still): Prometheus first evaluates a group up to an interval after it starts."""
    fine, coarse = u.rule_groups(labels=USAGE_LABELS)[:2]
    return [fine, {**coarse, "interval": "1m"}]


async def federated_rules(series: str, clusters: int, refreshes: int, evaluations: int, workdir: Path, usage: bool = False) -> dict:
    """The README's topology: one cluster's Prometheus with the fleet's rules, its /federate of them served
    `clusters` times to a global Prometheus, and the fleet's refresh against that. With `usage`, the usage rules
    there too, and their groups' evaluation times."""
    runner, target = await serve(("\n".join(series.splitlines()) + "\n").encode())
    local = f"""  - job_name: kube-state-metrics
    honor_labels: true
    scrape_timeout: 30s
    static_configs: [{{targets: ["{target}"]}}]
"""
    groups = [FleetQueries().rules(), *(usage_groups() if usage else [])]
    rules = json.dumps({"groups": groups})
    try:
        async with prom.running(workdir / "cluster", local, interval="30s", rules=rules, external_labels={"cluster": "c000"}) as server:
            times = await rule_evaluations(server, evaluations)
            duration = last_duration(server.url, "gputui-fleet")
            names = [g["name"] for g in groups[1:]]
            usage_times = dict(zip(names, await asyncio.gather(*(rule_evaluations(server, evaluations, name) for name in names)), strict=True))
            usage_durations = {name: last_duration(server.url, name) for name in names}
            slowest = {name: slowest_rules(server.url, name) for name in names}
            usage_series = {name: int(float(server.ask(f"count({name})")[0]["value"][1]))
                            for name in (u.R_POD_ALLOCATED, u.R_POD_HOURS["used"], u.R_ALLOCATED)} if usage else {}
            local_series = api(server.url, "/api/v1/status/tsdb")["headStats"]["numSeries"]
            federation = federate(server.url, FLEET_RULES)
    finally:
        await runner.cleanup()
    body = federated_copies(federation, clusters)
    runner, target = await serve(body)
    config = f"""  - job_name: federate
    honor_labels: true
    honor_timestamps: false
    static_configs: [{{targets: ["{target}"]}}]
"""
    try:
        async with prom.running(workdir / "global", config, interval="30s") as server:
            await server.until(lambda: len(server.ask(f"count by (cluster) ({R_HEALTH})")) == clusters, "the first federation", timeout=120)
            recorded = await refreshes_of(server.url, clusters, refreshes, use_rules=True)
            global_series = api(server.url, "/api/v1/status/tsdb")["headStats"]["numSeries"]
    finally:
        await runner.cleanup()
    return {"evaluations": times, "last_duration": duration, "usage": usage_times, "usage_durations": usage_durations, "slowest": slowest,
            "usage_series": usage_series, "local_series": local_series, "federated": len(federation),
            "federated_series": len(body.splitlines()) // clusters, "global_series": global_series, "scraped": len(body), "rules": recorded}


def mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.1f} kB"


async def print_federated(args: argparse.Namespace, objects: list[dict], series: str) -> None:
    with tempfile.TemporaryDirectory(prefix="gputui-bench-fleet-prom-") as tmp:
        p = await federated_rules(series, args.clusters, args.refreshes, args.evaluations, Path(tmp), args.usage_rules)
        r = await relist(objects, Path(tmp))
    assert p["rules"]["row"].totals == r["row"]["totals"], (p["rules"]["row"].totals, r["row"]["totals"])
    times = ", ".join(f"{t:.2f}" for t in p["evaluations"])
    print(f"one cluster's Prometheus: {p['local_series']} series in its head ({mb(len(series))} scraped every 30 s)")
    print(f"the fleet's recording rules there, one evaluation (every 30 s): {statistics.median(p['evaluations']):.2f} s "
          f"(median of {times}; prometheus_rule_group_last_duration_seconds {p['last_duration']:.2f} s)")
    for name, evaluated in p["usage"].items():
        print(f"{name} there (prometheus-rules --label team), one evaluation: {statistics.median(evaluated):.2f} s (median of "
              f"{', '.join(f'{t:.2f}' for t in evaluated)}; prometheus_rule_group_last_duration_seconds {p['usage_durations'][name]:.2f} s)")
        print("  its slowest rules then: " + ", ".join(f"{rule} {seconds:.2f} s" for rule, seconds in p["slowest"][name]))
    if p["usage_series"]:
        print("  the usage rules' series: " + ", ".join(f"{n:,} {name}" for name, n in p["usage_series"].items()))
    print(f"its /federate of {FLEET_RULES}: {p['federated_series']} series, {mb(p['federated'])}")
    print(f"global Prometheus: {p['global_series']} series in its head ({args.clusters} copies, {mb(p['scraped'])} scraped every 30 s)")
    q = p["rules"]
    print(f"from the global Prometheus, recording rules, per refresh (every 30 s): every row after {q['seconds']:.2f} s, "
          f"{q['samples']:.0f} samples read, {mb(q['bytes'])} of answers (median of {args.refreshes})")
    print(f"re-list, one cluster: {r['seconds']:.2f} s, {mb(r['bytes'])} from its API server")
    print(f"re-list, the fleet (every {RELIST_INTERVAL:.0f} s): {r['seconds'] * args.clusters:.1f} s of summaries, "
          f"{mb(r['bytes'] * args.clusters)} from {args.clusters} API servers")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=200)
    parser.add_argument("--nodes", type=int, default=50, help="nodes per cluster")
    parser.add_argument("--pods", type=int, default=200, help="pods per cluster")
    parser.add_argument("--refreshes", type=int, default=3)
    parser.add_argument("--federated-rules", action="store_true",
                        help="one cluster's Prometheus with the fleet's rules, federated --clusters times to a global one")
    parser.add_argument("--evaluations", type=int, default=3, help="--federated-rules: the rules' evaluations timed")
    parser.add_argument("--usage-rules", action="store_true",
                        help="--federated-rules: the usage rules too (prometheus-rules --label team; the hourly group every minute), "
                        "and each GPU's utilisation naming its pod: their groups' evaluation times")
    parser.add_argument("--smoke", action="store_true", help="3 clusters of 5 nodes and 20 pods")
    args = parser.parse_args()
    if args.smoke:
        args.clusters, args.nodes, args.pods, args.refreshes = 3, 5, 20, 2
    if prom.BINARY is None:
        raise SystemExit(prom.MISSING)
    objects, series = one_cluster(args.nodes, args.pods, args.usage_rules)
    gpu_nodes = sum(1 for o in objects if o["kind"] == "Node" and "nvidia.com/gpu" in o["status"].get("capacity", {}))
    print(f"fleet: {args.clusters} clusters of {args.nodes} nodes ({gpu_nodes} with GPUs) and {args.pods} pods each", flush=True)
    if args.federated_rules:
        await print_federated(args, objects, series)
        return
    with tempfile.TemporaryDirectory(prefix="gputui-bench-fleet-prom-") as tmp:
        # The smoke's rules every second, its scrapes less often: a 1-s scrape timed out under load and left the rules empty.
        intervals = ("3s", "1s") if args.smoke else ("120s", "30s")
        p = await from_prometheus(series, args.clusters, args.refreshes, Path(tmp) / "prometheus", *intervals)
        r = await relist(objects, Path(tmp))
    for how in ("raw", "rules"):
        assert p[how]["row"].totals == r["row"]["totals"], (how, p[how]["row"].totals, r["row"]["totals"])  # the same figures every way
    print(f"Prometheus: {p['series']} series in its head ({mb(p['scraped'])} scraped once)")
    for how, words in (("raw", "raw series"), ("rules", "recording rules")):
        q = p[how]
        print(f"from Prometheus, {words}, per refresh (every 30 s): every row after {q['seconds']:.2f} s, "
              f"{q['samples']:.0f} samples read, {mb(q['bytes'])} of answers (median of {args.refreshes})")
    print(f"the fleet's recording rules, one evaluation (every 30 s, in Prometheus): {p['evaluation']:.2f} s")
    print(f"re-list, one cluster: {r['seconds']:.2f} s, {mb(r['bytes'])} from its API server")
    print(f"re-list, the fleet (every {RELIST_INTERVAL:.0f} s): {r['seconds'] * args.clusters:.1f} s of summaries, "
          f"{mb(r['bytes'] * args.clusters)} from {args.clusters} API servers")


if __name__ == "__main__":
    asyncio.run(main())
