"""List pages read without parsing every item: item boundaries, labels and phase read
from raw bytes, and the pod pre-filter, which must keep every pod the model keeps."""
from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
import pytest_asyncio

from gputui.kube import gpu
from gputui.kube.client import Client
from gputui.kube.model import PODS, ClusterModel
from gputui.kube.raw_json import (
    item_spans,
    list_head,
    raw_metadata_labels,
    raw_pod_phase,
)
from gputui.kube.turns import Turns
from gputui.kube.watch import Reflector
from gputui.sim import scenarios, stacks
from tests.model.objects import container, plugin_pod, pod

GPU_STACK_LABELS = [{key: value} for key, value, _ in gpu.PLUGIN_LABELS] + [{"app": app} for app in gpu.OPERATOR_APPS] + [
    {"app.kubernetes.io/name": "node-feature-discovery"},
    {"app.kubernetes.io/name": "dcgm-exporter"},
    {"app.kubernetes.io/component": "nvidia-driver"},
    {"app.kubernetes.io/managed-by": "gpu-operator"},
    {"app.kubernetes.io/part-of": "nvidia-gpu"},
    dict([gpu.MANAGED_BY_GPUTUI]),
]


def page(items: list[dict[str, Any]], **meta: Any) -> bytes:
    return orjson.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "7", **meta}, "items": items})


def go_layout(obj: dict[str, Any]) -> dict[str, Any]:
    """As kube-apiserver writes list items: no kind/apiVersion, metadata first, status last."""
    return {key: obj[key] for key in ("metadata", "spec", "status") if key in obj}


def spans_of(body: bytes) -> list[tuple[int, int]] | None:
    return item_spans(body, list_head(body)[1])


@pytest_asyncio.fixture
async def api():
    client = Client("http://127.0.0.1:9")  # never called: the tests feed tables directly
    yield client
    await client.close()


def model(api: Client, resources: gpu.GpuResources = gpu.GpuResources()) -> ClusterModel:
    return ClusterModel(api, kinds=(), resources=resources)


def all_scenario_pods() -> list[dict[str, Any]]:
    objects = scenarios.load("demo") + scenarios.synthetic(20, 400)
    for build in stacks.SCENARIOS.values():
        objects += build()
    return [obj for obj in objects if obj.get("kind") == "Pod"]


TRICKY = pod("ml", "tricky", node="gpu-1", gpu={"nvidia.com/gpu": 1}, labels={"app": "x"})
TRICKY["metadata"]["annotations"] = {
    "note": '},{"metadata":{"name":"fake"}} and ,"labels":{"app":"nvidia-device-plugin-daemonset"} and ,"status":{"phase":"Failed"}',
}


@pytest.mark.parametrize("layout", [go_layout, lambda obj: obj], ids=["kube-apiserver", "with-kind"])
def test_spans_are_exactly_the_items(layout):
    items = [layout(p) for p in (pod("web", "a"), TRICKY, plugin_pod("gpu-1"), pod("ml", "b", gpu={"nvidia.com/gpu": 2}))]
    body = page(items, **{"continue": "token", "remainingItemCount": 3})
    assert [orjson.loads(body[start:end]) for start, end in spans_of(body)] == items


def test_spans_of_odd_pages():
    assert spans_of(page([])) == []
    pretty = json.dumps(json.loads(page([pod("web", "a"), pod("web", "b")])), indent=2).encode()
    assert spans_of(pretty) is None  # not laid out as servers write: parsed whole
    items_first = orjson.dumps({"items": [pod("web", "a")], "metadata": {"resourceVersion": "1"}})
    assert spans_of(items_first) is None


def test_raw_labels_and_phase():
    raw = orjson.dumps(go_layout(pod("ml", "done", node="gpu-1", phase="Succeeded", labels={"app": "train", "team": "a"})))
    assert orjson.loads(raw_metadata_labels(raw, 0, len(raw))) == {"app": "train", "team": "a"}
    assert raw_pod_phase(raw, 0, len(raw)) == "Succeeded"

    tricky = orjson.dumps(TRICKY)  # the annotation's look-alikes come after labels, inside a string
    assert orjson.loads(raw_metadata_labels(tricky, 0, len(tricky))) == {"app": "x"}
    assert raw_pod_phase(tricky, 0, len(tricky)) == "Running"

    unlabelled = pod("web", "bare")
    del unlabelled["metadata"]["labels"]
    unlabelled["metadata"]["annotations"] = {"a": "b"}
    unlabelled["spec"]["volumes"] = [{"name": "v", "ephemeral": {"volumeClaimTemplate": {"metadata": {"labels": {"app": "x"}}}}}]
    raw = orjson.dumps(unlabelled)
    assert raw_metadata_labels(raw, 0, len(raw)) is None  # a labels object that is not metadata's is not taken

    status_first = orjson.dumps({"metadata": {"name": "p"}, "status": {"phase": "Failed"}, "spec": {}})
    assert raw_pod_phase(status_first, 0, len(status_first)) is None  # status not last: unknown


