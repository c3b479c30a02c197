"""`gputui report` never prints a figure from a part it could not read: required parts (nodes, pods)
fail fast with the server's message; optional ones are named, on stderr and in the JSON's `missing`."""
from __future__ import annotations

import json

import pytest
import pytest_asyncio

from gputui.report.contract import REQUIRED_FAILURES
from gputui.sim.cluster import SimCluster
from tests.model.scenario import small_cluster
from tests.model.test_report import assert_one_line_error, report_of

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sim():
    async with SimCluster(small_cluster(), faults=True) as cluster:
        yield cluster


async def test_a_failing_pods_list_exits_2_within_seconds_with_the_servers_message(sim):
    sim.faults.fail("pods", 500)
    fault = sim.faults.lookup("pods")
    try:
        rc, out, err = await report_of("--kubeconfig", str(sim.kubeconfig_path), "-o", "json")
    finally:
        sim.faults.clear()
    assert_one_line_error(rc, out, err, "cannot list pods", "Internal error occurred: simulated failure serving pods", "(500)")
    assert fault.refused == REQUIRED_FAILURES  # gave up after a few tries, not when a timeout ran out


async def test_a_forbidden_optional_part_is_named_not_guessed(sim):
    sim.faults.fail("daemonsets.apps", 403)
    sim.faults.fail("events", 403)
    try:
        rc, out, err = await report_of("--kubeconfig", str(sim.kubeconfig_path), "-o", "json")
        _, table, table_err = await report_of("--kubeconfig", str(sim.kubeconfig_path))
    finally:
        sim.faults.clear()
    assert rc == 1, err
    data = json.loads(out)
    missing = {part["part"]: part["reason"] for part in data["missing"]}
    # metrics too: without DaemonSets no exporter is known to ask
    assert set(missing) == {"events", "daemonsets", "metrics"}, data["missing"]
    assert missing["metrics"] == "exporter unknown until pods and DaemonSets are listed (3 nodes)"
    assert missing["daemonsets"].startswith('forbidden (403): daemonsets.apps is forbidden: User "system:serviceaccount:gputui:viewer"')
    assert missing["events"].startswith("forbidden (403): events is forbidden")
    warnings = [line for line in err.splitlines() if line.startswith("gputui report: warning: ")]
    assert len(warnings) == 3 and err.count("\n") == 3, err
    assert any("daemonsets are forbidden (403)" in w and "components are unknown" in w for w in warnings)
    # what was read is still there
    assert [n["name"] for n in data["nodes"]] == ["gpu-1", "gpu-2", "mig-1", "cpu-1"]
    assert data["totals"]["nvidia.com/mig-1g.10gb"]["allocated"] == 2
    # the table does not say "no GPU stack" when it could not look
    assert "GPU stack: unknown (daemonsets could not be read)" in table and "none found" not in table
    assert "not read: daemonsets: forbidden (403)" in table and "not read: events: forbidden (403)" in table
    assert table_err.count("\n") == 3


async def test_a_failing_optional_part_gives_up_soon_and_is_named(sim):
    sim.faults.fail("resourceclaims.resource.k8s.io", 500)
    fault = sim.faults.lookup("resourceclaims.resource.k8s.io")
    try:
        rc, out, err = await report_of("--kubeconfig", str(sim.kubeconfig_path), "-o", "json")
    finally:
        sim.faults.clear()
    assert rc == 1, err
    data = json.loads(out)
    assert data["missing"] == [{"part": "resourceclaims", "reason": "Internal error occurred: simulated failure serving "
                                "resourceclaims.resource.k8s.io (500)"}], data["missing"]
    assert "gputui report: warning: resourceclaims could not be read: Internal error occurred" in err
    assert "not counted as allocated" in err
    assert fault.refused == REQUIRED_FAILURES  # gave up after a few tries
