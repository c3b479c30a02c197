"""The verification pod without a cluster: resource choice, pod spec, nvidia-smi parsing, judging."""
from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from gputui.kube import verify as v

FIXTURES = Path("/work/shared/fixtures/real")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def node(name: str, allocatable: dict[str, str], labels: dict[str, str] | None = None) -> dict:
    return {
        "metadata": {"name": name, "uid": "u-" + name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {},
        "status": {"capacity": dict(allocatable), "allocatable": dict(allocatable), "conditions": [{"type": "Ready", "status": "True"}]},
    }


def gpu_pod(node_name: str, resource: str, n: int, phase: str = "Running") -> dict:
    return {
        "metadata": {"name": f"p-{resource}-{n}", "namespace": "default"},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": {"limits": {resource: str(n)}}}]},
        "status": {"phase": phase},
    }


# -- which resource ---------------------------------------------------------


@pytest.mark.parametrize(
    ("free", "allocatable", "expected"),
    [
        ({"nvidia.com/gpu": 2}, {"nvidia.com/gpu": 8}, "nvidia.com/gpu"),
        ({"nvidia.com/gpu": 0, "nvidia.com/gpu.shared": 3}, {"nvidia.com/gpu.shared": 16}, "nvidia.com/gpu.shared"),
        # MIG mixed: the smallest free slice, stale zero-sized resources ignored
        (
            {"nvidia.com/gpu": 0, "nvidia.com/mig-3g.40gb": 1, "nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-2g.20gb": 1},
            {"nvidia.com/mig-3g.40gb": 1, "nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-2g.20gb": 1},
            "nvidia.com/mig-1g.10gb",
        ),
        ({"nvidia.com/mig-1g.10gb": 0, "nvidia.com/mig-2g.20gb": 1}, {"nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-2g.20gb": 1}, "nvidia.com/mig-2g.20gb"),
        # nothing free: what the node advertises, so the scheduler says why it does not fit
        ({"nvidia.com/gpu": 0}, {"nvidia.com/gpu": 8}, "nvidia.com/gpu"),
        ({"nvidia.com/mig-1g.10gb": 0}, {"nvidia.com/mig-1g.10gb": 2}, "nvidia.com/mig-1g.10gb"),
        ({}, {}, "nvidia.com/gpu"),
    ],
)
def test_choose_resource(free, allocatable, expected):
    assert v.choose_resource(free, allocatable) == expected


def test_plan_counts_what_pods_hold():
    n = node("gpu-a", {"nvidia.com/gpu": "1", "nvidia.com/mig-1g.10gb": "2", "cpu": "8"})
    pods = [gpu_pod("gpu-a", "nvidia.com/gpu", 1), gpu_pod("gpu-a", "nvidia.com/mig-1g.10gb", 1, phase="Succeeded")]
    plan = v.plan_for(n, pods, "ops", v.VerifyOptions())
    assert plan.free == {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 2}
    assert plan.resource == "nvidia.com/mig-1g.10gb"
    assert plan.manifest["spec"]["containers"][0]["resources"] == {
        "limits": {"nvidia.com/mig-1g.10gb": "1", "cpu": "100m", "memory": "128Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}}


def test_user_resource_and_count_win():
    n = node("gpu-a", {"nvidia.com/gpu": "8"})
    plan = v.plan_for(n, [], "ops", v.VerifyOptions(resource="nvidia.com/gpu.shared", count=2))
    assert (plan.resource, plan.count) == ("nvidia.com/gpu.shared", 2)
    assert plan.manifest["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu.shared": "2", "cpu": "100m", "memory": "128Mi"}


def test_obstacles_on_the_node_itself():
    n = node("gpu-a", {"nvidia.com/gpu": "1"})
    n["spec"] = {"unschedulable": True, "taints": [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "ml", "effect": "NoExecute"},
        {"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
        {"key": "soft", "value": "x", "effect": "PreferNoSchedule"},
    ]}
    n["status"]["conditions"] = [{"type": "Ready", "status": "Unknown"}]
    plan = v.plan_for(n, [gpu_pod("gpu-a", "nvidia.com/gpu", 1)], "ops", v.VerifyOptions())
    assert plan.obstacles == (
        "node gpu-a is cordoned",
        "node gpu-a is not Ready",
        "untolerated taint dedicated (NoExecute, NoSchedule; add --tolerate dedicated)",
        "only 0 nvidia.com/gpu free on the node",
    )
    tolerant = v.plan_for(n, [], "ops", v.VerifyOptions(tolerate=("dedicated",)))
    assert not any("dedicated" in o for o in tolerant.obstacles)
    assert v.plan_for(node("gpu-b", {"nvidia.com/gpu": "2"}), [], "ops", v.VerifyOptions()).obstacles == ()


# -- the pod ----------------------------------------------------------------


def test_pod_spec_is_pinned_unprivileged_and_labelled():
    n = node("ip-10-0-0-7.ec2.internal", {"nvidia.com/gpu": "4"}, {"kubernetes.io/hostname": "ip-10-0-0-7"})
    opts = v.VerifyOptions(image="registry.local/cuda:12", runtime_class="nvidia", timeout=90, tolerate=("dedicated",))
    pod = v.plan_for(n, [], "gpu-checks", opts).manifest
    spec, meta = pod["spec"], pod["metadata"]
    term = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term == [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["ip-10-0-0-7"]}]}]
    assert "nodeName" not in spec  # the scheduler judges fit, and says why not
    assert {"key": "nvidia.com/gpu", "operator": "Exists"} in spec["tolerations"]
    assert {"key": "dedicated", "operator": "Exists"} in spec["tolerations"]
    assert spec["restartPolicy"] == "Never"
    assert spec["activeDeadlineSeconds"] == 90
    assert spec["automountServiceAccountToken"] is False
    assert spec["runtimeClassName"] == "nvidia"
    assert "volumes" not in spec and "hostNetwork" not in spec and "hostPID" not in spec
    (container,) = spec["containers"]
    assert container["image"] == "registry.local/cuda:12"
    assert container["command"] == ["nvidia-smi"]
    assert container["securityContext"]["privileged"] is False
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert "volumeMounts" not in container
    assert meta["namespace"] == "gpu-checks"
    assert meta["labels"][v.MANAGED_BY_LABEL] == "gputui"
    assert meta["labels"][v.NODE_LABEL] == "ip-10-0-0-7.ec2.internal"
    assert meta["annotations"][v.NODE_ANNOTATION] == "ip-10-0-0-7.ec2.internal"
    assert meta["name"].startswith("gputui-verify-ip-10-0-0-7-ec2-internal-")


