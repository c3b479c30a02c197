"""Every recipe of the seed (../shared/seed/seed-en.md), run verbatim with the real kubectl and jq against the simulator.

Each recipe runs through `bash -c` with `kubectl` defined as the real binary plus this test's own
--kubeconfig and --cache-dir, so the pipelines read exactly as the seed prints them.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from gputui.sim import builders as b
from gputui.ui.demo import BackgroundCluster

CUDA = "nvidia/cuda:12.4.0-base-ubuntu22.04"
PLUGIN_LABELS = {"name": "nvidia-device-plugin-ds"}

pytestmark = pytest.mark.skipif(not (shutil.which("kubectl") and shutil.which("jq")), reason="needs kubectl and jq (.ci/run installs them)")


def seed_cluster(*, busy_gpus: bool = False) -> list[dict[str, Any]]:
    """cp-1 (control plane), cpu-1, gpu-a (4x H100, one in use), gpu-b (2x H100, both used by a two-container pod),
    the static device plugin on the GPU nodes. busy_gpus: gpu-a's other three GPUs are in use too."""
    h100 = b.gfd_labels("NVIDIA-H100-80GB-HBM3", 4)
    nodes = [
        b.node("cp-1", 0, cpu=8, memory_gib=32, labels={"node-role.kubernetes.io/control-plane": ""},
               taints=[{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]),
        b.node("cpu-1", 1, cpu=32, memory_gib=128),
        b.node("gpu-a", 2, labels=h100, extra_resources={"nvidia.com/gpu": (4, 4)}),
        b.node("gpu-b", 3, labels=b.gfd_labels("NVIDIA-H100-80GB-HBM3", 2), extra_resources={"nvidia.com/gpu": (2, 2)}),
    ]
    index = {n["metadata"]["name"]: i for i, n in enumerate(nodes)}
    by_name = {n["metadata"]["name"]: n for n in nodes}
    pods = []

    def run(pod: dict[str, Any], node: str) -> None:
        b.set_running(pod, by_name[node], index[node], len(pods), 3600)
        pods.append(pod)

    plugin_example = None
    for node in ("gpu-a", "gpu-b"):
        plugin_example = b.pod(f"nvidia-device-plugin-daemonset-{b.suffix('seed', node)}", "kube-system",
                               [b.container("nvidia-device-plugin-ctr", "nvcr.io/nvidia/k8s-device-plugin:v0.15.0")],
                               labels=PLUGIN_LABELS, owner=("apps/v1", "DaemonSet", "nvidia-device-plugin-daemonset"),
                               tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
        run(plugin_example, node)
    run(b.pod("train-a", "ml", [b.container("trainer", "nvcr.io/nvidia/pytorch:24.03-py3", limits={"nvidia.com/gpu": 3 if busy_gpus else 1})]),
        "gpu-a")
    if busy_gpus:
        run(b.pod("busy", "ml", [b.container("trainer", "nvcr.io/nvidia/pytorch:24.03-py3", limits={"nvidia.com/gpu": 1})]), "gpu-a")
    run(b.pod("two-gpu-containers", "ml", [
        b.container("left", "nvcr.io/nvidia/pytorch:24.03-py3", limits={"nvidia.com/gpu": 1}),
        b.container("right", "nvcr.io/nvidia/pytorch:24.03-py3", limits={"nvidia.com/gpu": 1}),
    ]), "gpu-b")
    run(b.pod("web", "default", [b.container("nginx", "nginx:1.27", requests={"cpu": "100m"})]), "cpu-1")
    ds = b.daemonset("nvidia-device-plugin-daemonset", "kube-system", PLUGIN_LABELS, plugin_example)
    ds["status"] = b.daemonset_status(ds, pods)
    return [*nodes, ds, *pods]


class Shell:
    """Runs a seed pipeline with `kubectl` bound to one simulator, a kubeconfig and a private discovery cache."""

    def __init__(self, kubeconfig: Path, cache_dir: Path) -> None:
        self.prelude = f'kubectl() {{ command kubectl --kubeconfig "{kubeconfig}" --cache-dir "{cache_dir}" "$@"; }}\n'

    def __call__(self, pipeline: str, *, ok: bool = True, timeout: float = 30) -> str:
        done = subprocess.run(["bash", "-c", self.prelude + pipeline], capture_output=True, text=True, timeout=timeout)
        if ok:
            assert done.returncode == 0, f"{pipeline!r} failed ({done.returncode}): {done.stderr}"
        return done.stdout

    def until(self, pipeline: str, check: Callable[[str], bool], timeout: float = 15) -> str:
        deadline = time.monotonic() + timeout
        while True:
            out = self(pipeline, ok=False)
            if check(out):
                return out
            if time.monotonic() > deadline:
                raise AssertionError(f"{pipeline!r} never satisfied the check; last output:\n{out}")
            time.sleep(0.1)


@pytest.fixture(scope="module")
def sim() -> Any:
    with BackgroundCluster(scenario=seed_cluster(), speed=20) as cluster:
        yield cluster


@pytest.fixture
def sh(sim: Any, tmp_path: Path) -> Shell:
    return Shell(sim.kubeconfig_path, tmp_path / "cache")


def cells(output: str) -> list[list[str]]:
    return [re.split(r"\s{2,}|\t", line.strip()) for line in output.strip().splitlines()]


def test_capacity_and_allocatable_custom_columns(sh: Shell) -> None:
    out = sh(r"kubectl get nodes -o custom-columns='NODE:.metadata.name,GPU_CAPACITY:.status.capacity.nvidia\.com/gpu,GPU_ALLOCATABLE:.status.allocatable.nvidia\.com/gpu'")
    assert cells(out) == [["NODE", "GPU_CAPACITY", "GPU_ALLOCATABLE"], ["cp-1", "<none>", "<none>"], ["cpu-1", "<none>", "<none>"],
                          ["gpu-a", "4", "4"], ["gpu-b", "2", "2"]]


def test_describe_node_capacity(sh: Shell) -> None:
    out = sh("kubectl describe node gpu-a | grep -A 10 'Capacity:'")
    lines = out.splitlines()
    assert lines[0] == "Capacity:" and len(lines) == 11
    assert re.search(r"^  nvidia\.com/gpu:\s+4$", out, re.M)
    assert "Allocatable:" in lines and re.search(r"^  cpu:\s+96$", out, re.M)


def test_plugin_pods_wide(sh: Shell) -> None:
    rows = cells(sh("kubectl get pods -n kube-system -l name=nvidia-device-plugin-ds -o wide"))
    assert rows[0][:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    assert sorted(r[6] for r in rows[1:]) == ["gpu-a", "gpu-b"]
    assert all(r[1:4] == ["1/1", "Running", "0"] and r[0].startswith("nvidia-device-plugin-daemonset-") for r in rows[1:])


def test_grep_device_plugin_pods(sh: Shell) -> None:
    rows = cells(sh("kubectl get pods -A | grep -i device-plugin"))
    assert len(rows) == 2 and all(r[0] == "kube-system" and r[3] == "Running" for r in rows)


def test_plugin_logs_by_label(sh: Shell) -> None:
    out = sh.until("kubectl logs -n kube-system -l name=nvidia-device-plugin-ds --tail=50",
                   lambda o: o.count("Registered device plugin for 'nvidia.com/gpu' with Kubelet") == 2)
    assert "Retreiving plugins." in out and "Running with config:" in out
    assert len(out.splitlines()) <= 100  # at most 50 lines from each of the two pods


def test_jq_allocatable_per_node(sh: Shell) -> None:
    out = sh("""kubectl get nodes -o json | jq -r '.items[] | [.metadata.name, (.status.allocatable["nvidia.com/gpu"] // "0")] | @tsv'""")
    assert out.splitlines() == ["cp-1\t0", "cpu-1\t0", "gpu-a\t4", "gpu-b\t2"]


def test_jq_gpu_pods_prints_a_two_container_pod_twice(sh: Shell) -> None:
    """The seed's one-liner is wrong for pods with several GPU containers: it prints them once per container."""
    out = sh("""kubectl get pods -A -o json | jq -r '.items[] | select(.spec.containers[].resources.requests["nvidia.com/gpu"] != null) | [.metadata.namespace, .metadata.name] | @tsv'""")
    lines = out.splitlines()
    assert lines.count("ml\ttwo-gpu-containers") == 2
    assert lines.count("ml\ttrain-a") == 1 and "default\tweb" not in lines


def test_gpu_check_pod_pends_without_a_free_gpu_then_prints_nvidia_smi(tmp_path: Path) -> None:
    with BackgroundCluster(scenario=seed_cluster(busy_gpus=True), speed=20) as cluster:
        sh = Shell(cluster.kubeconfig_path, tmp_path / "cache")
        out = sh("""kubectl run gpu-check --restart=Never \\
--image=nvidia/cuda:12.4.0-base-ubuntu22.04 \\
--overrides='{"spec":{"containers":[{"name":"gpu-check","image":"nvidia/cuda:12.4.0-base-ubuntu22.04","command":["nvidia-smi"],"resources":{"limits":{"nvidia.com/gpu":1}}}]}}'""")
        assert out.strip() == "pod/gpu-check created"
        events = sh.until("kubectl get events --field-selector involvedObject.name=gpu-check -o custom-columns=REASON:.reason,MESSAGE:.message --no-headers",
                          lambda o: "FailedScheduling" in o)
        assert ("0/4 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
                "3 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: 1 Preemption is not helpful for scheduling, "
                "3 No preemption victims found for incoming pod.") in events
        assert sh("kubectl get pod gpu-check -o jsonpath='{.status.phase}'") == "Pending"

        sh("kubectl delete pod -n ml busy --wait=true")
        sh.until("kubectl get pod gpu-check -o jsonpath='{.status.phase}'", lambda o: o == "Succeeded")
        logs = sh("kubectl logs gpu-check")
        assert "Driver Version: 550.54.15" in logs and "CUDA Version: 12.4" in logs
        assert len(re.findall(r"^\|\s+0  NVIDIA H100 80GB HBM3\s+On  \|", logs, re.M)) == 1
        assert sh("kubectl get pod gpu-check -o jsonpath='{.spec.nodeName}'") == "gpu-a"
        reasons = sh("kubectl get events --field-selector involvedObject.name=gpu-check -o jsonpath='{range .items[*]}{.reason} {end}'").split()
        assert {"FailedScheduling", "Scheduled", "Pulling", "Pulled", "Created", "Started"} <= set(reasons)
