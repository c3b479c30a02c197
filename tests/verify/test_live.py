"""The verification pod against the simulated cluster: its scheduler, kubelets and node faults."""
from __future__ import annotations

import asyncio
import contextlib
import random
import time

import pytest
import pytest_asyncio

from gputui.kube import verify as v
from gputui.sim.cluster import SimCluster
from tests.verify import cluster
from tests.verify.cluster import verification_pods

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.usefixtures("nothing_left_behind")]
FAST = v.VerifyOptions(timeout=20, delete_timeout=10)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sim():
    async with SimCluster(cluster.objects(), speed=20, faults=True) as s:
        yield s


async def verify(api, node, options=FAST, updates=None):
    return await v.verify_node(api, node, options, "default", (updates.append if updates is not None else None))


async def test_pass_on_a_free_gpu(api, sim):
    updates: list[v.Update] = []
    verdict = await verify(api, "gpu-ok", updates=updates)
    assert verdict.passed, verdict.reason
    assert (verdict.code, verdict.resource, verdict.count) == (v.PASS, "nvidia.com/gpu", 1)
    assert verdict.report.models == ["NVIDIA H100 80GB HBM3"]
    assert (verdict.report.driver, verdict.report.cuda) == ("550.54.15", "12.4")
    assert verdict.mismatches == ()
    assert verdict.deleted and verdict.leftover is None
    assert "1 x NVIDIA H100 80GB HBM3, driver 550.54.15, CUDA 12.4" in verdict.reason
    # what a live view gets: stages in order, the events, the log, a final verdict
    stages = [u.stage for u in updates]
    assert stages[0] == v.CREATING and stages[-1] == v.DONE
    assert stages.index(v.WAITING) < stages.index(v.DELETING)
    reasons = [e.reason for u in updates for e in u.events]
    assert "Scheduled" in reasons
    assert any("NVIDIA-SMI" in line for u in updates for line in u.log_lines)
    assert updates[-1].verdict == verdict
    assert all(u.pod == verdict.pod for u in updates)
    assert updates[-1].elapsed >= updates[0].elapsed


async def test_mig_node_gets_the_smallest_slice(api):
    verdict = await verify(api, "gpu-mig")
    assert verdict.passed, verdict.reason
    assert verdict.resource == "nvidia.com/mig-1g.10gb"
    assert len(verdict.report.migs) == 1
    assert verdict.mismatches == ()


async def test_shared_gpu_node(api):
    verdict = await verify(api, "gpu-shared")
    assert verdict.passed, verdict.reason
    assert verdict.resource == "nvidia.com/gpu.shared"
    assert verdict.report.models == ["Tesla T4"]


async def test_user_chosen_resource(api):
    verdict = await verify(api, "gpu-mig", v.VerifyOptions(resource="nvidia.com/mig-3g.40gb", timeout=20))
    assert verdict.passed, verdict.reason
    assert verdict.resource == "nvidia.com/mig-3g.40gb"


@pytest.mark.parametrize(
    ("node", "ours", "words"),
    [
        ("gpu-full", "only 0 nvidia.com/gpu free on the node", "Insufficient nvidia.com/gpu"),
        ("gpu-cordoned", "node gpu-cordoned is cordoned", "node(s) were unschedulable"),
        ("cpu-only", "node advertises no nvidia.com/gpu (is its device plugin running?)", "Insufficient nvidia.com/gpu"),
    ],
)
async def test_unschedulable_names_the_cause_and_quotes_the_scheduler(api, node, ours, words):
    verdict = await verify(api, node)
    assert verdict.code == v.UNSCHEDULABLE, verdict.reason
    assert verdict.reason.startswith(f"unschedulable: {ours}. The scheduler says: 0/")
    assert words in verdict.reason
    assert verdict.deleted


@pytest.mark.parametrize(
    ("node", "code", "words"),
    [
        ("gpu-driver-broken", v.NVIDIA_SMI, "couldn't communicate with the NVIDIA driver"),
        ("gpu-image-pull", v.IMAGE_PULL, "image pull failed"),
        ("gpu-runtime-hook", v.RUNTIME, "nvidia-container-cli"),
    ],
)
async def test_node_faults_are_classified(api, node, code, words):
    verdict = await verify(api, node)
    assert (verdict.code, verdict.passed) == (code, False), verdict.reason
    assert words in verdict.reason
    assert verdict.deleted


