"""Records from raw JSON and the GPU accounting, on real fixtures and hand-made objects."""
from __future__ import annotations

import pytest

from gputui.kube import gpu
from gputui.kube.quantities import parse_count
from gputui.kube.records import (
    display_status,
    effective_requests,
    event_from,
    node_from,
    pod_from,
)
from tests.model.objects import (
    container,
    event,
    fixture_labels,
    fixture_resources,
    node,
    plugin_pod,
    pod,
)

R = gpu.GpuResources()


def summary(node_obj, *pod_objs, resources=R, pods_known=True):
    n = node_from(node_obj)
    return gpu.summarize_node(n, [pod_from(p) for p in pod_objs], resources, pods_known=pods_known)


def codes(s):
    return [p.code for p in s.problems]


# -- effective request -------------------------------------------------------
def test_two_containers_add_up():
    spec = {"containers": [container("a", {"nvidia.com/gpu": 1}), container("b", {"nvidia.com/gpu": 2})]}
    assert effective_requests(spec) == {"nvidia.com/gpu": 3}


def test_init_container_larger_than_app_containers_wins():
    spec = {"containers": [container("a", {"nvidia.com/gpu": 1})], "initContainers": [container("i", {"nvidia.com/gpu": 4})]}
    assert effective_requests(spec) == {"nvidia.com/gpu": 4}


def test_sidecar_init_containers_add_to_app_containers():
    spec = {
        "containers": [container("a", {"nvidia.com/gpu": 2})],
        "initContainers": [
            container("sidecar", {"nvidia.com/gpu": 1}, restart_policy="Always"),
            container("setup", {"nvidia.com/gpu": 2}),
        ],
    }
    # app 2 + sidecar 1 = 3; during setup: sidecar 1 + setup 2 = 3
    assert effective_requests(spec) == {"nvidia.com/gpu": 3}
    spec["initContainers"][1] = container("setup", {"nvidia.com/gpu": 3})
    assert effective_requests(spec) == {"nvidia.com/gpu": 4}  # 1 + 3 during init


def test_limit_alone_implies_request_and_native_resources_are_ignored():
    c = container("a", {"nvidia.com/mig-1g.10gb": 2}, requests_too=False)
    c["resources"]["requests"] = {"cpu": "1", "memory": "1Gi"}
    assert effective_requests({"containers": [c]}) == {"nvidia.com/mig-1g.10gb": 2}


def test_parse_count():
    assert [parse_count(q) for q in ("8", "0", "1k", "2000m", "", None, "junk")] == [8, 0, 1000, 2, 0, 0, 0]