def test_defaults_match_the_seed():
    pod = v.plan_for(node("n", {"nvidia.com/gpu": "1"}), [], "default", v.VerifyOptions()).manifest
    assert pod["spec"]["containers"][0]["image"] == "nvidia/cuda:12.4.0-base-ubuntu22.04"
    assert "runtimeClassName" not in pod["spec"]
    assert pod["spec"]["activeDeadlineSeconds"] == 120


@pytest.mark.parametrize(
    "node_name",
    ["gpu-1", "A" * 253, "node.with.many.dots.example.com", "x" + "-" * 60 + "y", "UPPER_case.node", "a" * 42 + "-" + "b" * 30],
)
def test_names_and_label_values_are_always_valid(node_name):
    rng = random.Random(7)
    names = {v.pod_name(node_name, rng) for _ in range(20)}
    assert len(names) == 20
    for name in names:
        assert len(name) <= 63 and DNS_LABEL.match(name), name
        assert name.startswith("gputui-verify-")
    value = v.node_label_value(node_name)
    assert len(value) <= 63 and LABEL_VALUE.match(value)


def test_plan_yaml_round_trips():
    import yaml

    plan = v.plan_for(node("n1", {"nvidia.com/gpu": "1"}), [], "default", v.VerifyOptions())
    assert yaml.safe_load(plan.to_yaml()) == plan.manifest


# -- nvidia-smi ---------------------------------------------------------------


def test_parse_table_h100_mig():
    report = v.parse_nvidia_smi((FIXTURES / "nvidia-smi/dgx-h100-8x-mig-mixed-all-balanced.txt").read_text())
    assert (report.driver, report.cuda) == ("535.104.12", "12.2")
    assert [g.index for g in report.gpus] == list(range(8))
    assert report.models == ["NVIDIA H100 80GB HBM3"]
    assert report.gpus[0].bus_id == "00000000:1B:00.0"
    assert report.gpus[0].memory_mib is None  # N/A under MIG
    assert len(report.migs) == 32
    assert report.migs[0].memory_mib == 40448 and report.migs[-1].gpu == 7


def test_parse_table_old_layout_without_mig_devices():
    report = v.parse_nvidia_smi((FIXTURES / "nvidia-smi/a100-sxm4-40gb-mig-enabled-no-mig-devices-driver-450.txt").read_text())
    assert (report.driver, report.cuda) == ("450.80.02", "11.0")
    assert [(g.index, g.name, g.memory_mib) for g in report.gpus] == [(0, "A100-SXM4-40GB", 40537)]
    assert report.migs == ()


