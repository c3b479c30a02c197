"""Memory benchmark (a script, not a test): the app's RSS under steady churn, per terminal size, and its CPU at rest.

    python tests/bench_memory.py                  # 80x24, 200x150, 200x500; 10 minutes each; 1,000 nodes / 20,000 pods
    python tests/bench_memory.py --minutes 2      # shorter
    python tests/bench_memory.py --sizes 200x500  # one size
    python tests/bench_memory.py --smoke          # tiny and short, seconds in all (the test suite runs this)

What memory should follow is what is shown, not the terminal's size over time (issue 20, item 8: 68 -> 680 MB
within a minute at 200x500). Processes:
  the simulator   this script again (`--serve`): a synthetic SimCluster that, when told (SIGUSR2; SIGUSR1
                  stops it), bumps `--churn` running GPU pods' restart counts a second (each pod's row changes);
  each size       this script again (`--size WxH`), a fresh process so that one size's memory is not the
                  next one's: the real app (`gputui.ui.launch.make_app`) headless under `App.run_test(size=...)`
                  against the simulator, every GPU pod shown (`a`: the pods pane as full as the terminal allows).
Per size, once the app has synced and filled its tables: churn for `--minutes`, RSS (/proc/self/status VmRSS)
sampled every few seconds; printed: RSS after the first minute (`--settle`), at the end, the growth between
the two and the peak after the first minute; then churn stops, and after a pause the CPU the app's process
uses over `--rest` seconds with nothing changing (the age column and the background DCGM reads go on).
Figures are printed, never judged.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
SIZES = ("80x24", "200x150", "200x500")
SAMPLE_EVERY = 5.0  # seconds between RSS samples


def span(seconds: float) -> str:
    return f"{seconds / 60:.3g} min" if seconds >= 60 else f"{seconds:.3g} s"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# -- the simulator, with churn on demand --------------------------------------------------------------------
def serve(nodes: int, pods: int, per_second: int, kubeconfig: str) -> None:
    from gputui.kube.gpu import GpuResources
    from gputui.kube.records import effective_requests
    from gputui.sim.cluster import SimCluster

    async def main() -> None:
        async with SimCluster(nodes=nodes, pods=pods, kubeconfig_out=kubeconfig) as sim:
            # Plain JSON the simulator keeps for good: out of its cyclic GC's way (as bench_ui.py does).
            gc.collect()
            gc.freeze()
            gc.disable()
            gpus = GpuResources()
            gpu_pods = [
                (e.obj["metadata"]["namespace"], e.obj["metadata"]["name"])
                for e in sim.store.entries("pods")
                if e.obj.get("spec", {}).get("nodeName")
                and e.obj.get("status", {}).get("phase") == "Running"  # a finished pod is not watched: no row changes
                and e.obj.get("status", {}).get("containerStatuses")
                and gpus.of(effective_requests(e.obj["spec"]))
            ]
            churning = asyncio.Event()
            stop = asyncio.Event()
            made = [0, 0.0]  # changes made, and when the churn began

            def churn_on() -> None:
                made[:] = [0, time.perf_counter()]
                churning.set()

            def churn_off() -> None:
                churning.clear()
                print("paused", made[0], time.perf_counter() - made[1], flush=True)  # what this size got

            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGTERM, stop.set)
            loop.add_signal_handler(signal.SIGUSR2, churn_on)
            loop.add_signal_handler(signal.SIGUSR1, churn_off)
            print("serving", sim.url, len(gpu_pods), flush=True)

            def bump(obj: dict) -> None:
                status = obj["status"]["containerStatuses"][0]
                status["restartCount"] = int(status.get("restartCount", 0)) + 1

            i = 0
            while not stop.is_set():
                await asyncio.sleep(0.05)
                if not churning.is_set():
                    continue
                due = per_second * (time.perf_counter() - made[1])  # steady: as many as the time asks, late or not
                missing = 0
                while made[0] < due and missing < len(gpu_pods):
                    namespace, name = gpu_pods[i % len(gpu_pods)]
                    i += 1
                    try:
                        sim.store.mutate("pods", namespace, name, bump)
                    except Exception:  # noqa: BLE001  (a pod the simulator deleted meanwhile: the next one)
                        missing += 1
                        continue
                    made[0] += 1
                    missing = 0

    asyncio.run(main())


def start_sim(nodes: int, pods: int, per_second: int, kubeconfig: Path) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(nodes), str(pods), str(per_second), str(kubeconfig)],
        stdout=subprocess.PIPE, env=ENV, text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("serving"):
        proc.kill()
        raise SystemExit(f"bench: the simulator did not start ({line!r})")
    return proc, int(line.split()[2])


# -- one size, in a process of its own -----------------------------------------------------------------------
async def measure(kubeconfig: str, sim_pid: int, width: int, height: int, args: argparse.Namespace) -> dict:
    from gputui.ui.launch import make_app

    app = make_app(kubeconfig)
    async with app.run_test(size=(width, height)) as pilot:
        deadline = time.monotonic() + 300
        while not (app.model and app.model.states and all(s.phase in ("live", "absent") for s in app.model.states.values())):
            if time.monotonic() > deadline:
                raise SystemExit("bench: the model did not sync within 300 s")
            await pilot.pause(0.1)
        while not app.selected_node:
            await pilot.pause(0.1)
        await pilot.press("a")  # every GPU pod: as many rows as the terminal shows
        deadline = time.monotonic() + 120
        while not app.pods_all_nodes or app._pods_filling or app._freeze_when_filled or app.pods_table.row_count == 0:
            if time.monotonic() > deadline:
                raise SystemExit("bench: the tables did not fill within 120 s")
            await pilot.pause(0.1)
        await pilot.pause(1.0)
        pods = app.model.reflectors["pods"]
        rss_start = rss_mb()
        os.kill(sim_pid, signal.SIGUSR2)  # churn on
        started = time.monotonic()
        events_before = pods.events
        settle_rss: float | None = None
        samples: list[float] = []
        end = started + args.minutes * 60
        while (now := time.monotonic()) < end:
            if settle_rss is None:  # the first minute: the figure the growth is counted from, at its end
                if now >= started + args.settle:
                    settle_rss = rss_mb()
                else:
                    await asyncio.sleep(min(started + args.settle, end) - now)
                continue
            await asyncio.sleep(min(SAMPLE_EVERY, end - now))
            samples.append(rss_mb())
        churn_seconds = time.monotonic() - started
        applied = (pods.events - events_before) / churn_seconds
        rss_end = rss_mb()
        if settle_rss is None:
            settle_rss = rss_end
        os.kill(sim_pid, signal.SIGUSR1)  # churn off
        await asyncio.sleep(args.quiet)  # the last events applied and drawn
        cpu, wall = time.process_time(), time.monotonic()
        await asyncio.sleep(args.rest)
        rest_cpu = 100 * (time.process_time() - cpu) / (time.monotonic() - wall)
        return {
            "start": rss_start, "settle": settle_rss, "end": rss_end, "peak": max([settle_rss, rss_end, *samples]),
            "applied": applied, "rest_cpu": rest_cpu, "rows": app.pods_table.row_count, "minutes": churn_seconds / 60,
            "samples": samples,
        }


def one_size(args: argparse.Namespace) -> None:
    width, height = (int(n) for n in args.size.split("x"))
    f = asyncio.run(measure(args.kubeconfig, args.sim_pid, width, height, args))
    settle = span(args.settle)
    print(f"{args.size:>8}: RSS {f['settle']:.0f} MB at {settle}, {f['end']:.0f} MB at {span(f['minutes'] * 60)}: "
          f"growth after the first {settle} {f['end'] - f['settle']:+.1f} MB (peak {f['peak']:.0f} MB; "
          f"{f['start']:.0f} MB when the churn began)", flush=True)
    every = max(1, len(f["samples"]) // 10)  # about ten figures: whether it levels off, or keeps growing
    print(f"{args.size:>8}: RSS along the churn, MB: {' '.join(f'{mb:.0f}' for mb in f['samples'][every - 1::every]) or '-'}", flush=True)
    print(f"{args.size:>8}: churn {args.churn:,} pod changes/s asked, {f['applied']:,.0f} watch events/s applied, "
          f"{f['rows']:,} GPU-pod rows; CPU at rest {f['rest_cpu']:.1f} % of a core (over {span(args.rest)}, no churn)", flush=True)


# -- the whole run --------------------------------------------------------------------------------------------
def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
        return 0
    parser = argparse.ArgumentParser(description="gputui memory benchmark")
    parser.add_argument("--smoke", action="store_true", help="tiny and short: checks that the benchmark runs")
    parser.add_argument("--minutes", type=float, default=10.0, help="churn per size (default 10)")
    parser.add_argument("--nodes", type=int, default=1000, help="simulated nodes (default 1,000)")
    parser.add_argument("--pods", type=int, default=20000, help="simulated pods (default 20,000)")
    parser.add_argument("--churn", type=int, default=100, help="GPU pods' restart counts bumped a second (default 100)")
    parser.add_argument("--sizes", default=",".join(SIZES), help=f"terminal sizes, WxH, comma-separated (default {','.join(SIZES)})")
    parser.add_argument("--settle", type=float, default=60.0, help="seconds of churn before the first RSS figure (default 60)")
    parser.add_argument("--rest", type=float, default=30.0, help="seconds CPU at rest is measured over (default 30)")
    parser.add_argument("--quiet", type=float, default=5.0, help="seconds after the churn stops before that (default 5)")
    parser.add_argument("--size", help=argparse.SUPPRESS)  # one size, in a child process
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    parser.add_argument("--sim-pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smoke:
        args.nodes, args.pods, args.churn = 10, 100, 50
        args.minutes, args.settle, args.rest, args.quiet = 1.5 / 60, 0.5, 0.5, 0.2
    if args.size:
        one_size(args)
        return 0
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    for size in sizes:
        if not all(part.isdigit() for part in size.split("x")) or size.count("x") != 1:
            parser.error(f"--sizes: {size!r} is not WxH")
    print(f"memory under churn: {args.nodes:,} nodes, {args.pods:,} pods, {args.churn:,} pod changes/s, "
          f"{args.minutes:g} min per size", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        sim, gpu_pods = start_sim(args.nodes, args.pods, args.churn, kubeconfig)
        try:
            if not gpu_pods:
                raise SystemExit("bench: the simulated cluster runs no GPU pod to churn")
            for size in sizes:
                child = [sys.executable, __file__, "--size", size, "--kubeconfig", str(kubeconfig), "--sim-pid", str(sim.pid),
                         "--minutes", str(args.minutes), "--churn", str(args.churn), "--settle", str(args.settle),
                         "--rest", str(args.rest), "--quiet", str(args.quiet)]
                done = subprocess.run(child, env=ENV, text=True, stdout=subprocess.PIPE)
                sys.stdout.write(done.stdout)
                if done.returncode != 0:
                    print(f"bench: {size} failed ({done.returncode})", file=sys.stderr)
                    return 1
                assert sim.stdout is not None
                _, count, seconds = sim.stdout.readline().split()
                print(f"{size:>8}: the simulator made {int(count) / float(seconds):,.0f} pod changes/s", flush=True)
        finally:
            sim.send_signal(signal.SIGTERM)
            try:
                sim.wait(timeout=20)
            except subprocess.TimeoutExpired:
                sim.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
