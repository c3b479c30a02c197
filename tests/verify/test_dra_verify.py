"""Verification through Dynamic Resource Allocation: a node whose GPUs only the NVIDIA DRA driver hands out is
verified through a ResourceClaim (DeviceClass gpu.nvidia.com); the pod and its claim are deleted on every path.
Also the simulated scheduler's and claim controller's part of it."""
from __future__ import annotations

import asyncio
import contextlib
import random

import pytest
import pytest_asyncio

from gputui.kube import verify as v
from gputui.sim import builders as b
from gputui.sim.cluster import SimCluster
from gputui.sim.scenarios.cluster_builder import ClusterBuilder
from tests.verify.cluster import verification_pods

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.usefixtures("nothing_left_behind")]
FAST = v.VerifyOptions(timeout=20, delete_timeout=10)
CLAIMS = "resourceclaims.resource.k8s.io"
NODE = "dra-1"


def objects() -> list[dict]:
    c = ClusterBuilder()
    nfd = {"feature.node.kubernetes.io/pci-10de.present": "true", "nvidia.com/dra-kubelet-plugin": "true"}
    c.add_node(NODE, cpu=64, memory_gib=512, labels=nfd)
    c.add_node("cpu-1", cpu=16, memory_gib=64)
    c.add_dra_driver([NODE])
    c.add_resource_slice(NODE, "NVIDIA H100 80GB HBM3", 81559, 2)
    busy = b.pod("trainer-0", "default", [b.container("trainer", "nvcr.io/nvidia/pytorch:24.05-py3", command=["sleep", "infinity"])],
                 age_s=3600, now=c.now)
    c.add_claimed_pod(busy, NODE, "gpus", "gpu.nvidia.com", ["gpu-0"])
    # a namespace whose quota leaves less cpu than the verification pod asks for: its ResourceClaim is admitted, the pod is not
    c.others.append({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "tiny", "namespace": "tight"},
                     "spec": {"hard": {"requests.cpu": "50m"}}})
    return c.objects(["default", "tight"])


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sim():
    async with SimCluster(objects(), speed=20, faults=True) as s:
        yield s


@pytest.fixture
def seen(sim):
    """Every write to our verification claims and pods during the test: (kind, type, object)."""
    log: list[tuple[str, str, dict]] = []

    def record(event) -> None:
        labels = event.obj["metadata"].get("labels") or {}
        if event.resource.key in ("pods", CLAIMS) and labels.get(v.MANAGED_BY_LABEL) == "gputui":
            log.append((event.resource.key, event.type, event.obj))

    sim.store.subscribe(record)
    yield log
    sim.store._listeners.remove(record)


async def test_plan_is_a_claim_and_a_pod_using_it():
    node = b.node(NODE, 0)
    plan = v.plan_for(node, [], "default", FAST, random.Random(1), v.DraGpus("gpu.nvidia.com", 2, 1))
    assert plan.claim is not None and plan.claim_name == plan.name
    assert plan.claim["metadata"]["labels"][v.MANAGED_BY_LABEL] == v.MANAGED_BY
    assert plan.claim["spec"]["devices"]["requests"] == [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}]
    spec = plan.manifest["spec"]
    assert spec["resourceClaims"] == [{"name": "gpu", "resourceClaimName": plan.name}]
    assert spec["containers"][0]["resources"] == {"claims": [{"name": "gpu"}], "limits": {"cpu": "100m", "memory": "128Mi"},
                                                  "requests": {"cpu": "100m", "memory": "128Mi"}}
    assert (plan.resource, plan.free, plan.obstacles) == ("gpu.nvidia.com", {"gpu.nvidia.com": 1}, ())
    assert [d.split("\n", 2)[1] for d in plan.to_yaml().split("---\n")] == ["kind: ResourceClaim", "kind: Pod"]
    # a node advertising nvidia.com/gpu keeps the extended resource, whatever DRA offers
    node["status"]["allocatable"]["nvidia.com/gpu"] = node["status"]["capacity"]["nvidia.com/gpu"] = "2"
    plain = v.plan_for(node, [], "default", FAST, random.Random(1), v.DraGpus("gpu.nvidia.com", 2, 1))
    assert plain.claim is None and plain.resource == "nvidia.com/gpu"


