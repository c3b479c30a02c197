"""`gputui report --contexts / --all-contexts`: four clusters in one kubeconfig (healthy, a broken GPU
stack, unreachable, a bad token, and a slow one), read at once; one never holds the others back."""
from __future__ import annotations

import json
import socket

import pytest
import pytest_asyncio
import yaml

from gputui.sim import scenarios
from gputui.sim.cluster import SimCluster, kubeconfig_for, merged_kubeconfig
from tests.model.objects import node, plugin_pod, pod
from tests.model.test_report import report_of

pytestmark = pytest.mark.asyncio(loop_scope="module")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def clusters():
    healthy_objects = [node("gpu-1", capacity={"nvidia.com/gpu": 4}, labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}), plugin_pod("gpu-1"),
                       pod("ml", "a", node="gpu-1", gpu={"nvidia.com/gpu": 1})]
    async with SimCluster(healthy_objects) as healthy, \
            SimCluster(scenarios.load("operator-driver-crashloop")) as broken, \
            SimCluster(healthy_objects, faults=True) as slow:
        yield {"healthy": healthy, "broken": broken, "slow": slow}


@pytest.fixture
def fleet_kubeconfig(tmp_path, clusters) -> str:
    """One kubeconfig, a context per cluster: two good ones, one slow, one refusing connections, one bad token."""
    docs = {
        "healthy": kubeconfig_for(clusters["healthy"].url),
        "broken": kubeconfig_for(clusters["broken"].url),
        "slow": kubeconfig_for(clusters["slow"].url),
        "down": kubeconfig_for(f"https://127.0.0.1:{closed_port()}"),
        "bad-token": kubeconfig_for(clusters["healthy"].url, token="not-a-token"),
    }
    path = tmp_path / "fleet-kubeconfig"
    path.write_text(yaml.safe_dump(merged_kubeconfig(docs)))
    return str(path)


async def test_every_cluster_read_at_once_and_the_worst_exit_status(fleet_kubeconfig, clusters):
    clusters["slow"].faults.slow("pods", 30)
    try:
        rc, out, err = await report_of("--kubeconfig", fleet_kubeconfig, "--all-contexts", "--cluster-timeout", "4", "-o", "json")
    finally:
        clusters["slow"].faults.clear()
    assert rc == 2, err  # two could not be read
    data = json.loads(out)
    rows = {c["context"]: c for c in data["clusters"]}
    assert [c["context"] for c in data["clusters"]] == ["healthy", "broken", "slow", "down", "bad-token"]  # kubeconfig order
    assert rows["healthy"]["error"] is None and [n["name"] for n in rows["healthy"]["nodes"]] == ["gpu-1"]
    assert rows["healthy"]["totals"]["nvidia.com/gpu"] == {"capacity": 4, "allocatable": 4, "allocated": 1, "free": 3}
    assert rows["broken"]["error"] is None and any(n["problems"] for n in rows["broken"]["nodes"])
    assert rows["slow"]["error"] == "not read within 4 s"  # its timeout, not its 30 s pods list
    assert "connection refused" in rows["down"]["error"]
    assert "401" in rows["bad-token"]["error"] and "not-a-token" not in out + err
    assert set(rows["down"]) == {"context", "error"}

    totals = data["totals"]
    assert totals["clusters_read"] == 2
    assert totals["clusters_not_read"] == ["slow", "down", "bad-token"]
    assert totals["clusters_with_problems"] == ["broken"]
    read = [rows["healthy"], rows["broken"]]
    for resource, usage in totals["gpu"].items():
        assert usage == {k: sum(c["totals"].get(resource, {}).get(k, 0) for c in read) for k in usage}, resource
    assert set(totals["gpu"]) == {r for c in read for r in c["totals"]}
    models = {n["product"] for c in read for n in c["nodes"] if n["product"]}
    assert models and set(totals["by_model"]) == models
    for model, usage in totals["by_model"].items():
        assert usage["allocatable"] == sum(u["allocatable"] for c in read for n in c["nodes"] if n["product"] == model
                                           for u in n["gpu"].values())


async def test_exit_status_without_failures_and_globs(fleet_kubeconfig):
    rc, out, err = await report_of("--kubeconfig", fleet_kubeconfig, "--contexts", "healthy", "-o", "json")
    assert rc == 0, err
    assert [c["context"] for c in json.loads(out)["clusters"]] == ["healthy"]
    rc, out, err = await report_of("--kubeconfig", fleet_kubeconfig, "--contexts", "broken,healthy", "-o", "json")
    assert rc == 1, err  # the broken stack: a problem, nothing unread
    rc, out, err = await report_of("--kubeconfig", fleet_kubeconfig, "--contexts", "b*,healthy", "-o", "json")
    assert rc == 2, err  # bad-token could not be read
    assert [c["context"] for c in json.loads(out)["clusters"]] == ["healthy", "broken", "bad-token"]  # b* matches both
    assert json.loads(out)["totals"]["clusters_not_read"] == ["bad-token"]


async def test_the_table_has_a_section_per_cluster_and_the_fleet_line(fleet_kubeconfig):
    rc, out, err = await report_of("--kubeconfig", fleet_kubeconfig, "--contexts", "healthy,down,broken")
    assert rc == 2
    assert "context healthy: 1 nodes, 1 with GPUs, 0 with problems" in out
    assert "context down: not read: " in out and "connection refused" in out
    assert "context broken: " in out
    fleet_line = next(line for line in out.splitlines() if line.startswith("fleet: "))
    assert fleet_line.startswith("fleet: 2 of 3 clusters read; not read: down; with problems: broken")
    rc, tsv, _ = await report_of("--kubeconfig", fleet_kubeconfig, "--contexts", "healthy,down", "-o", "tsv")
    lines = tsv.splitlines()
    assert "healthy\tnode\tgpu-1\ttrue\ttrue" in "\n".join(lines)
    assert any(line.startswith("down\terror\t") for line in lines)


async def test_an_unknown_context_is_one_line_and_exit_2(fleet_kubeconfig):
    rc, out, err = await report_of("--kubeconfig", fleet_kubeconfig, "--contexts", "healthy,prod-*")
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("gputui report: 'prod-*' matches no context in the kubeconfig (contexts: healthy, broken, slow, down, bad-token)")
    rc, out, err = await report_of("--kubeconfig", fleet_kubeconfig, "--contexts", "healthy", "--context", "broken")
    assert rc == 2 and "--context" in err
