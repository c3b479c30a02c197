"""UI benchmark (a script, not a test): prints figures.

    python tests/bench_ui.py            # the figures issue 4 asks for
    python tests/bench_ui.py --smoke    # tiny and quick (the test suite runs this): the keypresses
                                        # typed into the first frame's demo, a 0.5 s lag part

1. time to first frame of `gputui --demo`, run for real in a pseudo-terminal
   (120x40): until the first screen, and until the first screen that lists nodes;
2. keypress-to-frame with 5,000 nodes: `gputui` in a pseudo-terminal against
   a simulator in another process; `j` is typed, the time to the first bytes
   of the redraw is measured; p50 and p95;
3. event-loop lag while the simulator (another process) changes GPU pods
   2,000 times a second: the app runs headless in this process and a probe measures
   how late a 10 ms sleep wakes up; p50, p99 and the RSS before and after. The
   rates printed are those achieved: pod changes the simulator made per second
   while measured, and watch events the app's model applied per second. Each
   change bumps a GPU pod's restart count (its row in the pods pane changes);
   `--churn inert` changes an annotation instead, which the model drops.
"""
from __future__ import annotations

import argparse
import asyncio
import fcntl
import gc
import os
import pty
import re
import select
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
ENV.pop("NO_COLOR", None)


# -- a pseudo-terminal around a gputui process -------------------------------------------
class Terminal:
    def __init__(self, args: list[str], cols: int = 120, rows: int = 40) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=ENV, close_fds=True, start_new_session=True)
        os.close(slave)
        self.seen = bytearray()

    def read(self, timeout: float) -> bytes:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return b""
        try:
            data = os.read(self.master, 65536)
        except OSError:
            return b""
        self.seen += data
        return data

    def wait_for(self, needle: bytes, timeout: float) -> float:
        """Seconds from the start until `needle` has been printed (styles between its words allowed)."""
        pattern = re.compile(rb"(?:\x1b\[[0-9;]*m|\s)+".join(re.escape(word) for word in needle.split(b" ")))
        deadline = time.perf_counter() + timeout
        while not pattern.search(self.seen):
            if time.perf_counter() > deadline:
                raise SystemExit(f"bench: {needle!r} did not appear within {timeout} s; last output: {bytes(self.seen[-300:])!r}")
            self.read(0.05)
        return time.perf_counter() - self.started

    def drain(self, quiet: float = 0.05, limit: float = 2.0) -> None:
        """Read until nothing comes for `quiet` seconds."""
        end = time.perf_counter() + limit
        while time.perf_counter() < end and self.read(quiet):
            pass

    def press(self, key: bytes, timeout: float = 2.0) -> float:
        """Type a key; seconds until the first bytes of the answer."""
        sent = time.perf_counter()
        os.write(self.master, key)
        deadline = sent + timeout
        while time.perf_counter() < deadline:
            if self.read(deadline - time.perf_counter()):
                return time.perf_counter() - sent
        return float("inf")

    def close(self) -> None:
        """`q`, reading what the app writes meanwhile as a terminal does: an app whose frames fill the
        pty's buffer blocks on its write and never reads the key (seen under load)."""
        try:
            os.write(self.master, b"q")
        except OSError:
            pass
        if not self._read_until_exit(10):
            os.killpg(self.proc.pid, signal.SIGTERM)
            if not self._read_until_exit(10):
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        os.close(self.master)

    def _read_until_exit(self, timeout: float) -> bool:
        deadline = time.perf_counter() + timeout
        while self.proc.poll() is None and time.perf_counter() < deadline:
            self.read(0.05)
        return self.proc.poll() is not None


def gputui(*args: str) -> list[str]:
    return [sys.executable, "-m", "gputui", *args]


# -- 1. first frame --------------------------------------------------------------------------
def first_frame(runs: int, presses: int = 0, quiet: float = 0.3) -> None:
    """With `presses`, the last run's app then has its keypresses timed (the smoke: one app for both), once
    its screen has been quiet for `quiet` seconds."""
    frames, filled = [], []
    for run in range(runs):
        term = Terminal(gputui("--demo"))
        try:
            frames.append(term.wait_for(b"Nodes", 30))
            filled.append(term.wait_for(b"h100-1", 30))
            if presses and run == runs - 1:
                synced = term.wait_for(b"watches live", 30)
                keys = press_keys(term, presses, quiet)
        finally:
            term.close()
    print(f"first frame, gputui --demo:            median {statistics.median(frames):.2f} s  (of {runs}; goal <= 1.0 s)")
    print(f"first frame listing nodes:             median {statistics.median(filled):.2f} s")
    if presses:
        print_keys("the demo's nodes", keys, synced)


