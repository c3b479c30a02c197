"""resourceVersions are a sequence per etcd, comparable only within one resource: events kept in an etcd of
their own (`--etcd-servers-overrides`) lag the pods' by far. kube-apiserver 1.34 answers a read of events
from a pod's resourceVersion as its watch cache does for a version from its future: a list, and a watch
with sendInitialEvents, wait for it and then fail 504 Timeout with the ResourceVersionTooLarge cause
(waitUntilFreshAndBlock); a plain watch starts there and stays silent until the events' own sequence
passes it (getAllEventsSinceLocked). Checked with raw HTTP, the official Python client and the real kubectl."""
from __future__ import annotations

import asyncio
import json

import orjson
import pytest
from kubernetes_asyncio import client, config, watch

from gputui.sim import builders as b
from gputui.sim.cluster import SimCluster
from gputui.sim.apiserver.store import Store

LAG = 100_000


def objects() -> list[dict]:
    trainer = b.pod("trainer", "default", [b.container("main", "busybox")], node_name="gpu-1")
    return [b.node("gpu-1", 1), trainer, b.event(trainer, "Scheduled", "Successfully assigned default/trainer to gpu-1")]


def test_each_etcd_counts_its_own_writes() -> None:
    store = Store(own_etcd={"events": 1}, first_revision=1 + LAG)
    node = store.create("nodes", b.node("gpu-1", 1))
    pod = store.create("pods", b.pod("p", "default", [b.container("c", "busybox")]))
    event = store.create("events", b.event(pod, "Scheduled", "assigned"))
    assert (int(node["metadata"]["resourceVersion"]), int(pod["metadata"]["resourceVersion"])) == (LAG + 2, LAG + 3)
    assert int(event["metadata"]["resourceVersion"]) == 2
    assert (store.resource_version, store.resource_version_of("pods"), store.resource_version_of("events")) == (LAG + 3, LAG + 3, 2)
    store.compact()
    with pytest.raises(Exception, match="too old resource version: 1 \\(2\\)"):
        store.watch("events", 1)
    # One etcd for everything unless told: one sequence.
    one = Store()
    one.create("nodes", b.node("gpu-1", 1))
    one.create("events", b.event(pod, "Scheduled", "assigned"))
    assert one.resource_version_of("events") == one.resource_version_of("nodes") == one.resource_version == 3


async def test_events_from_a_pods_resource_version(make_kubectl) -> None:
    async with SimCluster(objects(), events_lag=LAG, run_controllers=False) as sim:
        sim.too_large_wait = 0.3
        await config.load_kube_config(config_file=str(sim.kubeconfig_path))
        async with client.ApiClient() as api:
            v1 = client.CoreV1Api(api)
            pods = await v1.list_namespaced_pod("default")
            events = await v1.list_namespaced_event("default")
            pod_rv, events_rv = int(pods.metadata.resource_version), int(events.metadata.resource_version)
            assert pod_rv > LAG > events_rv
            assert int(pods.items[0].metadata.resource_version) > LAG > int(events.items[0].metadata.resource_version)
            # A list from the pod's resourceVersion: waited for, then 504 Timeout, Too large resource version.
            with pytest.raises(client.ApiException) as too_large:
                await v1.list_namespaced_event("default", resource_version=str(pod_rv))
            status = json.loads(too_large.value.body)
            assert (too_large.value.status, status["reason"]) == (504, "Timeout")
            assert status["message"] == f"Timeout: Too large resource version: {pod_rv}, current: {events_rv}"
            assert status["details"]["causes"] == [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]
            # A watch with sendInitialEvents from it: the same, as an ERROR event.
            with pytest.raises(client.ApiException) as failed:
                stream = watch.Watch().stream(v1.list_namespaced_event, "default", resource_version=str(pod_rv), send_initial_events=True,
                                              resource_version_match="NotOlderThan", allow_watch_bookmarks=True, timeout_seconds=5)
                _ = [e async for e in stream]
            assert failed.value.status == 504
            # A plain watch from it stays silent, while one from the events' own resourceVersion sees a new event.
            kubectl = make_kubectl(sim.kubeconfig_path)
            url = "/api/v1/namespaces/default/events?watch=1&timeoutSeconds=2&allowWatchBookmarks=true&resourceVersion="
            silent = asyncio.create_task(asyncio.to_thread(kubectl, "get", "--raw", url + str(pod_rv)))
            heard = asyncio.create_task(asyncio.to_thread(kubectl, "get", "--raw", url + str(events_rv)))
            await asyncio.sleep(0.5)
            trainer = sim.store.get("pods", "default", "trainer")
            sim.store.create("events", b.event(trainer, "Pulled", 'Container image "busybox" already present on machine'))
            assert (await silent).strip() == ""
            lines = [orjson.loads(line) for line in (await heard).splitlines() if line.strip()]
            assert [(e["type"], e["object"]["reason"]) for e in lines if e["type"] != "BOOKMARK"] == [("ADDED", "Pulled")]
            assert int(lines[0]["object"]["metadata"]["resourceVersion"]) == events_rv + 1
