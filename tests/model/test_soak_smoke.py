"""The soak benchmark runs (tiny): every figure it promises is printed, and they hang together.

Only that: how fast the watches come back, or how memory moves, is for the benchmark's
reader, never a test's verdict (a loaded machine must not fail the suite). The final
state, though, must equal the server's: that is correctness, not speed.
"""
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench_soak.py"
NUMBER = r"(\d[\d,]*(?:\.\d+)?)"
FAULTS = ("drop", "compact", "restart", "500-burst", "restore", "silence")


def figure(pattern: str, text: str) -> list[float]:
    match = re.search(pattern, text, re.M)
    assert match, f"no line matching {pattern!r} in:\n{text}"
    return [float(group.replace(",", "")) for group in match.groups()]


@pytest.mark.timeout(150)
def test_bench_soak_smoke_prints_its_figures():
    out = subprocess.run([sys.executable, str(BENCH), "--smoke"], capture_output=True, text=True, timeout=140)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    text = out.stdout

    # each fault kind was applied, and its watches came back: a count, a median and a max, all numbers
    for kind in FAULTS:
        count, median, worst, missed = figure(rf"^  {re.escape(kind)}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}$", text)
        assert count >= 1, kind
        assert missed == 0, f"{kind}: watches not back\n{text}"
        assert 0 <= median <= worst, kind
    # one progress line per fault applied, each with its recovery in seconds
    progress = re.findall(rf"^  \[\s*{NUMBER} s\] (\S+)\s+watches back\s+{NUMBER} s after the fault ended", text, re.M)
    assert {kind for _, kind, _ in progress} == set(FAULTS), text
    assert "NOT back" not in text and "NOT BACK" not in text
    compacted, compactions = figure(rf"compactions after which pods and nodes were listed again \(410\): {NUMBER} of {NUMBER}", text)
    assert 1 <= compactions and compacted <= compactions

    rss_start, rss_end, _ = figure(rf"RSS\s+start\s+{NUMBER} MB\s+end\s+{NUMBER} MB\s+\(([+-]?\d+\.\d) MB", text)
    assert rss_start > 0 and rss_end > 0
    tasks_start, tasks_end = figure(rf"tasks\s+start\s+{NUMBER}\s+end\s+{NUMBER}", text)
    assert tasks_start > 0 and tasks_end > 0

    achieved, asked, done, seconds = figure(
        rf"churn achieved: {NUMBER} changes/s \(asked {NUMBER}\); {NUMBER} changes in {NUMBER} s", text)
    assert done > 0 and seconds > 0 and asked > 0
    assert abs(achieved - done / seconds) <= 0.1 * achieved + 0.1
    applied, = figure(rf"the app's model applied {NUMBER} pod watch events/s", text)
    assert applied > 0

    assert re.search(r"model vs a fresh list through the API: equal", text), text
    assert re.search(r"Nodes and GPU pods tables vs a fresh model: equal", text), text
    assert text.rstrip().splitlines()[-1] == "final state equals the server's: yes", text
