"""The Python clients against the simulated API server: watch semantics, models, and raw HTTP API behaviour."""
from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, AsyncIterator

import aiohttp
import kubernetes
import pytest
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.exceptions import ApiException

from gputui.ui.demo import BackgroundCluster
from tests.sim.sim_api_objects import container, pod, small_cluster

BOOKMARK_INTERVAL = 0.3


@pytest.fixture(scope="module")
def sim():
    with BackgroundCluster(scenario=small_cluster(), faults=True, bookmark_interval=BOOKMARK_INTERVAL, run_controllers=False) as cluster:
        yield cluster


@contextlib.asynccontextmanager
async def core_api(sim: BackgroundCluster) -> AsyncIterator[client.CoreV1Api]:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(sim.kubeconfig_path), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        yield client.CoreV1Api(api)


async def collect(stream: Any, until: Any = None) -> list[tuple[str, str, dict]]:
    """(type, name, raw object) of each event until the stream ends or until(event) is true."""
    seen = []
    async for event in stream:
        raw = event["raw_object"]
        seen.append((event["type"], raw.get("metadata", {}).get("name", ""), raw))
        if until is not None and until(event):
            break
    return seen


def store_call(sim: BackgroundCluster, fn: Any) -> Any:
    """Run fn(store) on the simulator's loop."""
    return sim.call(lambda: fn(sim.sim.store))


def set_label(value: str):
    def change(p: dict) -> None:
        p["metadata"]["labels"]["tier"] = value

    return change


# -- kubernetes_asyncio: watch semantics ---------------------------------
async def test_list_then_watch_sees_added_modified_deleted(sim):
    async with core_api(sim) as v1:
        listed = await v1.list_namespaced_pod("ml")
        rv = listed.metadata.resource_version
        assert {p.metadata.name for p in listed.items} >= {"train-0", "infer-0"}
        w = watch.Watch()
        stream = w.stream(v1.list_namespaced_pod, "ml", resource_version=rv, timeout_seconds=5)
        task = asyncio.create_task(collect(stream, until=lambda e: e["type"] == "DELETED"))
        await asyncio.sleep(0.1)
        store_call(sim, lambda s: s.create("pods", pod("live-1", "ml")))
        store_call(sim, lambda s: s.mutate("pods", "ml", "live-1", set_label("cpu")))
        store_call(sim, lambda s: s.delete("pods", "ml", "live-1"))
        seen = await asyncio.wait_for(task, 5)
    assert [(t, n) for t, n, _ in seen] == [("ADDED", "live-1"), ("MODIFIED", "live-1"), ("DELETED", "live-1")]
    versions = [int(raw["metadata"]["resourceVersion"]) for _, _, raw in seen]
    assert versions == sorted(versions) and versions[0] > int(rv)


async def test_watch_resumes_from_a_resource_version(sim):
    async with core_api(sim) as v1:
        rv = (await v1.list_namespaced_pod("ml")).metadata.resource_version
        store_call(sim, lambda s: s.create("pods", pod("missed-1", "ml")))
        store_call(sim, lambda s: s.delete("pods", "ml", "missed-1"))
        seen = await collect(watch.Watch().stream(v1.list_namespaced_pod, "ml", resource_version=rv, timeout_seconds=1))
    assert [(t, n) for t, n, _ in seen] == [("ADDED", "missed-1"), ("DELETED", "missed-1")]


async def test_watch_without_resource_version_starts_with_current_objects(sim):
    async with core_api(sim) as v1:
        seen = await collect(watch.Watch().stream(v1.list_node, timeout_seconds=1))
    assert {(t, n) for t, n, _ in seen} >= {("ADDED", "gpu-1"), ("ADDED", "gpu-2"), ("ADDED", "gpu-3")}


async def test_bookmarks_when_allowed(sim):
    async with core_api(sim) as v1:
        rv = (await v1.list_node()).metadata.resource_version
        stream = watch.Watch().stream(v1.list_node, resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=5)
        seen = await asyncio.wait_for(collect(stream, until=lambda e: e["type"] == "BOOKMARK"), 3)
    kind, _, raw = seen[-1]
    assert kind == "BOOKMARK"
    assert raw["kind"] == "Node" and raw["apiVersion"] == "v1"
    assert int(raw["metadata"]["resourceVersion"]) >= int(rv)


