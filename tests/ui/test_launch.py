"""Starting `gputui`: a bad kubeconfig is one line on stderr and exit 2, with no
screen drawn first; and the app reaches its first frame without the modules it
only needs once connected."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_gputui(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color", **(env or {})}
    environment.pop("KUBECONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args], capture_output=True, text=True, timeout=60, env=environment, stdin=subprocess.DEVNULL
    )


def write_kubeconfig(path: Path, context: str = "lab") -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "secret-token"}}],
        "contexts": [{"name": context, "context": {"cluster": "c", "user": "u"}}],
        "current-context": context,
    }
    path.write_text(json.dumps(doc))  # JSON is YAML
    return path


def broken(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("make_args", "expected"),
    [
        (lambda tmp: ["--kubeconfig", str(tmp / "missing")], "no such file"),
        (lambda tmp: ["--kubeconfig", str(broken(tmp / "kc", "clusters: [unclosed\n"))], "not valid YAML"),
        (lambda tmp: ["--kubeconfig", str(broken(tmp / "kc", "- a list\n"))], "not a kubeconfig"),
        (lambda tmp: ["--kubeconfig", str(write_kubeconfig(tmp / "kc")), "--context", "prod"], 'context "prod" not found'),
    ],
    ids=["missing", "not-yaml", "not-a-mapping", "unknown-context"],
)
def test_bad_kubeconfig_is_one_line_and_no_screen(tmp_path, make_args, expected):
    result = run_gputui(*make_args(tmp_path), env={"HOME": str(tmp_path)})
    assert result.returncode == 2, result
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gputui: ") and expected in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""  # the app never started: no screen, not even for a moment


def test_no_kubeconfig_at_all(tmp_path):
    result = run_gputui(env={"HOME": str(tmp_path)})
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == "gputui: no kubeconfig found: pass --kubeconfig PATH, set KUBECONFIG, or create ~/.kube/config"


def test_first_frame_needs_no_client_no_simulator():
    """What `gputui` imports before it draws: the Kubernetes client, aiohttp, PyYAML, prometheus_client
    and the simulator load later (connecting, the demo's thread), and take longer to import than the UI."""
    probe = (
        "import sys; from gputui.cli.main import _parse_app_args; from gputui.ui.launch import make_app; "
        "make_app(None); "
        "print(sorted(m for m in ('kubernetes_asyncio', 'aiohttp', 'yaml', 'prometheus_client', 'pynvml', 'gputui.sim') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
