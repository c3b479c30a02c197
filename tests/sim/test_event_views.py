"""Events are written once and read through both API groups, as kube-apiserver serves them, seen by the official
async client: kube-scheduler writes through events.k8s.io/v1 (eventTime, reportingController, a `series` for
repeats keeping the first note), the kubelet through core v1 (count, source); each object has one name, uid and
resourceVersion in both views, with the real field mapping; a write through one group is read and watched
through the other. gputui reads the scheduler's repeats from `series` and its reporter from core's
`reportingComponent`."""
from __future__ import annotations

import asyncio

import orjson
import pytest
from kubernetes_asyncio import client, config

from gputui.kube.records import event_from
from gputui.kube.verify.judging import PodEvent
from gputui.sim import builders
from gputui.sim.cluster import SimCluster


async def until(check, what: str, timeout: float = 10.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        got = await check()
        if got:
            return got
        await asyncio.sleep(0.05)
    raise AssertionError(f"{what}: not within {timeout:.0f} s")


@pytest.fixture
async def sim():
    async with SimCluster([builders.node("cpu-1", 0)], speed=50) as cluster:
        yield cluster


@pytest.fixture
async def api(sim):
    await config.load_kube_config(config_file=str(sim.kubeconfig_path))
    async with client.ApiClient() as api_client:
        yield api_client


async def raw(sim, path: str) -> dict:
    async with sim.http_session() as http, http.get(f"{sim.url}{path}") as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json()


async def test_the_scheduler_writes_through_events_k8s_io_and_core_reads_the_same_objects(sim, api):
    core, events = client.CoreV1Api(api), client.EventsV1Api(api)
    gpu_pod = builders.pod("big", "default", [builders.container("c", "cuda", limits={"nvidia.com/gpu": 1})])
    gpu_pod["spec"].pop("nodeName", None)
    gpu_pod.pop("status", None)
    await core.create_namespaced_pod("default", gpu_pod)

    async def failed_scheduling():
        listed = await raw(sim, "/api/v1/namespaces/default/events?fieldSelector=reason%3DFailedScheduling")
        return listed["items"]

    first = (await until(failed_scheduling, "a FailedScheduling event"))[0]
    # A node change makes the scheduler try again: the same (isomorphic) event, now a series.
    for n in range(2):
        sim.store.mutate("nodes", "", "cpu-1", lambda node, n=n: node["metadata"].setdefault("labels", {}).update(retry=str(n)))
        await until(lambda n=n: _series_at_least(sim, first["metadata"]["name"], n + 2), f"series count {n + 2}")
    core_view = (await raw(sim, f"/api/v1/namespaces/default/events/{first['metadata']['name']}"))
    assert "count" not in core_view and core_view["series"]["count"] >= 3 and core_view["series"]["lastObservedTime"]
    assert core_view["message"] == first["message"]  # the first note is kept
    assert (core_view["source"], core_view["firstTimestamp"], core_view["lastTimestamp"]) == ({}, None, None)
    assert (core_view["reportingComponent"], core_view["reportingInstance"], core_view["action"]) == (
        "default-scheduler", "default-scheduler-gputui-sim-control-plane", "Scheduling")
    assert core_view["eventTime"].endswith("Z") and "." in core_view["eventTime"]  # a MicroTime

    # The events.k8s.io view: the same object, renamed fields; the official client reads it.
    v1_view = await events.read_namespaced_event(first["metadata"]["name"], "default")
    assert (v1_view.metadata.uid, v1_view.metadata.resource_version) == (core_view["metadata"]["uid"], core_view["metadata"]["resourceVersion"])
    assert (v1_view.reporting_controller, v1_view.note, v1_view.regarding.name, v1_view.series.count) == (
        "default-scheduler", core_view["message"], "big", core_view["series"]["count"])
    assert v1_view.deprecated_count is None and v1_view.deprecated_source.component is None

    # gputui counts the series and names the reporter, from core v1.
    record = event_from(core_view)
    assert (record.count, record.source) == (core_view["series"]["count"], "default-scheduler")
    said = PodEvent.from_object(core_view)
    assert (said.count, said.source, said.message) == (core_view["series"]["count"], "default-scheduler", core_view["message"])


async def _series_at_least(sim, name: str, count: int) -> bool:
    obj = await raw(sim, f"/apis/events.k8s.io/v1/namespaces/default/events/{name}")
    return (obj.get("series") or {}).get("count", 1) >= count


async def test_a_core_event_is_read_and_watched_through_events_k8s_io_and_back(sim, api):
    core, events = client.CoreV1Api(api), client.EventsV1Api(api)
    listed = await raw(sim, "/apis/events.k8s.io/v1/namespaces/default/events")
    body = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "kubelet-said", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}, "reason": "Pulled", "message": "pulled",
            "type": "Normal", "count": 3, "source": {"component": "kubelet", "host": "cpu-1"},
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:05:00Z"}
    # Raw HTTP: the official clients' events.k8s.io model refuses the null eventTime a core-written event has in
    # this view, on a real cluster too (kubernetes-client/python#1616).
    async with sim.http_session() as http, http.get(f"{sim.url}/apis/events.k8s.io/v1/namespaces/default/events", params={
            "watch": "true", "resourceVersion": listed["metadata"]["resourceVersion"], "timeoutSeconds": "5"}) as resp:
        created = await core.create_namespaced_event("default", body)
        seen = orjson.loads(await resp.content.readline())
    view = seen["object"]
    assert (seen["type"], view["metadata"]["name"], view["metadata"]["resourceVersion"]) == ("ADDED", "kubelet-said", created.metadata.resource_version)
    assert (view["note"], view["deprecatedCount"], view["deprecatedSource"], view["regarding"]["name"]) == (
        "pulled", 3, {"component": "kubelet", "host": "cpu-1"}, "p")
    assert (view["eventTime"], view["deprecatedFirstTimestamp"]) == (None, "2026-01-01T00:00:00Z")
    assert "message" not in view and "involvedObject" not in view
    # Written through events.k8s.io, read through core v1.
    await events.create_namespaced_event("default", {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "controller-said", "namespace": "default"},
        "eventTime": "2026-01-01T00:00:00.000001Z", "reportingController": "example.com/ctl", "reportingInstance": "ctl-0",
        "action": "Checking", "reason": "Checked", "note": "all good", "type": "Normal",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}})
    back = await raw(sim, "/api/v1/namespaces/default/events/controller-said")
    assert (back["message"], back["reportingComponent"], back["reportingInstance"], back["involvedObject"]["name"], back["source"]) == (
        "all good", "example.com/ctl", "ctl-0", "p", {})
    names = {e["metadata"]["name"] for e in (await raw(sim, "/api/v1/namespaces/default/events"))["items"]}
    assert {"kubelet-said", "controller-said"} <= names
    await events.delete_namespaced_event("controller-said", "default")
    assert "controller-said" not in {e["metadata"]["name"] for e in (await raw(sim, "/api/v1/namespaces/default/events"))["items"]}