async def test_timeout_seconds_ends_the_stream(sim):
    async with core_api(sim) as v1:
        rv = (await v1.list_node()).metadata.resource_version
        started = time.monotonic()
        # ended by the server (a hang ends in wait_for's TimeoutError), and not before timeoutSeconds
        seen = await asyncio.wait_for(collect(watch.Watch().stream(v1.list_node, resource_version=rv, timeout_seconds=1)), 30)
        elapsed = time.monotonic() - started
    assert seen == []
    assert elapsed >= 0.9


async def test_too_old_resource_version_raises_410(sim):
    async with core_api(sim) as v1:
        rv = (await v1.list_namespaced_pod("ml")).metadata.resource_version
        store_call(sim, lambda s: s.create("pods", pod("after-compact", "ml")))
        sim.call(sim.sim.faults.compact)
        with pytest.raises(ApiException) as raised:
            await collect(watch.Watch().stream(v1.list_namespaced_pod, "ml", resource_version=rv, timeout_seconds=2))
        store_call(sim, lambda s: s.delete("pods", "ml", "after-compact"))
    assert raised.value.status == 410


async def test_raw_410_event_is_a_status(sim):
    async with sim.sim.http_session() as http:
        rv = store_call(sim, lambda s: s.resource_version)
        sim.call(sim.sim.faults.compact)
        async with http.get(f"{sim.sim.url}/api/v1/pods", params={"watch": "1", "resourceVersion": str(rv - 1)}) as resp:
            assert resp.status == 200 and resp.content_type == "application/json"
            event = await resp.json(content_type=None)
    status = event["object"]
    assert event["type"] == "ERROR"
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    assert status["message"] == f"too old resource version: {rv - 1} ({rv})"


async def test_selector_transitions_become_added_and_deleted(sim):
    async with core_api(sim) as v1:
        rv = (await v1.list_namespaced_pod("ml")).metadata.resource_version
        store_call(sim, lambda s: s.create("pods", pod("mover", "ml", labels={"tier": "cpu"})))
        store_call(sim, lambda s: s.mutate("pods", "ml", "mover", set_label("gpu")))
        store_call(sim, lambda s: s.mutate("pods", "ml", "mover", set_label("gpu-2")))
        store_call(sim, lambda s: s.mutate("pods", "ml", "mover", set_label("cpu")))
        store_call(sim, lambda s: s.delete("pods", "ml", "mover"))
        stream = watch.Watch().stream(v1.list_namespaced_pod, "ml", label_selector="tier in (gpu,gpu-2)", resource_version=rv, timeout_seconds=1)
        seen = await collect(stream)
    assert [(t, raw["metadata"]["labels"]["tier"]) for t, n, raw in seen if n == "mover"] == [
        ("ADDED", "gpu"), ("MODIFIED", "gpu-2"), ("DELETED", "gpu-2"),
    ]


async def test_dropped_watches_end_the_stream_and_none_leak(sim):
    async with core_api(sim) as v1:
        rv = (await v1.list_node()).metadata.resource_version
        task = asyncio.create_task(collect(watch.Watch().stream(v1.list_node, resource_version=rv, timeout_seconds=30)))
        await wait_for(lambda: store_call(sim, lambda s: s.open_watches("nodes")) == 1)
        assert sim.call(sim.sim.faults.drop_watches) == 1
        assert await asyncio.wait_for(task, 3) == []
    assert store_call(sim, lambda s: s.open_watches()) == 0


async def test_client_disconnect_closes_the_watch(sim):
    async with sim.sim.http_session() as http:
        resp = await http.get(f"{sim.sim.url}/api/v1/pods", params={"watch": "true"})
        await resp.content.readline()
        assert store_call(sim, lambda s: s.open_watches("pods")) == 1
        resp.close()
    await wait_for(lambda: store_call(sim, lambda s: s.open_watches()) == 0)