async def test_prefilter_keeps_every_pod_the_model_keeps(api):
    m = model(api)
    pods = all_scenario_pods()
    pods += [pod("ns", f"stack-{i}", node="gpu-1", labels=labels) for i, labels in enumerate(GPU_STACK_LABELS)]
    pods += [plugin_pod("gpu-1", style) for style in ("static", "helm", "operator", "gke")]
    pods += [
        pod("ml", "mig", node="gpu-1", gpu={"nvidia.com/mig-1g.10gb": 1}),
        pod("ml", "shared", node="gpu-1", gpu={"nvidia.com/gpu.shared": 1}),
        pod("ml", "init-only", node="gpu-1", containers=[container("main")], init_containers=[container("warm", {"nvidia.com/gpu": 1})]),
        pod("ml", "limit-only", node="gpu-1", containers=[container("main", {"nvidia.com/gpu": 1}, requests_too=False)]),
        pod("ml", "pending", gpu={"nvidia.com/gpu": 1}),
        pod("ml", "finished-stack", node="gpu-1", phase="Succeeded", labels={"app": "nvidia-cuda-validator"}),
        pod("ml", "failed", node="gpu-1", phase="Failed", gpu={"nvidia.com/gpu": 1}),
        TRICKY,
    ]
    kept = dropped = 0
    for obj in pods:
        for layout in (go_layout(obj), obj):
            raw = orjson.dumps(layout)
            if m.keep.pod(layout) is not None:
                kept += 1
                assert m.keep.pod_may_matter(raw, 0, len(raw)), layout["metadata"]
            else:
                dropped += m.keep.pod_may_matter(raw, 0, len(raw)) is False
    assert kept > 100 and dropped > 100  # both sides of the filter were exercised


async def test_prefilter_drops_what_cannot_matter_and_reads_escapes(api):
    m = model(api)
    for obj in (pod("web", "cpu", node="cpu-1"), pod("ml", "done", node="gpu-1", phase="Succeeded", gpu={"nvidia.com/gpu": 1})):
        raw = orjson.dumps(go_layout(obj))
        assert not m.keep.pod_may_matter(raw, 0, len(raw))
    # JSON may spell a name with escapes; such a pod is parsed, and kept
    escaped = orjson.dumps(go_layout(pod("ml", "escaped", node="gpu-1", gpu={"nvidia.com/gpu": 1}))).replace(b"nvidia.com/gpu", b"nvidia.com\\/gpu")
    assert b"nvidia.com/" not in escaped and m.keep.pod_may_matter(escaped, 0, len(escaped))
    assert m.keep.pod(orjson.loads(escaped)) is not None
    # a configured extra resource is a marker too
    amd = orjson.dumps(go_layout(pod("ml", "amd", node="gpu-1", gpu={"amd.com/gpu": 1})))
    assert not m.keep.pod_may_matter(amd, 0, len(amd))
    with_amd = model(api, gpu.GpuResources(frozenset({"amd.com/gpu"})))
    assert with_amd.keep.pod_may_matter(amd, 0, len(amd)) and with_amd.keep.pod(orjson.loads(amd)) is not None


async def test_labels_that_cannot_be_read_cheaply_mean_parse(api):
    m = model(api)
    odd = orjson.dumps(go_layout(pod("web", "odd", node="cpu-1", labels={"app": "x}y"})))  # no server allows this value
    assert m.keep.pod_may_matter(odd, 0, len(odd))


class Sink:
    def __init__(self, m: ClusterModel) -> None:
        self.may_matter = m.pods.may_matter
        self.build = m.keep.pod


@pytest.mark.parametrize("layout", [go_layout, lambda obj: obj], ids=["kube-apiserver", "with-kind"])
async def test_reflector_page_items_equal_a_full_parse_after_the_model_filter(api, layout):
    m = model(api)
    items = [layout(p) for p in all_scenario_pods()[:300]] + [layout(TRICKY)]
    body = page(items)
    reflector = Reflector(PODS, api, "/api/v1/pods", Sink(m))
    parsed = await reflector._page_items(body, list_head(body)[1], Turns())
    assert len(parsed) < len(items)
    kept = [obj for obj in items if m.keep.pod(obj) is not None]
    assert [obj for obj in parsed if m.keep.pod(obj) is not None] == kept


async def test_a_page_that_does_not_split_cleanly_is_parsed_whole(api):
    m = model(api)
    odd = go_layout(pod("ml", "odd", node="gpu-1", gpu={"nvidia.com/gpu": 1}))
    # an array whose objects start with metadata, inside an item: not a Kubernetes pod, but JSON
    odd["spec"]["extra"] = [{"metadata": {"a": 1}}, {"metadata": {"b": "nvidia.com/gpu"}}]
    items = [go_layout(pod("web", "a")), odd, go_layout(pod("web", "b"))]
    body = page(items)
    reflector = Reflector(PODS, api, "/api/v1/pods", Sink(m))
    assert await reflector._page_items(body, list_head(body)[1], Turns()) == items
