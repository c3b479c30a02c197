"""Regression (issue 20, item 8): the app at a tall terminal under pod churn leaves nothing for
the cyclic GC to pile up: the collector runs while the watches stream.

Each frame Textual draws leaves reference cycles behind (a Strip that caches itself: one per line
drawn), which only the cyclic GC frees. It was paused from the first WatchList stream until every
such stream ended (4-5 minutes, again at each relist), so those cycles piled up in proportion to
the lines drawn: 68 -> 680 MB within a minute at 200x500. Asserted here on the cause (the collector
is on, and the objects it has not looked at stay near its threshold) and on what the tables keep for
it to go over (renders no frame reads again), not on memory or time."""
from __future__ import annotations

import gc

import pytest

from gputui.kube.gpu import GpuResources
from gputui.kube.records import effective_requests
from gputui.kube.watch import WATCHLIST
from tests.ui.ui_helpers import app_on, start_cluster, wait_for

CHURN_ROUNDS = 30
PODS_PER_ROUND = 20


@pytest.fixture(scope="module")
def cluster():
    yield from start_cluster([], nodes=20, pods=300)


def running_gpu_pods(sim) -> list[tuple[str, str]]:
    gpus = GpuResources()
    return [
        (e.obj["metadata"]["namespace"], e.obj["metadata"]["name"])
        for e in sim.store.entries("pods")
        if e.obj.get("spec", {}).get("nodeName")
        and e.obj.get("status", {}).get("containerStatuses")
        and gpus.of(effective_requests(e.obj["spec"]))
    ]


def bump_restarts(sim, keys: list[tuple[str, str]]) -> None:
    def bump(obj: dict) -> None:
        status = obj["status"]["containerStatuses"][0]
        status["restartCount"] = int(status.get("restartCount", 0)) + 1

    for namespace, name in keys:
        sim.store.mutate("pods", namespace, name, bump)


async def test_the_collector_runs_while_a_tall_terminal_follows_churn(cluster):
    assert gc.isenabled(), "the GC was off before this test began"
    app = app_on(cluster)
    async with app.run_test(size=(200, 500)) as pilot:
        await wait_for(pilot, lambda: app.model is not None and app.model.states
                       and all(s.phase in ("live", "absent") for s in app.model.states.values()), timeout=30, what="every watch live")
        assert app.model.reflectors["pods"].list_mode == WATCHLIST  # the list streamed, then the same stream watches
        await wait_for(pilot, lambda: app.selected_node, what="the first node")
        await pilot.press("a")
        gpu_pods = cluster.call(running_gpu_pods, cluster.sim)
        assert len(gpu_pods) >= PODS_PER_ROUND
        await wait_for(pilot, lambda: app.pods_table.row_count >= PODS_PER_ROUND, what="the GPU pods")
        refreshes = app.scheduler.refreshes
        for round_ in range(CHURN_ROUNDS):
            start = round_ * PODS_PER_ROUND % len(gpu_pods)
            cluster.call(bump_restarts, cluster.sim, (gpu_pods + gpu_pods)[start:start + PODS_PER_ROUND])
            await pilot.pause(0.05)
        await wait_for(pilot, lambda: app.scheduler.refreshes >= refreshes + 5, what="refreshes under churn")
        assert gc.isenabled(), "the cyclic GC is off while the watches stream: each frame's cycles pile up"
        threshold = gc.get_threshold()[0]
        # gen-0 collections keep this under about the threshold; paused, it reached hundreds of thousands
        assert gc.get_count()[0] <= 10 * threshold, gc.get_count()
        # What the collector goes over: DataTable's render caches hold the rows drawn since the last
        # change (their keys count the changes), not the last 1,000 rows and 10,000 cells drawn.
        table = app.pods_table
        in_view = len(table.visible_keys()) + 1  # and the header
        assert len(table._row_render_cache) <= 2 * in_view, (len(table._row_render_cache), in_view)
        assert len(table._cell_render_cache) <= 2 * in_view * len(table.columns)


async def test_the_tables_are_frozen_once_filled_even_on_a_cluster_that_goes_quiet(cluster):
    """The race a real terminal showed (1 run in 5 of the memory benchmark's second size): when the tables were
    looked at, the node summaries had moved on since they were drawn (a summary dropped without an event), and
    then the cluster sent nothing more. Only a pods refresh followed, the nodes were never drawn again, and
    the rows were never moved out of the collector's way."""
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.model is not None and app.model.pods_known and app.pods_table.row_count
                       and not app.scheduler.freeze_pending, timeout=30, what="the tables filled and frozen")
        app.scheduler.freeze_pending = True  # the model's sync noticed again: its rows to freeze once filled
        app.model._forget_summary()  # the summaries move on, with no event to say so
        app.scheduler.request("pods")
        await wait_for(pilot, lambda: not app.scheduler.freeze_pending, what="frozen, with no cluster event")
        app._when_synced(app.model)  # a sync noticed after the last refresh: frozen all the same
        await wait_for(pilot, lambda: not app.scheduler.freeze_pending, what="frozen after a late sync")
