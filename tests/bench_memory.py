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

    python tests/bench_memory.py --sizes 200x500 --breakdown     # each minute: pymalloc, glibc heap, CPU, cyclic GC
    python tests/bench_memory.py --sizes 200x500 --trace         # where the growth is allocated (slow: the app lags)

`--trace` (slower) starts tracemalloc once the tables are filled and prints, between the end of `--settle` and the
end of the churn, the allocation sites that grew most (by traceback), the object counts by type that grew, and
the cyclic GC's collections.
"""
from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
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


def pymalloc_stats() -> dict[str, int]:
    """sys._debugmallocstats()'s totals (it writes to the C stderr)."""
    with tempfile.TemporaryFile() as out:
        saved = os.dup(2)
        try:
            os.dup2(out.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read().decode(errors="replace")
    stats = {}
    for line in text.splitlines():
        name, _, value = line.rpartition("=")
        if name.startswith("#") and value.strip().replace(",", "").isdigit():
            stats[name.strip()] = int(value.strip().replace(",", ""))
    unused = re.search(r"(\d+) unused pools \* (\d+) bytes", text)
    stats["unused pools"] = int(unused.group(1)) * int(unused.group(2)) if unused else 0  # bytes
    return stats


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def breakdown() -> str:
    """What the RSS is made of: Python's blocks (pymalloc and the rest), glibc's heap in use and free, its mmaps."""
    line = f"python blocks {sys.getallocatedblocks():,}"
    stats = pymalloc_stats()
    if stats:
        line += (f"; pymalloc arenas {stats.get('# arenas allocated current', 0)} "
                 f"(blocks in use {stats.get('# bytes in allocated blocks', 0) / 1e6:.1f} MB, "
                 f"free {stats.get('# bytes in available blocks', 0) / 1e6:.1f} MB, unused pools {stats['unused pools'] / 1e6:.1f} MB)")
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = MallInfo2
        info = libc.mallinfo2()
        line += (f"; malloc heap {info.arena / 1e6:.1f} MB (in use {info.uordblks / 1e6:.1f}, free {info.fordblks / 1e6:.1f}, "
                 f"top pad {info.keepcost / 1e6:.1f}), mmapped {info.hblkhd / 1e6:.1f} MB in {info.hblks}")
    except (OSError, AttributeError):  # not glibc
        pass
    return line


class Breakdown:
    """--breakdown: each minute, what the RSS is made of, the CPU used, and what the cyclic GC did: its
    collections, the longest, and the objects it found unreachable (garbage that reference counting
    could not free, and that waits for it)."""

    def __init__(self) -> None:
        self.first_types: Counter[str] | None = None
        self.types: Counter[str] = Counter()
        self.cpu = time.process_time()
        self.wall = time.monotonic()
        self._begun = 0.0
        self.collections = [0, 0, 0]
        self.unreachable = 0
        self.longest = 0.0
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._begun = time.perf_counter()
            return
        self.collections[info["generation"]] += 1
        self.unreachable += info["collected"]
        self.longest = max(self.longest, time.perf_counter() - self._begun)

    def minute(self, size: str, minutes: float, rss: float) -> None:
        cpu = 100 * (time.process_time() - self.cpu) / (time.monotonic() - self.wall)
        collections, unreachable, longest = self.collections, self.unreachable, self.longest
        self.collections, self.unreachable, self.longest = [0, 0, 0], 0, 0.0
        self.types = Counter(type(o).__qualname__ for o in gc.get_objects())
        self.first_types = self.first_types or self.types
        print(f"{size:>8}: {minutes:4.1f} min RSS {rss:.1f} MB; {breakdown()}; GC-tracked objects {self.types.total():,}; "
              f"CPU {cpu:.0f} %; GC collections {'/'.join(map(str, collections))} (longest {1000 * longest:.0f} ms), "
              f"{unreachable:,} unreachable objects freed", flush=True)
        self.cpu, self.wall = time.process_time(), time.monotonic()

    def end(self, size: str) -> None:
        gc.callbacks.remove(self._on_gc)
        if self.first_types is not None:
            diff = Counter({t: n - self.first_types[t] for t, n in self.types.items()})
            print(f"{size:>8}: GC-tracked objects by type that grew from the first breakdown to the last: "
                  + ", ".join(f"{t} {n:+d}" for t, n in diff.most_common(12) if n > 0), flush=True)


# -- where the growth is (--trace) --------------------------------------------------------------------------
class Tracer:
    """tracemalloc snapshots and object counts by type, at the end of the first minute and at the end."""

    def __init__(self, frames: int) -> None:
        tracemalloc.start(frames)
        self.first: tuple[tracemalloc.Snapshot, Counter[str], list[dict]] | None = None

    @staticmethod
    def _look() -> tuple[tracemalloc.Snapshot, Counter[str], list[dict]]:
        gc.collect()
        types = Counter(type(o).__qualname__ for o in gc.get_objects())
        snapshot = tracemalloc.take_snapshot().filter_traces((
            tracemalloc.Filter(False, tracemalloc.__file__, all_frames=True), tracemalloc.Filter(False, __file__, all_frames=False),
        ))
        return snapshot, types, gc.get_stats()

    def settle(self) -> None:
        self.first = self._look()

    def report(self, size: str, top: int = 15) -> None:
        assert self.first is not None
        before, types_before, gc_before = self.first
        after, types_after, gc_after = self._look()
        tracemalloc.stop()
        grown = [s for s in after.compare_to(before, "traceback") if s.size_diff > 0][:top]
        total = sum(s.size_diff for s in after.compare_to(before, "filename"))
        print(f"{size:>8}: traced Python memory {total / 1e6:+.2f} MB since the first figure; the {len(grown)} sites that grew most:")
        for stat in grown:
            print(f"  {stat.size_diff / 1e3:+9.1f} kB {stat.count_diff:+7d} blocks  (now {stat.size / 1e3:.1f} kB, {stat.count} blocks)")
            for line in stat.traceback.format(most_recent_first=True)[: 2 * 8]:
                print("      " + line.strip())
        diff = Counter({t: types_after[t] - types_before[t] for t in types_after | types_before})
        print(f"{size:>8}: objects tracked by the GC, by type, that grew: "
              + ", ".join(f"{t} {n:+d}" for t, n in diff.most_common(15) if n > 0))
        print(f"{size:>8}: GC collections per generation over that time: "
              + " ".join(str(a["collections"] - b["collections"]) for a, b in zip(gc_after, gc_before, strict=True)), flush=True)


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
        while not app.pods_all_nodes or app.scheduler.pods_filling or app.scheduler.freeze_pending or app.pods_table.row_count == 0:
            if time.monotonic() > deadline:
                raise SystemExit("bench: the tables did not fill within 120 s")
            await pilot.pause(0.1)
        await pilot.pause(args.calm)
        pods = app.model.reflectors["pods"]
        tracer = Tracer(args.trace_frames) if args.trace else None
        watch = Breakdown() if args.breakdown else None
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
                    if tracer:
                        tracer.settle()
                else:
                    await asyncio.sleep(min(started + args.settle, end) - now)
                continue
            await asyncio.sleep(min(SAMPLE_EVERY, end - now))
            samples.append(rss_mb())
            if watch and len(samples) % round(60 / SAMPLE_EVERY) == 0:
                watch.minute(args.size, (time.monotonic() - started) / 60, samples[-1])
        churn_seconds = time.monotonic() - started
        applied = (pods.events - events_before) / churn_seconds
        rss_end = rss_mb()
        if settle_rss is None:
            settle_rss = rss_end
        if watch:
            watch.end(args.size)
        if tracer and tracer.first:
            tracer.report(args.size)
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
    parser.add_argument("--calm", type=float, default=1.0, help="seconds after the tables fill before the churn begins (default 1)")
    parser.add_argument("--trace", action="store_true", help="print where the memory grew after --settle (tracemalloc; slower)")
    parser.add_argument("--trace-frames", type=int, default=12, help="frames kept per allocation with --trace (default 12)")
    parser.add_argument("--breakdown", action="store_true", help="print each minute what the RSS is made of (Python, glibc's heap)")
    parser.add_argument("--size", help=argparse.SUPPRESS)  # one size, in a child process
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    parser.add_argument("--sim-pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smoke:
        args.nodes, args.pods, args.churn = 10, 100, 50
        # each phase as short as still gives its figure: an RSS sample after the settle, a churn rate, a CPU figure
        args.minutes, args.settle, args.rest, args.quiet, args.calm = 0.3 / 60, 0.1, 0.1, 0.1, 0.1
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
                         "--rest", str(args.rest), "--quiet", str(args.quiet), "--calm", str(args.calm),
                         *(["--trace"] if args.trace else []),
                         *(["--breakdown"] if args.breakdown else []),
                         "--trace-frames", str(args.trace_frames)]
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
