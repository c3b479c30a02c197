"""Typed decoding (kube/decoding.py): each kind's shape holds every field its record builder reads (the same records
as from the whole JSON, for every scenario's objects), field order does not matter (objects served with their keys
shuffled at every level give the same model), and an object that does not fit its shape is read whole."""
from __future__ import annotations

import random
from typing import Any

import msgspec
import orjson
import pytest

from gputui.kube import gpu
from gputui.kube.client import Client
from gputui.kube.config import connect
from gputui.kube.decoding import Decoding, EventShape, NodeShape, PodShape, filled
from gputui.kube.model import EVENTS, NODES, PODS, ClusterModel
from gputui.kube.records import event_from, node_from, object_key
from gputui.kube.watch import CACHE, PAGED, WATCHLIST
from gputui.sim import scenarios
from gputui.sim.scenarios import stacks
from gputui.sim.cluster import SimCluster
from tests.model.objects import container, event, plugin_pod, pod
from tests.model.scenario import FAST, expected_pods, small_cluster, stop

GPU_STACK_LABELS = [{key: value} for key, value, _ in gpu.PLUGIN_LABELS] + [{"app": app} for app in gpu.OPERATOR_APPS] + [
    {"app.kubernetes.io/name": "node-feature-discovery"},
    {"app.kubernetes.io/component": "nvidia-driver"},
    dict([gpu.MANAGED_BY_GPUTUI]),
]


def scenario_objects() -> list[dict[str, Any]]:
    objects = scenarios.load("demo") + scenarios.synthetic(20, 400)
    for build in stacks.SCENARIOS.values():
        objects += build()
    objects += [pod("ns", f"stack-{i}", node="gpu-1", labels=labels) for i, labels in enumerate(GPU_STACK_LABELS)]
    objects += [plugin_pod("gpu-1", style) for style in ("static", "helm", "operator", "gke")]
    objects += [
        pod("ml", "init-only", node="gpu-1", containers=[container("main")], init_containers=[container("warm", {"nvidia.com/gpu": 1})]),
        pod("ml", "limit-only", node="gpu-1", containers=[container("main", {"nvidia.com/gpu": 1}, requests_too=False)]),
        pod("ml", "finished-stack", node="gpu-1", phase="Succeeded", labels={"app": "nvidia-cuda-validator"}),
        pod("ml", "failed", node="gpu-1", phase="Failed", gpu={"nvidia.com/gpu": 1}),
        event("ml", "e1", kind="Pod", object_name="init-only", reason="FailedScheduling", message="0/3 nodes are available"),
        owned_by_its_second_owner(), on_an_unhealthy_device(),
    ]
    return objects


def owned_by_its_second_owner() -> dict[str, Any]:
    p = pod("ml", "second-owner", node="gpu-1", gpu={"nvidia.com/gpu": 1})
    p["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "holder", "uid": "u1"},
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u2", "controller": True, "blockOwnerDeletion": True},
    ]
    return p


def on_an_unhealthy_device() -> dict[str, Any]:
    """The kubelet's allocatedResourcesStatus (KEP-4680) on a container status."""
    p = pod("ml", "unhealthy-device", node="gpu-1", gpu={"nvidia.com/gpu": 1})
    p["status"]["containerStatuses"][0]["allocatedResourcesStatus"] = [
        {"name": "nvidia.com/gpu", "resources": [{"resourceID": "GPU-8c2f", "health": "Unhealthy"}]}]
    return p


