"""Benchmark (not a test): how fast the simulated API server serves a 20,000-pod list.

    python tests/bench_sim_list.py [--pods 20000] [--nodes 500] [--runs 5]

Prints the median wall time of a full `GET /api/v1/pods` fetched by curl in its
own process (what the server costs), then by an aiohttp client sharing the
server's process and loop (server and client cost together), and of a few variants.
"""
from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputui.sim import scenarios
from gputui.sim.cluster import SimCluster


def own_pods(pods: int) -> list[dict]:
    """Fallback when scenarios.synthetic is missing: plain pods of a few KB each."""
    objects = []
    for i in range(pods):
        objects.append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"pod-{i:05d}", "namespace": f"ns-{i % 20}", "labels": {"app": f"app-{i % 50}"},
                         "annotations": {"note": "x" * 2000}},
            "spec": {"nodeName": f"node-{i % 500}", "containers": [{"name": "main", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
            "status": {"phase": "Running"},
        })
    return objects


async def timed_get(http: aiohttp.ClientSession, url: str, runs: int, headers: dict[str, str] | None = None) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(runs):
        started = time.perf_counter()
        async with http.get(url, headers=headers) as response:
            body = await response.read()
        times.append(time.perf_counter() - started)
        size = len(body)
    return statistics.median(times), size


async def curl_get(url: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        proc = await asyncio.create_subprocess_exec(
            "curl", "-sf", "-H", "Authorization: Bearer gputui-sim", "-o", "/dev/null", "-w", "%{time_total}", url, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await proc.communicate()
        times.append(float(out))
    return statistics.median(times)


async def main(args: argparse.Namespace) -> None:
    try:
        objects, source = scenarios.synthetic(args.nodes, args.pods), "scenarios.synthetic"
    except (AttributeError, NotImplementedError):
        objects, source = own_pods(args.pods), "own pods"
    sim = SimCluster(objects, run_controllers=False, tls=False)  # the list path alone, not TLS
    started = time.perf_counter()
    async with sim:
        print(f"{args.pods} pods from {source}, loaded in {time.perf_counter() - started:.1f} s")
        async with sim.http_session() as http:
            base = f"{sim.url}/api/v1/pods"
            if shutil.which("curl"):
                seconds = await curl_get(base, args.runs)
                print(f"full list, curl:      {seconds:.3f} s median of {args.runs}")
            seconds, size = await timed_get(http, base, args.runs)
            print(f"full list, aiohttp:   {seconds:.3f} s median of {args.runs} ({size / 1e6:.1f} MB, client in-process)")
            seconds, _ = await timed_get(http, base + "?limit=500", args.runs)
            print(f"first page (500):     {seconds:.3f} s")
            seconds, _ = await timed_get(http, base + "?fieldSelector=status.phase%21%3DSucceeded&labelSelector=app", args.runs)
            print(f"with selectors:       {seconds:.3f} s")
            table = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}
            seconds, _ = await timed_get(http, base + "?limit=500", args.runs, table)
            print(f"Table page (500):     {seconds:.3f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--runs", type=int, default=5)
    asyncio.run(main(parser.parse_args()))
