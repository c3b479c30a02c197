"""A resource's state says since when its records are old: `stale_since` from the moment a synced watch
stops being live (or a relist after 410 begins) until the data is current again; `relisting` meanwhile."""
from __future__ import annotations

import time

import pytest
import pytest_asyncio

from gputui.kube.config import connect
from gputui.kube.model import PODS, ClusterModel
from gputui.sim.cluster import SimCluster
from tests.model.objects import pod
from tests.model.scenario import FAST, small_cluster, until

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sim():
    async with SimCluster(small_cluster(), faults=True) as cluster:
        yield cluster


@pytest_asyncio.fixture(loop_scope="module")
async def model(sim):
    async with await connect(str(sim.kubeconfig_path)) as conn:
        m = ClusterModel(conn.api, **FAST)
        seen: list[tuple[str, bool, float | None]] = []
        m.subscribe(lambda c: seen.append((m.states[PODS].phase, m.states[PODS].relisting, m.states[PODS].stale_since))
                    if c.kind == "state" and c.key == PODS else None)
        m.seen = seen  # type: ignore[attr-defined]
        await m.start()
        assert await m.wait_synced(5)
        yield m
        await m.stop()
    sim.faults.clear()


async def test_live_then_a_failing_watch_marks_the_records_stale(sim, model):
    state = model.states[PODS]
    assert state.synced and state.phase == "live" and state.stale_since is None and not state.relisting
    before = time.monotonic()
    sim.faults.fail("pods", 500)
    sim.faults.drop_watches()
    await until(lambda: model.states[PODS].attempt >= 2, what="repeated failures")
    stale = state.stale_since
    assert stale is not None and stale >= before
    await until(lambda: model.states[PODS].attempt >= 3, what="another failure")
    assert state.stale_since == stale  # as of the first failure, not the latest
    sim.faults.clear("pods")
    await until(lambda: state.phase == "live" and state.attempt == 0, what="live again")
    assert state.stale_since is None


async def test_a_relist_after_410_is_stale_until_it_ends(sim, model):
    reflector = model.reflectors[PODS]
    lists = reflector.lists
    model.seen.clear()
    sim.faults.slow("pods", 0.3)  # the relist takes a while
    sim.faults.drop_watches()
    sim.store.create("pods", pod("ml", "during-relist", node="gpu-1", gpu={"nvidia.com/gpu": 1}))
    sim.faults.compact()  # the watch's resourceVersion is now too old: 410, then a list
    await until(lambda: reflector.lists > lists, what="relist after 410")
    sim.faults.clear("pods")
    await until(lambda: model.states[PODS].phase == "live", what="live")
    during = [entry for entry in model.seen if entry[1]]
    assert during and all(stale is not None for _, _, stale in during), model.seen
    assert model.states[PODS].stale_since is None and not model.states[PODS].relisting
    assert model.pod("ml", "during-relist") is not None
