"""Gentle with the API server: lists come from the watch cache (a WatchList stream, else resourceVersion=0),
pages only from an old or odd server; 429 and 503 honour Retry-After; an expired continue token restarts the
list. The request shapes and what a real server would have read from etcd come from the simulator's counts."""
from __future__ import annotations

import time

import pytest

from gputui.kube.config import connect
from gputui.kube.model import NODES, PODS, UNFINISHED_PODS, ClusterModel
from gputui.kube import watch
from gputui.kube.watch import CACHE, PAGED, WATCHLIST
from gputui.sim.cluster import SimCluster
from tests.model.objects import pod
from tests.model.scenario import (
    CRDS,
    FAST,
    expected_pods,
    matches_fresh_list,
    reads,
    small_cluster,
    stop,
    synced,
    until,
)

KINDS = (NODES, PODS, "events", "daemonsets")


async def crd_names_list(sim: SimCluster) -> int:
    """Discovery's one list of the CRDs' names, from the watch cache (resourceVersion=0) as a Table, once its
    watch is open (discovery starts beside the sync)."""
    await until(lambda: any(verb == "watch" for verb, _ in reads(sim, CRDS)), what="discovery's CRD watch")
    lists = [query for verb, query in reads(sim, CRDS) if verb == "list"]
    assert all(query.get("resourceVersion") == "0" for query in lists), lists
    return len(lists)


async def synced_model(sim: SimCluster, **options) -> tuple[object, ClusterModel]:
    return await synced(sim, KINDS, **options)


async def test_a_current_server_streams_the_initial_state_and_nothing_comes_from_etcd():
    async with SimCluster(small_cluster(), run_controllers=False) as sim:
        conn, model = await synced_model(sim)
        try:
            assert matches_fresh_list(model, sim.store)
            assert all(r.list_mode == WATCHLIST for r in model.reflectors.values())
            verb, query = reads(sim, "pods")[0]
            assert verb == "watch" and query["sendInitialEvents"] == "true"
            assert query["resourceVersionMatch"] == "NotOlderThan" and query["allowWatchBookmarks"] == "true"
            assert sim.api_counts.watch_lists == len(model.watches.all) == len(KINDS) + 1  # events: two field selectors
            crd_lists = await crd_names_list(sim)
            assert sim.api_counts.lists_from_etcd == 0 and sim.api_counts.lists_from_cache == crd_lists == 1
            # the same stream goes on as the watch
            sim.store.create("pods", pod("ml", "after-the-stream", node="gpu-1", gpu={"nvidia.com/gpu": 1}))
            await until(lambda: model.pod("ml", "after-the-stream") is not None)
            assert sim.api_counts.watches == len(model.watches.all) + crd_lists  # and discovery's CRD watch
        finally:
            await stop(conn, model)


async def test_without_watchlist_one_list_from_the_watch_cache():
    async with SimCluster(small_cluster(), run_controllers=False, server_minor=33) as sim:  # WatchList off in 1.33
        conn, model = await synced_model(sim, page_size=2)
        try:
            assert matches_fresh_list(model, sim.store)
            assert all(r.list_mode == CACHE for r in model.reflectors.values())
            shapes = reads(sim, "pods")
            assert shapes[0][0] == "watch" and shapes[0][1]["sendInitialEvents"] == "true"  # refused with 422
            assert shapes[1] == ("list", {"resourceVersion": "0", "fieldSelector": UNFINISHED_PODS})  # no limit: one answer, whatever page_size
            assert sim.api_counts.lists_from_etcd == 0
            crd_lists = await crd_names_list(sim)
            assert sim.api_counts.lists_from_cache == len(model.watches.all) + crd_lists
        finally:
            await stop(conn, model)


async def test_paged_lists_are_what_an_old_server_reads_from_etcd():
    async with SimCluster(small_cluster(), run_controllers=False, server_minor=30) as sim:
        conn = await connect(str(sim.kubeconfig_path))
        model = ClusterModel(conn.api, kinds=(PODS,), page_size=3, list_modes=(PAGED,), **FAST)
        await model.start()
        try:
            assert await model.wait_synced(10)
            assert model.pods.records == expected_pods(model, sim.store)
            pages = [query for verb, query in reads(sim, "pods") if verb == "list"]
            assert pages[0] == {"limit": "3", "fieldSelector": UNFINISHED_PODS} and len(pages) >= 4
            assert all("continue" in page and page["fieldSelector"] == UNFINISHED_PODS for page in pages[1:])
            # 1.30: a consistent read and every continued page come from etcd
            assert sim.api_counts.lists_from_etcd == len(pages)
        finally:
            await stop(conn, model)


async def test_after_a_410_the_relist_is_consistent():
    async with SimCluster(small_cluster(), run_controllers=False, faults=True, server_minor=33) as sim:
        conn, model = await synced_model(sim)
        try:
            sim.faults.drop_watches()
            sim.store.create("pods", pod("ml", "while-away", node="gpu-1", gpu={"nvidia.com/gpu": 1}))
            sim.faults.compact()
            await until(lambda: model.pod("ml", "while-away") is not None, what="the relist")
            relists = [query for verb, query in reads(sim, "pods") if verb == "list"][1:]
            assert relists and "resourceVersion" not in relists[0]  # not from the cache: as client-go, after a 410
        finally:
            await stop(conn, model)


