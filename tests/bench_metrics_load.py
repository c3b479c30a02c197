"""The exporter load of the background DCGM reads (a script, not a test).

    python tests/bench_metrics_load.py                 # the demo cluster, 12 s at a compressed interval
    python tests/bench_metrics_load.py --nodes 200     # a synthetic cluster of 200 GPU nodes (stand-in exporters)

Runs the model's background reads (`MetricsPoller.start_background`) against the
simulator with a short interval, counts the requests sent through the API server's
pod proxy and the bytes of their answers, and prints them per node and per minute,
measured and scaled to the default interval (once a minute). With `--nodes`, the
budget (`--reads-per-minute`) is smaller than the cluster needs: the reads go round
the nodes and the printed figures show the cap holding.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


async def demo(seconds: float, interval: float) -> None:
    from gputui.kube.config import connect
    from gputui.kube.metrics import DEFAULT_BACKGROUND_INTERVAL
    from gputui.kube.model import ClusterModel
    from gputui.sim import SimCluster

    async with SimCluster("demo") as sim:
        async with await connect(str(sim.kubeconfig_path)) as conn:
            async with ClusterModel(conn.api, metrics_background_interval=interval) as model:
                await model.wait_synced(30)
                poller = model.metrics
                exporters = [n for n, e in model._exporters().items() if e.pod]
                poller.start_background()
                await asyncio.sleep(seconds)
                requests, bytes_read = poller.requests, poller.bytes_read
    nodes = len(exporters)
    per_read = bytes_read / max(1, requests)
    measured_rpm = requests / nodes / seconds * 60
    print(f"demo: {nodes} GPU nodes with a running exporter, {seconds:g} s at interval {interval:g} s")
    print(f"  measured: {requests} requests, {bytes_read} bytes: {measured_rpm:.1f} requests/min/node, "
          f"{measured_rpm * per_read / 1024:.1f} KiB/min/node, {per_read / 1024:.1f} KiB a read")
    scale = interval / DEFAULT_BACKGROUND_INTERVAL
    print(f"  at the default interval ({DEFAULT_BACKGROUND_INTERVAL:g} s): {measured_rpm * scale:.2f} requests/min/node, "
          f"{measured_rpm * scale * per_read / 1024:.1f} KiB/min/node")


async def synthetic(nodes: int, seconds: float, reads_per_minute: int, interval: float) -> None:
    from gputui.kube.config import connect
    from gputui.kube.metrics import Exporter, MetricsPoller
    from gputui.sim import SimCluster

    async with SimCluster("demo") as sim:  # its exporter pod on h100-1 answers for every synthetic node
        async with await connect(str(sim.kubeconfig_path)) as conn:
            from gputui.kube.model import ClusterModel

            async with ClusterModel(conn.api) as model:
                await model.wait_synced(30)
                real = next(e for e in model._exporters().values() if e.pod)
            targets = {f"node-{i:04d}": Exporter(real.namespace, real.pod) for i in range(nodes)}
            poller = MetricsPoller(conn.api, lambda: targets, background_interval=interval, reads_per_minute=reads_per_minute)
            poller.start_background()
            await asyncio.sleep(seconds)
            await poller.stop()
    read = sum(1 for n in targets if poller.node(n) is not None)
    rpm = poller.requests / seconds * 60
    print(f"synthetic: {nodes} GPU nodes, budget {reads_per_minute} reads/min, interval {interval:g} s, {seconds:g} s")
    print(f"  {poller.requests} requests ({rpm:.0f}/min in all, {rpm / nodes:.2f}/min/node), "
          f"{poller.bytes_read / seconds * 60 / 1024 / nodes:.1f} KiB/min/node; {read} nodes read at least once")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--interval", type=float, default=2.0, help="the compressed background interval (s)")
    parser.add_argument("--nodes", type=int, default=0, help="a synthetic cluster of this many GPU nodes instead of the demo")
    parser.add_argument("--reads-per-minute", type=int, default=600)
    args = parser.parse_args()
    if args.nodes:
        asyncio.run(synthetic(args.nodes, args.seconds, args.reads_per_minute, args.interval))
    else:
        asyncio.run(demo(args.seconds, args.interval))


if __name__ == "__main__":
    main()
