"""Regression (issue 20, item 8): the cyclic GC, paused while a WatchList stream sends the initial
state, runs again once that state has ended, while the same stream goes on as the watch.

It once stayed paused for the stream's whole life (4-5 minutes, and again at each relist): every
frame Textual draws leaves reference cycles behind (a Strip that caches itself), and at a
200x500 terminal under churn the app grew from 68 to 680 MB within a minute."""
from __future__ import annotations

import gc

from gputui.kube import watch
from gputui.kube.model import NODES, PODS
from gputui.kube.watch import WATCHLIST, gc_paused
from gputui.sim.cluster import SimCluster
from tests.model.objects import pod
from tests.model.scenario import model_watches, small_cluster, stop, synced, until

KINDS = (NODES, PODS, "events", "daemonsets")


async def test_the_collector_runs_again_once_the_initial_events_end():
    assert gc.isenabled(), "the GC was off before this test began"
    async with SimCluster(small_cluster(), run_controllers=False) as sim:
        conn, model = await synced(sim, KINDS)
        try:
            assert all(r.list_mode == WATCHLIST for r in model.reflectors.values())
            # the streams that sent the initial state go on as the watches
            sim.store.create("pods", pod("ml", "after-the-list", node="gpu-1", gpu={"nvidia.com/gpu": 1}))
            await until(lambda: model.pod("ml", "after-the-list") is not None)
            assert model_watches(sim) == len(model.watches.all)  # no stream was opened again
            assert watch._GcPause.depth == 0
            assert gc.isenabled()
        finally:
            await stop(conn, model)
    assert gc.isenabled()


def test_a_pause_that_ends_early_is_not_ended_twice():
    assert gc.isenabled()
    with gc_paused() as outer:
        with gc_paused() as inner:
            assert not gc.isenabled()
            inner.end()
            inner.end()
            assert not gc.isenabled()  # the outer pause still holds
        outer.end()
        assert gc.isenabled() and watch._GcPause.depth == 0
    assert gc.isenabled() and watch._GcPause.depth == 0