@pytest.mark.parametrize("code", [429, 503])
async def test_a_busy_server_is_waited_for_as_long_as_it_asks(code):
    async with SimCluster(small_cluster(), run_controllers=False, faults=True) as sim:
        sim.faults.fail("pods", code, retry_after=1)
        conn = await connect(str(sim.kubeconfig_path))
        model = ClusterModel(conn.api, kinds=(PODS,), backoff_initial=0.01, backoff_max=0.02, forbidden_retry=0.3)
        await model.start()
        try:
            await until(lambda: model.states[PODS].phase == "retrying", what="the refusal")
            state = model.states[PODS]
            assert state.error.startswith("server busy") and 0.5 <= state.retry_in() <= 1.0
            started, attempt = time.monotonic(), state.attempt
            await until(lambda: model.states[PODS].attempt > attempt, timeout=3, what="the next try")
            assert time.monotonic() - started >= 0.5  # Retry-After, not the 10 ms back-off
            sim.faults.clear()
            await until(lambda: model.states[PODS].phase == "live", timeout=5, what="served again")
        finally:
            await stop(conn, model)


async def test_an_expired_continue_token_restarts_the_list():
    async with SimCluster(small_cluster(), run_controllers=False, faults=True, server_minor=30) as sim:
        sim.faults.slow("pods", 0.3)
        conn = await connect(str(sim.kubeconfig_path))
        model = ClusterModel(conn.api, kinds=(PODS,), page_size=2, list_modes=(PAGED,), **FAST)
        await model.start()
        try:
            await until(lambda: any(verb == "list" for verb, _ in reads(sim, "pods")), what="the first page")
            sim.store.create("pods", pod("ml", "meanwhile", node="gpu-1", gpu={"nvidia.com/gpu": 1}))
            sim.faults.compact()  # the list's resourceVersion is gone: its continue token expires
            await until(lambda: sim.api_counts.expired_continues >= 1, timeout=5, what="a 410 on a continue token")
            sim.faults.clear()
            assert await model.wait_synced(10)
            await until(lambda: model.pod("ml", "meanwhile") is not None, what="the restarted list")
            assert model.pods.records == expected_pods(model, sim.store)
        finally:
            await stop(conn, model)


async def test_the_watchlist_stream_hands_the_table_slim_pods():
    """The stream's pods are decoded to their shape (kube/decoding.py), as list pages are: what no builder reads
    (images, mounts, annotations) is never built."""
    async with SimCluster(small_cluster(), run_controllers=False) as sim:
        conn = await connect(str(sim.kubeconfig_path))
        model = ClusterModel(conn.api, kinds=(PODS,), **FAST)
        handed: list[dict] = []
        keep = model.pods.put_listed
        model.pods.put_listed = lambda obj: (handed.append(obj), keep(obj))[1]  # type: ignore[method-assign]
        await model.start()
        try:
            assert await model.wait_synced(10)
            assert model.reflectors[PODS].list_mode == WATCHLIST
            served = {p["metadata"]["name"] for p in sim.store.objects("pods") if p["status"].get("phase") not in ("Succeeded", "Failed")}
            assert {obj["metadata"]["name"] for obj in handed} == served
            assert all(set(obj) <= {"metadata", "spec", "status"} and "image" not in obj["spec"]["containers"][0] for obj in handed)
            assert any(sim.store.get("pods", obj["metadata"]["namespace"], obj["metadata"]["name"])["spec"]["containers"][0].get("image")
                       for obj in handed)  # the simulator's pods have images: left out
            assert model.pods.records == expected_pods(model, sim.store)
        finally:
            await stop(conn, model)


def test_a_read_is_decoded_a_batch_of_whole_lines_at_a_time(monkeypatch):
    monkeypatch.setattr(watch, "BATCH", 10)
    lines = [b"a" * n + b"\n" for n in (3, 8, 25, 1, 4, 9, 2)]
    chunk = b"tail\n" + b"".join(lines) + b"next"
    start, end = 5, len(chunk) - 4
    batches = [bytes(b) for b in watch._batches(bytearray(b"earlier line\n"), chunk, start, end)]
    assert b"".join(batches) == b"earlier line\n" + b"".join(lines)
    assert batches[0] == b"earlier line\n" and all(b.endswith(b"\n") for b in batches)
    assert all(len(b) <= 10 or b.count(b"\n") == 1 for b in batches[1:])  # a line longer than a batch: alone, whole
    assert len(batches) > 4
    assert [bytes(b) for b in watch._batches(bytearray(), chunk, start, start + 4)] == [lines[0]]


async def test_a_watchlist_read_in_many_batches_is_the_whole_state(monkeypatch):
    monkeypatch.setattr(watch, "BATCH", 700)  # a pod's line or a few: reads of many batches, some longer than one
    async with SimCluster(small_cluster(), run_controllers=False) as sim:
        conn, model = await synced_model(sim)
        try:
            assert all(r.list_mode == WATCHLIST for r in model.reflectors.values())
            assert matches_fresh_list(model, sim.store) and model.pods.records
        finally:
            await stop(conn, model)