# -- kubectl STATUS ------------------------------------------------------------
def test_display_status_like_kubectl():
    assert display_status(pod("a", "p", node="n", gpu={"nvidia.com/gpu": 1}))[0] == "Running"
    assert display_status(pod("a", "p", node="n", waiting_reason="CrashLoopBackOff", restarts=5))[:2] == ("CrashLoopBackOff", 5)
    assert display_status(pod("a", "p", node="n", phase="Succeeded"))[0] == "Completed"
    assert display_status(pod("a", "p", node="n", deleting=True))[0] == "Terminating"
    obj = pod("a", "p", node="n", init_containers=[container("init")])
    obj["status"]["initContainerStatuses"] = [{"name": "init", "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}]
    obj["status"]["containerStatuses"] = []
    assert display_status(obj)[0] == "Init:0/1"
    obj["status"]["initContainerStatuses"][0]["state"] = {"terminated": {"exitCode": 2}}
    assert display_status(obj)[0] == "Init:ExitCode:2"


# -- nodes: real fixtures -------------------------------------------------------
def test_h100_mig_mixed_labels_give_facts_and_mig_slices():
    labels = fixture_labels("h100-80gb-hbm3-mig-mixed-all-balanced.node-labels.json")
    capacity = {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "2", "nvidia.com/mig-2g.20gb": "1", "nvidia.com/mig-3g.40gb": "1"}
    s = summary(node("h100", labels=labels, capacity=capacity), plugin_pod("h100", "operator"),
                pod("ml", "train", node="h100", gpu={"nvidia.com/mig-1g.10gb": 1}))
    f = s.facts
    assert (f.product, f.memory_mib, f.count, f.driver, f.cuda) == ("NVIDIA-H100-80GB-HBM3", 81559, 1, "550.54.15", "12.4")
    assert (f.mig_strategy, f.mig_capable, f.mig_config, f.mig_config_state, f.replicas, f.sharing) == ("mixed", True, "all-balanced", "success", 0, "none")
    assert f.mig_labels == {"mig-1g.10gb": 2, "mig-2g.20gb": 1, "mig-3g.40gb": 1}
    # nvidia.com/gpu at 0 is stale, not a GPU the node has
    assert list(s.usage) == ["nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb"]
    assert s.usage["nvidia.com/mig-1g.10gb"].as_dict() == {"capacity": 2, "allocatable": 2, "allocated": 1, "free": 1}
    assert s.problems == []
    # CPU feature labels are dropped, the NVIDIA PCI one is kept
    n = node_from(node("h100", labels=labels))
    assert not any(k.startswith("feature.node.kubernetes.io/cpu-") for k in n.labels)
    assert n.labels.get("nvidia.com/gpu.present") == "true"


def test_old_gfd_labels_driver_version():
    f = gpu.gpu_facts(node_from(node("a100", labels=fixture_labels("a100-sxm4-40gb-mig-mixed-gfd-labels-2020.json"))))
    assert (f.product, f.driver, f.cuda, f.mig_strategy) == ("A100-SXM4-40GB", "450.80.02", "11.0", "mixed")
    assert f.mig_labels == {"mig-1g.5gb": 1, "mig-2g.10gb": 1, "mig-3g.21gb": 1}


@pytest.mark.parametrize(
    "fixture,expected",
    [
        ("dgx-h100-8x-mig-mixed-describe-node-egrep.txt", {"nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-3g.40gb": 8}),
        ("dgx-h100-8x-mig-single-describe-node-egrep.txt", {"nvidia.com/gpu": 16}),
        ("describe-node-8gpu-host-only-7-allocatable.txt", {"nvidia.com/gpu": 7}),
        ("time-slicing-t4x4-renameByDefault-false-describe-excerpt.txt", {"nvidia.com/gpu": 16}),
    ],
)
def test_describe_fixtures_resources_without_stale_zeros(fixture, expected):
    capacity, allocatable = fixture_resources(fixture)
    s = summary(node("n", capacity=capacity, allocatable=allocatable), plugin_pod("n"))
    assert {k: u.allocatable for k, u in s.usage.items()} == expected
    assert s.problems == []


def test_unhealthy_gpu_is_reported():
    s = summary(node("n", capacity={"nvidia.com/gpu": 8}, allocatable={"nvidia.com/gpu": 7}), plugin_pod("n"))
    assert codes(s) == ["unhealthy-gpus"]
    assert "nvidia.com/gpu 7/8" in s.problems[0].message


def test_plugin_not_registered_on_labelled_node_without_resources():
    labels = fixture_labels("h100-80gb-hbm3-mig-capable-disabled.node-labels.json")
    s = summary(node("n", labels=labels, capacity={"nvidia.com/gpu": 0}), plugin_pod("n", "static", waiting_reason="CrashLoopBackOff", restarts=7))
    assert codes(s) == ["plugin-not-registered", "plugin-not-running"]
    assert "crash-looping (7 restarts)" in s.problems[1].message


def test_allocated_counts_running_and_terminating_not_finished_pods():
    n = node("n", capacity={"nvidia.com/gpu": 4})
    s = summary(
        n, plugin_pod("n"),
        pod("a", "running", node="n", gpu={"nvidia.com/gpu": 1}),
        pod("a", "terminating", node="n", gpu={"nvidia.com/gpu": 1}, deleting=True),
        pod("a", "done", node="n", gpu={"nvidia.com/gpu": 2}, phase="Succeeded"),
        pod("a", "failed", node="n", gpu={"nvidia.com/gpu": 2}, phase="Failed"),
        pod("a", "pending", gpu={"nvidia.com/gpu": 2}),
        pod("a", "elsewhere", node="m", gpu={"nvidia.com/gpu": 2}),
    )
    assert s.usage["nvidia.com/gpu"].as_dict() == {"capacity": 4, "allocatable": 4, "allocated": 2, "free": 2}


def test_overcommitted_not_ready_cordoned_and_missing_plugin():
    n = node("n", capacity={"nvidia.com/gpu": 1}, ready="False", unschedulable=True)
    s = summary(n, pod("a", "x", node="n", gpu={"nvidia.com/gpu": 2}))
    assert codes(s) == ["not-ready", "plugin-not-running", "overcommitted", "cordoned"]  # worst first
    assert s.usage["nvidia.com/gpu"].free == -1
    # without the pods the plugin is not judged
    assert "plugin-not-running" not in codes(summary(n, pods_known=False))


@pytest.mark.parametrize("style", ["static", "helm", "operator", "gke"])
def test_plugin_pod_found_for_every_install_style(style):
    s = summary(node("n", capacity={"nvidia.com/gpu": 1}), plugin_pod("n", style))
    assert s.plugin is not None and gpu.plugin_install_style(s.plugin.labels) == style
    assert s.problems == []
    assert gpu.plugin_container(s.plugin) in ("nvidia-device-plugin-ctr", "nvidia-device-plugin", "nvidia-gpu-device-plugin")


def test_helm_gfd_pod_is_not_the_plugin_and_not_ready_plugin_is_reported():
    gfd = pod("nvdp", "gfd", node="n", labels={"app.kubernetes.io/name": "nvidia-device-plugin"},
              containers=[container("gpu-feature-discovery-ctr")])
    s = summary(node("n", capacity={"nvidia.com/gpu": 1}), gfd, plugin_pod("n", ready=False))
    assert s.plugin.name == "plugin-static-n"
    assert codes(s) == ["plugin-not-running"] and "not ready" in s.problems[0].message


def test_cpu_node_has_no_gpu_and_no_problem():
    s = summary(node("cpu"))
    assert s.usage == {} and s.problems == [] and not s.gpu_node


def test_extra_resource_names():
    resources = gpu.GpuResources(frozenset({"amd.com/gpu"}))
    s = summary(node("amd", capacity={"amd.com/gpu": 2}), pod("a", "x", node="amd", gpu={"amd.com/gpu": 1}), resources=resources)
    assert s.usage["amd.com/gpu"].allocated == 1
    assert summary(node("amd", capacity={"amd.com/gpu": 2})).usage == {}


def test_unbound_reason_from_condition_then_event():
    p = pod_from(pod("a", "wait", gpu={"nvidia.com/gpu": 1}, unschedulable_message="0/3 nodes are available: 3 Insufficient nvidia.com/gpu."))
    assert gpu.gpu_pod(p, R).reason == "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    p = pod_from(pod("a", "wait", gpu={"nvidia.com/gpu": 1}, unschedulable_message=None))
    events = [
        event_from(event("a", "e1", kind="Pod", object_name="wait", reason="FailedScheduling", message="old", last="2025-01-01T00:00:00Z")),
        event_from(event("a", "e2", kind="Pod", object_name="wait", reason="FailedScheduling", message="new", last="2025-01-01T00:01:00Z")),
        event_from(event("a", "e3", kind="Pod", object_name="wait", reason="Other", message="other", last="2025-01-01T00:02:00Z")),
    ]
    assert gpu.gpu_pod(p, R, events).reason == "new"
    assert gpu.gpu_pod(p, R).reason is None
    assert gpu.gpu_pod(pod_from(pod("a", "done", node="n", gpu={"nvidia.com/gpu": 1}, phase="Succeeded")), R) is None


def test_stack_components():
    assert gpu.stack_component({"app": "nvidia-driver-daemonset"}) == "driver"
    assert gpu.stack_component({"app.kubernetes.io/component": "nvidia-driver", "app": "nvidia-gpu-driver-ubuntu22.04-abc"}) == "driver"
    assert gpu.stack_component({"app.kubernetes.io/name": "node-feature-discovery", "role": "worker"}) == "node-feature-discovery"
    assert gpu.stack_component({"name": "nvidia-device-plugin-ds"}) == "device-plugin"
    assert gpu.stack_component({"app": "web"}) is None


def _rule_strings() -> set[str]:
    """Every string the stack rules compare a label with or look one up by: the functions' own literals, the
    module constants they read, and the tables' keys and values."""
    rules = (gpu.stack_component_by_rule, gpu.plugin_install_style, gpu.is_operator_driver_app)
    strings = {c for f in rules for c in f.__code__.co_consts if isinstance(c, str)}
    for name in {n for f in rules for n in f.__code__.co_names}:
        value = getattr(gpu, name, None)
        items = value.items() if isinstance(value, dict) else value if isinstance(value, tuple) else (value,)
        for item in items:
            strings.update(s for s in (item if isinstance(item, tuple) else (item,)) if isinstance(s, str))
    return strings


def test_stack_values_look_agrees_with_the_rules():
    """stack_component tells most pods apart by one look at their label values (STACK_LABEL_VALUES): for every
    label the rules could match, and near misses, it answers as the rules one by one do."""
    strings = _rule_strings()
    assert {"nvidia-device-plugin-ds", "app.kubernetes.io/part-of", "nvidia-gpu", "gpu-operator", "nvidia-driver"} <= strings
    values = strings | {gpu.OPERATOR_DRIVER_PREFIX + "rhcos4.14", "web", "", "Nvidia-driver"}
    labels_tried = [{key: value} for key in strings for value in values]
    labels_tried += [{"team": "ml", key: value} for key in strings for value in values]
    found = 0
    for labels in labels_tried:
        expected = gpu.stack_component_by_rule(labels)
        assert gpu.stack_component(labels) == expected, labels
        found += expected is not None
    assert found > 40  # the tries reach the rules
    assert gpu.stack_component({"app": gpu.OPERATOR_DRIVER_PREFIX + "5.15.0-generic-ubuntu22.04"}) == "driver"
    # a value no server writes is judged by the rules, as before
    assert gpu.stack_component({"team": ["ml"], "name": "nvidia-device-plugin-ds"}) == "device-plugin"
    assert gpu.stack_component({"team": ["ml"]}) is None
