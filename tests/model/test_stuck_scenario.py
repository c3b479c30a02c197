"""The simulator's `stuck` scenario: every stuck state there from the start, as a single look (`gputui report`) reads
it, and the config file's [stuck] thresholds honoured by the report; the fleet row's worst problem with its age; a
ComputeDomain NotReady with the nodes that did not join, in a running model (its fault) and the report."""
from __future__ import annotations

import json
import time

import pytest
import pytest_asyncio

from gputui.kube import fleet
from gputui.kube.config import connect
from gputui.kube.model import ClusterModel
from gputui.kube.verdicts import Verdict
from gputui.sim import SimCluster
from tests.model.scenario import FAST, until
from tests.model.test_report import report_of

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sim():
    async with SimCluster("stuck", faults=True) as cluster:
        yield cluster


class Clock:
    """The model's clock: wall time, plus what a test moves it by."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def __call__(self) -> float:
        return time.time() + self.ahead


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def watched(sim):
    clock = Clock()
    async with await connect(str(sim.kubeconfig_path)) as conn:
        async with ClusterModel(conn.api, clock=clock, **FAST) as model:
            assert await model.wait_synced(10)
            yield model, clock


def problems_of(data: dict, node: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in next(n for n in data["nodes"] if n["name"] == node)["problems"]:
        out.setdefault(p["code"], []).append(p["message"])
    return out


async def test_every_stuck_state_is_there_at_the_start(sim):
    rc, out, _ = await report_of("--kubeconfig", str(sim.kubeconfig_path), "-o", "json")
    data = json.loads(out)
    assert rc == 1
    mig = problems_of(data, "mig-1")[Verdict.MIG_STUCK]
    assert mig[0].startswith("the MIG manager failed to apply MIG config all-1g.10gb")
    assert mig[1].startswith("operands paused for a MIG change with none under way (nvidia.com/mig.config.state=failed)")
    assert Verdict.MIG_STUCK not in problems_of(data, "mig-2")  # pending since before this look: no age to judge
    [waiting] = problems_of(data, "up-1")[Verdict.DRIVER_UPGRADE_STUCK]
    assert "wait-for-jobs-required" in waiting and waiting.endswith("for 120m")  # the controller's own start time
    assert problems_of(data, "up-1")[Verdict.CORDONED][0].startswith("node is cordoned by the GPU driver upgrade")
    [failed] = problems_of(data, "up-2")[Verdict.DRIVER_UPGRADE_STUCK]
    assert failed.startswith("the GPU driver upgrade failed")
    [left] = problems_of(data, "nvs-1")[Verdict.LEFT_CORDONED]
    assert left.startswith("cordoned by NVSentinel for GpuMemWatch (GPU-fatal-error-ruleset)") and left.endswith("left cordoned for 120m")
    [domain] = data["compute_domains"]
    assert (domain["namespace"], domain["name"], domain["status"], domain["num_nodes"]) == ("ml", "nvl-train", "NotReady", 4)
    assert [(n["name"], n["status"]) for n in domain["nodes"]] == [("nvl-1", "Ready"), ("nvl-2", "NotReady")]
    assert domain["not_joined"] == ["nvl-3", "nvl-4"] and domain["problem"]["code"] == Verdict.COMPUTE_DOMAIN_NOT_READY
    assert domain["problem"]["message"].startswith("ComputeDomain ml/nvl-train NotReady since before gputui's first look, "
                                                   "created 120m ago: 2 of 4 nodes joined, 1 Ready; not Ready: nvl-2; "
                                                   "did not join: nvl-3, nvl-4")


async def test_the_report_honours_the_config_files_thresholds(sim, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text("[stuck]\nupgrade_after = 10800\n")  # 3 hours: waiting for jobs for 2 is not stuck yet
    _, out, _ = await report_of("--kubeconfig", str(sim.kubeconfig_path), "--config", str(config), "-o", "json")
    assert Verdict.DRIVER_UPGRADE_STUCK not in problems_of(json.loads(out), "up-1")


async def test_the_fleet_row_names_the_worst_stuck_state_with_its_age(watched):
    model, clock = watched
    row = await fleet.figures("stuck", model, clock())
    assert row["worst"] == (Verdict.MIG_STUCK, "mig-1") and row["problem_nodes"] == 4
    assert row["worst_subject"] is None  # failed before gputui's first look: no age yet ("over 0s" says nothing)
    clock.ahead += 5 * 60
    model.recheck_due()
    row = await fleet.figures("stuck", model, clock())
    assert (row["worst"], row["worst_subject"]) == ((Verdict.MIG_STUCK, "mig-1"), "over 5m")


def domain(model: ClusterModel):
    [view] = model.domain_views()
    return view


async def test_a_compute_domain_turns_ready_then_not_ready_stuck_past_its_threshold(sim, watched):
    model, clock = watched
    try:
        sim.faults.compute_domain("ml", "nvl-train", ["nvl-1", "nvl-2", "nvl-3", "nvl-4"], [])
        await until(lambda: domain(model).domain.status == "Ready", what="Ready")
        assert domain(model).finding.problem is None and domain(model).not_joined == ()
        assert not [p for p in model.cluster_problems() if p.code == Verdict.COMPUTE_DOMAIN_NOT_READY]
        sim.faults.compute_domain("ml", "nvl-train", ["nvl-1", "nvl-2", "nvl-3"], ["nvl-3"])  # nvl-4's daemon is gone
        await until(lambda: domain(model).domain.status == "NotReady", what="NotReady")
        assert domain(model).finding.problem is None  # just now: the daemons may be starting
        clock.ahead += 11 * 60
        model.recheck_due()
        [problem] = [p for p in model.cluster_problems() if p.code == Verdict.COMPUTE_DOMAIN_NOT_READY]
        assert problem.message == ("ComputeDomain ml/nvl-train NotReady for 11m: 3 of 4 nodes joined, 2 Ready; not Ready: nvl-3; "
                                   "did not join: nvl-4 (the domain's channel claims are allocated there)")
        assert problem.subject == "11m"
    finally:
        sim.faults.compute_domain("ml", "nvl-train", ["nvl-1", "nvl-2"], ["nvl-2"])


async def test_the_compute_domain_fault_refuses_what_it_cannot_do(sim):
    with pytest.raises(ValueError, match="no ComputeDomain ml/nope"):
        sim.faults.compute_domain("ml", "nope", [], [])
    with pytest.raises(ValueError, match="not Ready but not joined: nvl-2"):
        sim.faults.compute_domain("ml", "nvl-train", ["nvl-1"], ["nvl-2"])
