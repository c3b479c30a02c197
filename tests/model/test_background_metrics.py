"""Background DCGM reads: every GPU node's exporter at the slow rate without anyone wanting
metrics, within the budget (reads a minute, concurrency), round-robin beyond it; the XIDs
become verdicts the report gives alike."""
from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from gputui.kube.config import connect
from gputui.kube.metrics import IDLE_LOOK, Exporter, MetricsPoller
from gputui.kube.model import ClusterModel
from gputui.sim import SimCluster
from gputui.sim.scenarios import stacks
from tests.model.scenario import FAST, until
from tests.model.test_report import report_of

pytestmark = pytest.mark.asyncio


@contextlib.asynccontextmanager
async def model_on(scenario, **options):
    async with SimCluster(scenario, run_controllers=False, faults=True) as sim:
        async with await connect(str(sim.kubeconfig_path)) as conn:
            async with ClusterModel(conn.api, metrics_timeout=2.0, **FAST, **options) as model:
                assert await model.wait_synced(10)
                yield sim, model


async def test_xids_reach_the_verdicts_without_details_and_the_report_agrees():
    async with model_on(stacks.xid_injected(), metrics_background_interval=60.0) as (sim, model):
        assert not model.metrics.wanted
        model.metrics.start_background()
        await until(lambda: all(model.node_metrics(n) is not None and model.node_metrics(n).current for n in ("gpu-1", "gpu-2")),
                    what="both exporters read in the background")
        live = {s.name: [(p.code, p.message) for p in s.problems] for s in model.node_summaries()}
        assert ("xid-errors", "last XID GPU 1: XID 79 (GPU has fallen off the bus)") in live["gpu-1"]
        reads = model.metrics.background_reads
        await asyncio.sleep(0.3)
        assert model.metrics.background_reads == reads == 2  # once a minute: not again yet
        rc, out, err = await report_of("--kubeconfig", str(sim.kubeconfig_path), "-o", "json")
        assert rc == 1, err
        reported = {n["name"]: [(p["code"], p["message"]) for p in n["problems"]] for n in json.loads(out)["nodes"]}
        assert reported == live


async def test_reads_started_before_the_sync_begin_once_the_exporters_are_known():
    """As the app does: the background reads start with the model, before any exporter is known;
    the first reads follow the sync, not the next idle look (IDLE_LOOK, 10 s, later)."""
    async with SimCluster(stacks.gpu_operator_healthy(), run_controllers=False) as sim:
        async with await connect(str(sim.kubeconfig_path)) as conn:
            async with ClusterModel(conn.api, metrics_timeout=2.0, metrics_background_interval=60.0, **FAST) as model:
                model.metrics.start_background()
                await asyncio.sleep(0)  # the first look: nothing is listed yet, so nothing is due
                assert model.metrics.background_reads == 0
                assert await model.wait_synced(10)
                await until(lambda: model.metrics.background_reads == 2, timeout=IDLE_LOOK / 2,
                            what="both exporters read as soon as they are known")


async def test_reads_slower_than_the_interval_go_on_at_once():
    """A read that takes longer than the background interval leaves its node due when it ends: the next read
    follows it, not the next idle look (IDLE_LOOK, 10 s later)."""
    async with model_on(stacks.gpu_operator_healthy(), metrics_background_interval=0.2) as (sim, model):
        sim.faults.slow("pods/proxy", 0.5)
        model.metrics.start_background()
        await until(lambda: model.metrics.background_reads >= 6, timeout=IDLE_LOOK * 0.8,
                    what="both exporters read three times, each read slower than the interval")


def background_reads_of(poller: MetricsPoller) -> list[str]:
    """The nodes the background reads from now on, in order."""
    read: list[str] = []
    original = poller._background_read

    async def recorded(node, exporter):
        read.append(node)
        await original(node, exporter)

    poller._background_read = recorded  # type: ignore[method-assign]
    return read


