"""A node's summary is recomputed when one of its pods changes only if `gpu.summary_inputs` of the pod
changed (tables.PodTable): those inputs must be all the summary reads. Here every field of every pod of
the built-in scenarios is changed in turn, and wherever the inputs compare equal the summary must too; a
summary that starts reading a field the inputs leave out fails here, not silently on screen."""
from __future__ import annotations

import dataclasses

import pytest

from gputui.kube import gpu
from gputui.kube.records import ContainerStatus, DeviceHealth, Pod, node_from, pod_from
from gputui.sim.scenarios import load

SCENARIOS = ("demo", "health", "stuck")


def other_values(pod: Pod, field: str) -> list[object]:
    """Values unlike the pod's for one field, of the field's kind."""
    value = getattr(pod, field)
    if field == "phase":
        return [p for p in ("Pending", "Running", "Succeeded", "Failed", "Unknown") if p != value]
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, 0 if value else 3]
    if isinstance(value, float) or value is None and field in ("created", "deleted", "started"):
        return [1.0e9, None] if value is not None else [1.0e9]
    if isinstance(value, str) or value is None:
        return ["changed", ""] if value else ["changed"]
    if field == "owner":
        return [None, ("Job", "other"), ("DaemonSet", "other")]
    if field == "labels":
        return [{}, {**value, "team": "other"}, {**value, "app": "nvidia-device-plugin-daemonset"}]
    if field == "requests":
        return [{}, {**value, "nvidia.com/gpu": value.get("nvidia.com/gpu", 0) + 1}]
    if field in ("container_statuses", "init_container_statuses"):
        crashing = ContainerStatus("c", False, False, 7, "waiting", "CrashLoopBackOff", "back-off", None, "Error", 1)
        return [(), (crashing,)]
    if field == "devices":
        return [(), (DeviceHealth("c", "nvidia.com/gpu", "GPU-0", "Unhealthy"),)]
    if isinstance(value, tuple):
        return [(), ("changed",)]
    raise AssertionError(f"no other value for Pod.{field} ({value!r}): teach this test the field")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_pod_change_the_inputs_do_not_see_changes_no_summary(scenario):
    objects = load(scenario)
    nodes = [node_from(o) for o in objects if o.get("kind") == "Node"]
    pods = [pod_from(o) for o in objects if o.get("kind") == "Pod"]
    checked = 0
    for node in nodes:
        on_node = [p for p in pods if p.node == node.name]
        before = gpu.summarize_node(node, on_node, gpu.GpuResources())
        for i, pod in enumerate(on_node):
            for field in (f.name for f in dataclasses.fields(Pod)):
                for value in other_values(pod, field):
                    changed = dataclasses.replace(pod, **{field: value})
                    if gpu.summary_inputs(changed) != gpu.summary_inputs(pod):
                        continue  # the table recomputes the summary: nothing to check
                    after = gpu.summarize_node(node, [*on_node[:i], changed, *on_node[i + 1:]], gpu.GpuResources())
                    assert after == before, f"{scenario}: {node.name}: {pod.namespace}/{pod.name}.{field} = {value!r} " \
                                            "changed the summary, and summary_inputs does not read it"
                    checked += 1
    assert checked > 100, checked  # the scenarios hold workload pods on nodes: the check ran