async def test_pass_through_a_claim_and_both_deleted(api, sim, seen):
    verdict = await v.verify_node(api, NODE, FAST, "default")
    assert verdict.passed, verdict.reason
    assert (verdict.resource, verdict.deleted, verdict.leftover) == ("gpu.nvidia.com", True, None)
    assert "1 x NVIDIA H100 80GB HBM3" in verdict.reason
    claims = [obj for key, _, obj in seen if key == CLAIMS]
    assert claims and claims[0]["metadata"]["name"] == verdict.pod
    allocated = next(c for c in claims if (c.get("status") or {}).get("allocation"))
    assert [r["device"] for r in allocated["status"]["allocation"]["devices"]["results"]] == ["gpu-1"]  # gpu-0 is trainer-0's
    assert [r["name"] for r in allocated["status"]["reservedFor"]] == [verdict.pod]
    # the claim went after the pod
    deleted = [(key, obj["metadata"]["name"]) for key, kind, obj in seen if kind == "DELETED"]
    assert deleted == [("pods", verdict.pod), (CLAIMS, verdict.pod)]
    assert verification_pods(sim) == []


async def test_a_claim_is_deleted_when_its_pod_is_refused(api, sim, seen):
    verdict = await v.verify_node(api, NODE, FAST, "tight")
    assert (verdict.code, verdict.reason) == (v.REFUSED, "the API server refused the pod: exceeded quota: tiny, requested: "
                                                         "requests.cpu=100m, used: requests.cpu=0, limited: requests.cpu=50m")
    assert verdict.deleted and verdict.leftover is None
    assert [(key, kind) for key, kind, _ in seen] == [(CLAIMS, "ADDED"), (CLAIMS, "DELETED")]
    assert verification_pods(sim) == []


async def test_unschedulable_when_dra_has_too_few_free(api, seen):
    verdict = await v.verify_node(api, NODE, v.VerifyOptions(timeout=20, delete_timeout=10, count=2), "default")
    assert verdict.code == v.UNSCHEDULABLE
    assert "only 1 gpu.nvidia.com free on the node" in verdict.reason
    assert "cannot allocate all claims" in verdict.reason
    assert verdict.deleted
    assert {key for key, kind, _ in seen if kind == "DELETED"} == {"pods", CLAIMS}


async def test_cancelled_run_deletes_pod_and_claim(api, sim):
    plan = await v.plan_verification(api, NODE, FAST, "default")
    task = asyncio.create_task(v.run_plan(api, plan, FAST))
    for _ in range(200):
        if sim.store.find("pods", "default", plan.name) is not None:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert verification_pods(sim) == []


async def test_read_only_creates_neither(api, seen):
    plan = await v.plan_verification(api, NODE, v.VerifyOptions(read_only=True), "default")  # what a confirmation shows
    assert plan.claim is not None and "kind: ResourceClaim" in plan.to_yaml()
    with pytest.raises(v.ReadOnlyError):
        await v.run_plan(api, plan, v.VerifyOptions(read_only=True))
    with pytest.raises(v.ReadOnlyError):
        await v.verify_node(api, NODE, v.VerifyOptions(read_only=True), "default")
    assert seen == []


async def test_leftover_claims_are_found_and_deleted(api, sim):
    claim = v.build_claim("gputui-verify-dra-1-left1", "default", NODE, "gpu.nvidia.com", 1)
    sim.store.create(CLAIMS, claim)
    found = await v.find_leftovers(api, "default")
    assert [(lo.kind, lo.name, lo.node, lo.status) for lo in found] == [("ResourceClaim", "gputui-verify-dra-1-left1", NODE, "Pending")]
    assert await v.delete_leftovers(api, found, confirm_timeout=5) == []
    assert verification_pods(sim) == []


async def test_sim_scheduler_refuses_a_missing_claim_and_holds_a_deleted_one(api, sim):
    pod = b.pod("needs-claim", "default", [b.container("c", "busybox", command=["sleep", "infinity"])])
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "nowhere"}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    for key in ("nodeName",):
        pod["spec"].pop(key, None)
    pod.pop("status", None)
    resp = await api.request("POST", "/api/v1/namespaces/default/pods", body=pod)
    assert resp.status == 201, await resp.text()
    resp.release()
    try:
        for _ in range(200):
            current = sim.store.get("pods", "default", "needs-claim")
            cond = next((c for c in current["status"].get("conditions") or [] if c["type"] == "PodScheduled"), {})
            if cond.get("reason") == "Unschedulable":
                break
            await asyncio.sleep(0.02)
        assert 'resourceclaim.resource.k8s.io "nowhere" not found' in cond["message"]
        # a container naming a claim the pod does not list is refused, as kube-apiserver does
        bad = b.pod("bad-claim", "default", [b.container("c", "busybox")])
        bad["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        resp = await api.request("POST", "/api/v1/namespaces/default/pods", body=bad)
        assert resp.status == 422
        resp.release()
    finally:
        sim.store.delete("pods", "default", "needs-claim")