async def test_slow_rate_repeats_and_a_details_node_is_not_read_twice():
    async with model_on(stacks.gpu_operator_healthy(), metrics_background_interval=0.3, metrics_interval=0.05) as (_, model):
        poller = model.metrics
        poller.start_background()
        await until(lambda: poller.background_reads >= 6, what="three rounds")
        first = poller.node("gpu-1").at
        await until(lambda: poller.node("gpu-1").at != first, what="gpu-1 read again")
        read_by_background = background_reads_of(poller)
        release = poller.want(["gpu-1"])  # the details screen: gpu-1 at the fast rate
        await until(lambda: read_by_background.count("gpu-2") >= 3, what="gpu-2 read in the background, three times")
        release()
        assert "gpu-1" not in read_by_background  # read every 0.05 s by the details: never due for the background


async def test_a_details_node_read_slower_than_the_interval_is_not_read_in_the_background_too():
    """The details screen's fast reads of gpu-1 take longer than the background interval (a slow API server):
    each ends with gpu-1 due by the clock, and the background must still leave it to them."""
    async with model_on(stacks.gpu_operator_healthy(), metrics_background_interval=0.2, metrics_interval=0.05) as (sim, model):
        poller = model.metrics
        read_by_background = background_reads_of(poller)
        sim.faults.slow("pods/proxy", 0.4)
        release = poller.want(["gpu-1"])
        poller.start_background()
        await until(lambda: read_by_background.count("gpu-2") >= 3, what="gpu-2 read in the background, three times")
        fast_reads = poller.requests - read_by_background.count("gpu-2")
        release()
        assert fast_reads >= 3  # gpu-1 was read the while, by the details' loop
        assert "gpu-1" not in read_by_background


async def test_nodes_the_fast_reads_release_are_read_in_the_background_at_once():
    """Every node wanted at the fast rate: the background reads none and has nothing to wait for (it sleeps until
    IDLE_LOOK); released, they are its own again at once, not an idle look later."""
    async with model_on(stacks.gpu_operator_healthy(), metrics_background_interval=0.2, metrics_interval=0.05) as (_, model):
        poller = model.metrics
        release = poller.want()  # every node
        poller.start_background()
        await until(lambda: poller.requests >= 6, what="both nodes read at the fast rate, three times")
        assert poller.background_reads == 0
        release()
        await until(lambda: poller.background_reads >= 2, timeout=IDLE_LOOK / 2, what="both nodes read in the background")


async def test_the_budget_caps_reads_a_minute_and_goes_round_robin(tmp_path):
    """Ten nodes, a minute's budget of 120 reads (2 a second) and an interval far below what
    the budget allows: the reads keep to the budget and go round every node."""
    from tests.model.test_dcgm_poll import VALID, stand_in

    bodies = {f"n{i}": (200, VALID) for i in range(10)}
    async with stand_in(bodies, tmp_path) as base:
        poller = MetricsPoller(base.api, lambda: {pod: Exporter("ns", pod) for pod in bodies},
                               background_interval=0.01, reads_per_minute=120, concurrency=2)
        poller.start_background()
        try:
            await asyncio.sleep(3.0)
        finally:
            await poller.stop()
        # a burst of `concurrency` (2), then 2 a second: at most 2 + 6 in 3 s
        assert 5 <= poller.requests <= 8, poller.requests
        read = [n for n in bodies if poller.node(n) is not None]
        assert len(read) == poller.requests  # round-robin: no node read twice before every node was read once
        assert poller.bytes_read == poller.requests * len(VALID.encode())


async def test_nodes_without_exporters_get_their_reason_without_a_request(tmp_path):
    from tests.model.test_dcgm_poll import VALID, stand_in

    async with stand_in({"n1": (200, VALID)}, tmp_path) as base:
        targets = {"n1": Exporter("ns", "n1"), "n2": Exporter(unavailable="no DCGM exporter on this node")}
        poller = MetricsPoller(base.api, lambda: targets, background_interval=60.0)
        poller.start_background()
        try:
            await until(lambda: poller.node("n1") is not None and poller.node("n1").current, what="n1 read")
        finally:
            await poller.stop()
        assert poller.node("n2").error == "no DCGM exporter on this node" and poller.requests == 1
