"""Cancel a hundred verifications at random points; print how many pods were left behind (0 expected).

    python tests/bench_verify_cancel.py [--runs 100] [--speed 20] [--seed 1]

Each run verifies a random node of a small simulated cluster (passing nodes,
MIG, shared, full, and the three node faults) and is cancelled after a random
delay somewhere between "before the create call" and "after the verdict".
After every run the script counts the verification pods still in the cluster;
at the end it also asks the API (find_leftovers), as the next gputui start would.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE / "verify")]  # the package (run from anywhere) and the test cluster

from gputui.kube import verify as v  # noqa: E402
from gputui.kube.config import connect  # noqa: E402
from gputui.sim.cluster import SimCluster  # noqa: E402

import cluster  # noqa: E402

NODES = ["gpu-ok", "gpu-mig", "gpu-shared", "gpu-full", "gpu-driver-broken", "gpu-image-pull", "gpu-runtime-hook"]


def pods_left(sim: SimCluster) -> int:
    return sum((p["metadata"].get("labels") or {}).get(v.MANAGED_BY_LABEL) == v.MANAGED_BY for p in sim.store.objects("pods"))


async def main(runs: int, speed: float, seed: int) -> int:
    rng = random.Random(seed)
    options = v.VerifyOptions(timeout=30, delete_timeout=10)
    async with SimCluster(cluster.objects(), speed=speed) as sim:
        conn = await connect(str(sim.kubeconfig_path))
        try:
            # How long an uninterrupted verification of each node takes here, to spread the cancellations over it.
            # (Measured on the second run: the first one also pulls the image.)
            full_run: dict[str, float] = {}
            for node in NODES * 2:
                started = time.perf_counter()
                await v.verify_node(conn.api, node, options, "default")
                full_run[node] = time.perf_counter() - started

            finished_first = 0
            left_after_run: list[int] = []
            cleanup_s: list[float] = []
            stages_hit: dict[str, int] = {}
            for _ in range(runs):
                node = rng.choice(NODES)
                seen: list[v.Update] = []
                task = asyncio.create_task(v.verify_node(conn.api, node, options, "default", seen.append))
                await asyncio.sleep(rng.uniform(0, full_run[node]))
                stage = seen[-1].stage if seen else "before-create"
                t0 = time.perf_counter()
                if task.cancel():
                    stages_hit[stage] = stages_hit.get(stage, 0) + 1
                    await asyncio.gather(task, return_exceptions=True)
                    cleanup_s.append(time.perf_counter() - t0)
                else:
                    finished_first += 1
                left_after_run.append(pods_left(sim))
            leftovers = await v.find_leftovers(conn.api)
        finally:
            await conn.close()

    print(f"runs: {runs} (cancelled mid-run: {runs - finished_first}, finished before the cancel: {finished_first})")
    print("an uninterrupted verification took " + ", ".join(f"{n} {t * 1000:.0f} ms" for n, t in full_run.items()) + f" at speed {speed:g}")
    print("cancelled at stage: " + ", ".join(f"{k} {n}" for k, n in sorted(stages_hit.items())))
    if cleanup_s:
        print(f"cancel -> task finished (pod deleted, deletion confirmed): median {statistics.median(cleanup_s) * 1000:.0f} ms, "
              f"max {max(cleanup_s) * 1000:.0f} ms")
    print(f"runs that left a pod: {sum(1 for n in left_after_run if n)}")
    print(f"pods left at the end: {pods_left(sim)} (found by label through the API: {len(leftovers)})")
    return 0 if pods_left(sim) == 0 and not leftovers and not any(left_after_run) else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--speed", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=1)
    a = parser.parse_args()
    sys.exit(asyncio.run(main(a.runs, a.speed, a.seed)))
