"""gputui.kube.stack: install detection, the per-node component matrix, the new verdicts.

Pods are built from the real `kubectl get pods -n gpu-operator` outputs in
the fixtures; DaemonSets follow the GPU Operator's and the device plugin's
manifests (names, labels, node selectors).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gputui.kube import stack as stack_module
from gputui.kube import stuck
from gputui.kube.gpu import Problem, has_nvidia_gpus
from gputui.kube.records import daemonset_from, node_from, pod_from
from gputui.kube.stack import (
    COMPONENTS,
    CRASH_LOOPING,
    MISSING,
    NOT_EXPECTED,
    NOT_READY,
    RUNNING,
    cluster_problems,
    components_json,
)

REAL = Path("/work/shared/fixtures/real")
OPERATOR_NS = "gpu-operator"


# -- the functions under test, fed raw objects as the API returns them -------
# (the model turns them into records the same way)


def classify_daemonset(ds: dict):
    return stack_module.classify_daemonset(daemonset_from(ds))


def detect_stack(daemonsets: list[dict], policies=()):
    return stack_module.detect_stack([daemonset_from(d) for d in daemonsets], policies)


def component_matrix(found, nodes: list[dict], pods: list[dict]):
    return stack_module.component_matrix(found, [node_from(n) for n in nodes], [pod_from(p) for p in pods])


def daemonset_targets(ds: dict, n: dict):
    return stack_module.daemonset_targets(daemonset_from(ds), node_from(n))


def pod_component_state(component: str, p: dict):
    return stack_module.pod_component_state(component, pod_from(p))


def node_problems(n: dict, components, **kw):
    return [{"code": p.code, "message": p.message} for p in stack_module.node_problems(node_from(n), components, **kw)]


def is_gpu_node(n: dict) -> bool:
    return has_nvidia_gpus(node_from(n))


# -- builders --------------------------------------------------------------


def node(name: str, labels: dict | None = None, taints: list | None = None) -> dict:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {"taints": taints or []}, "status": {"capacity": {}}}


def h100_node(name: str = "s4124-0073") -> dict:
    labels = json.loads((REAL / "nodes/h100-80gb-hbm3-mig-mixed-all-balanced.node-labels.json").read_text())
    return node(name, labels)


def daemonset(name: str, namespace: str, labels: dict, node_selector: dict | None = None, containers: tuple[str, ...] = ("main",),
              tolerations: list | None = None, affinity: dict | None = None) -> dict:
    pod_spec = {"containers": [{"name": c} for c in containers], "nodeSelector": node_selector or {}, "tolerations": tolerations or []}
    if affinity:
        pod_spec["affinity"] = affinity
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "spec": {"selector": {"matchLabels": dict(labels)}, "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec}}}


OPERATOR_DAEMONSETS = [
    ("nvidia-driver-daemonset", "driver", ("nvidia-driver-ctr",)),
    ("nvidia-container-toolkit-daemonset", "container-toolkit", ("nvidia-container-toolkit-ctr",)),
    ("nvidia-device-plugin-daemonset", "device-plugin", ("nvidia-device-plugin", "config-manager")),
    ("gpu-feature-discovery", "gpu-feature-discovery", ("gpu-feature-discovery", "config-manager")),
    ("nvidia-dcgm-exporter", "dcgm-exporter", ("nvidia-dcgm-exporter",)),
    ("nvidia-mig-manager", "mig-manager", ("nvidia-mig-manager",)),
    ("nvidia-operator-validator", "operator-validator", ("nvidia-operator-validator",)),
]
GPU_TOLERATION = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def operator_daemonsets(skip: tuple[str, ...] = (), nfd: bool = True) -> list[dict]:
    sets = [
        daemonset(name, OPERATOR_NS, {"app": name}, {f"nvidia.com/gpu.deploy.{deploy}": "true"}, containers, GPU_TOLERATION)
        for name, deploy, containers in OPERATOR_DAEMONSETS if name not in skip
    ]
    if nfd:
        sets.append(daemonset("gpu-operator-node-feature-discovery-worker", OPERATOR_NS,
                              {"app.kubernetes.io/name": "node-feature-discovery", "role": "worker"}, containers=("worker",)))
    return sets


def cluster_policy(state: str = "ready", message: str | None = None, spec: dict | None = None, name: str = "cluster-policy") -> dict:
    status: dict = {"state": state, "namespace": OPERATOR_NS}
    if state == "notReady":
        status["conditions"] = [
            {"type": "Ready", "status": "False", "reason": "OperandNotReady", "message": message},
            {"type": "Error", "status": "False", "reason": "", "message": ""},
        ]
    return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": name}, "spec": spec or {}, "status": status}


def pod(name: str, namespace: str, node_name: str, owner: str | None, containers: list[dict], init: list[dict] | None = None,
        phase: str = "Running", created: str = "2025-01-01T00:00:00Z", init_specs: list[dict] | None = None) -> dict:
    meta = {"name": name, "namespace": namespace, "creationTimestamp": created}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": owner, "controller": True}]
    return {"metadata": meta,
            "spec": {"nodeName": node_name, "containers": [{"name": c["name"]} for c in containers],
                     "initContainers": init_specs or [{"name": c["name"]} for c in init or []]},
            "status": {"phase": phase, "containerStatuses": containers, "initContainerStatuses": init or []}}


def running(name: str, restarts: int = 0) -> dict:
    return {"name": name, "ready": True, "restartCount": restarts, "state": {"running": {"startedAt": "2025-01-01T00:00:00Z"}}}


def pods_from_kubectl(text: str, node_name: str, daemonsets: list[dict]) -> list[dict]:
    """Pod objects for the rows of a `kubectl get pods` listing, all on one node."""
    names = {(d["metadata"]["name"]): d for d in daemonsets}
    pods = []
    for line in text.splitlines():
        cols = line.split()
        if not cols or cols[0] == "NAME":
            continue
        name, ready, status, restarts = cols[0], cols[1], cols[2], int(cols[3])
        owner = name.rsplit("-", 1)[0]
        ds = names.get(owner)
        containers = [c["name"] for c in ds["spec"]["template"]["spec"]["containers"]] if ds else ["main"]
        ready_n, total = map(int, ready.split("/"))
        while len(containers) < total:
            containers.append(f"ctr{len(containers)}")
        containers = containers[:total]
        init: list[dict] = []
        phase = "Running"
        statuses = []
        for i, c in enumerate(containers):
            status_obj = {"name": c, "ready": i < ready_n, "restartCount": restarts if i == 0 else 0,
                          "state": {"running": {}} if status == "Running" else {"waiting": {"reason": "PodInitializing"}}}
            if restarts and i == 0 and i >= ready_n:
                status_obj["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error"}}
            statuses.append(status_obj)
        if status == "Completed":
            phase = "Succeeded"
            statuses = [{"name": c, "ready": False, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}} for c in containers]
        match = re.fullmatch(r"Init:(\d+)/(\d+)", status)
        if match:
            phase = "Pending"
            done, count = int(match.group(1)), int(match.group(2))
            init = [{"name": f"init-{i}", "ready": False, "restartCount": 0,
                     "state": {"terminated": {"exitCode": 0, "reason": "Completed"}} if i < done else
                     ({"running": {}} if i == done else {"waiting": {"reason": "PodInitializing"}})} for i in range(count)]
        pods.append(pod(name, OPERATOR_NS, node_name, owner if ds else None, statuses, init, phase))
    return pods


def run(daemonsets, nodes, pods, policies=()):
    stack = detect_stack(daemonsets, policies)
    return stack, component_matrix(stack, nodes, pods)


# -- GPU Operator ----------------------------------------------------------


def test_healthy_operator_from_real_listing_everything_runs():
    sets = operator_daemonsets()
    sets[-1]["metadata"]["name"] = "gpu-operator-node-feature-discovery-worker"
    n = h100_node()
    pods = pods_from_kubectl((REAL / "gpu-operator/get-pods-gpu-operator-healthy-with-mig-manager.txt").read_text(), "s4124-0073", sets)
    stack, matrix = run(sets, [n], pods, [cluster_policy()])
    assert stack.to_json() == {"kind": "gpu-operator", "install": "operator", "namespace": OPERATOR_NS,
                               "cluster_policy": {"name": "cluster-policy", "state": "ready", "message": None,
                                                  "kind": "ClusterPolicy", "since": None}}
    assert components_json(matrix["s4124-0073"]) == {c: RUNNING for c in COMPONENTS}
    plugin = matrix["s4124-0073"]["device-plugin"]
    assert plugin.pod == "gpu-operator/nvidia-device-plugin-daemonset-924x6"
    assert plugin.container == "nvidia-device-plugin"  # the main container, not the config-manager sidecar
    assert cluster_problems(stack) == [] and node_problems(n, matrix["s4124-0073"]) == []


def test_stuck_operator_from_real_listing():
    sets = operator_daemonsets(nfd=False)
    labels = {f"nvidia.com/gpu.deploy.{d}": "true" for _, d, _ in OPERATOR_DAEMONSETS if d != "mig-manager"}
    n = node("gpu-1", {"nvidia.com/gpu.present": "true", **labels})
    pods = pods_from_kubectl((REAL / "gpu-operator/get-pods-gpu-operator-stuck-init.txt").read_text(), "gpu-1", sets)
    policy = cluster_policy("notReady", "ClusterPolicy is not ready; states not ready: [state-driver state-container-toolkit]")
    stack, matrix = run(sets, [n], pods, [policy])
    row = matrix["gpu-1"]
    driver = row["driver"]
    assert (driver.state, driver.restarts, driver.ready, driver.last_termination) == (CRASH_LOOPING, 3, "0/2", "Error (exit 1)")
    assert driver.container == "nvidia-driver-ctr"
    assert (row["container-toolkit"].state, row["container-toolkit"].detail) == (NOT_READY, "Init:0/1")
    assert row["validator"].detail == "Init:0/4"
    assert row["mig-manager"].state == NOT_EXPECTED and "nvidia.com/gpu.deploy.mig-manager" in row["mig-manager"].detail
    assert row["nfd-worker"].state == NOT_EXPECTED
    [problem] = cluster_problems(stack)
    assert problem == Problem("operator-not-ready", "ClusterPolicy cluster-policy is notReady: ClusterPolicy is not ready; states not ready: [state-driver state-container-toolkit]")
    failing = node_problems(n, row)
    assert [p["code"] for p in failing] == ["component-failing"] * 5
    assert failing[0]["message"] == "driver crash-looping (nvidia-driver-daemonset-4rtiu: Running, 3 restarts, last Error (exit 1))"
    assert not any(p["message"].startswith("device-plugin") for p in failing)  # plugin-not-running covers it
    assert any(p["message"].startswith("device-plugin") for p in node_problems(n, row, skip=()))


def test_managed_cluster_with_driver_disabled_is_normal():
    sets = operator_daemonsets(skip=("nvidia-driver-daemonset",))
    n = h100_node()
    pods = [pod(f"{d['metadata']['name']}-abcde", OPERATOR_NS, "s4124-0073", d["metadata"]["name"],
                [running(c["name"]) for c in d["spec"]["template"]["spec"]["containers"]]) for d in sets]
    stack, matrix = run(sets, [n], pods, [cluster_policy(spec={"driver": {"enabled": False}})])
    row = matrix["s4124-0073"]
    assert row["driver"].state == NOT_EXPECTED and row["driver"].detail == "disabled in ClusterPolicy cluster-policy: spec.driver.enabled=false"
    assert all(row[c].state == RUNNING for c in COMPONENTS if c != "driver")
    assert node_problems(n, row) == []


def test_exporter_missing_where_its_daemonset_should_run():
    sets = operator_daemonsets()
    n = h100_node()
    pods = [pod(f"{d['metadata']['name']}-abcde", OPERATOR_NS, "s4124-0073", d["metadata"]["name"],
                [running(c["name"]) for c in d["spec"]["template"]["spec"]["containers"]])
            for d in sets if d["metadata"]["name"] != "nvidia-dcgm-exporter"]
    _, matrix = run(sets, [n], pods, [cluster_policy()])
    dcgm = matrix["s4124-0073"]["dcgm-exporter"]
    assert dcgm.state == MISSING and dcgm.detail == "no pod of DaemonSet gpu-operator/nvidia-dcgm-exporter on this node"
    assert node_problems(n, matrix["s4124-0073"]) == [{"code": "component-failing", "message": "dcgm-exporter missing: no pod of DaemonSet gpu-operator/nvidia-dcgm-exporter on this node"}]


def test_operand_without_daemonset_is_missing_where_the_deploy_label_asks_for_it():
    sets = operator_daemonsets(skip=("nvidia-dcgm-exporter",))
    _, matrix = run(sets, [h100_node()], [], [cluster_policy()])
    dcgm = matrix["s4124-0073"]["dcgm-exporter"]
    assert dcgm.state == MISSING and "nvidia.com/gpu.deploy.dcgm-exporter=true" in dcgm.detail


def test_deploy_label_false_means_not_expected_even_if_the_selector_would_match():
    sets = [daemonset("nvidia-dcgm-exporter", OPERATOR_NS, {"app": "nvidia-dcgm-exporter"})]
    n = node("g", {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.deploy.dcgm-exporter": "false"})
    _, matrix = run(sets, [n], [], [cluster_policy()])
    assert matrix["g"]["dcgm-exporter"].state == NOT_EXPECTED
    n2 = node("h", {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.deploy.operands": "false"})
    _, matrix = run(sets, [n2], [], [cluster_policy()])
    assert matrix["h"]["dcgm-exporter"].state == NOT_EXPECTED


def test_policy_without_status_and_several_policies():
    fresh = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"}, "spec": {}}
    stack = detect_stack([], [fresh])
    assert (stack.kind, stack.namespace, stack.cluster_policy.state) == ("gpu-operator", None, "unknown")
    assert cluster_problems(stack) == []
    ignored = cluster_policy("ignored", name="a-old-policy")
    stack = detect_stack(operator_daemonsets(), [ignored, cluster_policy("notReady", "x")])
    assert stack.cluster_policy.name == "cluster-policy"
    assert cluster_problems(stack)[0].code == "operator-not-ready"


def test_operator_found_by_its_daemonsets_when_clusterpolicies_cannot_be_listed():
    stack = detect_stack(operator_daemonsets(), [])
    assert (stack.kind, stack.install, stack.namespace, stack.cluster_policy) == ("gpu-operator", "operator", OPERATOR_NS, None)


def test_mig_config_failed_is_a_stuck_mig_change_not_a_failing_component():
    n = h100_node()
    n["metadata"]["labels"]["nvidia.com/mig.config.state"] = "failed"
    assert node_problems(n, {}) == []
    [found] = stuck.node_findings(node_from(n), stuck.StateMemory(lambda: 100.0), 100.0, stuck.StuckSettings())
    assert found.problem is not None and found.problem.code == "mig-stuck" and "all-balanced" in found.problem.message


def test_driver_found_by_component_label_whatever_its_name():
    ds = daemonset("nvidia-gpu-driver-ubuntu22.04-7c6d7bd5f6", OPERATOR_NS, {"app.kubernetes.io/component": "nvidia-driver", "app": "nvidia-gpu-driver-ubuntu22.04-7c6d7bd5f6"})
    assert classify_daemonset(ds) == ("driver", "operator")


# -- standalone device plugin ---------------------------------------------


def static_plugin() -> dict:
    return daemonset("nvidia-device-plugin-daemonset", "kube-system", {"name": "nvidia-device-plugin-ds"},
                     containers=("nvidia-device-plugin-ctr",), tolerations=GPU_TOLERATION)


def test_static_plugin_install():
    n = node("g", {"nvidia.com/gpu.present": "true"})
    p = pod("nvidia-device-plugin-daemonset-x1", "kube-system", "g", "nvidia-device-plugin-daemonset", [running("nvidia-device-plugin-ctr")])
    stack, matrix = run([static_plugin()], [n, node("cpu-only")], [p])
    assert stack.to_json() == {"kind": "device-plugin", "install": "static", "namespace": "kube-system", "cluster_policy": None}
    assert list(matrix) == ["g"]  # only GPU nodes
    assert components_json(matrix["g"]) == {c: (RUNNING if c == "device-plugin" else NOT_EXPECTED) for c in COMPONENTS}
    assert node_problems(n, matrix["g"]) == []


def test_helm_install_with_gfd_sharing_the_chart_labels_and_mps_ignored():
    chart = {"app.kubernetes.io/name": "nvidia-device-plugin", "app.kubernetes.io/instance": "nvdp"}
    plugin = daemonset("nvdp-nvidia-device-plugin", "nvidia-device-plugin", chart, containers=("nvidia-device-plugin-sidecar", "nvidia-device-plugin-ctr"))
    gfd = daemonset("nvdp-nvidia-device-plugin-gpu-feature-discovery", "nvidia-device-plugin", chart, containers=("gpu-feature-discovery-ctr",))
    mps = daemonset("nvdp-nvidia-device-plugin-mps-control-daemon", "nvidia-device-plugin",
                    {"app.kubernetes.io/name": "nvidia-device-plugin-mps-control-daemon", "app.kubernetes.io/instance": "nvdp"})
    assert classify_daemonset(plugin) == ("device-plugin", "helm")
    assert classify_daemonset(gfd) == ("gfd", "helm")
    assert classify_daemonset(mps) is None
    n = node("g", {"nvidia.com/gpu.present": "true"})
    crash = {"name": "nvidia-device-plugin-ctr", "ready": False, "restartCount": 7,
             "state": {"waiting": {"reason": "CrashLoopBackOff"}}, "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}
    p = pod("nvdp-nvidia-device-plugin-abcde", "nvidia-device-plugin", "g", "nvdp-nvidia-device-plugin", [running("nvidia-device-plugin-sidecar"), crash])
    stack, matrix = run([plugin, gfd, mps], [n], [p])
    assert (stack.kind, stack.install, stack.namespace) == ("device-plugin", "helm", "nvidia-device-plugin")
    state = matrix["g"]["device-plugin"]
    assert (state.state, state.container, state.detail, state.restarts) == (CRASH_LOOPING, "nvidia-device-plugin-ctr", "CrashLoopBackOff", 7)
    assert matrix["g"]["gfd"].state == MISSING


def test_gke_plugin_by_label_and_node_affinity():
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "cloud.google.com/gke-accelerator", "operator": "Exists"}]}]}}}
    ds = daemonset("nvidia-gpu-device-plugin-small-cos", "kube-system", {"k8s-app": "nvidia-gpu-device-plugin"}, affinity=affinity,
                   tolerations=[{"operator": "Exists", "effect": "NoSchedule"}])
    gke_gpu = node("gke-pool-gpu-1", {"cloud.google.com/gke-accelerator": "nvidia-l4"})
    gke_gpu["status"]["capacity"] = {"nvidia.com/gpu": "1"}
    labelled_other = node("other", {"nvidia.com/gpu.present": "true"})
    stack, matrix = run([ds], [gke_gpu, labelled_other], [])
    assert (stack.kind, stack.install) == ("device-plugin", "gke")
    assert matrix["gke-pool-gpu-1"]["device-plugin"].state == MISSING
    other = matrix["other"]["device-plugin"]
    assert other.state == NOT_EXPECTED and "node affinity" in other.detail


def test_several_plugins_on_one_node():
    sets = operator_daemonsets() + [static_plugin()]
    n = h100_node()
    pods = [pod("nvidia-device-plugin-daemonset-a", OPERATOR_NS, "s4124-0073", "nvidia-device-plugin-daemonset", [running("nvidia-device-plugin")]),
            pod("nvidia-device-plugin-daemonset-b", "kube-system", "s4124-0073", "nvidia-device-plugin-daemonset", [running("nvidia-device-plugin-ctr")])]
    stack, matrix = run(sets, [n], pods, [cluster_policy()])
    assert stack.kind == "gpu-operator" and [d.install for d in stack.plugins] == ["operator", "static"]
    several = [p for p in node_problems(n, matrix["s4124-0073"]) if p["code"] == "several-plugins"]
    assert several == [{"code": "several-plugins", "message": "several device plugins target this node: gpu-operator/nvidia-device-plugin-daemonset, kube-system/nvidia-device-plugin-daemonset"}]


def test_no_stack():
    n = node("g", {"nvidia.com/gpu.present": "true"})
    stack, matrix = run([daemonset("kube-proxy", "kube-system", {"k8s-app": "kube-proxy"})], [n], [])
    assert stack.to_json() == {"kind": "none", "install": None, "namespace": None, "cluster_policy": None}
    assert set(components_json(matrix["g"]).values()) == {NOT_EXPECTED}


# -- scheduling and pod states --------------------------------------------


def test_taints_and_tolerations():
    tainted = node("t", {"nvidia.com/gpu.present": "true"}, taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])
    plain = daemonset("x", "ns", {"name": "nvidia-device-plugin-ds"})
    ok, why = daemonset_targets(plain, tainted)
    assert not ok and why == "the node's taint nvidia.com/gpu:NoSchedule is not tolerated"
    assert daemonset_targets(static_plugin(), tainted) == (True, None)
    equal = daemonset("x", "ns", {}, tolerations=[{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}])
    assert daemonset_targets(equal, tainted)[0]
    wrong_value = daemonset("x", "ns", {}, tolerations=[{"key": "nvidia.com/gpu", "operator": "Equal", "value": "other"}])
    assert not daemonset_targets(wrong_value, tainted)[0]
    cordoned = node("c", taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}])
    assert daemonset_targets(plain, cordoned)[0]  # DaemonSet pods tolerate cordoning
    prefer = node("p", taints=[{"key": "dedicated", "effect": "PreferNoSchedule"}])
    assert daemonset_targets(plain, prefer)[0]


@pytest.mark.parametrize(("expr", "expected"), [
    ({"key": "gpu", "operator": "In", "values": ["a100", "h100"]}, True),
    ({"key": "gpu", "operator": "NotIn", "values": ["h100"]}, False),
    ({"key": "missing", "operator": "DoesNotExist"}, True),
    ({"key": "count", "operator": "Gt", "values": ["4"]}, True),
    ({"key": "count", "operator": "Lt", "values": ["4"]}, False),
])
def test_node_affinity_operators(expr, expected):
    n = node("n", {"gpu": "h100", "count": "8"})
    ds = daemonset("x", "ns", {}, affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}}})
    assert daemonset_targets(ds, n)[0] is expected


def test_node_selector_mismatch_says_which_label():
    ds = daemonset("x", "ns", {}, node_selector={"nvidia.com/gpu.deploy.driver": "true"})
    assert daemonset_targets(ds, node("n")) == (False, "its nodeSelector wants nvidia.com/gpu.deploy.driver=true")


def test_pod_states():
    oom = {"name": "c", "ready": True, "restartCount": 2, "state": {"running": {}}, "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}
    state = pod_component_state("gfd", pod("p", "ns", "n", "ds", [oom]))
    assert (state.state, state.restarts, state.last_termination) == (RUNNING, 2, "OOMKilled (exit 137)")
    terminating = pod("p", "ns", "n", "ds", [running("c")])
    terminating["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    assert (pod_component_state("gfd", terminating).state, pod_component_state("gfd", terminating).detail) == (NOT_READY, "Terminating")
    pulling = {"name": "c", "ready": False, "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff"}}}
    state = pod_component_state("gfd", pod("p", "ns", "n", "ds", [pulling], phase="Pending"))
    assert (state.state, state.detail) == (NOT_READY, "ImagePullBackOff")
    init_loop = {"name": "driver-validation", "ready": False, "restartCount": 5, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                 "lastState": {"terminated": {"exitCode": 14, "reason": "Error"}}}
    waiting = {"name": "nvidia-operator-validator", "ready": False, "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}
    state = pod_component_state("validator", pod("p", "ns", "n", "ds", [waiting], [init_loop], phase="Pending"))
    assert (state.state, state.detail, state.container, state.last_termination) == (CRASH_LOOPING, "Init:CrashLoopBackOff", "driver-validation", "Error (exit 14)")


def test_newest_live_pod_wins_during_a_rollout():
    old = pod("ds-old", "ns", "g", "nvidia-device-plugin-daemonset", [running("c")], created="2025-01-01T00:00:00Z")
    old["metadata"]["deletionTimestamp"] = "2025-01-02T00:00:00Z"
    new = pod("ds-new", "ns", "g", "nvidia-device-plugin-daemonset", [{"name": "c", "ready": False, "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}],
              phase="Pending", created="2025-01-02T00:00:00Z")
    ds = daemonset("nvidia-device-plugin-daemonset", "ns", {"name": "nvidia-device-plugin-ds"})
    _, matrix = run([ds], [node("g", {"nvidia.com/gpu.present": "true"})], [old, new])
    assert matrix["g"]["device-plugin"].pod == "ns/ds-new"


def test_gpu_node_detection():
    assert is_gpu_node(node("a", {"feature.node.kubernetes.io/pci-10de.present": "true"}))
    assert is_gpu_node(node("b", {"nvidia.com/gpu.product": "Tesla-T4"}))
    stale = node("c")
    stale["status"]["capacity"] = {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "0"}
    assert not is_gpu_node(stale)  # a resource at 0 is not a GPU the node has
    stale["status"]["capacity"]["nvidia.com/mig-1g.10gb"] = "7"
    assert is_gpu_node(stale)
