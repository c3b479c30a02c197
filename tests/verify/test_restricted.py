"""Verification on a locked-down cluster (the "restricted" scenario: PodSecurity restricted, ResourceQuotas on
cpu, memory and GPUs, a LimitRange): the pod passes where it is allowed, and each refusal of the API server's
admission plugins is one line quoting the server's words, with nothing left behind."""
from __future__ import annotations

import json

import pytest
import pytest_asyncio

from gputui.kube import verify as v
from gputui.sim.cluster import SimCluster
from tests.verify.cluster import verification_pods
from tests.verify.test_cli import gputui_verify

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.usefixtures("nothing_left_behind")]
FAST = v.VerifyOptions(timeout=20, delete_timeout=10)
QUOTA_EXCEEDED = ("the API server refused the pod: exceeded quota: gpus, requested: requests.nvidia.com/gpu=1, "
                  "used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sim():
    async with SimCluster("restricted", speed=20, faults=True) as s:
        yield s


async def test_the_pod_passes_podsecurity_restricted_and_the_quotas(api, sim):
    admitted: list[dict] = []

    def record(event) -> None:
        if event.type == "ADDED" and event.resource.key == "pods" and event.obj["metadata"].get("namespace") == "ml-team":
            admitted.append(event.obj)

    sim.store.subscribe(record)
    try:
        verdict = await v.verify_node(api, "gpu-1", FAST, "ml-team")
    finally:
        sim.store._listeners.remove(record)
    assert verdict.passed, verdict.reason
    assert verdict.deleted and "1 x NVIDIA H100 80GB HBM3" in verdict.reason
    (pod,) = admitted
    container = pod["spec"]["containers"][0]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "1", "cpu": "100m", "memory": "128Mi"},
                                      "requests": {"cpu": "100m", "memory": "128Mi", "nvidia.com/gpu": "1"}}
    assert "kubernetes.io/limit-ranger" not in pod["metadata"].get("annotations", {})  # it named its own, nothing defaulted
    assert pod["spec"]["securityContext"] == {"runAsNonRoot": True, "runAsUser": v.RUN_AS_USER, "runAsGroup": v.RUN_AS_USER,
                                              "seccompProfile": {"type": "RuntimeDefault"}}
    assert container["securityContext"] == {"privileged": False, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert pod["status"]["qosClass"] == "Guaranteed"


@pytest.mark.parametrize(
    ("namespace", "node", "reason"),
    [
        ("ml-small", "gpu-2", QUOTA_EXCEEDED),
        ("no-such-namespace", "gpu-1", 'the API server refused the pod: namespaces "no-such-namespace" not found'),
        ("retired", "gpu-1", "the API server refused the pod: unable to create new content in namespace retired because it is being terminated"),
    ],
    ids=["quota-exceeded", "namespace-missing", "namespace-terminating"],
)
async def test_a_refusal_is_one_line_quoting_the_server(api, sim, namespace, node, reason):
    updates: list[v.Update] = []
    verdict = await v.verify_node(api, node, FAST, namespace, updates.append)
    assert (verdict.code, verdict.reason) == (v.REFUSED, reason)
    assert verdict.code in v.CHECK_NOT_MADE and not verdict.passed
    assert verdict.deleted and verdict.leftover is None
    assert [u.stage for u in updates] == [v.CREATING, v.DONE]  # nothing was created, so nothing to delete
    assert verification_pods(sim) == []


async def test_gputui_verify_passes_and_prints_each_refusal(sim):
    code, out, err = await gputui_verify(sim, "gpu-1", "-n", "ml-team", "--yes")
    assert code == 0, err
    assert out.splitlines()[1].split()[:2] == ["gpu-1", "PASS"]
    code, out, err = await gputui_verify(sim, "gpu-2", "-n", "ml-small", "--yes", "-o", "json")
    assert code == 2, err  # the check could not be made
    (verdict,) = json.loads(out)["verdicts"]
    assert (verdict["result"], verdict["code"], verdict["reason"]) == ("FAIL", "refused", QUOTA_EXCEEDED)
    code, out, err = await gputui_verify(sim, "gpu-1", "-n", "retired", "--yes")
    header, row = out.splitlines()
    assert code == 2 and row.split()[:2] == ["gpu-1", "FAIL"]
    assert row.endswith("  the API server refused the pod: unable to create new content in namespace retired because it is being terminated")
    assert "Traceback" not in err
