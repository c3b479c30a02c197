"""The real kubectl against the simulated API server: printing, selectors, describe, logs, writes, errors."""
from __future__ import annotations

import json
import re

import pytest

from gputui.ui.demo import BackgroundCluster
from tests.sim.sim_api_objects import small_cluster


@pytest.fixture(scope="module")
def sim():
    with BackgroundCluster(scenario=small_cluster(), faults=True, run_controllers=False) as cluster:
        yield cluster


def rows(output: str) -> list[list[str]]:
    """Table output split into cells (columns are separated by 2+ spaces)."""
    return [re.split(r"\s{2,}", line.strip()) for line in output.strip().splitlines()]


def test_get_nodes_prints_server_side_table(kubectl):
    table = rows(kubectl("get", "nodes"))
    assert table[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    by_name = {r[0]: r for r in table[1:]}
    assert by_name["gpu-1"] == ["gpu-1", "Ready", "worker", "3d", "v1.34.1"]
    assert by_name["gpu-3"][1] == "Ready,SchedulingDisabled"


def test_get_nodes_wide(kubectl):
    table = rows(kubectl("get", "nodes", "-o", "wide"))
    assert table[0][:7] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "EXTERNAL-IP"]
    gpu2 = next(r for r in table if r[0] == "gpu-2")
    assert gpu2[5:] == ["10.0.0.2", "<none>", "Ubuntu 22.04.4 LTS", "5.15.0-1063-nvidia", "containerd://1.7.27"]


def test_get_pods_all_namespaces(kubectl):
    table = rows(kubectl("get", "pods", "-A"))
    assert table[0] == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    by_name = {r[1]: r for r in table[1:]}
    assert by_name["infer-0"][:4] == ["ml", "infer-0", "2/2", "Running"]
    assert by_name["waiting-0"][2:5] == ["0/1", "Pending", "0"]
    # the last restart was 2 minutes before the module started (kubectl leaves out 0 seconds: `6m`)
    assert re.fullmatch(r"3 \(\d+m(\d+s)? ago\)", by_name["train-0"][4])
    assert {"nvidia-device-plugin-ds-abcde", "nvidia-device-plugin-ds-fghij"} <= set(by_name)


def test_get_pods_wide_by_label_in_kube_system(kubectl):
    table = rows(kubectl("get", "pods", "-n", "kube-system", "-l", "name=nvidia-device-plugin-ds", "-o", "wide"))
    assert table[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES"]
    assert sorted(r[6] for r in table[1:]) == ["gpu-1", "gpu-2"]


def test_get_pods_json_is_a_list_of_complete_objects(kubectl):
    doc = json.loads(kubectl("get", "pods", "-A", "-o", "json"))
    assert doc["kind"] == "List"
    names = {p["metadata"]["name"] for p in doc["items"]}
    assert {"train-0", "infer-0", "waiting-0"} <= names
    assert all(p["metadata"]["uid"] and p["metadata"]["resourceVersion"] for p in doc["items"])


def test_seed_custom_columns_for_gpu_capacity(kubectl):
    out = kubectl(
        "get", "nodes", "-o",
        r"custom-columns=NODE:.metadata.name,GPU_CAPACITY:.status.capacity.nvidia\.com/gpu,GPU_ALLOCATABLE:.status.allocatable.nvidia\.com/gpu",
    )
    table = rows(out)
    assert table[0] == ["NODE", "GPU_CAPACITY", "GPU_ALLOCATABLE"]
    assert ["gpu-1", "8", "8"] in table


def test_label_selector_set_and_inequality(kubectl):
    out = kubectl("get", "pods", "-n", "ml", "-l", "tier in (gpu),app!=infer", "-o", "name")
    assert sorted(out.split()) == ["pod/train-0", "pod/waiting-0"]
    out = kubectl("get", "pods", "-A", "-l", "!tier", "-o", "name")
    assert "pod/train-0" not in out and "pod/nvidia-device-plugin-ds-abcde" in out


def test_field_selectors(kubectl):
    unbound = kubectl("get", "pods", "-A", "--field-selector", "spec.nodeName=", "-o", "name")
    assert unbound.split() == ["pod/waiting-0"]
    on_gpu2 = kubectl("get", "pods", "-A", "--field-selector", "spec.nodeName=gpu-2,status.phase!=Failed", "-o", "name")
    assert sorted(on_gpu2.split()) == ["pod/infer-0", "pod/nvidia-device-plugin-ds-fghij"]
    not_running = kubectl("get", "pods", "-A", "--field-selector", "status.phase!=Running", "-o", "name")
    assert not_running.split() == ["pod/waiting-0"]


def test_unknown_field_selector_is_a_bad_request(kubectl):
    done = kubectl.run("get", "pods", "--field-selector", "spec.gpus=1")
    assert done.returncode == 1
    assert "Error from server (BadRequest)" in done.stderr and "field label not supported: spec.gpus" in done.stderr


def test_get_events_and_event_field_selectors(kubectl):
    table = rows(kubectl("get", "events", "-n", "ml"))
    assert table[0] == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert table[1][1:4] == ["Warning", "FailedScheduling", "pod/waiting-0"]
    assert table[1][4].startswith("0/3 nodes are available")
    out = kubectl("get", "events", "-A", "--field-selector", "involvedObject.name=waiting-0,reason=FailedScheduling", "-o", "name")
    assert out.split() == ["event/waiting-0.1"]


def test_describe_node(kubectl):
    out = kubectl("describe", "node", "gpu-1")
    capacity = out[out.index("Capacity:"):]
    assert re.search(r"nvidia\.com/gpu:\s+8", capacity)
    pods = out[out.index("Non-terminated Pods:"):]
    assert "(2 in total)" in pods and "train-0" in pods and "nvidia-device-plugin-ds-abcde" in pods
    assert "NodeReady" in out[out.index("Events:"):]


def test_get_daemonsets(kubectl):
    table = rows(kubectl("get", "ds", "-A"))
    assert table[0] == ["NAMESPACE", "NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE SELECTOR", "AGE"]
    assert table[1][:8] == ["kube-system", "nvidia-device-plugin-ds", "2", "2", "2", "2", "2", "nvidia.com/gpu.present=true"]


def test_logs_tail_and_container_choice(sim, kubectl):
    def write_logs():
        for i in range(5):
            sim.sim.logs.append("ml", "train-0", "trainer", f"step {i}")
        sim.sim.logs.append("ml", "infer-0", "server", "serving on :8000")
        sim.sim.logs.append("ml", "infer-0", "metrics", "exporter up")

    sim.call(write_logs)
    assert kubectl("logs", "-n", "ml", "train-0", "--tail=2") == "step 3\nstep 4\n"
    assert kubectl("logs", "-n", "ml", "infer-0", "-c", "metrics") == "exporter up\n"
    bad = kubectl.run("logs", "-n", "ml", "infer-0", "-c", "nope")
    assert bad.returncode == 1 and "container nope is not valid for pod infer-0" in bad.stderr
    labelled = kubectl("logs", "-n", "ml", "-l", "app=train", "--tail=1")
    assert labelled == "step 4\n"


def test_logs_of_a_container_not_started(kubectl):
    kubectl("run", "not-started", "--restart=Never", "--image=busybox", "--overrides", json.dumps({"spec": {"nodeName": "gpu-1"}}))
    done = kubectl.run("logs", "not-started")
    assert done.returncode == 1
    assert 'container "not-started" in pod "not-started" is waiting to start: ContainerCreating' in done.stderr
    kubectl("delete", "pod", "not-started", "--grace-period=0", "--force")


def test_run_defaults_requests_and_resets_status(kubectl):
    overrides = {"spec": {"containers": [{
        "name": "gpu-check", "image": "nvidia/cuda:12.4.0-base-ubuntu22.04", "command": ["nvidia-smi"],
        "resources": {"limits": {"nvidia.com/gpu": 1}},
    }]}}
    kubectl("run", "gpu-check", "--restart=Never", "--image=nvidia/cuda:12.4.0-base-ubuntu22.04", "--overrides", json.dumps(overrides))
    pod = json.loads(kubectl("get", "pod", "gpu-check", "-o", "json"))
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "1"}
    assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    assert pod["metadata"]["creationTimestamp"]
    again = kubectl.run("run", "gpu-check", "--restart=Never", "--image=busybox")
    assert again.returncode == 1 and 'pods "gpu-check" already exists' in again.stderr
    # Unbound: removed at once, so kubectl's wait for the deletion ends.
    assert kubectl("delete", "pod", "gpu-check").strip() == 'pod "gpu-check" deleted'
    assert kubectl.run("get", "pod", "gpu-check").returncode == 1


