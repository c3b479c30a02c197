"""Reflectors against the simulator's faults: after recovery the model equals a fresh list."""
from __future__ import annotations

import pytest
import pytest_asyncio

from gputui.kube.config import connect
from gputui.kube.model import PODS, ClusterModel
from gputui.kube.tables import Change
from gputui.sim.cluster import SimCluster
from tests.model.objects import pod
from tests.model.scenario import FAST, matches_fresh_list, small_cluster, until

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sim():
    async with SimCluster(small_cluster(), faults=True) as cluster:
        yield cluster


@pytest_asyncio.fixture(loop_scope="module")
async def model(sim):
    async with await connect(str(sim.kubeconfig_path)) as conn:
        m = ClusterModel(conn.api, **FAST)
        changes: list[Change] = []
        m.subscribe(changes.append)
        m.changes = changes  # type: ignore[attr-defined]
        await m.start()
        assert await m.wait_synced(5)
        yield m
        await m.stop()
    sim.faults.clear()


async def test_initial_sync_keeps_only_pods_that_matter(sim, model):
    assert {k: s.phase for k, s in model.states.items()} == {
        "nodes": "live", "pods": "live", "events": "live", "daemonsets": "live",
        "clusterpolicies": "absent",  # no ClusterPolicy CRD in this cluster
        "resourceslices": "live", "resourceclaims": "live", "deviceclasses": "live",
        "workloads": "absent", "localqueues": "absent", "clusterqueues": "absent",  # no Kueue
        "computedomains": "absent", "gpuclusters": "absent",  # no NVIDIA DRA driver CRDs, no DRA-based GPU Operator
    }
    kept = set(model.pods.records)
    assert ("ml", "train-0") in kept and ("kube-system", "plugin-static-gpu-1") in kept
    assert ("web", "frontend") not in kept and ("web", "backend") not in kept  # no GPU, not GPU stack
    assert ("ml", "finished") not in kept
    assert matches_fresh_list(model, sim.store)
    # events: about kept pods and nodes only
    # the scenario's own event, and the simulated scheduler's (events.k8s.io, a name of its own) about the same pod
    assert {e.reason for e in model.events_for("Pod", "ml", "waiting")} == {"FailedScheduling"}
    assert model.events_for("Pod", "web", "frontend") == []
    assert [e.reason for e in model.events_for("Node", "", "gpu-2")] == ["NodeReady"]
    assert Change(PODS, None) in model.changes


async def test_live_changes_reach_model_and_listeners(sim, model):
    model.changes.clear()
    sim.store.create("pods", pod("ml", "new-job", node="gpu-2", gpu={"nvidia.com/gpu": 1}))
    await until(lambda: model.pod("ml", "new-job") is not None, what="new pod")
    assert Change(PODS, ("ml", "new-job")) in model.changes
    assert model.summary("gpu-2").usage["nvidia.com/gpu"].allocated == 4  # 3 (init container) + 1
    sim.store.mutate("pods", "ml", "new-job", lambda p: p["status"].update(phase="Succeeded"))
    await until(lambda: model.pod("ml", "new-job") is None, what="finished pod dropped")
    assert model.summary("gpu-2").usage["nvidia.com/gpu"].allocated == 3
    sim.store.create("pods", pod("web", "cpu-only", node="cpu-1"))
    sim.store.create("pods", pod("ml", "marker", node="gpu-1", gpu={"nvidia.com/gpu": 1}))
    await until(lambda: model.pod("ml", "marker") is not None)
    assert ("web", "cpu-only") not in model.pods.records
    assert not any(c.key == ("web", "cpu-only") for c in model.changes)
    sim.store.delete("pods", "ml", "marker")
    await until(lambda: model.pod("ml", "marker") is None)
    assert matches_fresh_list(model, sim.store)


async def test_410_relists_and_deletes_what_was_missed(sim, model):
    reflector = model.reflectors[PODS]
    lists = reflector.lists
    # While no watch is open, the history is compacted and objects change.
    sim.faults.drop_watches()
    sim.store.delete("pods", "ml", "train-0")
    sim.store.create("pods", pod("ml", "train-1", node="gpu-1", gpu={"nvidia.com/gpu": 2}))
    sim.faults.compact()
    await until(lambda: reflector.lists > lists, what="relist after 410")
    await until(lambda: matches_fresh_list(model, sim.store), what="model equals a fresh list")
    assert model.pod("ml", "train-0") is None  # no ghost
    assert model.pod("ml", "train-1") is not None
    assert model.states[PODS].phase == "live"


