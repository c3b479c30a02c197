"""The memory benchmark runs (tiny): for each terminal size it prints its figures, and they are numbers.

Only that: how memory moves, or what the CPU does at rest, is for the benchmark's reader, never a
test's verdict (a loaded machine must not fail the suite)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench_memory.py"
NUMBER = r"([+-]?\d[\d,]*(?:\.\d+)?)"
SIZES = ("80x24", "200x150")  # the benchmark's loop over sizes, kept short: each size is a child process


def figures(pattern: str, text: str) -> list[float]:
    match = re.search(pattern, text, re.M)
    assert match, f"no line matching {pattern!r} in:\n{text}"
    return [float(group.replace(",", "")) for group in match.groups()]


@pytest.mark.timeout(120)
def test_bench_memory_smoke_prints_its_figures_per_size():
    out = subprocess.run([sys.executable, str(BENCH), "--smoke", "--sizes", ",".join(SIZES)], capture_output=True, text=True, timeout=110)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    text = out.stdout
    for size in SIZES:
        at = rf"^\s*{size}: "
        settle, end, growth, peak, start = figures(
            at + rf"RSS {NUMBER} MB at \S+ \S+, {NUMBER} MB at \S+ \S+: growth after the first \S+ \S+ {NUMBER} MB "
            rf"\(peak {NUMBER} MB; {NUMBER} MB when the churn began\)$", text)
        assert min(settle, end, peak, start) > 0, size
        assert growth == pytest.approx(end - settle, abs=1.0), size  # both rounded as printed
        asked, applied, rows, cpu = figures(
            at + rf"churn {NUMBER} pod changes/s asked, {NUMBER} watch events/s applied, {NUMBER} GPU-pod rows; "
            rf"CPU at rest {NUMBER} % of a core", text)
        assert asked > 0 and applied >= 0 and rows > 0 and cpu >= 0, size
        (made,) = figures(at + rf"the simulator made {NUMBER} pod changes/s$", text)
        assert made >= 0, size