def shuffled(value: Any, rng: random.Random) -> Any:
    """The same JSON value with every object's keys in another order."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {key: shuffled(value[key], rng) for key in keys}
    if isinstance(value, list):
        return [shuffled(item, rng) for item in value]
    return value


async def test_each_shape_holds_what_its_builder_reads():
    model = ClusterModel(Client("http://127.0.0.1:9"), kinds=())  # never connects: the builders only
    built = {"Pod": (PodShape, model.keep.pod), "Node": (NodeShape, node_from), "Event": (EventShape, event_from)}
    counts = dict.fromkeys(built, 0)
    slimmer = 0
    for obj in scenario_objects():
        if obj.get("kind") not in built:
            continue
        shape, build = built[obj["kind"]]
        raw = orjson.dumps(obj)
        typed = Decoding.of(shape).object(raw)
        assert build(typed) == build(orjson.loads(raw)), object_key(obj)
        counts[obj["kind"]] += 1
        slimmer += len(msgspec.json.encode(typed)) < len(raw)
    assert counts["Pod"] > 400 and counts["Node"] > 20 and counts["Event"] >= 1, counts
    assert slimmer > 400  # the shapes leave out what no builder reads


def test_an_object_that_does_not_fit_its_shape_is_read_whole():
    odd = {"metadata": {"name": "p", "namespace": "ml", "labels": {"app": 7}}, "spec": {"containers": "none"}}
    assert Decoding.of(PodShape).object(orjson.dumps(odd)) == odd  # the builder judges it (tables count it unreadable)
    fits = {"metadata": {"name": "p", "namespace": "ml", "managedFields": [{"manager": "x"}]}, "spec": {"containers": [
        {"name": "c", "image": "i", "env": [{"name": "A", "value": "1"}], "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    assert Decoding.of(PodShape).object(orjson.dumps(fits)) == {
        "metadata": {"name": "p", "namespace": "ml"}, "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def test_pages_and_events():
    decoding = Decoding.of(PodShape)
    meta, items = decoding.page(b'{"items":[{"spec":{"nodeName":"n"},"metadata":{"name":"a"}}],"metadata":{"continue":"t","resourceVersion":"5"}}')
    assert meta == {"continue": "t", "resourceVersion": "5"} and [decoding.object(item) for item in items] == [
        {"spec": {"nodeName": "n"}, "metadata": {"name": "a"}}]
    assert decoding.page(b'{"kind":"PodList","items":null,"metadata":{}}') == ({}, [])
    _, items = Decoding.of(NodeShape).page(b'{"items":[null,7]}')
    assert [Decoding.of(NodeShape).object(item) for item in items] == [None, 7]  # as they are: the table skips them
    bookmark = b'{"object":{"metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}},"type":"BOOKMARK"}'
    assert decoding.event(bookmark) == ("BOOKMARK", {"metadata": {"resourceVersion": "9", "annotations": {"k8s.io/initial-events-end": "true"}}})
    error = b'{"type":"ERROR","object":{"kind":"Status","status":"Failure","code":410,"message":"too old"}}'
    assert decoding.event(error) == ("ERROR", {"kind": "Status", "status": "Failure", "code": 410, "message": "too old"})
    with pytest.raises(ValueError):
        decoding.event(b'{"type":"ADDED","object":')


def test_many_lines_at_once_as_line_by_line():
    decoding = Decoding.of(PodShape)
    pods = [pod("ml", f"p{i}", node="gpu-1", gpu={"nvidia.com/gpu": 1}) for i in range(3)]
    added = [orjson.dumps({"type": "ADDED", "object": p}) for p in pods]
    bookmark = b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}}'
    odd = orjson.dumps({"type": "MODIFIED", "object": {"metadata": {"name": "p", "labels": {"app": 7}}}})
    for lines in (added, [*added, bookmark], [odd, *added]):  # typed in one pass; a BOOKMARK or an odd object: line by line
        buffer = memoryview(b"x" + b"\n".join(lines) + b"\n")[1:]  # where it lies in a chunk
        events = decoding.events(buffer)
        assert [(t, filled(o)) for t, o in events] == [(t, filled(o)) for t, o in map(decoding.event, lines)]
        assert [t for t, _ in events] == [orjson.loads(line)["type"] for line in lines]
    assert decoding.events(b"") == [] and decoding.events(b"\n \n") == []
    with pytest.raises(ValueError):
        decoding.events(added[0] + b"\n" + b'{"type":"ADDED","object":\n')


def test_what_only_a_kept_pod_reads_is_decoded_once_it_is_kept():
    model = ClusterModel(Client("http://127.0.0.1:9"), kinds=())

    def owned(obj: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
        obj["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": kind, "name": name, "uid": "u", "controller": True}]
        return obj

    typed = Decoding.of(PodShape).object(orjson.dumps(owned(pod("ml", "web", node="cpu-1"), "ReplicaSet", "web-1")))
    assert isinstance(typed["status"]["containerStatuses"], msgspec.Raw)  # not built: most pods are not kept
    assert model.keep.pod(typed) is None and isinstance(typed["metadata"]["ownerReferences"], msgspec.Raw)
    whole = owned(pod("ml", "train", node="gpu-1", gpu={"nvidia.com/gpu": 1}, restarts=2), "Job", "t")
    record = model.keep.pod(Decoding.of(PodShape).object(orjson.dumps(whole)))
    assert record is not None and record.owner == ("Job", "t") and record.restarts == 2 and record == model.keep.pod(whole)


@pytest.mark.parametrize("mode", [WATCHLIST, CACHE, PAGED])
async def test_objects_served_with_shuffled_keys_give_the_same_model(mode):
    rng = random.Random(23)
    objects = [shuffled(obj, rng) for obj in small_cluster()]
    async with SimCluster(objects, run_controllers=False) as sim:
        conn = await connect(str(sim.kubeconfig_path))
        model = ClusterModel(conn.api, kinds=(NODES, PODS, EVENTS), list_modes=(mode,), page_size=3, **FAST)
        await model.start()
        try:
            assert await model.wait_synced(10)
            assert model.reflectors[PODS].list_mode == mode
            served = await conn.api.json("GET", "/api/v1/pods")
            assert sum(list(item)[0] not in ("apiVersion", "kind", "metadata") for item in served["items"]) >= 3  # not Go's order
            assert model.pods.records == expected_pods(model, sim.store) and len(model.pods.records) >= 5
            assert model.nodes.records == {o["metadata"]["name"]: node_from(o) for o in sim.store.objects("nodes")}
        finally:
            await stop(conn, model)


def test_a_lazy_field_is_filled_to_its_shape_or_whole():
    p = pod("ml", "p", node="gpu-1", gpu={"nvidia.com/gpu": 1})
    p["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    typed = filled(Decoding.of(PodShape).object(orjson.dumps(p)))
    assert typed["status"]["conditions"] == [{"type": "Ready", "status": "True"}]  # what no builder reads is left out
    assert "image" not in typed["status"]["containerStatuses"][0]
    p["status"]["conditions"] = ["Ready", {"type": "Ready"}]  # no server writes this: read whole, judged by the builder
    assert filled(Decoding.of(PodShape).object(orjson.dumps(p)))["status"]["conditions"] == ["Ready", {"type": "Ready"}]
