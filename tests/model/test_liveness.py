"""A figure is live only while its stream is known to be current (issue 20): a server restored past our
resourceVersion leaves no ghost, a silent server or an unanswered watch is not live within seconds and
its records read as of when they were last known current, and an answer after an outage wakes every
reflector waiting out its back-off. Times are compared with each other (what came first), never with a
budget: a loaded machine changes how long, not the order."""
from __future__ import annotations

import asyncio
import time

import pytest
import pytest_asyncio

from gputui.kube.config import connect
from gputui.kube.model import NODES, PODS, ClusterModel
from gputui.kube.watch import AUTH_BACKOFF_FIRST, LIVE, Reflector
from gputui.kube.watches import Liveness
from gputui.sim.cluster import SimCluster
from tests.model.objects import pod
from tests.model.scenario import FAST, matches_fresh_list, small_cluster, until

pytestmark = pytest.mark.asyncio(loop_scope="module")

QUICK = Liveness(interval=0.1, quiet_after=0.6, probe_timeout=0.5, answer_within=0.6)


@pytest_asyncio.fixture(loop_scope="module")
async def sim():
    async with SimCluster(small_cluster(), faults=True) as cluster:
        yield cluster


async def started(sim, **options) -> tuple:
    conn = await connect(str(sim.kubeconfig_path))
    model = ClusterModel(conn.api, kinds=(NODES, PODS), liveness=QUICK, **options)
    seen: list[tuple[float, str, float | None]] = []
    model.subscribe(lambda c: seen.append((time.monotonic(), model.states[PODS].phase, model.states[PODS].stale_since))
                    if c.kind == "state" and c.key == PODS else None)
    await model.start()
    assert await model.wait_synced(10), model.states
    return conn, model, seen


async def test_a_server_restored_past_our_resource_version_leaves_no_ghost(sim, make_kubectl):
    conn, model, _ = await started(sim, **FAST)
    try:
        sim.store.create("pods", pod("ml", "ghost", node="gpu-1", gpu={"nvidia.com/gpu": 1}))
        sim.store.delete("pods", "ml", "train-0")
        await until(lambda: model.pod("ml", "ghost") is not None and model.pod("ml", "train-0") is None, what="the changes seen")
        held = int(model.reflectors[PODS].resource_version)
        # The backup had train-0 and no ghost; restored, it took writes past what the model holds.
        await sim.faults.restart(downtime=0.3, fresh=True, writes_while_down=held)
        assert sim.store.resource_version > held
        await until(lambda: model.states[PODS].phase == LIVE and model.states[NODES].phase == LIVE
                    and matches_fresh_list(model, sim.store), what="the model equal to the restored server's state")
        kubectl = make_kubectl(sim.kubeconfig_path)
        names = set((await asyncio.to_thread(kubectl, "get", "pods", "-n", "ml", "-o", "name")).split())
        assert "pod/ghost" not in names and "pod/train-0" in names
        assert model.pod("ml", "ghost") is None and model.pod("ml", "train-0") is not None
    finally:
        await model.stop()
        await conn.close()


async def test_a_silent_server_is_not_live_and_its_records_are_as_of_before_it_went_silent(sim):
    conn, model, _ = await started(sim, **FAST)
    try:
        state = model.states[PODS]
        assert state.phase == LIVE
        silenced_at = time.monotonic()
        sim.faults.silence()
        await until(lambda: model.states[PODS].phase != LIVE and model.states[NODES].phase != LIVE, what="not live")
        state = model.states[PODS]
        assert "does not answer" in state.describe(), state.describe()
        assert state.stale_since is not None and state.stale_since <= silenced_at  # its true age, not since we noticed
        sim.faults.clear()
        await until(lambda: model.states[PODS].phase == LIVE and model.states[PODS].stale_since is None, what="live again")
        assert matches_fresh_list(model, sim.store)
    finally:
        sim.faults.clear()
        await model.stop()
        await conn.close()


async def test_a_watch_the_server_does_not_answer_is_not_live_until_it_does(sim):
    conn, model, seen = await started(sim, **FAST)
    try:
        sim.faults.slow("pods", 2.0)
        seen.clear()
        dropped_at = time.monotonic()
        sim.faults.drop_watches()  # the pods watch is asked for again, and answered 2 s later
        await until(lambda: any(phase != LIVE for _, phase, _ in seen), what="the unanswered watch not live")
        sim.faults.clear("pods")
        await until(lambda: model.states[PODS].phase == LIVE and model.states[PODS].stale_since is None, what="live again")
        # as of the old watch's end, before it was noticed that the new one goes unanswered
        waiting = [(at, stale) for at, phase, stale in seen if phase != LIVE]
        assert waiting and all(stale is not None and dropped_at <= stale < at for at, stale in waiting), seen
    finally:
        sim.faults.clear()
        await model.stop()
        await conn.close()


async def test_the_first_answer_after_an_outage_wakes_every_reflector_from_its_back_off(sim):
    conn, model, _ = await started(sim)  # the real back-off: 0.5 s doubled, up to 15 s
    try:
        live_at: dict[str, float] = {}
        down: set[str] = set()  # kinds whose next LIVE is the one after the outage
        model.subscribe(lambda c: live_at.setdefault(c.key, time.monotonic())
                        if c.kind == "state" and c.key in down and model.states[c.key].phase == LIVE else None)
        back = asyncio.Event()
        restart = asyncio.ensure_future(sim.faults.restart(back=back))
        # down until a retry is due well after the server is back, however slowly this machine runs
        await until(lambda: all(model.states[k].attempt >= 3 for k in (NODES, PODS))
                    and any((model.states[k].retry_at or 0) > time.monotonic() + 3.0 for k in (NODES, PODS)),
                    timeout=40, what="backing off past 3 s")
        down.update((NODES, PODS))
        scheduled = {k: model.states[k].retry_at for k in (NODES, PODS)}
        back.set()
        await restart
        back_at = time.monotonic()
        await until(lambda: set(live_at) == {NODES, PODS}, timeout=30, what="live again")
        woken = {k: at for k, at in scheduled.items() if at is not None and at > back_at + 1.0}
        assert woken, f"no reflector had a back-off long enough to tell: {scheduled}, back at {back_at}"
        assert all(live_at[k] < at for k, at in woken.items()), (live_at, woken)
    finally:
        await model.stop()
        await conn.close()


@pytest.mark.filterwarnings("ignore:The test <Function test_a_403")
def test_a_403_is_retried_from_a_few_seconds_up_to_30():
    reflector = Reflector("pods", None, "/api/v1/pods", None)  # the default forbidden_retry: 30 s
    waits = [reflector._auth_backoff(attempt) for attempt in range(1, 8)]
    ceilings = [min(30.0, AUTH_BACKOFF_FIRST * 2 ** (n - 1)) for n in range(1, 8)]
    assert all(0.75 * high <= wait <= high for wait, high in zip(waits, ceilings, strict=True)), waits
    assert ceilings[0] == AUTH_BACKOFF_FIRST and ceilings[-1] == 30.0
