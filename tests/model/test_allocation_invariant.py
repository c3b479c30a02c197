"""Every GPU holder listed: on every scenario the project has, for every node and GPU resource, the GPUs of the
listed unfinished pods (`gpu_pods`, the report's `pods`) add up to the node's allocated, DRA holders included."""
from __future__ import annotations

from collections import Counter

from gputui.kube import idle
from gputui.kube.config import connect
from gputui.kube.model import ClusterModel
from gputui.report.contract import as_contract
from gputui.sim.scenarios import demo, fragmented, stacks, generated as synthetic
from gputui.sim.cluster import SimCluster
from tests.model.scenario import small_cluster
from tests.ui import ui_scenario
from tests.verify import cluster as verify_cluster

SCENARIOS = {
    "demo": demo.build,
    "fragmented": fragmented.build,
    **{f"stack:{name}": build for name, build in stacks.SCENARIOS.items()},
    "synthetic": lambda: synthetic.generate(12, 300),
    "tests/model small_cluster": small_cluster,
    "tests/ui gpu_cluster": ui_scenario.gpu_cluster,
    "tests/ui hostile_cluster": ui_scenario.hostile_cluster,
    "tests/verify cluster": verify_cluster.objects,
}


def _mismatches(model: ClusterModel, pods: list[dict]) -> list[str]:
    held: dict[str, Counter[str]] = {}
    for entry in pods:
        if entry["node"] is not None and entry["phase"] not in ("Succeeded", "Failed"):
            held.setdefault(entry["node"], Counter()).update(entry["gpu"])
    out = []
    for summary in model.node_summaries():
        listed = held.pop(summary.name, Counter())
        for name in set(summary.usage) | set(listed):
            allocated = summary.usage[name].allocated if name in summary.usage else 0
            if listed[name] != allocated:
                out.append(f"{summary.name} {name}: pods listed hold {listed[name]}, node allocated {allocated}")
    out += [f"{node}: pods listed on a node the model does not know: {dict(c)}" for node, c in held.items()]
    return out


async def _scenario_mismatches(name: str) -> list[str]:
    async with SimCluster(SCENARIOS[name](), speed=50) as sim:
        conn = await connect(str(sim.kubeconfig_path))
        try:
            async with ClusterModel(conn.api) as model:
                assert await model.wait_synced(20), name
                contract = as_contract(model, None, None)
                # gpu_pods() and the report list the same pods, with the same GPUs
                assert [(g.pod.namespace, g.pod.name, g.gpu) for g in model.gpu_pods()] == \
                    [(p["namespace"], p["name"], p["gpu"]) for p in contract["pods"]], name
                return [f"{name}: {m}" for m in _mismatches(model, contract["pods"])]
        finally:
            await conn.close()


async def test_listed_pods_add_up_to_allocated_on_every_scenario():
    found = []
    for name in SCENARIOS:
        found += await _scenario_mismatches(name)
    assert found == []


async def test_demo_dra_holders_are_listed_with_their_claims_and_devices():
    async with SimCluster(demo.build(), speed=50) as sim:
        conn = await connect(str(sim.kubeconfig_path))
        try:
            async with ClusterModel(conn.api) as model:
                assert await model.wait_synced(20)
                on_node = {g.pod.name: g for g in model.gpu_pods(node=demo.DRA_NODE)}
                serve, asr = on_node["qwen-72b-serving-0"], on_node["whisper-dra-0"]
                assert serve.gpu == {"gpu.nvidia.com": 2}  # DRA devices by DeviceClass, never nvidia.com/gpu
                assert [(h.claim.split("/")[0], h.devices) for h in serve.claims] == [("inference", ("gpu-0", "gpu-1"))]
                assert asr.gpu == {"mig.nvidia.com": 1}  # a MIG device, named as the node's and the cluster's rows name it
                assert asr.claims[0].devices == ("gpu-7-mig-1g10gb-19-0",)
                assert model.summary(demo.DRA_NODE).usage["gpu.nvidia.com"].allocated == 2
                report = {p["name"]: p for p in as_contract(model, None, None)["pods"]}
                assert report["qwen-72b-serving-0"]["claims"][0]["devices"] == ["gpu-0", "gpu-1"]
                assert report["whisper-dra-0"]["claims"][0]["claim"].startswith("inference/whisper-dra-0-mig-")
                held = {h.name: h.gpus for h in idle.holders(model) if h.node == demo.DRA_NODE}
                assert held == {"qwen-72b-serving-0": 2, "whisper-dra-0": 1}  # the idle view's GPUS, not 0
        finally:
            await conn.close()
