"""The GPU Operator's DRA-based stack, a GPUCluster in place of a ClusterPolicy (the simulator's `gpu-cluster`
scenario): recognised as the GPU Operator alike, its notReady a problem with its age, in the report."""
from __future__ import annotations

import json

import pytest
import pytest_asyncio

from gputui.kube import stack
from gputui.kube.verdicts import Verdict
from gputui.sim import SimCluster
from gputui.sim.scenarios.gpu_cluster import gpu_cluster
from tests.model.test_report import report_of


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sim():
    async with SimCluster("gpu-cluster") as cluster:
        yield cluster


@pytest.mark.asyncio(loop_scope="module")
async def test_a_gpu_cluster_not_ready_is_the_operator_not_ready_with_its_age(sim):
    rc, out, _ = await report_of("--kubeconfig", str(sim.kubeconfig_path), "-o", "json")
    data = json.loads(out)
    assert rc == 1 and data["stack"]["kind"] == "gpu-operator" and data["stack"]["namespace"] == "gpu-operator"
    policy = data["stack"]["cluster_policy"]
    assert (policy["kind"], policy["name"], policy["state"]) == ("GPUCluster", "gpu-cluster", "notReady")
    # As the operator's controller writes it: Ready=False carries no message, Error=True says why.
    assert policy["message"] == "Waiting for operand pods to be ready" and policy["since"] > 0
    _, table, _ = await report_of("--kubeconfig", str(sim.kubeconfig_path), "-o", "table")
    assert "GPU stack: gpu-operator in gpu-operator; GPUCluster gpu-cluster: notReady" in table
    assert f"cluster: {Verdict.OPERATOR_NOT_READY}: GPUCluster gpu-cluster is notReady for 120m:" in table


def test_a_cluster_policy_comes_before_a_gpu_cluster_and_ages_are_optional():
    from datetime import datetime, timezone

    now = datetime(2026, 12, 1, tzinfo=timezone.utc)
    policy = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "zz-policy"}, "status": {"state": "ready"}}
    found = stack.detect_stack([], [gpu_cluster("notReady", 600, now), policy])
    assert found.cluster_policy is not None and (found.cluster_policy.kind, found.cluster_policy.name) == ("ClusterPolicy", "zz-policy")
    alone = stack.detect_stack([], [gpu_cluster("notReady", 600, now, "why")]).cluster_policy
    assert alone is not None and alone.kind == "GPUCluster"
    [problem] = stack.policy_problems(alone, now.timestamp())
    assert (problem.message, problem.subject) == ("GPUCluster gpu-cluster is notReady for 10m: why", "10m")
    assert stack.policy_problems(alone)[0].message == "GPUCluster gpu-cluster is notReady: why"  # no clock: no age


def test_a_gpu_cluster_is_as_the_operator_writes_it():
    """status.state is the CRD's enum (no "ignored": a GPUCluster is a singleton); ready, Ready=True (Reconciled) and
    Error=False; not ready, the message on Error=True and none on Ready=False, which the model reads."""
    from datetime import datetime, timezone

    now = datetime(2026, 12, 1, tzinfo=timezone.utc)
    with pytest.raises(ValueError, match="ready, notReady, disabled"):
        gpu_cluster("ignored", 600, now)
    ready = gpu_cluster("ready", 600, now)
    assert [(c["type"], c["status"], c["reason"]) for c in ready["status"]["conditions"]] == [
        ("Ready", "True", "Reconciled"), ("Error", "False", "Ready")]
    assert stack.policy_problems(stack.cluster_policy_status(ready)) == []
    failed = gpu_cluster("notReady", 600, now, "Error syncing state state-dra-driver: boom", "ReconcileFailed")
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in failed["status"]["conditions"]] == [
        ("Ready", "False", "Error", ""), ("Error", "True", "ReconcileFailed", "Error syncing state state-dra-driver: boom")]
    assert stack.cluster_policy_status(failed).message == "Error syncing state state-dra-driver: boom"
