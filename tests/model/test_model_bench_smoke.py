"""The model benchmark script runs end to end on a tiny cluster and prints its figures.

Only that the figures are there and hang together: whether they meet the goals
is for the benchmark's reader, never a test's verdict (a loaded machine must not
fail the suite).
"""
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench_model.py"
NUMBER = r"(\d[\d,]*(?:\.\d+)?)"
SIGNED = r"(-?\d[\d,]*(?:\.\d+)?)"  # a difference of two noisy medians
MS = 0.0005  # half the last digit of a figure printed in seconds to the millisecond


def figure(pattern: str, text: str) -> list[float]:
    match = re.search(pattern, text)
    assert match, f"no line matching {pattern!r} in:\n{text}"
    return [float(group.replace(",", "")) for group in match.groups()]


def test_bench_model_smoke_prints_its_figures():
    out = subprocess.run([sys.executable, str(BENCH), "--smoke"], capture_output=True, text=True, timeout=110)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout

    # what kubectl+jq ran: the seed's recipes, with only our kubeconfig and cache added
    commands = re.findall(r"^\s+\$ (kubectl .*)$", text, re.M)
    assert len(commands) == 3, text
    assert all("--kubeconfig " in c and "--cache-dir " in c for c in commands)
    assert "get pods -A -o json | jq -r" in commands[2]

    raw, = figure(rf"raw HTTP fetch\s+{NUMBER} s", text)
    ours, ratio, rss, _ = figure(
        rf"gputui model\s+{NUMBER} s\s+= {NUMBER} x raw fetch\s+peak RSS {NUMBER} MB \(after imports {NUMBER} MB\)", text)
    models, faster, _ = figure(rf"kubernetes_asyncio\s+{NUMBER} s\s+gputui is {NUMBER}x faster\s+peak RSS {NUMBER} MB", text)
    seed, fraction = figure(rf"kubectl\+jq \(seed\)\s+{NUMBER} s\s+gputui takes 1/{NUMBER} of it", text)
    per_second, = figure(rf"model applies {NUMBER} events/s", text)
    report, = figure(rf"gputui report -o json\s+{NUMBER} s\s+whole process", text)
    _, report_fraction = figure(rf"gputui takes 1/{NUMBER} of it; gputui report, whole process, 1/{NUMBER}", text)
    version, = figure(rf"gputui --version\s+{NUMBER} s\s+as installed", text)
    empty_report, more = figure(rf"gputui report -o json, one node\s+{NUMBER} s\s+as installed \({NUMBER} s more than --version\)", text)
    checkout, compiling = figure(rf"the same from a checkout, no bytecode\s+{NUMBER} s\s+\({SIGNED} s compiling gputui's sources\)", text)

    assert min(raw, ours, models, seed, rss, per_second, report, version, empty_report) > 0
    assert abs(more - (empty_report - version)) <= 0.002
    assert checkout > 0 and abs(compiling - (checkout - empty_report)) <= 0.002
    assert abs(report_fraction - seed / report) <= 0.15 * report_fraction
    # the ratios are those of the printed medians (rounded to milliseconds, so compare loosely)
    assert abs(ratio - ours / raw) <= 0.15 * ratio
    assert abs(faster - models / ours) <= 0.15 * faster
    assert abs(fraction - seed / ours) <= 0.15 * fraction
    assert len(re.findall(r"^  run \d+: raw .* s, gputui .* s, gputui report \(whole process\) .* s, kubernetes_asyncio .* s, kubectl\+jq .* s$", text, re.M)) == 1


def test_bench_model_sync_smoke_prints_the_floors_beside_the_models():
    """--sync beside a tree of its own (this one): each model's line and the two floors', for both list modes."""
    root = str(BENCH.parent.parent)
    out = subprocess.run([sys.executable, str(BENCH), "--sync", "--smoke", "--before", root], capture_output=True, text=True,
                         timeout=110)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    served, = figure(rf"initial sync, 10 nodes / 200 pods: {NUMBER} unfinished pods", text)
    assert 0 < served <= 200
    for mode in ("watchlist", "cache"):
        curl, = figure(rf"{mode}: curl {NUMBER} s", text)
        kept = []
        for name in ("before", "after", "read", "skip"):
            wall, ratio, cpu, per_pod = figure(
                rf"{mode}: {name}\s+{NUMBER} s = {NUMBER} x curl; CPU {NUMBER} s = {NUMBER} us a pod; ", text)
            assert min(curl, wall, cpu, per_pod) > 0
            # what the printed figures allow, each rounded to its last digit (a millisecond: most of a tiny sync)
            assert (wall - MS) / (curl + MS) - 0.005 <= ratio <= (wall + MS) / (curl - MS) + 0.005
            assert (cpu - MS) / served * 1e6 - 0.05 <= per_pod <= (cpu + MS) / served * 1e6 + 0.05
            if name in ("before", "after"):
                kept += figure(rf"{mode}: {name}\s+.* keeps {NUMBER} pods", text)
        assert kept[0] == kept[1] > 0  # the same tree, the same pods kept
        assert re.search(rf"{mode}: read .* floor: the request read, nothing done", text)
        assert re.search(rf"{mode}: skip .* floor: read, every object decoded to no field", text)
