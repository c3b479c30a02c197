"""Stuck GPU plumbing (kube/stuck.py) on the simulator's `health` scenario, each state written by a fault command
as its component writes it: it appears in a running model with its age, past its threshold where it has one, and
clears; the report's JSON says the same from a single look."""
from __future__ import annotations

import json
import time

import pytest
import pytest_asyncio

from gputui.kube import stuck
from gputui.kube.config import connect
from gputui.kube.model import ClusterModel
from gputui.kube.records import Node, node_from
from gputui.kube.verdicts import Verdict
from gputui.sim import SimCluster
from tests.model.objects import node
from tests.model.scenario import FAST, until
from tests.model.test_report import report_of

pytestmark = pytest.mark.asyncio(loop_scope="module")
MINUTE = 60.0


class Clock:
    """The model's clock: wall time, plus what a test moves it by."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def __call__(self) -> float:
        return time.time() + self.ahead


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sim():
    async with SimCluster("health", faults=True) as cluster:
        yield cluster


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def watched(sim):
    clock = Clock()
    async with await connect(str(sim.kubeconfig_path)) as conn:
        async with ClusterModel(conn.api, clock=clock, **FAST) as model:
            assert await model.wait_synced(10)
            yield model, clock


def problems(model: ClusterModel, node: str, code: Verdict) -> list[str]:
    summary = model.summary(node)
    return [p.message for p in summary.problems if p.code == code] if summary else []


async def later(model: ClusterModel, clock: Clock, seconds: float) -> None:
    clock.ahead += seconds
    model.recheck_due()


async def test_a_mig_change_pending_past_its_threshold_is_stuck_with_its_age_and_clears(sim, watched):
    model, clock = watched
    sim.faults.mig_state("mig-1", "pending")
    await until(lambda: model.nodes.records["mig-1"].labels.get("nvidia.com/mig.config.state") == "pending", what="pending")
    assert problems(model, "mig-1", Verdict.MIG_STUCK) == []  # at work, not yet for long
    await later(model, clock, 31 * MINUTE)
    [stuck] = problems(model, "mig-1", Verdict.MIG_STUCK)
    assert stuck.startswith("MIG reconfiguration to all-1g.10gb pending") and stuck.endswith("for 31m")
    sim.faults.mig_state("mig-1", "success")
    await until(lambda: not problems(model, "mig-1", Verdict.MIG_STUCK), what="cleared")


async def test_operands_paused_with_no_change_under_way_and_a_failed_change(sim, watched):
    model, _ = watched
    sim.faults.mig_state("mig-1", "pending")
    sim.faults.mig_state("mig-1", "failed")  # the MIG manager stops on the error: its clients stay paused
    found = await until(lambda: len(problems(model, "mig-1", Verdict.MIG_STUCK)) == 2 and problems(model, "mig-1", Verdict.MIG_STUCK))
    assert found[0].startswith("the MIG manager failed to apply MIG config all-1g.10gb")
    assert "operands paused for a MIG change with none under way (nvidia.com/mig.config.state=failed)" in found[1]
    assert "device-plugin" in found[1]
    sim.faults.mig_state("mig-1", "success")
    await until(lambda: not problems(model, "mig-1", Verdict.MIG_STUCK), what="cleared")


async def test_a_driver_upgrade_cordons_says_so_is_stuck_past_its_threshold_and_clears(sim, watched):
    model, clock = watched
    sim.faults.upgrade_state("gpu-1", "drain-required")
    cordon = await until(lambda: problems(model, "gpu-1", Verdict.CORDONED), what="cordoned by the upgrade")
    assert cordon[0].startswith("node is cordoned by the GPU driver upgrade (nvidia.com/gpu-driver-upgrade-state=drain-required)")
    assert problems(model, "gpu-1", Verdict.DRIVER_UPGRADE_STUCK) == []
    await later(model, clock, 61 * MINUTE)
    [stuck] = problems(model, "gpu-1", Verdict.DRIVER_UPGRADE_STUCK)
    assert "drain-required" in stuck and stuck.endswith("for 61m")  # as kubectl says ages
    sim.faults.upgrade_state("gpu-1", "wait-for-jobs-required")  # its start time is the controller's annotation
    await until(lambda: any("wait-for-jobs-required" in p for p in problems(model, "gpu-1", Verdict.DRIVER_UPGRADE_STUCK)),
                what="stuck waiting for jobs (the annotation's time, the clock an hour on)")
    sim.faults.upgrade_state("gpu-1", "upgrade-failed")
    [failed] = await until(lambda: [p for p in problems(model, "gpu-1", Verdict.DRIVER_UPGRADE_STUCK) if "failed" in p])
    assert failed.startswith("the GPU driver upgrade failed")
    sim.faults.upgrade_state("gpu-1", "upgrade-done")
    await until(lambda: not problems(model, "gpu-1", Verdict.DRIVER_UPGRADE_STUCK) and not problems(model, "gpu-1", Verdict.CORDONED),
                what="done and uncordoned")


async def test_a_node_nvsentinel_left_cordoned_once_healthy_again(sim, watched):
    """Its fault quarantine halted, NVSentinel does not act on the healthy event: the node stays cordoned."""
    model, _ = watched
    sim.faults.quarantine("dra-1", "GpuMemWatch", "uncorrectable ECC")
    cordon = await until(lambda: problems(model, "dra-1", Verdict.CORDONED), what="quarantined")
    assert "NVSentinel" in cordon[0] and problems(model, "dra-1", Verdict.LEFT_CORDONED) == []  # still unhealthy
    sim.faults.heal("dra-1", "GpuMemWatch", halted=True)
    [left] = await until(lambda: problems(model, "dra-1", Verdict.LEFT_CORDONED), what="left cordoned")
    assert left.startswith("cordoned by NVSentinel for GpuMemWatch (GPU-fatal-error-ruleset), its health conditions "
                           "healthy again: left cordoned for ")


async def test_nvsentinel_lifts_its_quarantine_once_every_check_it_holds_the_node_for_is_healthy(sim, watched):
    model, _ = watched
    sim.faults.quarantine("gpu-1", "GpuMemWatch", "uncorrectable ECC")
    sim.faults.quarantine("gpu-1", "SysLogsXIDError", "Xid 79")
    await until(lambda: problems(model, "gpu-1", Verdict.CORDONED), what="quarantined")
    sim.faults.heal("gpu-1", "GpuMemWatch")  # SysLogsXIDError still holds it
    await until(lambda: not any("GpuMemWatch" in p for p in problems(model, "gpu-1", Verdict.HEALTH_CONDITION)), what="healed")
    assert problems(model, "gpu-1", Verdict.CORDONED) and not problems(model, "gpu-1", Verdict.LEFT_CORDONED)
    sim.faults.heal("gpu-1", "SysLogsXIDError")
    await until(lambda: not problems(model, "gpu-1", Verdict.CORDONED), what="uncordoned by NVSentinel")
    assert not problems(model, "gpu-1", Verdict.LEFT_CORDONED)
    record = model.node("gpu-1")
    assert record is not None
    labels = record.labels
    assert labels["k8saas.nvidia.com/uncordon-by"] == "NVSentinel" and "k8saas.nvidia.com/cordon-by" not in labels
    assert "dgxc.nvidia.com/nvsentinel-state" not in labels


async def test_a_check_no_nvsentinel_monitor_sends_is_refused(sim):
    with pytest.raises(ValueError, match="NVSentinel"):
        sim.faults.quarantine("gpu-1", "NVSwitchFatal")


async def test_the_report_says_what_a_single_look_can(sim, watched):
    """A pending MIG change is not stuck for an age the report cannot know; failed states and a left cordon are.
    (Each test sets up what it reads: the module's tests may run on different workers.)"""
    sim.faults.mig_state("mig-1", "failed")
    sim.faults.upgrade_state("ts-1", "upgrade-failed")
    sim.faults.quarantine("dra-1", "GpuMemWatch", "uncorrectable ECC")
    sim.faults.heal("dra-1", "GpuMemWatch", halted=True)
    try:
        rc, out, _ = await report_of("--kubeconfig", str(sim.kubeconfig_path), "-o", "json")
        data = json.loads(out)
        codes = {n["name"]: {p["code"] for p in n["problems"]} for n in data["nodes"]}
        assert rc == 1 and Verdict.MIG_STUCK in codes["mig-1"] and Verdict.DRIVER_UPGRADE_STUCK in codes["ts-1"]
        assert Verdict.LEFT_CORDONED in codes["dra-1"]
        sim.faults.mig_state("mig-1", "pending")
        rc, out, _ = await report_of("--kubeconfig", str(sim.kubeconfig_path), "-o", "json")
        mig = next(n for n in json.loads(out)["nodes"] if n["name"] == "mig-1")
        assert Verdict.MIG_STUCK not in {p["code"] for p in mig["problems"]}
    finally:
        sim.faults.mig_state("mig-1", "success")
        sim.faults.upgrade_state("ts-1", "upgrade-done")


def _nvsentinel_node(annotations: dict[str, str], cordon_by: str = "NVSentinel") -> Node:
    obj = node("n", labels={"k8saas.nvidia.com/cordon-by": cordon_by, "k8saas.nvidia.com/cordon-reason": "GPU-fatal-error-ruleset",
                            "k8saas.nvidia.com/cordon-timestamp": "2026-01-02T03-04-05Z"}, unschedulable=True)
    obj["metadata"]["annotations"] = annotations
    return node_from(obj)


async def test_the_cordon_is_nvsentinels_by_its_annotation_not_by_the_labels_a_manual_uncordon_leaves():
    """NVSentinel keeps its cordon-* labels when an admin uncordons the node (it notes
    quarantinedNodeUncordonedManually): a later cordon is the admin's. A forced quarantine's cordon-by names the
    agent and its creator, not NVSentinel; quarantineHealthEventIsCordoned says the cordon is NVSentinel's."""
    recordonned = _nvsentinel_node({"quarantinedNodeUncordonedManually": "True"})
    assert stuck.cordon_words(recordonned) is None and stuck.left_cordoned(recordonned, stuck.StateMemory(), 0.0) == []
    events = '[{"agent": "gpu-health-monitor", "checkName": "GpuMemWatch", "isFatal": true}]'
    forced = _nvsentinel_node({"quarantineHealthEvent": events, "quarantineHealthEventIsCordoned": "True"}, "ops-tool-u1")
    assert stuck.cordon_words(forced) == "node is cordoned by NVSentinel's fault quarantine: no new pods are scheduled on it"
    [left] = stuck.left_cordoned(forced, stuck.StateMemory(), 0.0)
    assert left.problem is not None and left.problem.message.startswith(
        "cordoned by NVSentinel for GpuMemWatch (GPU-fatal-error-ruleset), its health conditions healthy again: left cordoned")
