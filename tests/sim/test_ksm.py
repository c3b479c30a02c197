"""The simulated kube-state-metrics (sim/exporters/ksm.py): its series as kube-state-metrics documents them, parsed
by prometheus_client's parser (an independent reader of the text format), and served on a port of its own."""
from __future__ import annotations

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gputui.sim import SimCluster
from gputui.sim.scenarios import idle_gpus
from gputui.sim import builders as b
from gputui.sim.exporters.ksm import CONTENT_TYPE, KubeStateMetrics, exposition, parse_allowlist, prometheus_labels


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def scenario() -> tuple[list[dict], list[dict]]:
    objects = idle_gpus.build()
    pending = b.pod("waiting", "ml", [b.container("main", "img", limits={"nvidia.com/gpu": 2})], labels={"team": "vision"})
    objects.append(pending)
    return [o for o in objects if o["kind"] == "Node"], [o for o in objects if o["kind"] == "Pod"]


def test_gpu_requests_with_their_resource_unit_node_and_uid():
    nodes, pods = scenario()
    found = samples(exposition(nodes, pods))
    gpu = {(s["namespace"], s["pod"], s["resource"]): (s["node"], s["unit"], s["container"], v)
           for s, v in found["kube_pod_container_resource_requests"] if s["resource"].startswith("nvidia_com_")}
    assert gpu[("ml", "llm-train-0", "nvidia_com_gpu")] == ("gpu-1", "integer", "main", 4.0)
    assert gpu[("research", "notebook-bob", "nvidia_com_mig_1g_10gb")] == ("mig-1", "integer", "main", 1.0)
    assert gpu[("ml", "waiting", "nvidia_com_gpu")] == ("", "integer", "main", 2.0)  # not scheduled: node empty
    cpu = {(s["pod"], s["unit"]): v for s, v in found["kube_pod_container_resource_requests"] if s["resource"] == "cpu"}
    memory = {(s["pod"], s["unit"]): v for s, v in found["kube_pod_container_resource_requests"] if s["resource"] == "memory"}
    assert cpu[("llm-train-0", "core")] == 4.0 and memory[("llm-train-0", "byte")] == 32 * 2**30
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}
    assert all(s["uid"] == uids[s["pod"]] for s, _ in found["kube_pod_container_resource_requests"])


def test_phase_one_series_per_phase_none_without_a_phase():
    nodes, pods = scenario()
    pods[-1]["status"] = {}
    found = samples(exposition(nodes, pods))
    train = {s["phase"]: v for s, v in found["kube_pod_status_phase"] if s["pod"] == "llm-train-0"}
    assert train == {"Pending": 0, "Succeeded": 0, "Failed": 0, "Running": 1, "Unknown": 0}
    assert not [s for s, _ in found["kube_pod_status_phase"] if s["pod"] == "waiting"]
    info = next(s for s, _ in found["kube_pod_info"] if s["pod"] == "llm-train-0")
    assert (info["node"], info["created_by_kind"], info["host_network"]) == ("gpu-1", "<none>", "false")


