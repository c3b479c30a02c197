"""The simulated scheduler and kubelets, driven directly on a Store and a LogBook (no HTTP)."""
from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any, Callable

import pytest

from gputui.sim import builders as b
from gputui.sim.behaviour import nvidia_smi
from gputui.sim.behaviour.controllers import Controllers
from gputui.sim.behaviour.logs import LogBook
from gputui.sim.scenarios import populate
from gputui.sim.apiserver.store import Store

Obj = dict[str, Any]
FIXTURES = Path("/work/shared/fixtures/real")
CUDA = "nvidia/cuda:12.4.0-base-ubuntu22.04"
SPEED = 50.0


class Cluster:
    """What Controllers needs from a SimCluster: a store, a log book and a speed."""

    def __init__(self, objects: list[Obj], speed: float = SPEED) -> None:
        self.store, self.logs, self.speed = Store(), LogBook(), speed
        populate(self.store, objects)
        self.controllers = Controllers(self)

    def pod(self, name: str, ns: str = "default") -> Obj:
        return self.store.get("pods", ns, name)

    def events(self, name: str, ns: str = "default") -> list[Obj]:
        return [e for e in self.store.objects("events", ns) if e["involvedObject"]["name"] == name]

    def log(self, pod: str, container: str, ns: str = "default") -> str:
        return b"".join(self.logs.read(ns, pod, container) or []).decode()

    async def until(self, check: Callable[[], Any], timeout: float = 5.0) -> Any:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            result = check()
            if result:
                return result
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"condition not met within {timeout}s")
            await asyncio.sleep(0.01)


def gpu_node(name: str, index: int, gpus: int = 4, *, allocatable: int | None = None, **kw: Any) -> Obj:
    return b.node(name, index, labels=b.gfd_labels("NVIDIA-H100-80GB-HBM3", gpus),
                  extra_resources={"nvidia.com/gpu": (gpus, gpus if allocatable is None else allocatable)}, **kw)


def gpu_pod(name: str, gpus: int = 1, *, ns: str = "default", node: str | None = None, **kw: Any) -> Obj:
    command = kw.pop("command", ["sleep", "infinity"])
    restart = kw.pop("restart_policy", "Always")
    limits = {"nvidia.com/gpu": gpus} if gpus else None
    return b.pod(name, ns, [b.container("main", CUDA, command=command, limits=limits)], node_name=node,
                 restart_policy=restart, **kw)


@pytest.fixture
async def cluster_of() -> Any:
    started: list[Cluster] = []

    def make(objects: list[Obj], speed: float = SPEED) -> Cluster:
        cluster = Cluster(objects, speed)
        cluster.controllers.start()
        started.append(cluster)
        return cluster

    yield make
    for cluster in started:
        await cluster.controllers.stop()


def phase(cluster: Cluster, name: str, ns: str = "default") -> str:
    return (cluster.pod(name, ns).get("status") or {}).get("phase", "")


def scheduled_condition(pod: Obj) -> Obj:
    return next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")


# -- scheduling ----------------------------------------------------------------

async def test_binds_to_a_node_with_free_gpus_and_records_scheduled(cluster_of: Any) -> None:
    cluster = cluster_of([b.node("cpu-1", 0), gpu_node("gpu-1", 1), gpu_pod("busy", 4, node="gpu-1"), gpu_node("gpu-2", 2)])
    cluster.store.create("pods", gpu_pod("train", 2))
    node = await cluster.until(lambda: cluster.pod("train")["spec"].get("nodeName"))
    assert node == "gpu-2"  # gpu-1's four GPUs are held by `busy`
    assert scheduled_condition(cluster.pod("train"))["status"] == "True"
    scheduled = [e for e in cluster.events("train") if e["reason"] == "Scheduled"]
    assert scheduled[0]["message"] == "Successfully assigned default/train to gpu-2"
    # written through events.k8s.io/v1, as kube-scheduler writes: its reporter, no legacy source
    assert (scheduled[0]["reportingComponent"], scheduled[0]["action"], scheduled[0]["source"]) == ("default-scheduler", "Binding", {})