async def test_timeout(api):
    verdict = await verify(api, "gpu-ok", v.VerifyOptions(timeout=0.01))
    assert verdict.code == v.TIMEOUT
    assert verdict.reason.startswith("timed out after 0.01 s while ")
    assert verdict.deleted


async def test_forbidden_create_names_the_permission(api, sim):
    sim.faults.fail("pods", 403)
    verdict = await verify(api, "gpu-ok")
    assert verdict.code == v.FORBIDDEN
    assert "create pods in namespace default" in verdict.reason
    assert verdict.deleted


async def test_read_only_creates_nothing(api, created):
    before = len(created)
    with pytest.raises(v.ReadOnlyError):
        await verify(api, "gpu-ok", v.VerifyOptions(read_only=True))
    plan = await v.plan_verification(api, "gpu-ok", FAST, "default")
    with pytest.raises(v.ReadOnlyError):
        await v.run_plan(api, plan, v.VerifyOptions(read_only=True))
    with pytest.raises(v.ReadOnlyError):
        await v.run_plans(api, [plan], v.VerifyOptions(read_only=True))
    assert len(created) == before


async def test_unknown_node(api):
    with pytest.raises(v.VerifyError, match="node 'no-such-node' not found"):
        await verify(api, "no-such-node")


async def test_cancellation_at_random_points_leaves_nothing(api, sim):
    started = time.perf_counter()
    await verify(api, "gpu-ok")
    full_run = time.perf_counter() - started  # spread the cancellations over a whole run
    rng = random.Random(5)
    nodes = ["gpu-ok", "gpu-mig", "gpu-full", "gpu-image-pull", "gpu-driver-broken"]
    stages_hit: list[str] = []
    for _ in range(30):
        seen: list[v.Update] = []
        task = asyncio.create_task(verify(api, rng.choice(nodes), updates=seen))
        await asyncio.sleep(rng.uniform(0, full_run))
        if task.cancel():
            stages_hit.append(seen[-1].stage if seen else "not started")
        await asyncio.gather(task, return_exceptions=True)
        assert verification_pods(sim) == []
        if seen and seen[-1].stage == v.DONE:
            assert seen[-1].verdict.deleted
    assert len(stages_hit) >= 15  # most runs were still going when cancelled...
    assert len(set(stages_hit)) >= 3  # ...at different points of their lives


@pytest.mark.parametrize("stage", [v.CREATING, v.WAITING, v.RUNNING, v.JUDGING, v.DELETING])
async def test_cancelled_at_each_stage(api, sim, stage):
    # Cancelled from inside the progress callback: at that very point, the create call in flight included.
    hit: list[v.Update] = []

    def cancel_at_stage(update: v.Update) -> None:
        hit.append(update)
        if update.stage == stage and len([u for u in hit if u.stage == stage]) == 1:
            task.cancel()

    task = asyncio.create_task(v.verify_node(api, "gpu-ok", FAST, "default", cancel_at_stage))
    (outcome,) = await asyncio.gather(task, return_exceptions=True)
    assert stage in [u.stage for u in hit]
    assert isinstance(outcome, asyncio.CancelledError)
    assert hit[-1].stage == v.DONE and hit[-1].verdict.deleted and hit[-1].status == "Deleted"
    assert verification_pods(sim) == []


async def test_leaving_the_update_stream_early_deletes_the_pod(api, sim):
    plan = await v.plan_verification(api, "gpu-ok", FAST, "default")
    async with contextlib.aclosing(v.updates(api, plan, FAST)) as stream:
        async for update in stream:
            if update.stage == v.WAITING:
                assert verification_pods(sim) == [plan.name]
                break
    assert verification_pods(sim) == []


async def test_several_nodes_with_bounded_concurrency(api):
    nodes = ["gpu-ok", "gpu-mig", "gpu-shared", "gpu-full", "gpu-driver-broken"]
    plans = [await v.plan_verification(api, n, FAST, "default") for n in nodes]
    running, peak = set(), 0

    def track(update: v.Update) -> None:
        nonlocal peak
        running.add(update.node) if update.stage != v.DONE else running.discard(update.node)
        peak = max(peak, len(running))

    verdicts = await v.run_plans(api, plans, FAST, track, concurrency=2)
    assert [vd.node for vd in verdicts] == nodes
    assert [vd.passed for vd in verdicts] == [True, True, True, False, False]
    assert peak == 2


