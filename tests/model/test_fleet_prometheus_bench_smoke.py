"""The fleet-from-Prometheus benchmark runs end to end on three tiny clusters and prints its figures (which, not how fast)."""
import subprocess
import sys
from pathlib import Path

import pytest

from tests import prometheus as prom
from tests.model.test_model_bench_smoke import NUMBER, figure

BENCH = Path(__file__).resolve().parent.parent / "bench_fleet_prometheus.py"


@pytest.mark.skipif(prom.BINARY is None, reason=prom.MISSING)
def test_bench_fleet_prometheus_smoke_prints_its_figures():
    out = subprocess.run([sys.executable, str(BENCH), "--smoke"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]  # it also checks both ways give the same totals
    text = out.stdout
    series, = figure(rf"Prometheus: {NUMBER} series in its head", text)
    seconds, samples = figure(rf"raw series, per refresh \(every 30 s\): every row after {NUMBER} s, {NUMBER} samples read", text)
    _, recorded = figure(rf"recording rules, per refresh \(every 30 s\): every row after {NUMBER} s, {NUMBER} samples read", text)
    evaluation, = figure(rf"the fleet's recording rules, one evaluation \(every 30 s, in Prometheus\): {NUMBER} s", text)
    assert 0 < recorded < samples and evaluation >= 0
    one_s, = figure(rf"re-list, one cluster: {NUMBER} s", text)
    fleet_s, = figure(rf"re-list, the fleet \(every 180 s\): {NUMBER} s of summaries", text)
    assert series > 0 and samples > 0 and seconds > 0 and one_s > 0
    assert fleet_s == pytest.approx(one_s * 3, abs=0.06)