async def test_dropped_stream_resumes_from_last_resource_version(sim, model):
    reflector = model.reflectors[PODS]
    lists = reflector.lists
    sim.faults.drop_watches()
    sim.store.create("pods", pod("ml", "after-drop", node="gpu-2", gpu={"nvidia.com/gpu": 1}))
    await until(lambda: model.pod("ml", "after-drop") is not None, what="event replayed after re-watch")
    assert reflector.lists == lists  # resumed, not relisted
    sim.store.delete("pods", "ml", "after-drop")
    await until(lambda: matches_fresh_list(model, sim.store))


async def test_restart_retries_then_recovers(sim, model):
    states = []
    model.subscribe(lambda c: states.append(model.states[c.key].describe()) if c.kind == "state" and c.key == PODS else None)
    restart = sim.faults.restart(downtime=0.6)
    sim.store.create("pods", pod("ml", "during-restart", node="gpu-1", gpu={"nvidia.com/gpu": 1}))
    await restart
    await until(lambda: model.pod("ml", "during-restart") is not None, what="recovery after restart")
    await until(lambda: model.states[PODS].phase == "live")
    assert any("connection refused" in s or "server closed" in s for s in states), states
    assert matches_fresh_list(model, sim.store)


async def test_500_backs_off_with_attempts_then_recovers(sim, model):
    sim.faults.fail("pods", 500)
    sim.faults.drop_watches()
    await until(lambda: model.states[PODS].attempt >= 2, what="repeated failures")
    state = model.states[PODS]
    assert state.phase == "retrying" and "simulated failure" in state.error
    assert state.describe().startswith("retrying")
    sim.store.create("pods", pod("ml", "during-500", node="gpu-2", gpu={"nvidia.com/gpu": 1}))
    sim.faults.clear("pods")
    await until(lambda: model.pod("ml", "during-500") is not None)
    await until(lambda: model.states[PODS].phase == "live" and model.states[PODS].attempt == 0)
    assert model.states["nodes"].phase == "live"


async def test_slow_watch_trips_inactivity_timeout_then_recovers(sim):
    async with await connect(str(sim.kubeconfig_path)) as conn:
        m = ClusterModel(conn.api, inactivity_timeout=0.3, **FAST)
        async with m:
            assert await m.wait_synced(5)
            sim.faults.slow("nodes", 0.6)  # every nodes answer now starts later than the read timeout
            sim.faults.drop_watches()
            await until(lambda: m.states["nodes"].phase == "retrying", what="inactivity timeout")
            assert m.states["nodes"].error == "timed out"
            sim.faults.clear("nodes")
            sim.store.mutate("nodes", "", "gpu-1", lambda n: n["spec"].update(unschedulable=True))
            await until(lambda: m.node("gpu-1").unschedulable, timeout=8, what="recovery")
            assert [p.code for p in m.summary("gpu-1").problems] == ["cordoned"]
            sim.store.mutate("nodes", "", "gpu-1", lambda n: n["spec"].pop("unschedulable"))
            await until(lambda: matches_fresh_list(m, sim.store))


async def test_forbidden_pods_degrade_that_part_only(sim):
    sim.faults.fail("pods", 403)
    try:
        async with await connect(str(sim.kubeconfig_path)) as conn:
            m = ClusterModel(conn.api, **FAST)
            async with m:
                assert await m.wait_synced(5)
                state = m.states[PODS]
                assert state.phase == "forbidden" and 'cannot list resource "pods"' in state.error
                assert state.describe().startswith("forbidden: ")
                assert m.states["nodes"].phase == "live"
                summaries = {s.name: s for s in m.node_summaries()}
                assert summaries["gpu-2"].usage["nvidia.com/gpu"].allocatable == 3
                # unknown pods: no plugin verdict, rather than a false one
                assert [p.code for p in summaries["gpu-2"].problems] == ["unhealthy-gpus"]
                sim.faults.clear("pods")
                await until(lambda: m.states[PODS].phase == "live", what="pods allowed again")
                assert matches_fresh_list(m, sim.store)
                assert "plugin-not-running" in [p.code for p in m.summary("mig-1").problems]
    finally:
        sim.faults.clear()



async def test_the_model_hears_a_list_end_with_the_list_counted(sim):
    """When a pods list ends the model already counts the pods as listed: what it does then (dropping the events
    of pods not kept, once every namespace's pods are listed) must not wait for a next list."""
    async with await connect(str(sim.kubeconfig_path)) as conn:
        m = ClusterModel(conn.api, kinds=(PODS,), **FAST)
        heard: list[bool] = []
        m.subscribe(lambda c: heard.append(m.states[PODS].synced) if c.kind == PODS and c.key is None else None)
        async with m:
            assert await m.wait_synced(5)
    assert heard and heard[0] is True
