"""`gputui sim` as a process: serving line, kubeconfig for kubectl, clean stop, clear refusals."""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sim.sim_api_objects import small_cluster

REPO = Path(__file__).resolve().parents[2]


def gputui_sim(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.Popen(
        [sys.executable, "-m", "gputui", "sim", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )


def first_line(proc: subprocess.Popen[str], timeout: float = 30) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "gputui sim printed nothing in time"
    return proc.stdout.readline().strip()


@pytest.fixture
def scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": small_cluster()}))
    return path


def test_serves_until_sigterm_and_kubectl_uses_its_kubeconfig(tmp_path, scenario_file, make_kubectl):
    kubeconfig = tmp_path / "out" / "kubeconfig"
    proc = gputui_sim("--scenario", str(scenario_file), "--port", "0", "--kubeconfig-out", str(kubeconfig))
    try:
        line = first_line(proc)
        assert line.startswith("serving https://127.0.0.1:")  # HTTPS by default (a throw-away CA)
        port = int(line.rsplit(":", 1)[1])
        assert port > 0
        assert f"server: https://127.0.0.1:{port}" in kubeconfig.read_text()
        assert "certificate-authority-data: " in kubeconfig.read_text()
        assert "current-context: gputui-sim" in kubeconfig.read_text()
        kubectl = make_kubectl(kubeconfig)
        assert sorted(kubectl("get", "nodes", "-o", "name").split()) == ["node/gpu-1", "node/gpu-2", "node/gpu-3"]
    finally:
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=15)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr


def test_port_in_use_is_refused_with_one_line():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = gputui_sim("--port", str(port))
        stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert stdout == ""
    assert stderr.strip() == f"gputui sim: port {port} on 127.0.0.1 is already in use (choose another with --port, or --port 0)"


def test_bad_scenario_names_file_item_and_reason(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: a}\n- apiVersion: v1\n  kind: Pod\n  metadata: {namespace: x}\n")
    proc = gputui_sim("--scenario", str(path))
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1
    assert str(path) in stderr and "item 1" in stderr and "name" in stderr


def test_unparsable_scenario_is_refused(tmp_path):
    path = tmp_path / "garbage.yaml"
    path.write_text("items: [\n")
    proc = gputui_sim("--scenario", str(path))
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert stderr.startswith(f"gputui sim: {path}: ") and "Traceback" not in stderr


def test_events_lag_puts_events_in_an_etcd_of_their_own(tmp_path, scenario_file, make_kubectl):
    kubeconfig = tmp_path / "kubeconfig"
    proc = gputui_sim("--scenario", str(scenario_file), "--events-lag", "1000", "--kubeconfig-out", str(kubeconfig))
    try:
        assert first_line(proc).startswith("serving https://")
        kubectl = make_kubectl(kubeconfig)
        versions = {kind: int(json.loads(kubectl("get", "--raw", f"/api/v1/{kind}"))["metadata"]["resourceVersion"])
                    for kind in ("nodes", "events")}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=15)
    # Events' own sequence is 1000 revisions behind the main etcd's (one etcd: both lists carry the same revision).
    assert versions["nodes"] - versions["events"] >= 1000, versions