def test_delete_bound_pod_marks_it_terminating(kubectl):
    kubectl("run", "doomed", "--restart=Never", "--image=busybox", "--overrides", json.dumps({"spec": {"nodeName": "gpu-2"}}))
    kubectl("delete", "pod", "doomed", "--wait=false")
    pod = json.loads(kubectl("get", "pod", "doomed", "-o", "json"))
    assert pod["metadata"]["deletionTimestamp"] and pod["metadata"]["deletionGracePeriodSeconds"] == 30
    assert rows(kubectl("get", "pod", "doomed"))[1][2] == "Terminating"
    kubectl("delete", "pod", "doomed", "--grace-period=0", "--force")
    assert 'pods "doomed" not found' in kubectl.run("get", "pod", "doomed").stderr


def test_label_cordon_and_status_patch(kubectl):
    kubectl("label", "node", "gpu-2", "team=ml")
    kubectl("cordon", "gpu-2")
    node = json.loads(kubectl("get", "node", "gpu-2", "-o", "json"))
    assert node["metadata"]["labels"]["team"] == "ml" and node["spec"]["unschedulable"] is True
    kubectl("uncordon", "gpu-2")
    kubectl("label", "node", "gpu-2", "team-")
    kubectl("patch", "node", "gpu-2", "--subresource=status", "--type=merge", "-p",
            json.dumps({"status": {"allocatable": {"nvidia.com/gpu": "7"}}}))
    node = json.loads(kubectl("get", "node", "gpu-2", "-o", "json"))
    assert "team" not in node["metadata"]["labels"] and not node["spec"].get("unschedulable")
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "7" and node["status"]["capacity"]["nvidia.com/gpu"] == "8"


def test_not_found_and_forbidden_errors(sim, kubectl):
    missing = kubectl.run("get", "pod", "nope")
    assert missing.returncode == 1
    assert missing.stderr.strip() == 'Error from server (NotFound): pods "nope" not found'
    sim.call(sim.sim.faults.fail, "pods", 403)
    try:
        forbidden = kubectl.run("get", "pods", "-A")
    finally:
        sim.call(sim.sim.faults.clear, "pods")
    assert forbidden.returncode == 1
    assert forbidden.stderr.strip() == (
        'Error from server (Forbidden): pods is forbidden: User "system:serviceaccount:gputui:viewer" '
        'cannot list resource "pods" in API group "" at the cluster scope'
    )
    assert "train-0" in kubectl("get", "pods", "-A")