# -- a simulator in a process of its own ----------------------------------------------------------
def start_sim(nodes: int, pods: int, churn: int, kubeconfig: Path, visible: bool = True, wait: bool = True) -> subprocess.Popen:
    """With `wait=False` the caller calls `sim_ready` once it needs the simulator (it starts meanwhile)."""
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(nodes), str(pods), str(churn), str(kubeconfig), "visible" if visible else "inert"],
        stdout=subprocess.PIPE, env=ENV, text=True,
    )
    if wait:
        sim_ready(proc)
    return proc


def sim_ready(proc: subprocess.Popen) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("serving"):
        raise SystemExit(f"bench: the simulator did not start ({line!r})")


def serve(nodes: int, pods: int, churn: int, kubeconfig: str, visible: bool) -> None:
    """Run a synthetic simulator; with churn, change GPU pods `churn` times a second."""
    from gputui.sim.cluster import SimCluster

    async def main() -> None:
        async with SimCluster(nodes=nodes, pods=pods, kubeconfig_out=kubeconfig) as sim:
            # The simulator keeps every object and a long watch history of plain
            # (acyclic) JSON dicts: without this the cyclic GC rescans them over and
            # over, and the simulator, not the UI, becomes the bottleneck.
            gc.collect()
            gc.freeze()
            gc.disable()
            print("serving", sim.url, flush=True)
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGTERM, stop.set)
            counter = Counter()
            # SIGUSR1: print the pod changes made so far (the parent reads them around its measurement).
            loop.add_signal_handler(signal.SIGUSR1, lambda: print("churned", counter.done, time.perf_counter(), flush=True))
            if churn:
                await churn_pods(sim, churn, stop, counter, visible)
            await stop.wait()

    asyncio.run(main())


class Counter:
    done = 0


async def churn_pods(sim, per_second: int, stop: asyncio.Event, counter: Counter, visible: bool) -> None:
    from gputui.kube.gpu import GpuResources
    from gputui.kube.records import effective_requests

    gpus = GpuResources()
    gpu_pods = [
        (e.obj["metadata"]["namespace"], e.obj["metadata"]["name"])
        for e in sim.store.entries("pods")
        if e.obj.get("spec", {}).get("nodeName")
        and e.obj.get("status", {}).get("containerStatuses")
        and gpus.of(effective_requests(e.obj["spec"]))
    ]

    # The simulated kubelets leave a running pod without a program alone: neither
    # change makes them react. An annotation is an update gputui keeps nothing of.
    def bump(obj: dict) -> None:
        annotations = obj["metadata"].setdefault("annotations", {})
        annotations["bench.gputui/tick"] = str(int(annotations.get("bench.gputui/tick", "0")) + 1)
        if visible:
            status = obj["status"]["containerStatuses"][0]
            status["restartCount"] = int(status.get("restartCount", 0)) + 1

    tick = 0.05
    batch = max(1, int(per_second * tick))
    i = 0
    next_at = time.perf_counter()
    while not stop.is_set():
        for _ in range(batch):
            ns, name = gpu_pods[i % len(gpu_pods)]
            i += 1
            try:
                sim.store.mutate("pods", ns, name, bump)
                counter.done += 1
            except Exception:  # noqa: BLE001  (a pod the simulator deleted meanwhile)
                pass
        next_at += tick
        await asyncio.sleep(max(0.0, next_at - time.perf_counter()))


# -- 2. keypress to frame ----------------------------------------------------------------------------
def press_keys(term: Terminal, presses: int, quiet: float = 0.3) -> list[float]:
    """Once the screen is quiet (nothing drawn for `quiet` seconds), `j` typed `presses` times: seconds to the
    first bytes of each redraw."""
    term.drain(quiet=quiet, limit=10)
    times = []
    for _ in range(presses):
        times.append(term.press(b"j"))
        term.drain()
    return sorted(times)


def print_keys(what: str, times: list[float], synced: float) -> None:
    p95 = times[max(0, int(len(times) * 0.95) - 1)]
    print(f"keypress-to-frame, {what}:      p50 {statistics.median(times) * 1000:.1f} ms  "
          f"p95 {p95 * 1000:.1f} ms  (of {len(times)}; goal p95 <= 50 ms; synced in {synced:.1f} s)")