async def test_leftovers_are_found_and_deleted(api, sim):
    options = v.VerifyOptions()
    for node in ("gpu-ok", "gpu-shared"):  # what a killed run leaves: the pod, and nobody to delete it
        sim.store.create("pods", v.build_pod(node, "default", "nvidia.com/gpu", options))
    from_etcd = sim.api_counts.lists_from_etcd
    found = await v.find_leftovers(api, "default")
    assert sorted(lo.node for lo in found) == ["gpu-ok", "gpu-shared"]
    assert sim.api_counts.lists_from_etcd == from_etcd  # pods and claims listed from the watch cache
    assert [shape for verb, resource, shape in list(sim.api_counts.recent)[-2:]] == [
        {"resourceVersion": "0"}, {"resourceVersion": "0"}]
    assert all(lo.name.startswith(f"gputui-verify-{lo.node}-") for lo in found)
    assert await v.delete_leftovers(api, found, confirm_timeout=10) == []
    assert await v.find_leftovers(api) == []


async def test_unconfirmed_deletion_is_reported(api, sim):
    # A pod bound to a node whose kubelet is gone stays Terminating: the deletion cannot be confirmed.
    stuck = v.build_pod("gpu-ok", "default", "nvidia.com/gpu", v.VerifyOptions())
    stuck["spec"]["nodeName"] = "gpu-gone"
    sim.store.create("pods", stuck)
    try:
        assert await v.delete_pod(api, "default", stuck["metadata"]["name"], confirm_timeout=0.3) is False
        assert [lo.status for lo in await v.find_leftovers(api)] == ["Terminating"]
    finally:
        sim.store.delete("pods", "default", stuck["metadata"]["name"])


async def test_a_log_that_could_not_be_read_is_read_whole_before_the_verdict(api, sim):
    # The log stream failed (a restart, a proxy): judging the empty log would blame the node's device injection.
    sim.faults.fail("pods/log", 500)
    stages: list[str] = []

    def readable_once_terminated(update: v.Update) -> None:
        stages.append(update.stage)
        if update.stage == v.JUDGING:
            sim.faults.clear("pods/log")

    verdict = await v.verify_node(api, "gpu-ok", FAST, "default", readable_once_terminated)
    assert verdict.passed, verdict.reason
    assert verdict.report is not None and verdict.report.gpus
    assert v.JUDGING in stages


async def test_a_log_never_readable_times_out_saying_why(api, sim):
    sim.faults.fail("pods/log", 500)
    verdict = await v.verify_node(api, "gpu-ok", v.VerifyOptions(timeout=4, delete_timeout=10), "default")
    assert verdict.code == v.TIMEOUT, verdict
    assert "Completed; " in verdict.reason and "its log could not be read (" in verdict.reason, verdict.reason
    assert verdict.deleted


async def test_a_log_the_user_may_not_read_is_a_check_not_made(api, sim):
    sim.faults.fail("pods/log", 403)
    verdict = await v.verify_node(api, "gpu-ok", FAST, "default")
    assert verdict.code == v.FORBIDDEN and verdict.code in v.CHECK_NOT_MADE, verdict
    assert verdict.reason.startswith("forbidden: you may not get pods/log in namespace default: no nvidia-smi output to judge ("), verdict.reason
    assert verdict.deleted


async def test_an_api_server_restart_mid_run_is_survived(api, sim):
    restarts: list[asyncio.Task] = []

    def restart_once_waiting(update: v.Update) -> None:
        if update.stage == v.WAITING and not restarts:
            restarts.append(asyncio.create_task(sim.faults.restart(downtime=0.3)))

    verdict = await v.verify_node(api, "gpu-ok", FAST, "default", restart_once_waiting)
    await restarts[0]
    assert verdict.passed, verdict.reason
    assert verdict.elapsed >= 0.3  # it did wait through the downtime
    assert verdict.deleted
