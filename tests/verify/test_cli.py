"""`gputui verify` as a person or a script runs it: a real process against the simulated cluster."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest
import pytest_asyncio

from gputui.sim.cluster import SimCluster
from tests.verify import cluster
from tests.verify.cluster import verification_pods

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.usefixtures("nothing_left_behind")]
REPO = Path(__file__).resolve().parents[2]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sim():
    # Slower than the lifecycle tests' cluster, so a signal can reach a pod that is still running.
    async with SimCluster(cluster.objects(), speed=2, faults=True) as s:
        yield s


async def start(sim, *args: str, stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, kubeconfig: str | None = None):
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gputui", "verify", *args, "--kubeconfig", kubeconfig or str(sim.kubeconfig_path),
        stdin=stdin, stdout=asyncio.subprocess.PIPE, stderr=stderr, env=env, cwd=REPO,
    )


async def gputui_verify(sim, *args: str, **kw) -> tuple[int, str, str]:
    proc = await start(sim, *args, **kw)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, out.decode(), (err or b"").decode()


async def wait_for_pod(sim, timeout: float = 20.0) -> str:
    async with asyncio.timeout(timeout):
        while not (pods := verification_pods(sim)):  # noqa: ASYNC110  (the simulator's store has no event to wait on)
            await asyncio.sleep(0.02)
    return pods[0]


def run_in_process(capsys, *args: str) -> tuple[int, str, str]:
    """For the refusals that happen before any connection: no process to start."""
    from gputui.cli.main import main

    code = main(["verify", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["gpu-ok"], "gputui verify: refusing to create pods without confirmation: no terminal to ask on, pass --yes"),
        (["gpu-ok", "--yes", "--read-only"], "gputui verify: read-only mode: verification creates a pod on each node, so nothing was done"),
        (["--yes"], "gputui verify: name at least one NODE, or pass --all"),
        (["gpu-ok", "--all", "--yes"], "gputui verify: name nodes or pass --all, not both"),
    ],
)
async def test_refusals_before_connecting(sim, created, capsys, args, message):
    before = len(created)
    code, out, err = run_in_process(capsys, *args, "--kubeconfig", str(sim.kubeconfig_path))
    assert (code, out, err.strip()) == (2, "", message)
    assert len(created) == before


async def test_pass_prints_progress_and_the_verdict(sim):
    code, out, err = await gputui_verify(sim, "gpu-ok", "--yes", "--timeout", "30")
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split() == ["NODE", "RESULT", "RESOURCE", "TIME", "DETAIL"]
    assert row.split()[:4] == ["gpu-ok", "PASS", "nvidia.com/gpu", "x1"]
    assert "NVIDIA H100 80GB HBM3, driver 550.54.15, CUDA 12.4" in row
    assert "creating pod gputui-verify-gpu-ok-" in err
    assert "Normal Scheduled: Successfully assigned default/gputui-verify-gpu-ok-" in err
    assert "| NVIDIA-SMI" in err.replace("|  NVIDIA", "| NVIDIA") or "NVIDIA-SMI" in err
    assert "pod deleted" in err


async def test_json_and_exit_1_when_a_node_fails(sim):
    code, out, err = await gputui_verify(sim, "gpu-ok", "gpu-full", "--yes", "-o", "json")
    assert code == 1, err
    doc = json.loads(out)
    assert [(d["node"], d["result"], d["code"]) for d in doc["verdicts"]] == [("gpu-ok", "PASS", "pass"), ("gpu-full", "FAIL", "unschedulable")]
    creating = [line for line in err.splitlines() if "creating pod" in line]
    assert len(creating) == 2 and len({line.index("creating pod") for line in creating}) == 1  # one column, node names padded
    assert doc["verdicts"][0]["gpus"][0]["model"] == "NVIDIA H100 80GB HBM3"
    assert "Insufficient nvidia.com/gpu" in doc["verdicts"][1]["reason"]
    assert all(d["deleted"] for d in doc["verdicts"])
    assert (doc["passed"], doc["failed"]) == (1, 1)


async def test_all_gpu_nodes(sim):
    code, out, _ = await gputui_verify(sim, "--all", "--yes", "-o", "json", "--concurrency", "8")
    assert code == 1  # the cluster has broken nodes on purpose
    verdicts = {d["node"]: d for d in json.loads(out)["verdicts"]}
    assert "cpu-only" not in verdicts
    assert {n for n, d in verdicts.items() if d["result"] == "PASS"} == {"gpu-ok", "gpu-mig", "gpu-shared"}
    assert verdicts["gpu-image-pull"]["code"] == "image-pull"


async def test_unknown_node(sim):
    code, out, err = await gputui_verify(sim, "no-such-node", "--yes")
    assert (code, out, err.strip()) == (2, "", "gputui verify: node 'no-such-node' not found")


async def test_connection_errors_are_one_line(sim, tmp_path):
    broken = tmp_path / "kubeconfig"
    broken.write_text("clusters: [\n")
    code, _, err = await gputui_verify(sim, "gpu-ok", "--yes", kubeconfig=str(broken))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    code, _, err = await gputui_verify(sim, "gpu-ok", "--yes", "--context", "nope")
    assert code == 2 and 'context "nope" not found' in err and "Traceback" not in err


async def test_forbidden_create_says_which_permission(sim):
    sim.faults.fail("pods", 403)
    code, out, err = await gputui_verify(sim, "gpu-ok", "--yes")
    assert code == 2, err
    assert "forbidden: you may not create pods in namespace default (RBAC: create pods in namespace default)" in out


async def test_ctrl_c_deletes_the_pod_before_exiting(sim):
    proc = await start(sim, "gpu-ok", "--yes")
    await wait_for_pod(sim)
    proc.send_signal(signal.SIGINT)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 130, err.decode()
    assert "every verification pod was deleted" in err.decode()
    assert verification_pods(sim) == []


async def test_a_killed_run_is_found_and_cleaned_next_time(sim):
    proc = await start(sim, "gpu-ok", "--yes")
    left = await wait_for_pod(sim)
    proc.kill()  # no chance to clean up
    await proc.wait()
    assert verification_pods(sim) == [left]
    code, out, err = await gputui_verify(sim, "gpu-shared", "--yes", "--clean-leftovers")
    assert code == 0, err
    assert "Found 1 verification pod(s) left over from an earlier run:" in err
    assert f"default/{left}  node gpu-ok" in err
    assert "Deleted 1 leftover pod(s)." in err


async def test_confirmation_on_a_terminal_shows_the_pod(sim, created):
    before = len(created)
    master, slave = os.openpty()
    try:
        proc = await start(sim, "gpu-ok", stdin=slave, stderr=slave)
        os.close(slave)
        seen = b""
        async with asyncio.timeout(30):
            while b"Create? [y/N]" not in seen:
                seen += await asyncio.to_thread(os.read, master, 65536)
        os.write(master, b"n\n")
        out, _ = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        os.close(master)
    text = seen.decode()
    assert proc.returncode == 2
    assert "    command:\n    - nvidia-smi\n" in text.replace("\r\n", "\n")
    assert "nvidia.com/gpu: '1'" in text
    assert len(created) == before