async def test_unschedulable_message_counts_reasons_like_the_real_scheduler(cluster_of: Any) -> None:
    nodes = [b.node("cp-1", 0, taints=[{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]),
             gpu_node("gpu-cordoned", 1, unschedulable=True)]
    pods = []
    for i in range(5):
        nodes.append(gpu_node(f"gpu-{i}", 2 + i, gpus=2))
        pods.append(gpu_pod(f"holder-{i}", 2, node=f"gpu-{i}"))
    cluster = cluster_of(nodes + pods)
    cluster.store.create("pods", gpu_pod("waiting", 1))
    await cluster.until(lambda: cluster.events("waiting"))
    expected = ("0/7 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
                "1 node(s) were unschedulable, 5 Insufficient nvidia.com/gpu. preemption: 0/7 nodes are available: "
                "2 Preemption is not helpful for scheduling, 5 No preemption victims found for incoming pod.")
    condition = scheduled_condition(cluster.pod("waiting"))
    assert (condition["status"], condition["reason"], condition["message"]) == ("False", "Unschedulable", expected)
    event = cluster.events("waiting")[0]
    assert (event["type"], event["reason"], event["message"], event.get("count"), event.get("series")) == (
        "Warning", "FailedScheduling", expected, None, None)
    assert (event["reportingComponent"], event["source"]) == ("default-scheduler", {})
    assert phase(cluster, "waiting") == "Pending"

    # A retry that fails again makes the one event a series; a freed GPU lets the pod in.
    cluster.store.mutate("nodes", "", "gpu-0", lambda n: n["metadata"]["labels"].update({"touched": "yes"}))
    await cluster.until(lambda: (cluster.events("waiting")[0].get("series") or {}).get("count") == 2)
    assert len([e for e in cluster.events("waiting") if e["reason"] == "FailedScheduling"]) == 1
    cluster.store.delete("pods", "default", "holder-3")
    assert await cluster.until(lambda: cluster.pod("waiting")["spec"].get("nodeName")) == "gpu-3"


async def test_taints_and_tolerations(cluster_of: Any) -> None:
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    cluster = cluster_of([gpu_node("gpu-1", 0, taints=[taint])])
    cluster.store.create("pods", gpu_pod("plain", 1))
    cluster.store.create("pods", gpu_pod("equal", 1, tolerations=[{"key": "nvidia.com/gpu", "operator": "Equal",
                                                                      "value": "present", "effect": "NoSchedule"}]))
    cluster.store.create("pods", gpu_pod("everything", 1, tolerations=[{"operator": "Exists"}]))
    await cluster.until(lambda: cluster.pod("equal")["spec"].get("nodeName") and cluster.pod("everything")["spec"].get("nodeName"))
    await cluster.until(lambda: cluster.events("plain"))
    assert "1 node(s) had untolerated taint {nvidia.com/gpu: present}" in scheduled_condition(cluster.pod("plain"))["message"]


async def test_not_ready_node_is_treated_as_tainted(cluster_of: Any) -> None:
    cluster = cluster_of([gpu_node("gpu-1", 0, ready="False")])
    cluster.store.create("pods", gpu_pod("p", 1))
    await cluster.until(lambda: cluster.events("p"))
    assert "1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }" in scheduled_condition(cluster.pod("p"))["message"]


async def test_node_selector_and_required_affinity(cluster_of: Any) -> None:
    cluster = cluster_of([gpu_node("gpu-a", 0), gpu_node("gpu-b", 1), gpu_node("gpu-c", 2)])

    def hostname(op: str, *values: str) -> Obj:
        return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": op, "values": list(values)}]}]}}}

    cluster.store.create("pods", gpu_pod("pinned", 1, affinity=hostname("In", "gpu-b")))
    cluster.store.create("pods", gpu_pod("not-a-or-b", 1, affinity=hostname("NotIn", "gpu-a", "gpu-b")))
    cluster.store.create("pods", gpu_pod("by-field", 1, affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-a"]}]}]}}}))
    cluster.store.create("pods", gpu_pod("selector", 1, node_selector={"kubernetes.io/hostname": "gpu-c"}))
    cluster.store.create("pods", gpu_pod("nowhere", 1, node_selector={"nvidia.com/gpu.product": "NVIDIA-B200"}))
    placed = await cluster.until(lambda: all(cluster.pod(n)["spec"].get("nodeName") for n in ("pinned", "not-a-or-b", "by-field", "selector"))
                                 and {n: cluster.pod(n)["spec"]["nodeName"] for n in ("pinned", "not-a-or-b", "by-field", "selector")})
    assert placed == {"pinned": "gpu-b", "not-a-or-b": "gpu-c", "by-field": "gpu-a", "selector": "gpu-c"}
    await cluster.until(lambda: cluster.events("nowhere"))
    assert scheduled_condition(cluster.pod("nowhere"))["message"].startswith(
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: "
        "3 Preemption is not helpful for scheduling.")


async def test_effective_request_counts_init_containers_and_sidecars(cluster_of: Any) -> None:
    init_heavy = b.pod("init-heavy", "default", [b.container("main", CUDA, limits={"nvidia.com/gpu": 1})],
                       init_containers=[b.container("warmup", CUDA, limits={"nvidia.com/gpu": 4})])
    sidecar = b.pod("sidecar", "default", [b.container("main", CUDA, limits={"nvidia.com/gpu": 3})],
                    init_containers=[b.container("proxy", CUDA, limits={"nvidia.com/gpu": 1}, restart_policy="Always")])
    assert b.pod_requests(init_heavy)["nvidia.com/gpu"] == 4
    assert b.pod_requests(sidecar)["nvidia.com/gpu"] == 4
    cluster = cluster_of([gpu_node("gpu-1", 0), gpu_pod("one", 1, node="gpu-1")])
    cluster.store.create("pods", init_heavy)
    await cluster.until(lambda: cluster.events("init-heavy"))
    assert "1 Insufficient nvidia.com/gpu" in scheduled_condition(cluster.pod("init-heavy"))["message"]


async def test_cpu_memory_and_pod_count_limits(cluster_of: Any) -> None:
    cluster = cluster_of([b.node("small", 0, cpu=4, memory_gib=8)])
    cluster.store.create("pods", b.pod("big", "default", [b.container("c", "nginx", requests={"cpu": "8", "memory": "16Gi"})]))
    await cluster.until(lambda: cluster.events("big"))
    assert "1 Insufficient cpu, 1 Insufficient memory" in scheduled_condition(cluster.pod("big"))["message"]


# -- kubelet -------------------------------------------------------------------

async def test_kubelet_starts_a_pod_with_complete_status_and_events(cluster_of: Any) -> None:
    cluster = cluster_of([gpu_node("gpu-1", 3)])
    pod = b.pod("web", "default", [b.container("app", "nginx:1.27"), b.container("side", "busybox:1.36", command=["sleep", "9999"])],
                init_containers=[b.container("setup", "busybox:1.36", command=["true"])])
    cluster.store.create("pods", pod)
    await cluster.until(lambda: phase(cluster, "web") == "Running" and all(c["ready"] for c in cluster.pod("web")["status"]["containerStatuses"]))
    status = cluster.pod("web")["status"]
    assert status["hostIP"] == "10.0.0.13" and status["podIP"].startswith("10.244.3.") and status["startTime"]
    init = status["initContainerStatuses"][0]
    assert init["state"]["terminated"]["reason"] == "Completed" and init["state"]["terminated"]["exitCode"] == 0
    for cs in status["containerStatuses"]:
        assert cs["ready"] and cs["started"] and cs["restartCount"] == 0 and "running" in cs["state"]
        assert cs["containerID"].startswith("containerd://") and "@sha256:" in cs["imageID"]
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "PodReadyToStartContainers": "True", "Initialized": "True", "Ready": "True", "ContainersReady": "True", "PodScheduled": "True"}
    reasons = [(e["reason"], e["involvedObject"].get("fieldPath", "")) for e in sorted(cluster.events("web"), key=lambda e: int(e["metadata"]["resourceVersion"]))]
    assert reasons[:5] == [("Scheduled", ""), ("Pulling", "spec.initContainers{setup}"), ("Pulled", "spec.initContainers{setup}"),
                           ("Created", "spec.initContainers{setup}"), ("Started", "spec.initContainers{setup}")]
    assert ("Started", "spec.containers{side}") in reasons
    assert ("Pulled", "spec.containers{side}") in reasons  # busybox was already on the node: "already present"
    from gputui.sim.behaviour.kubelet import Kubelet

    assert isinstance(cluster.controllers.kubelets["gpu-1"], Kubelet)


async def test_deletion_stops_containers_and_removes_the_pod(cluster_of: Any) -> None:
    cluster = cluster_of([gpu_node("gpu-1", 0), gpu_pod("doomed", 1, node="gpu-1")])
    await cluster.until(lambda: phase(cluster, "doomed") == "Running")
    cluster.store.create("pods", gpu_pod("next", 4))
    await cluster.until(lambda: cluster.events("next"))

    def mark(p: Obj) -> None:  # what the API server does on DELETE of a bound pod
        p["metadata"]["deletionTimestamp"] = b.rfc3339(b.utcnow())
        p["metadata"]["deletionGracePeriodSeconds"] = 30

    cluster.store.mutate("pods", "default", "doomed", mark)
    await cluster.until(lambda: cluster.store.find("pods", "default", "doomed") is None)
    assert any(e["reason"] == "Killing" and e["message"] == "Stopping container main" for e in cluster.events("doomed"))
    assert cluster.logs.read("default", "doomed", "main") is None
    # Its GPU is free again: the pending 4-GPU pod gets the node.
    assert await cluster.until(lambda: cluster.pod("next")["spec"].get("nodeName")) == "gpu-1"


async def test_nvidia_smi_pod_prints_its_gpus_and_succeeds(cluster_of: Any) -> None:
    cluster = cluster_of([gpu_node("gpu-1", 0, gpus=8)])
    cluster.store.create("pods", gpu_pod("smi", 2, command=["nvidia-smi"], restart_policy="Never"))
    await cluster.until(lambda: phase(cluster, "smi") == "Succeeded")
    state = cluster.pod("smi")["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (state["exitCode"], state["reason"]) == (0, "Completed")
    out = cluster.log("smi", "main")
    assert "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15    CUDA Version: 12.4     |" in out
    rows = re.findall(r"^\|\s+(\d+)  NVIDIA H100 80GB HBM3\s+On  \| (\S+) Off", out, re.M)
    assert [r[0] for r in rows] == ["0", "1"] and len({r[1] for r in rows}) == 2
    assert out.count("81559MiB") == 2 and "No running processes found" in out
    assert all(len(line) == nvidia_smi.WIDTH for line in out.splitlines()[1:] if line)


async def test_nvidia_smi_on_a_mig_slice_shows_the_mig_device(cluster_of: Any) -> None:
    layout = {"1g.10gb": 16, "2g.20gb": 8, "3g.40gb": 8}
    labels = b.gfd_labels("NVIDIA-H100-80GB-HBM3", 8, mig_strategy="mixed", mig_config="all-balanced")
    labels.update(b.mig_labels("NVIDIA-H100-80GB-HBM3", {p: n // 8 for p, n in layout.items()}))
    node = b.node("mig-1", 0, labels=labels, extra_resources={f"nvidia.com/mig-{p}": (n, n) for p, n in layout.items()})
    cluster = cluster_of([node])
    cluster.store.create("pods", b.pod("slice", "default", [b.container("main", CUDA, command=["nvidia-smi"],
                                                                         limits={"nvidia.com/mig-2g.20gb": 1})], restart_policy="Never"))
    await cluster.until(lambda: phase(cluster, "slice") == "Succeeded")
    out = cluster.log("slice", "main")
    assert "| MIG devices:" in out and "Enabled |" in out
    mig_rows = re.findall(r"^\|\s+0\s+(\d+)\s+0\s+0  \|\s+11MiB / 20096MiB  \| 32", out, re.M)
    assert mig_rows == ["3"]


def test_nvidia_smi_table_matches_the_real_layout() -> None:
    """The generator, fed the DGX H100 fixture's devices and readings, reproduces the real table line for line."""
    fixture = (FIXTURES / "nvidia-smi/dgx-h100-8x-mig-mixed-all-balanced.txt").read_text().splitlines()
    layout = {"1g.10gb": 16, "2g.20gb": 8, "3g.40gb": 8}
    labels = b.gfd_labels("NVIDIA-H100-80GB-HBM3", 8, mig_strategy="mixed")
    node = b.node("dgx", 0, labels=labels, extra_resources={f"nvidia.com/mig-{p}": (n, n) for p, n in layout.items()})
    gpus = nvidia_smi.NodeGpus(node)
    devices = [d for r in ("nvidia.com/mig-3g.40gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-1g.10gb") for d in gpus.devices(r)]
    readings = [(int(t), int(w)) for t, w in re.findall(r"N/A\s+(\d+)C\s+P0\s+(\d+)W", "\n".join(fixture))]
    physical, migs = gpus.resolve(devices)
    ours = nvidia_smi.render_table(physical, migs, "535.104.12", "12.2", mig_enabled=True, readings=readings).splitlines()
    assert re.fullmatch(r"\w{3} \w{3} \d\d \d\d:\d\d:\d\d \d{4}\s*", ours[0])  # the date line nvidia-smi starts with
    ours = ours[2:]  # the fixture lacks the date and the top border
    # GPUs 4 and 5 of that DGX happen to number their instances differently (1, 5, 13, 14): compare the GI column apart.
    gi = re.compile(r"^(\|\s+\d+)\s+\d+(\s+\d+\s+\d+  \|)")
    assert [gi.sub(r"\1 GI\2", line) for line in ours] == [gi.sub(r"\1 GI\2", line) for line in fixture]


async def test_driver_broken_node_fails_nvidia_smi_with_the_real_error(cluster_of: Any) -> None:
    cluster = cluster_of([gpu_node("gpu-1", 0, annotations={"sim.gputui.io/fault": "driver-broken"})])
    cluster.store.create("pods", gpu_pod("smi", 1, command=["nvidia-smi"], restart_policy="Never"))
    await cluster.until(lambda: phase(cluster, "smi") == "Failed")
    term = cluster.pod("smi")["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (9, "Error")
    assert cluster.log("smi", "main") == nvidia_smi.DRIVER_FAILURE + "\n"


async def test_image_pull_fault_gives_errimagepull_then_backoff(cluster_of: Any) -> None:
    cluster = cluster_of([gpu_node("gpu-1", 0, annotations={"sim.gputui.io/fault": "image-pull"})])
    cluster.store.create("pods", gpu_pod("pull", 1))
    reasons = set()

    def seen_backoff() -> bool:
        reasons.add(cluster.pod("pull")["status"].get("containerStatuses", [{}])[0].get("state", {}).get("waiting", {}).get("reason"))
        return "ImagePullBackOff" in reasons

    await cluster.until(seen_backoff)
    assert "ErrImagePull" in reasons or any(e["message"] == "Error: ErrImagePull" for e in cluster.events("pull"))
    assert phase(cluster, "pull") == "Pending"
    failed = [e["message"] for e in cluster.events("pull") if e["reason"] == "Failed"]
    assert any(m.startswith(f'Failed to pull image "{CUDA}": failed to pull and unpack image "docker.io/{CUDA}": '
                            'failed to resolve reference') and "registry-1.docker.io" in m for m in failed)
    assert "Error: ImagePullBackOff" in failed


async def test_runtime_hook_fault_fails_gpu_containers(cluster_of: Any) -> None:
    cluster = cluster_of([gpu_node("gpu-1", 0, annotations={"sim.gputui.io/fault": "runtime-hook"})])
    cluster.store.create("pods", gpu_pod("once", 1, command=["nvidia-smi"], restart_policy="Never"))
    cluster.store.create("pods", gpu_pod("again", 1))
    cluster.store.create("pods", gpu_pod("cpu-only", 0))
    await cluster.until(lambda: phase(cluster, "once") == "Failed")
    term = cluster.pod("once")["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (128, "StartError")
    assert "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1" in term["message"]
    assert term["message"].startswith("failed to create containerd task:")
    await cluster.until(lambda: cluster.pod("again")["status"]["containerStatuses"][0]["state"].get("waiting", {}).get("reason")
                        == "RunContainerError")
    await cluster.until(lambda: phase(cluster, "cpu-only") == "Running")
    assert any(e["reason"] == "Failed" and "nvidia-container-cli" in e["message"] for e in cluster.events("again"))


async def test_active_deadline_fails_the_pod(cluster_of: Any) -> None:
    cluster = cluster_of([gpu_node("gpu-1", 0)], speed=100)
    cluster.store.create("pods", gpu_pod("slow", 1, active_deadline=5))
    await cluster.until(lambda: phase(cluster, "slow") == "Failed")
    status = cluster.pod("slow")["status"]
    assert (status["reason"], status["message"]) == ("DeadlineExceeded", "Pod was active on the node longer than the specified deadline")
    assert any(e["reason"] == "DeadlineExceeded" for e in cluster.events("slow"))


async def test_crashing_container_backs_off_with_growing_restarts(cluster_of: Any) -> None:
    cluster = cluster_of([gpu_node("gpu-1", 0)], speed=200)
    cluster.store.create("pods", gpu_pod("crashy", 0, annotations={"sim.gputui.io/run-seconds": "1", "sim.gputui.io/exit-code": "2"}))
    cluster.store.create("pods", gpu_pod("oneshot", 0, restart_policy="Never",
                                         annotations={"sim.gputui.io/run-seconds": "1", "sim.gputui.io/exit-code": "3"}))
    await cluster.until(lambda: cluster.pod("crashy")["status"].get("containerStatuses", [{}])[0].get("restartCount", 0) >= 2, timeout=10)
    cs = cluster.pod("crashy")["status"]["containerStatuses"][0]
    assert cs["lastState"]["terminated"]["exitCode"] == 2
    assert any(e["reason"] == "BackOff" for e in cluster.events("crashy"))
    assert phase(cluster, "crashy") == "Running"
    await cluster.until(lambda: phase(cluster, "oneshot") == "Failed")


async def test_not_ready_node_kubelet_does_nothing(cluster_of: Any) -> None:
    cluster = cluster_of([gpu_node("gpu-1", 0, ready="Unknown")])
    # Tolerating the lost node's NoExecute taint for good (as a DaemonSet's pod does): never evicted from it.
    forever = [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}]
    created = cluster.store.create("pods", gpu_pod("stuck", 1, node="gpu-1", tolerations=forever))
    await asyncio.sleep(0.2)
    assert cluster.pod("stuck")["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert cluster.pod("stuck")["status"] == {"phase": "Pending", "qosClass": "Burstable"}
    # When the node comes back, its kubelet takes the pod up.
    cluster.store.mutate("nodes", "", "gpu-1", lambda n: [c.update(status="True") for c in n["status"]["conditions"] if c["type"] == "Ready"])
    await cluster.until(lambda: phase(cluster, "stuck") == "Running")


async def test_device_plugin_logs_registration_unhealthy_devices_and_keeps_logging(cluster_of: Any) -> None:
    node = gpu_node("gpu-1", 0, gpus=8, allocatable=7)
    plugin = b.pod("nvidia-device-plugin-daemonset-abcde", "kube-system",
                   [b.container("nvidia-device-plugin-ctr", "nvcr.io/nvidia/k8s-device-plugin:v0.15.0")],
                   labels={"name": "nvidia-device-plugin-ds"}, node_name="gpu-1")
    cluster = cluster_of([node, plugin], speed=200)
    name = plugin["metadata"]["name"]
    await cluster.until(lambda: "Registered device plugin" in cluster.log(name, "nvidia-device-plugin-ctr", "kube-system"))
    text = cluster.log(name, "nvidia-device-plugin-ctr", "kube-system")
    assert re.search(r"^I\d{4} \d\d:\d\d:\d\d\.\d{6}       1 server\.go:\d+\] Registered device plugin for 'nvidia.com/gpu' with Kubelet$", text, re.M)
    unhealthy = nvidia_smi.NodeGpus(node).unhealthy_devices("nvidia.com/gpu")
    assert len(unhealthy) == 1 and f"'nvidia.com/gpu' device marked unhealthy: {unhealthy[0]}" in text
    assert '"migStrategy": "single"' in text  # the startup config dump
    lines_before = len(text.splitlines())
    await cluster.until(lambda: len(cluster.log(name, "nvidia-device-plugin-ctr", "kube-system").splitlines()) > lines_before)


async def test_device_plugin_crash_loops_without_a_driver(cluster_of: Any) -> None:
    node = gpu_node("gpu-1", 0, annotations={"sim.gputui.io/fault": "driver-broken"})
    plugin = b.pod("plugin", "kube-system", [b.container("nvidia-device-plugin-ctr", "nvcr.io/nvidia/k8s-device-plugin:v0.15.0")],
                   node_name="gpu-1")
    cluster = cluster_of([node, plugin], speed=200)
    await cluster.until(lambda: cluster.pod("plugin", "kube-system")["status"].get("containerStatuses", [{}])[0]
                        .get("state", {}).get("waiting", {}).get("reason") == "CrashLoopBackOff")
    assert "failed to initialize NVML" in cluster.log("plugin", "nvidia-device-plugin-ctr", "kube-system")