async def wait_for(condition: Any, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


# -- the sync client reads complete models -------------------------------
def test_sync_client_reads_models(sim):
    api = kubernetes.config.new_client_from_config(config_file=str(sim.kubeconfig_path))
    with api:
        core, apps = kubernetes.client.CoreV1Api(api), kubernetes.client.AppsV1Api(api)
        nodes = core.list_node().items
        assert {n.metadata.name for n in nodes} >= {"gpu-1", "gpu-2", "gpu-3"}
        assert nodes[0].status.node_info.kubelet_version == "v1.34.1"
        pods = core.list_pod_for_all_namespaces().items
        train = next(p for p in pods if p.metadata.name == "train-0")
        assert train.status.container_statuses[0].restart_count == 3
        assert train.spec.containers[0].resources.limits["nvidia.com/gpu"] == "4"
        events = core.list_event_for_all_namespaces(field_selector="reason=FailedScheduling").items
        assert [e.involved_object.name for e in events] == ["waiting-0"]
        daemonsets = apps.list_daemon_set_for_all_namespaces().items
        assert daemonsets[0].status.number_ready == 2
        assert core.read_namespace("ml").status.phase == "Active"


# -- raw HTTP: API-server behaviour ----------------------------------------
@contextlib.asynccontextmanager
async def http_session(sim: BackgroundCluster) -> AsyncIterator[aiohttp.ClientSession]:
    async with sim.sim.http_session(base_url=sim.sim.url) as session:
        yield session


async def test_discovery(sim):
    async with http_session(sim) as http:
        version = await (await http.get("/version")).json()
        core = await (await http.get("/api/v1")).json()
        groups = await (await http.get("/apis")).json()
        apps = await (await http.get("/apis/apps/v1")).json()
    assert version["gitVersion"].startswith("v1.") and version["platform"] == "linux/amd64"
    assert core["groupVersion"] == "v1"
    resources = {r["name"]: r for r in core["resources"]}
    assert resources["pods"]["shortNames"] == ["po"] and resources["pods"]["namespaced"] is True
    assert {"pods/log", "pods/status", "pods/binding", "nodes/status"} <= set(resources)
    # nvidia.com is served only while its CRD exists, which this cluster lacks.
    names = [g["name"] for g in groups["groups"]]
    assert names[:3] == ["apps", "apiextensions.k8s.io", "resource.k8s.io"] and "nvidia.com" not in names
    assert {"batch", "rbac.authorization.k8s.io", "storage.k8s.io"} <= set(names)  # the kinds kept as given, read-only
    assert apps["resources"][0]["kind"] == "DaemonSet"


async def test_paging_with_limit_and_continue(sim):
    names = []
    params = {"limit": "2"}
    async with http_session(sim) as http:
        while True:
            page = await (await http.get("/api/v1/pods", params=params)).json()
            assert page["kind"] == "PodList" and page["apiVersion"] == "v1"
            assert len(page["items"]) <= 2
            names += [p["metadata"]["name"] for p in page["items"]]
            if "continue" in page["metadata"]:
                assert page["metadata"]["remainingItemCount"] > 0
            token = page["metadata"].get("continue")
            if not token:
                break
            params = {"limit": "2", "continue": token}
        everything = await (await http.get("/api/v1/pods")).json()
    assert names == [p["metadata"]["name"] for p in everything["items"]] and len(names) >= 5


async def test_table_for_events_and_partial_metadata(sim):
    headers = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}
    async with http_session(sim) as http:
        table = await (await http.get("/api/v1/namespaces/ml/events", headers=headers)).json()
        full = await (await http.get("/api/v1/nodes/gpu-1", headers=headers, params={"includeObject": "Object"})).json()
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0] == ["Last Seen", "Type", "Reason", "Object", "Message"]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert full["rows"][0]["object"]["kind"] == "Node" and full["rows"][0]["cells"][:2] == ["gpu-1", "Ready"]


async def test_create_errors_are_real_statuses(sim):
    async with http_session(sim) as http:
        bad_name = await http.post("/api/v1/namespaces/ml/pods", json=pod("Bad_Name", "ml", node_name=None))
        no_containers = await http.post("/api/v1/namespaces/ml/pods", json={"metadata": {"name": "empty"}, "spec": {"containers": []}})
        duplicate = await http.post("/api/v1/namespaces/ml/pods", json=pod("train-0", "ml"))
        missing = await http.get("/api/v1/namespaces/ml/pods/ghost")
        invalid, empty, dup, gone = [await r.json() for r in (bad_name, no_containers, duplicate, missing)]
    assert (bad_name.status, invalid["reason"], invalid["status"]) == (422, "Invalid", "Failure")
    assert invalid["message"].startswith('Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain')
    assert invalid["details"]["causes"][0]["field"] == "metadata.name"
    assert (no_containers.status, empty["message"]) == (422, 'Pod "empty" is invalid: spec.containers: Required value')
    assert (duplicate.status, dup["reason"], dup["message"]) == (409, "AlreadyExists", 'pods "train-0" already exists')
    assert (missing.status, gone["details"]) == (404, {"name": "ghost", "kind": "pods"})


