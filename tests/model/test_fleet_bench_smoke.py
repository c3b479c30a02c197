"""The fleet benchmark runs end to end on three tiny clusters and prints its figures (which, not how fast)."""
import re
import subprocess
import sys
from pathlib import Path

from tests.model.test_model_bench_smoke import NUMBER, figure

BENCH = Path(__file__).resolve().parent.parent / "bench_fleet.py"


def test_bench_fleet_smoke_prints_its_figures():
    out = subprocess.run([sys.executable, str(BENCH), "--smoke"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    text = out.stdout
    rows = re.findall(rf"^  (cluster-\d\d)  live with its figures after\s+{NUMBER} s   nvidia.com/gpu allocatable (\d+)$", text, re.M)
    assert [name for name, _, _ in rows] == ["cluster-00", "cluster-01", "cluster-02"], text
    assert all(int(gpus) > 0 for _, _, gpus in rows)  # every row's figures known, not a placeholder
    every, = figure(rf"every row live after: {NUMBER} s", text)
    assert every == max(float(seconds) for _, seconds, _ in rows)
    one, = figure(rf"peak RSS, one cluster's model: {NUMBER} MB", text)
    whole, extra = figure(rf"peak RSS, the fleet of 3: {NUMBER} MB \(([-\d.]+) MB for each cluster beyond the first\)", text)
    assert one > 0 and whole > 0
    assert abs(extra - (whole - one) / 2) < 0.11
