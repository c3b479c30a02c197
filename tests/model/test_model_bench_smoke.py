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

    assert min(raw, ours, models, seed, rss, per_second) > 0
    # the ratios are those of the printed medians (rounded to milliseconds, so compare loosely)
    assert abs(ratio - ours / raw) <= 0.15 * ratio
    assert abs(faster - models / ours) <= 0.15 * faster
    assert abs(fraction - seed / ours) <= 0.15 * fraction
    assert len(re.findall(r"^  run \d+: raw .* s, gputui .* s, kubernetes_asyncio .* s, kubectl\+jq .* s$", text, re.M)) == 1
