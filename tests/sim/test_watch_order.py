"""A watch never sends a bookmark ahead of events still queued for it: every event's resourceVersion
is at least that of the bookmarks before it (clients take an older one as a server that went back in time)."""
from __future__ import annotations

import asyncio

import orjson

from gputui.sim.cluster import SimCluster


async def test_bookmarks_never_overtake_queued_events():
    async with SimCluster(nodes=2, pods=40, bookmark_interval=0.1, run_controllers=False) as sim:
        pods = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in sim.store.objects("pods")]
        since = sim.store.resource_version
        stop = asyncio.Event()

        async def churn() -> None:
            i = 0
            while not stop.is_set():
                for _ in range(5):
                    namespace, name = pods[i % len(pods)]
                    i += 1
                    sim.store.mutate("pods", namespace, name, lambda o, i=i: o["metadata"].setdefault("annotations", {}).update(t=str(i)))
                await asyncio.sleep(0.005)

        task = asyncio.create_task(churn())
        last_bookmark, events, bookmarks, overtaken = 0, 0, 0, []
        try:
            async with sim.http_session() as http:
                params = {"watch": "true", "resourceVersion": str(since), "allowWatchBookmarks": "true", "timeoutSeconds": "3"}
                async with http.get(f"{sim.url}/api/v1/pods", params=params) as resp:
                    async for line in resp.content:
                        event = orjson.loads(line)
                        rv = int(event["object"]["metadata"]["resourceVersion"])
                        if event["type"] == "BOOKMARK":
                            bookmarks += 1
                            last_bookmark = rv
                        else:
                            events += 1
                            if rv < last_bookmark:
                                overtaken.append((rv, last_bookmark))
                        await asyncio.sleep(0.001)  # a reader a little slower than the writes: a backlog builds
        finally:
            stop.set()
            await task
        assert events > 500 and bookmarks >= 1
        assert overtaken == []


async def test_a_watchlist_continues_after_its_bookmark_never_before_it():
    """The initial-events-end bookmark carries the snapshot's resourceVersion: the changes made while the
    initial state was being sent follow it, each later than it."""
    async with SimCluster(nodes=20, pods=3000, run_controllers=False) as sim:
        pods = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in sim.store.objects("pods")][:50]
        stop = asyncio.Event()

        async def churn() -> None:
            i = 0
            while not stop.is_set():
                namespace, name = pods[i % len(pods)]
                i += 1
                sim.store.mutate("pods", namespace, name, lambda o, i=i: o["metadata"].setdefault("annotations", {}).update(t=str(i)))
                await asyncio.sleep(0)

        task = asyncio.create_task(churn())
        end, after, older = None, 0, []
        try:
            async with sim.http_session() as http:
                params = {"watch": "true", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
                          "allowWatchBookmarks": "true", "resourceVersion": "", "timeoutSeconds": "2"}
                async with http.get(f"{sim.url}/api/v1/pods", params=params) as resp:
                    async for line in resp.content:
                        event = orjson.loads(line)
                        meta = event["object"]["metadata"]
                        if event["type"] == "BOOKMARK" and (meta.get("annotations") or {}).get("k8s.io/initial-events-end"):
                            end = int(meta["resourceVersion"])
                        elif end is not None and event["type"] != "BOOKMARK":
                            after += 1
                            if int(meta["resourceVersion"]) < end:
                                older.append(int(meta["resourceVersion"]))
        finally:
            stop.set()
            await task
        assert end is not None and after > 100
        assert older == []