def test_creation_time_cordon_and_taints():
    nodes, pods = scenario()
    nodes[0]["spec"]["unschedulable"] = True
    nodes[0]["spec"]["taints"] = [{"key": "nvidia.com/gpu-xid", "value": "79", "effect": "NoExecute"},
                                  {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    pods[0]["metadata"]["creationTimestamp"] = "2026-01-02T03:04:05Z"
    found = samples(exposition(nodes, pods))
    assert ({"namespace": pods[0]["metadata"]["namespace"], "pod": pods[0]["metadata"]["name"], "uid": pods[0]["metadata"]["uid"]},
            1767323045.0) in found["kube_pod_created"]
    cordoned = {s["node"]: v for s, v in found["kube_node_spec_unschedulable"]}
    assert cordoned[nodes[0]["metadata"]["name"]] == 1 and sum(cordoned.values()) == 1 and len(cordoned) == len(nodes)
    assert sorted((s["key"], s["value"], s["effect"], v) for s, v in found["kube_node_spec_taint"]) == [
        ("node.kubernetes.io/unschedulable", "", "NoSchedule", 1), ("nvidia.com/gpu-xid", "79", "NoExecute", 1)]


def test_labels_only_the_allow_listed_sanitised_as_ksm_does():
    nodes, pods = scenario()
    bare = samples(exposition(nodes, pods))
    assert all(set(s) == {"namespace", "pod", "uid"} for s, _ in bare["kube_pod_labels"])  # no allow-list: no label_*
    assert all(set(s) == {"node"} for s, _ in bare["kube_node_labels"])
    allowed = samples(exposition(nodes, pods, parse_allowlist("pods=[team,app],nodes=[nvidia.com/gpu.product]")))
    labels = {s["pod"]: s for s, _ in allowed["kube_pod_labels"]}
    assert labels["waiting"]["label_team"] == "vision" and "label_app" not in labels["waiting"]
    assert labels["llm-train-0"]["label_app"] == "llm-train"
    products = {s["node"]: s.get("label_nvidia_com_gpu_product") for s, _ in allowed["kube_node_labels"]}
    assert products["gpu-1"] == idle_gpus.H100 and products["cpu-1"] is None
    # KSM's names: sanitised, snake-cased, collisions suffixed on every colliding key.
    assert prometheus_labels("label", {"app.kubernetes.io/name": "x", "teamName": "y"}, ["*"]) == [
        ("label_app_kubernetes_io_name", "x"), ("label_team_name", "y")]
    assert prometheus_labels("label", {"a.b": "1", "a-b": "2"}, ["*"]) == [("label_a_b_conflict1", "2"), ("label_a_b_conflict2", "1")]
    with pytest.raises(ValueError, match="not KIND"):
        parse_allowlist("team")


def test_node_resources_and_conditions():
    nodes, pods = scenario()
    found = samples(exposition(nodes, pods))
    allocatable = {(s["node"], s["resource"]): (s["unit"], v) for s, v in found["kube_node_status_allocatable"]}
    assert allocatable[("gpu-1", "nvidia_com_gpu")] == ("integer", 8.0)
    assert allocatable[("mig-1", "nvidia_com_mig_1g_10gb")] == ("integer", 7.0)
    assert allocatable[("gpu-1", "cpu")][0] == "core" and allocatable[("gpu-1", "memory")][0] == "byte"
    capacity = {(s["node"], s["resource"]) for s, _ in found["kube_node_status_capacity"]}
    assert ("gpu-2", "nvidia_com_gpu") in capacity
    ready = {s["status"]: v for s, v in found["kube_node_status_condition"] if s["node"] == "gpu-1" and s["condition"] == "Ready"}
    assert ready == {"true": 1, "false": 0, "unknown": 0}
    info = {s["node"]: s for s, _ in found["kube_node_info"]}
    assert info["gpu-1"]["kubelet_version"].startswith("v1.") and info["gpu-1"]["internal_ip"]


async def test_served_on_its_own_port_from_the_live_store():
    async with SimCluster("idle-gpus", run_controllers=False) as sim, KubeStateMetrics(sim) as ksm:
        async with aiohttp.ClientSession() as session, session.get(f"{ksm.url}/metrics") as resp:
            assert resp.status == 200 and resp.headers["Content-Type"] == CONTENT_TYPE
            before = samples(await resp.text())
        sim.store.delete("pods", "ml", "llm-train-0")
        async with aiohttp.ClientSession() as session, session.get(f"{ksm.url}/metrics") as resp:
            after = samples(await resp.text())
    assert any(s["pod"] == "llm-train-0" for s, _ in before["kube_pod_info"])
    assert not any(s["pod"] == "llm-train-0" for s, _ in after["kube_pod_info"])
    assert ksm.scrapes == 2
