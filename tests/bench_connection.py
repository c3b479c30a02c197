"""Start-up of this checkout beside another source tree (a script, not a test): whole processes, side by side.

    git archive REV | tar -x -C /tmp/before        # the tree to compare with
    python tests/bench_connection.py --before /tmp/before [--runs 7]

Against one simulated one-node cluster (its own process, from this checkout, HTTPS and a token), each run
times, alternately for each tree (a copy of its `gputui` with its modules compiled, as `pip install` leaves
it, first on the path; a first run of each unmeasured): `gputui report -o json` from start to exit, and the app in a pseudo-terminal (80x24) from start to
the first screen that lists the node. Prints each tree's medians and the difference, in wall time and,
for the report, in CPU time (user and system: what load on the machine changes least).
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import bench_ui  # noqa: E402  (the pseudo-terminal)

NODE = "bench-gpu-node-1"
SCENARIO = f"""apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {{name: {NODE}, labels: {{nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}}}}
  status:
    capacity: {{nvidia.com/gpu: "8"}}
    allocatable: {{nvidia.com/gpu: "8"}}
    conditions: [{{type: Ready, status: "True"}}]
"""


def start_sim(workdir: str) -> tuple[subprocess.Popen[bytes], str]:
    scenario, kubeconfig = os.path.join(workdir, "one-node.yaml"), os.path.join(workdir, "kubeconfig")
    Path(scenario).write_text(SCENARIO)
    sim = subprocess.Popen([sys.executable, "-m", "gputui", "sim", "--scenario", scenario, "--kubeconfig-out", kubeconfig],
                           cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while not os.path.exists(kubeconfig):
        if time.monotonic() > deadline or sim.poll() is not None:
            raise SystemExit("bench: the simulator did not start")
        time.sleep(0.05)
    return sim, kubeconfig


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def report_seconds(tree: str, kubeconfig: str, cpu: list[float] | None = None) -> float:
    env = {**os.environ, "PYTHONPATH": tree}
    cpu_before = children_cpu()
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "gputui", "report", "-o", "json", "--kubeconfig", kubeconfig],
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=60)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"bench: report from {tree} failed ({done.returncode}): {done.stderr[-500:]}")
    if cpu is not None:
        cpu.append(children_cpu() - cpu_before)
    return seconds


def app_seconds(tree: str, kubeconfig: str) -> float:
    bench_ui.ENV["PYTHONPATH"] = tree
    term = bench_ui.Terminal(bench_ui.gputui("--kubeconfig", kubeconfig), cols=80, rows=24)
    try:
        return term.wait_for(NODE.encode(), 30)
    finally:
        term.close()


def installed(source: str | Path, place: str) -> str:
    """A copy of the tree's gputui with its modules compiled beside them: the directory to put on the path."""
    shutil.copytree(Path(source) / "gputui", os.path.join(place, "gputui"), ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(Path(source) / "styles", os.path.join(place, "styles"))  # the app's stylesheet, beside the package
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(place, "gputui")], check=True)
    return place


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="the source tree to compare with (a directory holding gputui/)")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gputui-bench-") as workdir:
        trees = {name: installed(source, os.path.join(workdir, name)) for name, source in (("before", args.before), ("after", ROOT))}
        os.chdir(workdir)  # `python -m` puts the working directory first on the path: no gputui there
        sim, kubeconfig = start_sim(workdir)
        try:
            for tree in trees.values():  # bytecode written, caches warm: not measured
                report_seconds(tree, kubeconfig)
                app_seconds(tree, kubeconfig)
            times: dict[str, dict[str, list[float]]] = {name: {"report": [], "app": [], "report-cpu": []} for name in trees}
            for run in range(args.runs):
                for name, tree in (trees.items() if run % 2 == 0 else reversed(trees.items())):
                    times[name]["report"].append(report_seconds(tree, kubeconfig, times[name]["report-cpu"]))
                    times[name]["app"].append(app_seconds(tree, kubeconfig))
        finally:
            os.killpg(sim.pid, signal.SIGTERM)
            sim.wait(10)
    print(f"whole process, median of {args.runs}, alternating (one-node cluster, HTTPS, a token):")
    for what, words in (("report", "gputui report -o json"), ("report-cpu", "gputui report -o json, CPU time"),
                        ("app", "app: first screen listing the node")):
        before, after = (statistics.median(times[name][what]) for name in ("before", "after"))
        print(f"  {words:38} before {before:.3f} s   after {after:.3f} s   difference {after - before:+.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