def test_parse_truncated_name_and_trailing_garbage():
    report = v.parse_nvidia_smi((FIXTURES / "nvidia-smi/p100-driver-validation-inforom-corrupted-rc14.txt").read_text())
    assert (report.driver, report.cuda) == ("470.82.01", "11.4")
    assert [(g.name, g.memory_mib) for g in report.gpus] == [("Tesla P100-PCIE...", 16280)]


@pytest.mark.parametrize(
    ("fixture", "gpu_name", "profiles"),
    [
        ("h100-nvidia-smi-L-mig-mixed.txt", "NVIDIA H100 80GB HBM3", ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]),
        ("a100-nvidia-smi-L-mig-legacy-uuid-format.txt", "A100-SXM4-40GB", ["3g.20gb", "2g.10gb", "1g.5gb"]),
    ],
)
def test_parse_list_form(fixture, gpu_name, profiles):
    report = v.parse_nvidia_smi((FIXTURES / "nvidia-smi" / fixture).read_text())
    assert [g.name for g in report.gpus] == [gpu_name]
    assert [m.profile for m in report.migs] == profiles
    assert report.driver is None


def test_parse_driver_failure_lists_nothing():
    text = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n"
    report = v.parse_nvidia_smi(text)
    assert report.gpus == () and report.driver is None


def test_labels_agree_with_the_real_node():
    labels = json.loads((FIXTURES / "nodes/h100-80gb-hbm3-mig-mixed-all-balanced.node-labels.json").read_text())
    smi = v.SmiReport("550.54.15", "12.4", (v.SmiGpu(0, "NVIDIA H100 80GB HBM3", None),), (v.SmiMig(0, None, 9984),))
    assert v.disagreements(smi, labels, "nvidia.com/mig-1g.10gb", 1) == []


def test_labels_disagreements_are_named():
    labels = json.loads((FIXTURES / "nodes/a100-sxm4-40gb-mig-mixed-gfd-labels-2020.json").read_text())
    assert (v.gfd_driver_version(labels), v.gfd_cuda_version(labels)) == ("450.80.02", "11.0")
    smi = v.SmiReport("470.82.01", "11.4", (v.SmiGpu(0, "Tesla P100-PCIE...", 16280), v.SmiGpu(1, "Tesla P100-PCIE...", 16280)))
    found = v.disagreements(smi, labels, "nvidia.com/gpu", 1)
    assert any(f.startswith("model:") and "A100-SXM4-40GB" in f for f in found)
    assert any(f.startswith("driver:") and "450.80.02" in f for f in found)
    assert any(f.startswith("CUDA:") for f in found)
    assert any(f.startswith("memory:") for f in found)
    assert any(f.startswith("count:") for f in found)


def test_shared_and_truncated_products_match():
    smi = v.SmiReport(None, None, (v.SmiGpu(0, "Tesla T4", 15360),))
    assert v.disagreements(smi, {"nvidia.com/gpu.product": "Tesla-T4-SHARED"}, "nvidia.com/gpu", 1) == []
    smi = v.SmiReport(None, None, (v.SmiGpu(0, "Tesla P100-PCIE...", None),))
    assert v.disagreements(smi, {"nvidia.com/gpu.product": "Tesla-P100-PCIE-16GB"}, "nvidia.com/gpu", 1) == []


# -- judging --------------------------------------------------------------------


def pod_with(phase="Pending", waiting=None, terminated=None, running=False, conditions=(), reason=None):
    state = {}
    if waiting:
        state["waiting"] = waiting
    if terminated:
        state["terminated"] = terminated
    if running:
        state["running"] = {"startedAt": "2025-01-01T00:00:00Z"}
    status = {"phase": phase, "conditions": list(conditions)}
    if reason:
        status["reason"] = reason
    if state:
        status["containerStatuses"] = [{"name": v.CONTAINER, "state": state, "ready": running, "restartCount": 0}]
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [{"name": v.CONTAINER}]}, "status": status}


SMI_OK = (FIXTURES / "nvidia-smi/a100-sxm4-40gb-mig-enabled-no-mig-devices-driver-450.txt").read_text().splitlines()


def test_judge_still_on_its_way():
    assert v.judge(pod_with(), [], []) is None
    assert v.judge(pod_with(waiting={"reason": "ContainerCreating"}), [v.PodEvent("Normal", "Pulling", "Pulling image")], []) is None
    assert v.judge(pod_with("Running", running=True), [], SMI_OK[:3]) is None


