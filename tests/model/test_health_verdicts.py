"""health-condition and tainted: node conditions set by GPU health monitors (NVSentinel,
node-problem-detector) and unusual taints on GPU nodes; every node's verdicts worst first,
and the Nodes pane's cell led (word and symbol) by the worst one."""
from __future__ import annotations

import pytest

from gputui.kube import gpu
from gputui.kube.config import connect
from gputui.kube.model import ClusterModel
from gputui.kube.records import node_from, pod_from
from gputui.sim import SimCluster
from gputui.ui import render
from tests.model.objects import node, plugin_pod, pod
from tests.model.scenario import FAST

GPU_LABELS = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def with_conditions(obj: dict, *conditions: tuple[str, str, str, str]) -> dict:
    obj["status"]["conditions"] += [{"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in conditions]
    return obj


def summary(node_obj: dict, *pods: dict) -> gpu.NodeSummary:
    return gpu.summarize_node(node_from(node_obj), [pod_from(p) for p in pods], gpu.GpuResources())


def codes(s: gpu.NodeSummary) -> list[str]:
    return [p.code for p in s.problems]


def gpu_node(allocatable: int = 8, **kw) -> dict:
    return node("g", capacity={"nvidia.com/gpu": 8}, allocatable={"nvidia.com/gpu": allocatable}, labels=GPU_LABELS, **kw)


def test_a_health_monitors_condition_is_a_verdict_naming_it_with_its_message():
    n = with_conditions(
        gpu_node(),
        ("GpuMemWatch", "True", "GpuMemWatchIsNotHealthy", "ErrorCode:DCGM_FR_VOLATILE_DBE_DETECTED GPU:3 Recommended Action=RESTART_VM"),
        ("SysLogsXIDError", "False", "SysLogsXIDErrorIsHealthy", "No Health Failures"),  # healthy: not a verdict
        ("MemoryPressure", "True", "KubeletHasInsufficientMemory", "low memory"),  # the kubelet's own: not this verdict
        ("KernelDeadlock", "True", "DockerHung", ""),  # node-problem-detector
    )
    s = summary(n, plugin_pod("g"))
    health = [p for p in s.problems if p.code == "health-condition"]
    assert [(p.subject, p.message) for p in health] == [
        ("GpuMemWatch", "condition GpuMemWatch is True (GpuMemWatchIsNotHealthy: ErrorCode:DCGM_FR_VOLATILE_DBE_DETECTED GPU:3 Recommended Action=RESTART_VM)"),
        ("KernelDeadlock", "condition KernelDeadlock is True (DockerHung)"),
    ]
    assert codes(s) == ["health-condition", "health-condition"]
    cell = render.verdicts(s.problems, width=26)
    assert cell.plain == "✗ GpuMemWatch +1"


def test_unusual_taints_on_gpu_nodes_are_verdicts_the_usual_ones_are_not():
    taints = [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},  # keeps CPU pods off: usual
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},  # Kubernetes' own for cordoned
        {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
        {"key": "nvidia.com/gpu-error", "value": "fatal", "effect": "NoSchedule"},  # NVSentinel's chart's example taint
        {"key": "example.com/draining", "effect": "NoExecute"},
        {"key": "example.com/prefer-not", "effect": "PreferNoSchedule"},  # only a preference
    ]
    s = summary(gpu_node(taints=taints), plugin_pod("g"))
    assert [(p.code, p.subject, p.message) for p in s.problems] == [
        ("tainted", "nvidia.com/gpu-error", "taint nvidia.com/gpu-error=fatal:NoSchedule keeps new pods that do not tolerate it off this node"),
        ("tainted", "example.com/draining", "taint example.com/draining:NoExecute evicts the pods that do not tolerate it"),
    ]
    assert render.verdicts(s.problems, width=26).plain == "✗ taint gpu-error +1"
    # a CPU node's taints are its own business
    cpu = node("c", taints=[{"key": "example.com/draining", "effect": "NoExecute"}])
    assert summary(cpu).problems == []


def test_worst_first_and_the_worst_decides_the_symbol():
    n = gpu_node(7, ready="False", unschedulable=True, taints=[{"key": "example.com/x", "effect": "NoSchedule"}])
    n = with_conditions(n, ("GpuNvlinkWatch", "True", "", "NVLink down"))
    s = summary(n, pod("a", "x", node="g", gpu={"nvidia.com/gpu": 8}))  # no plugin pod, overcommitted
    assert codes(s) == ["not-ready", "plugin-not-running", "health-condition", "unhealthy-gpus", "overcommitted", "tainted", "cordoned"]
    assert render.verdicts(s.problems, width=17).plain == "✗ not ready +6"
    # cordoned alone warns; cordoned with a worse problem is never what the cell leads with
    cordoned = summary(gpu_node(unschedulable=True), plugin_pod("g"))
    assert render.verdicts(cordoned.problems).plain == "! cordoned"
    unready = summary(gpu_node(ready="False", unschedulable=True), plugin_pod("g"))
    assert render.verdicts(unready.problems, width=12).plain == "✗ not ready +1"
    assert gpu.SEVERITY_ORDER.index("not-ready") < gpu.SEVERITY_ORDER.index("cordoned")


@pytest.mark.asyncio
async def test_conditions_and_taints_reach_the_model_through_the_api():
    n = with_conditions(
        gpu_node(taints=[{"key": "nvidia.com/gpu-xid-error", "value": "true", "effect": "NoSchedule"}], unschedulable=True),
        ("SysLogsXIDError", "True", "SysLogsXIDErrorIsNotHealthy", "ErrorCode:79 GPU:0 PCI:0000:1b:00"),
    )
    async with SimCluster([n, plugin_pod("g")], run_controllers=False) as sim:
        async with await connect(str(sim.kubeconfig_path)) as conn:
            async with ClusterModel(conn.api, **FAST) as model:
                assert await model.wait_synced(10)
                problems = model.summary("g").problems
    assert [p.code for p in problems] == ["health-condition", "tainted", "cordoned"]
    assert problems[0].message == "condition SysLogsXIDError is True (SysLogsXIDErrorIsNotHealthy: ErrorCode:79 GPU:0 PCI:0000:1b:00)"