async def test_create_fills_server_fields_and_resets_pod_status(sim):
    new = pod("ignored", "ml", node_name=None, containers=[container("a", gpus=2)])
    del new["metadata"]["name"], new["metadata"]["uid"]
    new["metadata"].update(generateName="gen-", creationTimestamp=None)
    new["spec"]["initContainers"] = [{"name": "prep", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "1"}}}]
    async with http_session(sim) as http:
        resp = await http.post("/api/v1/namespaces/ml/pods", json=new)
        created = await resp.json()
        await http.delete(f"/api/v1/namespaces/ml/pods/{created['metadata']['name']}")
    assert resp.status == 201
    meta = created["metadata"]
    assert meta["name"].startswith("gen-") and len(meta["name"]) == 9
    assert meta["uid"] and meta["creationTimestamp"] and meta["resourceVersion"]
    assert created["spec"]["initContainers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "1", "cpu": "1"}
    assert created["status"] == {"phase": "Pending", "qosClass": "Burstable"}


async def test_strategic_merge_and_status_subresource(sim):
    async with http_session(sim) as http:
        smp = {"Content-Type": "application/strategic-merge-patch+json"}
        patched = await (await http.patch(
            "/api/v1/namespaces/ml/pods/infer-0",
            json={"spec": {"containers": [{"name": "metrics", "image": "prom/statsd-exporter:v0.27.0"}]}, "status": {"phase": "Failed"}},
            headers=smp,
        )).json()
        status_patch = {"status": {"conditions": [{"type": "Ready", "status": "False"}]}, "spec": {"nodeName": "elsewhere"}}
        status_patched = await (await http.patch("/api/v1/namespaces/ml/pods/infer-0/status", json=status_patch, headers=smp)).json()
        unsupported = await http.patch("/api/v1/namespaces/ml/pods/infer-0", data=b"{}", headers={"Content-Type": "application/apply-patch+yaml"})
    containers = patched["spec"]["containers"]
    assert [c["name"] for c in containers] == ["server", "metrics"]
    assert containers[1]["image"] == "prom/statsd-exporter:v0.27.0" and containers[0]["image"].startswith("nvcr.io")
    assert patched["status"]["phase"] == "Running"  # status is ignored on the main resource
    conditions = {c["type"]: c["status"] for c in status_patched["status"]["conditions"]}
    assert conditions == {"PodScheduled": "True", "Ready": "False"}  # merged by type
    assert status_patched["spec"]["nodeName"] == "gpu-2"  # only status changes through /status
    assert unsupported.status == 415


async def test_binding_and_graceful_pod_deletion(sim):
    async with http_session(sim) as http:
        await http.post("/api/v1/namespaces/ml/pods", json=pod("to-bind", "ml", node_name=None))
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "to-bind"}, "target": {"kind": "Node", "name": "gpu-1"}}
        bound = await http.post("/api/v1/namespaces/ml/pods/to-bind/binding", json=binding)
        again = await http.post("/api/v1/namespaces/ml/pods/to-bind/binding", json=binding)
        marked = await (await http.delete("/api/v1/namespaces/ml/pods/to-bind", json={"gracePeriodSeconds": 5})).json()
        still_there = await http.get("/api/v1/namespaces/ml/pods/to-bind")
        removed = await http.delete("/api/v1/namespaces/ml/pods/to-bind", params={"gracePeriodSeconds": "0"})
        after = await http.get("/api/v1/namespaces/ml/pods/to-bind")
        node_delete = await http.delete("/api/v1/nodes/gpu-3")
    assert bound.status == 201 and again.status == 409
    assert marked["spec"]["nodeName"] == "gpu-1" and marked["metadata"]["deletionGracePeriodSeconds"] == 5
    assert marked["metadata"]["deletionTimestamp"]
    assert still_there.status == 200 and removed.status == 200 and after.status == 404
    assert (await node_delete.json())["status"] == "Success"
    store_call(sim, lambda s: s.create("nodes", small_cluster()[2]))