def test_judge_pass():
    assert v.judge(pod_with("Succeeded", terminated={"exitCode": 0, "reason": "Completed"}), [], SMI_OK) == (v.PASS, "nvidia-smi listed 1 GPU(s)")


def test_judge_exit_zero_without_gpus_fails():
    code, reason = v.judge(pod_with("Succeeded", terminated={"exitCode": 0, "reason": "Completed"}), [], ["No devices were found"])
    assert code == v.NVIDIA_SMI and "listed no GPU" in reason


def test_judge_unschedulable_uses_the_schedulers_words():
    words = "0/7 nodes are available: 1 Insufficient nvidia.com/gpu, 6 node(s) didn't match Pod's node affinity/selector."
    cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": words}
    assert v.judge(pod_with(conditions=[cond]), [], []) == (v.UNSCHEDULABLE, f"unschedulable: {words}")
    bare = dict(cond, message="")
    event = v.PodEvent("Warning", "FailedScheduling", "0/1 nodes are available: 1 node(s) were unschedulable.")
    assert v.judge(pod_with(conditions=[bare]), [event], []) == (v.UNSCHEDULABLE, f"unschedulable: {event.message}")


def test_judge_image_pull():
    event = v.PodEvent("Warning", "Failed", 'Failed to pull image "nvidia/cuda:nope": not found')
    code, reason = v.judge(pod_with(waiting={"reason": "ErrImagePull", "message": "rpc error"}), [event], [])
    assert code == v.IMAGE_PULL and "not found" in reason and "ErrImagePull" in reason
    code, _ = v.judge(pod_with(waiting={"reason": "ImagePullBackOff", "message": "Back-off pulling image"}), [], [])
    assert code == v.IMAGE_PULL


def test_judge_runtime_hook():
    msg = "failed to create containerd task: nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1"
    for pod in (
        pod_with(waiting={"reason": "RunContainerError", "message": msg}),
        pod_with("Failed", terminated={"exitCode": 128, "reason": "StartError", "message": msg}),
    ):
        code, reason = v.judge(pod, [], [])
        assert code == v.RUNTIME and "libnvidia-ml.so.1" in reason
    sandbox = v.PodEvent("Warning", "FailedCreatePodSandBox", 'no runtime for "nvidia" is configured')
    assert v.judge(pod_with(waiting={"reason": "ContainerCreating"}), [sandbox], [])[0] == v.RUNTIME


def test_judge_driver_failure():
    lines = ["NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."]
    code, reason = v.judge(pod_with("Failed", terminated={"exitCode": 9, "reason": "Error"}), [], lines)
    assert code == v.NVIDIA_SMI
    assert reason.startswith("nvidia-smi failed (exit 9): NVIDIA-SMI has failed because it couldn't communicate")


def test_judge_deadline():
    code, _ = v.judge(pod_with("Failed", reason="DeadlineExceeded"), [], [])
    assert code == v.TIMEOUT


def test_verdict_json_shape():
    report = v.parse_nvidia_smi("\n".join(SMI_OK))
    verdict = v.Verdict("n1", True, v.PASS, "ok", pod="p", namespace="default", resource="nvidia.com/gpu", report=report, deleted=True)
    data = json.loads(json.dumps(verdict.to_json()))
    assert data["result"] == "PASS" and data["gpus"] == [{"index": 0, "model": "A100-SXM4-40GB", "memory_mib": 40537}]
    assert data["driver"] == "450.80.02" and data["deleted"] is True and data["leftover"] is None


def test_events_in_the_order_they_happened_whatever_the_precision_of_their_times():
    """The scheduler writes through events.k8s.io (`eventTime`, microseconds), the kubelet through core/v1
    (`firstTimestamp`, whole seconds): within one second only the events' resourceVersions tell the order."""
    from gputui.kube.verify.run import _event_order

    scheduled = {"metadata": {"resourceVersion": "41"}, "eventTime": "2026-12-02T16:00:00.456789Z", "reason": "Scheduled"}
    pulling = {"metadata": {"resourceVersion": "42"}, "firstTimestamp": "2026-12-02T16:00:00Z", "reason": "Pulling"}
    started = {"metadata": {"resourceVersion": "40"}, "firstTimestamp": "2026-12-02T16:00:03Z", "reason": "Started"}  # a lagging sequence
    assert [e["reason"] for e in sorted([started, pulling, scheduled], key=_event_order)] == ["Scheduled", "Pulling", "Started"]