def keypress(nodes: int, pods: int, presses: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        sim = start_sim(nodes, pods, 0, kubeconfig)
        try:
            term = Terminal(gputui("--kubeconfig", str(kubeconfig)))
            try:
                synced = term.wait_for(b"watches live", 120)
                print_keys(f"{nodes:,} nodes", press_keys(term, presses), synced)
            finally:
                term.close()
        finally:
            sim.terminate()
            sim.wait(timeout=20)


# -- 3. event-loop lag under churn ----------------------------------------------------------------------
def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def churned(sim: subprocess.Popen) -> tuple[int, float]:
    """(pod changes the simulator made so far, when) as it tells on SIGUSR1."""
    assert sim.stdout is not None
    sim.send_signal(signal.SIGUSR1)
    _, done, at = sim.stdout.readline().split()
    return int(done), float(at)


async def measure_lag(kubeconfig: str, seconds: float, sim: subprocess.Popen, settle: float) -> dict:
    from gputui.ui.launch import make_app

    app = make_app(kubeconfig)
    lags: list[float] = []
    async with app.run_test(size=(120, 40)) as pilot:
        deadline = time.monotonic() + 60
        while not (app.model and app.model.states and all(s.phase in ("live", "absent") for s in app.model.states.values())):
            if time.monotonic() > deadline:
                raise SystemExit("bench: the model did not sync")
            await pilot.pause(0.1)
        await pilot.pause(settle)
        filled_by = time.monotonic() + 30
        while app.scheduler.pods_filling or app.scheduler.freeze_pending:  # the first full picture, then its one-off GC freeze
            if time.monotonic() > filled_by:
                print(f"bench: the first full picture took over 30 s (filling {app.scheduler.pods_filling}, "
                      f"freeze pending {app.scheduler.freeze_pending}); measuring anyway")
                break
            await pilot.pause(0.1)
        rss_before = rss_mb()
        pods = app.model.reflectors["pods"]
        events_before, refreshes_before = pods.events, app.scheduler.refreshes
        made_before, made_at = await asyncio.to_thread(churned, sim)
        started = time.perf_counter()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            asked = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append(time.perf_counter() - asked - 0.01)
        elapsed = time.perf_counter() - started
        made, made_until = await asyncio.to_thread(churned, sim)
        rss_after = rss_mb()
        return {
            "lags": lags, "rss_before": rss_before, "rss_after": rss_after, "seconds": elapsed,
            "made_per_s": (made - made_before) / (made_until - made_at),
            "applied_per_s": (pods.events - events_before) / elapsed,
            "refreshes_per_s": (app.scheduler.refreshes - refreshes_before) / elapsed,
        }


def event_lag(nodes: int, pods: int, per_second: int, seconds: float, visible: bool = True, settle: float = 1.0) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        sim = start_sim(nodes, pods, per_second, kubeconfig, visible)
        try:
            lag_on(sim, kubeconfig, per_second, seconds, visible, settle)
        finally:
            sim.terminate()
            sim.wait(timeout=20)


def lag_on(sim: subprocess.Popen, kubeconfig: Path, per_second: int, seconds: float, visible: bool, settle: float) -> None:
    """The lag part against a started simulator that churns `per_second`."""
    figures = asyncio.run(measure_lag(str(kubeconfig), seconds, sim, settle))
    lags = sorted(figures["lags"])
    p99 = lags[max(0, int(len(lags) * 0.99) - 1)]
    what = "restart counts" if visible else "annotations"
    print(f"event-loop lag, {per_second:,} pod events/s asked ({what}): p50 {statistics.median(lags) * 1000:.1f} ms  p99 {p99 * 1000:.1f} ms  "
          f"(goal p99 <= 50 ms; achieved: simulator {figures['made_per_s']:,.0f} pod changes/s, "
          f"app {figures['applied_per_s']:,.0f} watch events/s applied, {figures['refreshes_per_s']:.1f} refreshes/s)")
    print(f"memory over {figures['seconds']:.0f} s of churn:        RSS {figures['rss_before']:.0f} MB -> {figures['rss_after']:.0f} MB")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6] == "visible")
        return 0
    parser = argparse.ArgumentParser(description="gputui UI benchmark")
    parser.add_argument("--smoke", action="store_true", help="tiny and quick: checks that the benchmark runs")
    parser.add_argument("--only", choices=("frame", "keys", "lag"), action="append", help="run only these parts (repeatable)")
    parser.add_argument("--seconds", type=float, default=15.0, help="how long the event-loop lag is measured (default 15)")
    parser.add_argument("--churn", choices=("visible", "inert"), default="visible",
                        help="what each pod event changes: a restart count (default) or an annotation")
    args = parser.parse_args()
    parts = set(args.only or ("frame", "keys", "lag"))
    if args.smoke:
        # one pty app for the first frame and the keypresses; the lag part as the full run's, shorter, its
        # simulator starting meanwhile (the smoke measures nothing: the figures are there, that is all)
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = Path(tmp) / "kubeconfig"
            sim = start_sim(10, 100, 100, kubeconfig, wait=False)
            try:
                first_frame(runs=1, presses=3, quiet=0.1)
                sim_ready(sim)
                lag_on(sim, kubeconfig, 100, seconds=0.5, visible=True, settle=0.1)
            finally:
                sim.terminate()
                sim.wait(timeout=20)
        return 0
    if "frame" in parts:
        first_frame(runs=3)
    if "keys" in parts:
        keypress(nodes=5000, pods=20000, presses=60)
    if "lag" in parts:
        event_lag(nodes=1000, pods=10000, per_second=2000, seconds=args.seconds, visible=args.churn == "visible")
    return 0


if __name__ == "__main__":
    sys.exit(main())
