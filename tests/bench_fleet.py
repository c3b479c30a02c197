"""Benchmark of the fleet (a script, not a test): many clusters watched at once by one gputui.

    python tests/bench_fleet.py                    # 10 clusters of 1,000 nodes / 20,000 pods
    python tests/bench_fleet.py --clusters 3 --nodes 200 --pods 4000
    python tests/bench_fleet.py --smoke            # 3 clusters of 20 nodes / 300 pods (the test suite runs this)

Each cluster is a simulator in its own process (`gputui sim --nodes N --pods M`); one
kubeconfig holds a context per cluster. The fleet model (`gputui.kube.fleet.Fleet`, what
the Fleet screen renders) watches them all; the benchmark prints, per cluster, the seconds
until its row is live with its figures known, the time until every row is, and this
process's peak RSS beside that of one cluster's model alone (the fleet's first cluster,
synced first in a fresh process): memory per watched cluster.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_model import Simulator, peak_rss_mb  # noqa: E402

TICK = 0.02  # seconds between the event-loop probe's turns


def merged(kubeconfigs: list[str], out: Path) -> list[str]:
    """One kubeconfig with each simulator's context, named cluster-00, cluster-01, ..."""
    doc: dict = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": [], "preferences": {}}
    names = []
    for i, path in enumerate(kubeconfigs):
        one = yaml.safe_load(Path(path).read_text())
        name = f"cluster-{i:02d}"
        names.append(name)
        doc["clusters"].append({"name": name, "cluster": one["clusters"][0]["cluster"]})
        doc["users"].append({"name": name, "user": one["users"][0]["user"]})
        doc["contexts"].append({"name": name, "context": {"cluster": name, "user": name}})
    doc["current-context"] = names[0]
    out.write_text(yaml.safe_dump(doc))
    out.chmod(0o600)
    return names


async def watch_fleet(kubeconfig: str, contexts: list[str], max_live: int) -> dict:
    from gputui.kube import fleet as f
    from gputui.kube.config import connect

    fleet = f.Fleet(contexts, lambda context: connect(kubeconfig, context), max_live=max_live)
    started = time.monotonic()
    live_at: dict[str, float] = {}
    stalls: list[float] = []

    async def tick() -> None:  # how long the event loop (the UI's, in the app) went without a turn
        while True:
            before = time.monotonic()
            await asyncio.sleep(TICK)
            stalls.append(time.monotonic() - before - TICK)

    ticker = asyncio.create_task(tick())
    await fleet.start()
    try:
        while len(live_at) < len(contexts) and time.monotonic() - started < 600:
            for row in fleet.rows():
                if row.context not in live_at and row.state in (f.LIVE, f.SUMMARY) and row.known:
                    live_at[row.context] = time.monotonic() - started
            await asyncio.sleep(0.05)
        rows = {row.context: row for row in fleet.rows()}
    finally:
        ticker.cancel()
        await fleet.stop()
    return {"live_s": live_at, "all_live_s": max(live_at.values()) if len(live_at) == len(contexts) else None,
            "longest_stall_s": max(stalls, default=0.0), "stall_p99_s": statistics.quantiles(stalls, n=100, method="inclusive")[98] if len(stalls) > 1 else 0.0,
            "peak_rss_mb": peak_rss_mb(),
            "gpus": {c: rows[c].totals["nvidia.com/gpu"].allocatable if rows[c].totals and "nvidia.com/gpu" in rows[c].totals else None
                     for c in contexts}}


def child(kubeconfig: str, contexts: list[str], max_live: int) -> dict:
    """Run in a fresh interpreter, so that its peak RSS is its own."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", kubeconfig, "--child-contexts", ",".join(contexts), "--max-live", str(max_live)],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )
    if out.returncode != 0:
        raise SystemExit(f"bench: the fleet child failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--max-live", type=int, default=None, help="watched clusters at most (default: all of them)")
    parser.add_argument("--smoke", action="store_true", help="3 clusters of 20 nodes / 300 pods")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-contexts", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        contexts = args.child_contexts.split(",")
        print(json.dumps(asyncio.run(watch_fleet(args.child, contexts, args.max_live or len(contexts)))))
        return 0
    if args.smoke:
        args.clusters, args.nodes, args.pods = 3, 20, 300
    max_live = args.max_live or args.clusters
    print(f"fleet: {args.clusters} clusters of {args.nodes:,} nodes / {args.pods:,} pods, {max_live} watched", flush=True)
    with tempfile.TemporaryDirectory(prefix="gputui-bench-fleet-") as workdir:
        # the smoke starts its simulators, then its two children, side by side (the full run: one by one)
        with ThreadPoolExecutor(max_workers=args.clusters if args.smoke else 1) as pool:
            starting = [pool.submit(Simulator, args.nodes, args.pods, str(Path(workdir) / f"c{i}")) for i in range(args.clusters)]
            try:
                sims = [started.result() for started in starting]
                kubeconfig = Path(workdir) / "fleet-kubeconfig"
                contexts = merged([sim.kubeconfig for sim in sims], kubeconfig)
                one_run = pool.submit(child, str(kubeconfig), contexts[:1], 1)
                whole = pool.submit(child, str(kubeconfig), contexts, max_live).result()
                one = one_run.result()
            finally:
                for started in starting:
                    if not started.cancel() and started.exception() is None:
                        started.result().stop()
    print("\n== every cluster at once ==")
    for context in contexts:
        seconds = whole["live_s"].get(context)
        shown = f"{seconds:7.2f} s" if seconds is not None else "    not live"
        print(f"  {context}  live with its figures after {shown}   nvidia.com/gpu allocatable {whole['gpus'][context]}")
    times = list(whole["live_s"].values())
    all_live = whole["all_live_s"]
    print(f"  every row live after: {all_live:.2f} s" if all_live is not None else "  every row live after: NOT all live")
    if times:
        print(f"  median cluster live after: {statistics.median(times):.2f} s")
    print(f"  one cluster alone live after: {one['all_live_s']:.2f} s" if one["all_live_s"] is not None else "  one cluster alone: NOT live")
    print(f"  event loop, longest stall: {whole['longest_stall_s'] * 1000:.0f} ms (p99 {whole['stall_p99_s'] * 1000:.0f} ms); "
          f"one cluster alone: {one['longest_stall_s'] * 1000:.0f} ms (p99 {one['stall_p99_s'] * 1000:.0f} ms)")
    print("\n== memory ==")
    per_cluster = (whole["peak_rss_mb"] - one["peak_rss_mb"]) / max(1, len(contexts) - 1)
    print(f"  peak RSS, one cluster's model: {one['peak_rss_mb']:.1f} MB")
    print(f"  peak RSS, the fleet of {len(contexts)}: {whole['peak_rss_mb']:.1f} MB "
          f"({per_cluster:.1f} MB for each cluster beyond the first)")
    return 0 if all_live is not None else 1


if __name__ == "__main__":
    sys.exit(main())
