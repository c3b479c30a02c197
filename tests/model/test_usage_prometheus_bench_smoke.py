"""The usage benchmark runs end to end on two hours of two nodes, raw, from the rules (and by node and model as an
older rules file reads them), and from two copies of the rules' series, and prints its figures (which, not how fast)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import prometheus as prom

BENCH = Path(__file__).resolve().parent.parent / "bench_usage_prometheus.py"


@pytest.mark.skipif(prom.BINARY is None or prom.PROMTOOL is None, reason=prom.MISSING)
def test_bench_usage_prometheus_smoke_prints_its_figures():
    out = subprocess.run([sys.executable, str(BENCH), "--smoke", "--replicate", "2"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]  # it also checks the copies' figures twice the one's
    rows = re.findall(r"^  (\S+) +(raw|rules|older) +[\d.]+ s +([\d,]+) samples .*\((raw series|recording rules gputui:\*:1[mh])[;,]", out.stdout, re.M)
    asked = [(by, how, words) for by, how, _, words in rows]
    hourly, minute = "recording rules gputui:*:1h", "recording rules gputui:*:1m"
    # by node and model also as a rules file without their own rules reads them: by node, the 1-minute ones
    rules = [("namespace", "rules", hourly), ("label:team", "rules", hourly), ("node", "rules", hourly), ("node", "older", minute),
             ("model", "rules", hourly), ("model", "older", hourly)]
    assert asked == [*((by, "raw", "raw series") for by in ("namespace", "label:team", "node", "model")), *rules, *rules], out.stdout  # then the two copies
    assert all(int(samples.replace(",", "")) > 0 for _, _, samples, _ in rows)
    assert out.stdout.count("each figure 2 times the one cluster's") == 6
