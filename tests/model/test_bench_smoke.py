"""The model benchmark script runs end to end on a tiny cluster."""
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench_model.py"


def test_bench_model_smoke():
    out = subprocess.run([sys.executable, str(BENCH), "--smoke"], capture_output=True, text=True, timeout=110)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "gputui model" in out.stdout and "kubectl+jq (seed)" in out.stdout
    assert "PASS  model applies >= 5,000 watch events/s" in out.stdout
