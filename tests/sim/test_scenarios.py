"""Scenarios: the demo cluster, loading files (and refusing bad ones), populating a store, the synthetic generator."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import orjson
import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from gputui.sim import SimCluster, scenarios
from gputui.sim import builders as b
from gputui.sim.apiserver.store import Store

MODEL_OF = {"Namespace": "V1Namespace", "Node": "V1Node", "Pod": "V1Pod", "Event": "CoreV1Event", "DaemonSet": "V1DaemonSet",
            "Service": "V1Service", "CustomResourceDefinition": "V1CustomResourceDefinition", "DeviceClass": "V1DeviceClass",
            "ResourceSlice": "V1ResourceSlice", "ResourceClaim": "ResourceV1ResourceClaim"}
CUSTOM_KINDS = {"ClusterPolicy"}  # no generated model: read as plain JSON (CustomObjectsApi)


@pytest.fixture(scope="module")
def demo() -> list[dict]:
    return scenarios.load("demo")


def by_kind(objects: list[dict], kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def test_demo_objects_deserialise_with_the_sync_client_models(demo: list[dict]) -> None:
    api = k8s.ApiClient()
    for obj in demo:
        if obj["kind"] in CUSTOM_KINDS:
            continue
        model = api.deserialize(json.dumps(obj), MODEL_OF[obj["kind"]], "application/json")
        assert model.metadata.name == obj["metadata"]["name"]


def test_fragmented_objects_deserialise_and_hold_a_gated_pod() -> None:
    objects = scenarios.load("fragmented")
    api = k8s.ApiClient()
    for obj in objects:
        model = api.deserialize(json.dumps(obj), MODEL_OF[obj["kind"]], "application/json")
        assert model.metadata.name == obj["metadata"]["name"]
    gated = next(o for o in objects if o["kind"] == "Pod" and o["spec"].get("schedulingGates"))
    assert api.deserialize(json.dumps(gated), "V1Pod", "application/json").spec.scheduling_gates[0].name == "kueue.x-k8s.io/admission"


def test_demo_is_deterministic(demo: list[dict]) -> None:
    again = scenarios.load("demo")
    names = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in demo]
    assert names == [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in again]
    assert [o["metadata"].get("uid") for o in demo] == [o["metadata"].get("uid") for o in again]


def test_demo_shows_every_case(demo: list[dict]) -> None:
    nodes, pods = by_kind(demo, "Node"), [o for o in demo if o["kind"] == "Pod"]
    cap = {n: o["status"]["capacity"] for n, o in nodes.items()}
    alloc = {n: o["status"]["allocatable"] for n, o in nodes.items()}
    assert nodes["h100-1"]["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert nodes["h100-1"]["metadata"]["labels"]["nvidia.com/cuda.driver-version.full"] == "550.54.15"
    assert {r: cap["h100-mig-1"][r] for r in cap["h100-mig-1"] if r.startswith("nvidia.com/")} == {
        "nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "16", "nvidia.com/mig-2g.20gb": "8", "nvidia.com/mig-3g.40gb": "8"}
    assert cap["t4-shared-1"]["nvidia.com/gpu.shared"] == "16" and "nvidia.com/gpu" not in cap["t4-shared-1"]
    assert (cap["a100-1"]["nvidia.com/gpu"], alloc["a100-1"]["nvidia.com/gpu"]) == ("8", "7")
    assert nodes["a100-2"]["metadata"]["labels"]["nvidia.com/gpu.present"] == "true"
    assert not any(r.startswith("nvidia.com/") for r in cap["a100-2"])  # labelled, nothing registered
    assert not b.node_is_ready(nodes["h100-3"]) and nodes["h100-4"]["spec"]["unschedulable"]
    assert nodes["cp-1"]["spec"]["taints"][0]["key"] == "node-role.kubernetes.io/control-plane"
    assert not any(r.startswith("nvidia.com/") for r in cap["cpu-1"])
    # Both install styles of the device plugin; the operator's operands.
    ds_ns = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in demo if o["kind"] == "DaemonSet"}
    assert ("kube-system", "nvidia-device-plugin-daemonset") in ds_ns and ("gpu-operator", "nvidia-device-plugin-daemonset") in ds_ns
    for operand in ("nvidia-driver-daemonset", "nvidia-container-toolkit-daemonset", "gpu-feature-discovery", "nvidia-dcgm-exporter",
                    "nvidia-mig-manager", "nvidia-operator-validator"):
        assert ("gpu-operator", operand) in ds_ns
    static = [p for p in pods if p["metadata"]["labels"].get("name") == "nvidia-device-plugin-ds"]
    operator = [p for p in pods if p["metadata"]["labels"].get("app") == "nvidia-device-plugin-daemonset"]
    assert len(static) == 3 and len(operator) == 5
    crashing = [p for p in static if p["spec"]["nodeName"] == "a100-2"][0]
    assert crashing["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    # Workloads: multi-container multi-GPU training, init container asking GPUs, finished pods declaring GPUs, pending ones.
    gpu_pods = [p for p in pods if any(b.is_gpu_resource(r) and v > 0 for r, v in b.pod_requests(p).items())]
    assert {p["metadata"]["namespace"] for p in gpu_pods} >= {"ml-training", "inference", "research"}
    assert any(len(p["spec"]["containers"]) > 1 and b.pod_requests(p).get("nvidia.com/gpu", 0) >= 4 for p in gpu_pods)
    assert any(b.container_requests(c).get("nvidia.com/gpu") for p in pods for c in p["spec"].get("initContainers") or []
               if p["metadata"]["namespace"] == "research")
    assert {p["status"]["phase"] for p in gpu_pods} >= {"Running", "Succeeded", "Failed", "Pending"}
    assert len([p for p in gpu_pods if not p["spec"].get("nodeName")]) == 3
    # DaemonSet status agrees with the pods.
    static_ds = next(o for o in demo if o["kind"] == "DaemonSet" and o["metadata"]["namespace"] == "kube-system"
                     and o["metadata"]["name"] == "nvidia-device-plugin-daemonset")
    assert (static_ds["status"]["desiredNumberScheduled"], static_ds["status"]["numberReady"]) == (3, 2)


async def test_demo_runs_pending_pods_fail_to_schedule_and_the_sync_client_reads_everything() -> None:
    async with SimCluster(scenario="demo", speed=20) as sim:
        async def failed_scheduling() -> list[dict]:
            while True:
                found = [e for e in sim.store.objects("events") if e["reason"] == "FailedScheduling"]
                if len(found) == 3:
                    return found
                await asyncio.sleep(0.02)

        events = await asyncio.wait_for(failed_scheduling(), 5)
        assert all(e["message"].startswith("0/11 nodes are available: ") for e in events)

        def read_all() -> tuple[int, int, int]:
            api = k8s_config.new_client_from_config(config_file=str(sim.kubeconfig_path))
            core, apps = k8s.CoreV1Api(api), k8s.AppsV1Api(api)
            pods = core.list_pod_for_all_namespaces().items
            nodes = core.list_node().items
            core.list_event_for_all_namespaces()
            apps.list_daemon_set_for_all_namespaces()
            assert all(p.status.container_statuses is None or all(cs.image_id is not None for cs in p.status.container_statuses) for p in pods)
            return len(pods), len(nodes), sum(1 for p in pods if p.spec.node_name is None)

        pods, nodes, pending = await asyncio.to_thread(read_all)
        assert (nodes, pending) == (11, 3) and pods >= 80


def test_load_a_kubectl_style_list_file_and_multi_document_yaml(tmp_path: Path) -> None:
    node = b.node("n1", 0)
    pod = b.pod("p1", "team-a", [b.container("c", "nginx")])
    listing = tmp_path / "cluster.yaml"
    listing.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [node, pod], "metadata": {"resourceVersion": ""}}))
    assert [o["metadata"]["name"] for o in scenarios.load(listing)] == ["n1", "p1"]
    docs = tmp_path / "docs.yaml"
    docs.write_text(yaml.safe_dump(node) + "---\n" + yaml.safe_dump(pod))
    assert [o["kind"] for o in scenarios.load(str(docs))] == ["Node", "Pod"]
    as_json = tmp_path / "cluster.json"
    as_json.write_bytes(orjson.dumps({"kind": "PodList", "apiVersion": "v1", "items": [pod]}))
    loaded = scenarios.load(as_json)
    assert loaded[0]["status"] == pod["status"]  # objects keep the status they are given


@pytest.mark.parametrize(("text", "suffix", "words"), [
    ("items: [\n  - {kind: Node", ".yaml", "not valid YAML at line"),
    ('{"kind": "List", "items": [', ".json", "not valid JSON"),
    ("kind: List\nitems:\n- kind: Node\n  metadata: {name: a}\n- metadata: {name: b}\n", ".yaml", "item 1: no kind"),
    ("kind: List\nitems:\n- kind: Node\n  metadata: {labels: {}}\n", ".yaml", "item 0: Node without metadata.name"),
    ("kind: List\nitems:\n- kind: Node\n  metadata: {name: a}\n- apiVersion: v1\n  kind: Widget\n  metadata: {name: s}\n", ".yaml",
     "item 1: unknown kind v1 Widget"),
    ("- just a string\n", ".yaml", "item 0: not an object"),
])
def test_bad_scenarios_name_the_file_the_item_and_the_reason(tmp_path: Path, text: str, suffix: str, words: str) -> None:
    path = tmp_path / f"bad{suffix}"
    path.write_text(text)
    with pytest.raises(scenarios.ScenarioError) as err:
        scenarios.load(path)
    assert str(err.value).startswith(f"{path}: ") and words in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_file_is_a_scenario_error(tmp_path: Path) -> None:
    with pytest.raises(scenarios.ScenarioError, match="cannot read"):
        scenarios.load(tmp_path / "absent.yaml")


def test_populate_creates_namespaces_first_and_computes_daemonset_status() -> None:
    node = b.node("n1", 0)
    pod = b.pod("plugin-x", "gpu-stack", [b.container("c", "nvcr.io/nvidia/k8s-device-plugin:v0.15.0")], labels={"name": "ds"})
    b.set_running(pod, node, 0, 0, 60)
    ds = b.daemonset("plugin", "gpu-stack", {"name": "ds"}, pod)
    del ds["status"]
    store = Store()
    scenarios.populate(store, [pod, ds, node])  # order given does not matter
    names = {o["metadata"]["name"] for o in store.objects("namespaces")}
    assert names == {"default", "kube-node-lease", "kube-public", "kube-system", "gpu-stack"}
    rvs = {o["kind"]: int(o["metadata"]["resourceVersion"]) for o in store.objects("nodes") + store.objects("pods")
           + store.objects("daemonsets.apps")}
    assert rvs["Node"] < rvs["DaemonSet"] < rvs["Pod"]
    status = store.get("daemonsets.apps", "gpu-stack", "plugin")["status"]
    assert (status["desiredNumberScheduled"], status["numberReady"]) == (1, 1)


def test_synthetic_cluster_sizes() -> None:
    objects = scenarios.synthetic(500, 20_000)
    pods = [o for o in objects if o["kind"] == "Pod"]
    nodes = [o for o in objects if o["kind"] == "Node"]
    assert len(pods) == 20_000 and len(nodes) == 500
    sizes = [len(orjson.dumps(p)) for p in pods]
    assert 3_000 <= min(sizes) and max(sizes) <= 8_192
    assert all(p["metadata"]["managedFields"] for p in pods[-100:])
    gpu = [p for p in pods if any(b.is_gpu_resource(r) for r in b.pod_requests(p))]
    assert 0.10 <= len(gpu) / len(pods) <= 0.30
    gpu_nodes = [n for n in nodes if "nvidia.com/gpu" in n["status"]["capacity"]]
    assert gpu_nodes and all(n["metadata"]["labels"]["nvidia.com/gpu.product"] for n in gpu_nodes)
    # Running GPU pods never exceed a node's GPUs.
    held: dict[str, float] = {}
    for p in gpu:
        if p["status"]["phase"] == "Running":
            held[p["spec"]["nodeName"]] = held.get(p["spec"]["nodeName"], 0) + b.pod_requests(p)["nvidia.com/gpu"]
    assert max(held.values()) <= 8
    api = k8s.ApiClient()
    for obj in pods[:50] + nodes[:5]:
        api.deserialize(json.dumps(obj), MODEL_OF[obj["kind"]], "application/json")
