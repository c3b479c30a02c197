"""The UI benchmark runs (tiny): every figure it promises is printed."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench_ui.py"


@pytest.mark.timeout(120)
def test_bench_ui_smoke():
    done = subprocess.run([sys.executable, str(BENCH), "--smoke"], capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stdout + done.stderr
    for figure in ("first frame, gputui --demo", "keypress-to-frame", "event-loop lag", "memory over"):
        assert figure in done.stdout, figure
    assert " ms" in done.stdout and " s " in done.stdout