async def test_log_endpoint_errors_and_follow(sim):
    async with http_session(sim) as http:
        ambiguous = await http.get("/api/v1/namespaces/ml/pods/infer-0/log")
        waiting = await http.get("/api/v1/namespaces/ml/pods/waiting-0/log")  # unbound: nothing to show yet
        follow = await http.get("/api/v1/namespaces/kube-system/pods/nvidia-device-plugin-ds-abcde/log", params={"follow": "true"})
        sim.call(lambda: sim.sim.logs.append("kube-system", "nvidia-device-plugin-ds-abcde", "nvidia-device-plugin-ctr", "Registered device plugin"))
        first = await asyncio.wait_for(follow.content.readline(), 2)
        sim.call(lambda: sim.sim.logs.end("kube-system", "nvidia-device-plugin-ds-abcde", "nvidia-device-plugin-ctr"))
        rest = await asyncio.wait_for(follow.content.read(), 2)
        limited = await http.get("/api/v1/namespaces/kube-system/pods/nvidia-device-plugin-ds-abcde/log", params={"limitBytes": "10"})

        def restart_trainer() -> None:
            sim.sim.logs.append("ml", "train-0", "trainer", "first run\nout of memory")
            sim.sim.logs.end("ml", "train-0", "trainer")
            sim.sim.logs.append("ml", "train-0", "trainer", "second run")

        sim.call(restart_trainer)
        previous = await http.get("/api/v1/namespaces/ml/pods/train-0/log", params={"previous": "true", "tailLines": "1"})
        current = await http.get("/api/v1/namespaces/ml/pods/train-0/log")
        no_previous = await http.get("/api/v1/namespaces/ml/pods/infer-0/log", params={"previous": "true", "container": "server"})
        message = (await ambiguous.json())["message"]
    assert ambiguous.status == 400
    assert message == "a container name must be specified for pod infer-0, choose one of: [server metrics]"
    assert waiting.status == 200 and await waiting.read() == b""
    assert first == b"Registered device plugin\n" and rest == b""
    assert await limited.read() == b"Registered"
    assert await previous.read() == b"out of memory\n" and await current.read() == b"second run\n"
    assert no_previous.status == 400
    assert (await no_previous.json())["message"] == 'previous terminated container "server" in pod "infer-0" not found'


async def test_a_restart_cuts_a_followed_log_as_a_dropped_connection(sim):
    """The server going away ends its log streams with it (the client reads a cut body, not a clean end), at
    once: not after the server's shutdown grace, which would hold the restart up."""
    pod, container = "train-0", "trainer"
    sim.call(lambda: sim.sim.logs.append("ml", pod, container, "epoch 1"))  # a running instance to follow
    back = asyncio.Event()
    async with http_session(sim) as http:
        follow = await http.get(f"/api/v1/namespaces/ml/pods/{pod}/log", params={"follow": "true", "tailLines": "1"})
        first = await asyncio.wait_for(follow.content.readline(), 5)
        restart = asyncio.run_coroutine_threadsafe(sim.sim.restart(back=back), sim._loop)
        try:
            with pytest.raises(aiohttp.ClientPayloadError):
                await asyncio.wait_for(follow.content.read(), 30)
            still_down = not restart.done()
        finally:
            sim.call(back.set)
            await asyncio.wrap_future(restart)
        after = await (await http.get(f"/api/v1/namespaces/ml/pods/{pod}/log", params={"tailLines": "1"})).read()
    assert first == b"epoch 1\n"
    assert still_down  # the stream was cut as the server went, not when it came back
    assert after == b"epoch 1\n"  # the log itself stays


async def test_faults_500_slow_and_restart(sim):
    async with http_session(sim) as http:
        sim.call(sim.sim.faults.fail, "daemonsets.apps", 500)
        failed = await http.get("/apis/apps/v1/daemonsets")
        sim.call(sim.sim.faults.clear)
        sim.call(sim.sim.faults.slow, "nodes", 0.3)
        started = time.monotonic()
        slow = await http.get("/api/v1/nodes")
        slow_s = time.monotonic() - started
        sim.call(sim.sim.faults.clear)
        error = await failed.json()
    assert failed.status == 500 and error["reason"] == "InternalError"
    assert slow.status == 200 and slow_s >= 0.3
    rv = store_call(sim, lambda s: s.resource_version)
    restart = asyncio.wrap_future(asyncio.run_coroutine_threadsafe(sim.sim.restart(downtime=0.5), sim._loop))
    await asyncio.sleep(0.2)
    with pytest.raises(aiohttp.ClientConnectionError):
        async with sim.sim.http_session() as fresh:
            await fresh.get(f"{sim.sim.url}/version")
    await restart
    async with http_session(sim) as http:
        listed = await (await http.get("/api/v1/nodes")).json()
    assert int(listed["metadata"]["resourceVersion"]) == rv and len(listed["items"]) == 3
