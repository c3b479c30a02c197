"""The GPU stack in the model and the report, against the simulator's stack scenarios and the demo:
install detection, the component matrix, operator-not-ready, component-failing, several-plugins,
xid-errors, DRA devices and DRA-held GPUs, live changes, and what kubectl says of the same cluster."""
from __future__ import annotations

import asyncio
import contextlib
import json
import re
from typing import AsyncIterator

import pytest
import pytest_asyncio

from gputui.kube.config import connect
from gputui.kube.model import CLUSTERPOLICIES, METRICS, RESOURCECLAIMS, ClusterModel
from gputui.kube.stack import (
    COMPONENTS,
    CRASH_LOOPING,
    MISSING,
    NOT_EXPECTED,
    NOT_READY,
    RUNNING,
)
from gputui.kube.tables import Change
from gputui.sim import SimCluster
from gputui.sim.scenarios import stacks
from tests.model.scenario import FAST, until
from tests.model.test_report import report_of

pytestmark = pytest.mark.asyncio(loop_scope="module")
OPERATOR_NS = "gpu-operator"


@contextlib.asynccontextmanager
async def cluster(scenario, **sim_options) -> AsyncIterator[tuple[SimCluster, ClusterModel]]:
    """A static simulated cluster (no controllers: the stored state is the truth) and a synced model
    that has read every DCGM exporter once."""
    sim_options.setdefault("run_controllers", False)
    async with SimCluster(scenario, **sim_options) as sim:
        async with await connect(str(sim.kubeconfig_path)) as conn:
            model = ClusterModel(conn.api, metrics_timeout=2.0, **FAST)
            async with model:
                assert await model.wait_synced(10)
                await model.metrics.poll_once()
                yield sim, model


def codes(model: ClusterModel, node: str) -> list[str]:
    return [p.code for p in model.summary(node).problems]


def states(model: ClusterModel, node: str) -> dict[str, str]:
    return {name: c.state for name, c in model.components(node).items()}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def demo():
    async with cluster("demo", faults=True) as (sim, model):
        yield sim, model


@pytest.fixture(scope="module")
def kubectl_demo(demo, make_kubectl):
    return make_kubectl(demo[0].kubeconfig_path)


# -- install styles ---------------------------------------------------------------------

@pytest.mark.parametrize(("scenario", "kind", "install", "namespace", "running"), [
    (stacks.gpu_operator_healthy, "gpu-operator", "operator", OPERATOR_NS, set(COMPONENTS)),
    (stacks.static_plugin, "device-plugin", "static", "kube-system", {"device-plugin"}),
    (stacks.helm_plugin, "device-plugin", "helm", "nvidia-device-plugin", {"device-plugin", "gfd"}),
    (stacks.gke_plugin, "device-plugin", "gke", "kube-system", {"device-plugin"}),
    (stacks.two_plugins, "device-plugin", "static", "kube-system", {"device-plugin", "gfd"}),  # the first of two
    (stacks.no_gpu_stack, "none", None, None, set()),
])
async def test_each_install_style_is_detected_with_its_components(scenario, kind, install, namespace, running):
    async with cluster(scenario()) as (_, model):
        found = model.stack()
        assert (found.kind, found.install, found.namespace) == (kind, install, namespace)
        assert model.cluster_policy_state() == ("ready" if kind == "gpu-operator" else "none")
        assert model.cluster_problems() == []
        matrix = model.component_matrix()
        assert set(matrix) == {"gpu-1", "gpu-2"}  # GPU nodes only, not cpu-1
        for node in matrix:
            assert states(model, node) == {c: RUNNING if c in running else NOT_EXPECTED for c in COMPONENTS}
            several = [p.message for p in model.summary(node).problems if p.code == "several-plugins"]
            if scenario is stacks.two_plugins:
                assert [p.install for p in found.plugins] == ["static", "helm"]
                assert several == ["several device plugins target this node: "
                                   "kube-system/nvidia-device-plugin-daemonset, nvidia-device-plugin/nvdp-nvidia-device-plugin"]
            else:
                assert several == []
            assert "component-failing" not in codes(model, node)
        if kind == "gpu-operator":
            metrics = model.node_metrics("gpu-2")
            assert metrics.current and len(metrics.readings) == 8
        else:
            assert model.node_metrics("gpu-1").error == "no DCGM exporter on this node"


async def test_managed_components_point_at_their_pods_and_log_containers():
    async with cluster(stacks.gpu_operator_healthy()) as (_, model):
        plugin = model.components("gpu-1")["device-plugin"]
        assert plugin.pod.startswith(f"{OPERATOR_NS}/nvidia-device-plugin-daemonset-")
        assert plugin.container == "nvidia-device-plugin" and plugin.ready == "2/2"
        assert plugin.daemonsets == (f"{OPERATOR_NS}/nvidia-device-plugin-daemonset",)
        assert model.mig_config("gpu-1") is not None


# -- failures -----------------------------------------------------------------------------

async def test_operator_not_ready_and_the_driver_crash_looping_on_one_node():
    async with cluster(stacks.operator_driver_crashloop()) as (_, model):
        [problem] = model.cluster_problems()
        assert problem.code == "operator-not-ready" and "state-driver" in problem.message
        assert model.cluster_policy_state() == "notReady"
        driver = model.components("gpu-2")["driver"]
        assert (driver.state, driver.restarts, driver.last_termination) == (CRASH_LOOPING, 9, "Error (exit 1)")
        assert driver.container == "nvidia-driver-ctr"
        failing = [p.message for p in model.summary("gpu-2").problems if p.code == "component-failing"]
        assert failing[0].startswith("driver crash-looping (nvidia-driver-daemonset-") and "9 restarts" in failing[0]
        assert states(model, "gpu-2")["container-toolkit"] == NOT_READY  # waiting in Init for the driver
        assert "component-failing" not in codes(model, "gpu-1")
        assert states(model, "gpu-1") == {c: RUNNING for c in COMPONENTS}
        # the exporter of gpu-2 waits in Init: nothing to read there, said in place
        assert model.node_metrics("gpu-2").error.startswith("exporter not running on this node (dcgm-exporter not-ready")
        assert model.node_metrics("gpu-1").current


async def test_exporter_missing_where_it_should_run():
    async with cluster(stacks.exporter_missing()) as (_, model):
        exporter = model.components("gpu-2")["dcgm-exporter"]
        assert exporter.state == MISSING
        assert exporter.detail == f"no pod of DaemonSet {OPERATOR_NS}/nvidia-dcgm-exporter on this node"
        assert f"dcgm-exporter missing: no pod of DaemonSet {OPERATOR_NS}/nvidia-dcgm-exporter on this node" in [
            p.message for p in model.summary("gpu-2").problems]
        assert model.node_metrics("gpu-2").error.startswith("exporter not running on this node (dcgm-exporter missing")
        assert model.node_metrics("gpu-1").current and "component-failing" not in codes(model, "gpu-1")
        assert model.cluster_problems()[0].code == "operator-not-ready"


async def test_injected_xids_become_the_xid_errors_verdict_and_reach_the_report():
    async with cluster(stacks.xid_injected()) as (sim, model):
        problems = {n: [p.message for p in model.summary(n).problems if p.code == "xid-errors"] for n in ("gpu-1", "gpu-2")}
        assert problems == {"gpu-1": ["last XID GPU 1: XID 79 (GPU has fallen off the bus)"],
                            "gpu-2": ["last XID GPU 0: XID 31 (GPU memory page fault, usually the application)"]}
        rc, out, err = await report_of("--kubeconfig", str(sim.kubeconfig_path), "-o", "json")
        assert rc == 1, err
        data = json.loads(out)
        policy = data["stack"].pop("cluster_policy")
        assert data["stack"] == {"kind": "gpu-operator", "install": "operator", "namespace": OPERATOR_NS}
        assert policy.pop("since") > 0  # its Ready condition's lastTransitionTime
        assert policy == {"name": "cluster-policy", "state": "ready", "message": None, "kind": "ClusterPolicy"}
        nodes = {n["name"]: n for n in data["nodes"]}
        assert nodes["gpu-1"]["components"] == {c: "running" for c in COMPONENTS}
        assert "gpus" not in nodes["cpu-1"] and nodes["cpu-1"]["components"] == {}
        gpus = nodes["gpu-1"]["gpus"]
        assert [g["index"] for g in gpus] == list(range(8))
        for g in gpus:
            assert set(g) == {"index", "uuid", "model", "util", "fb_used_mib", "fb_free_mib", "temp_c", "power_w", "xid", "pod"}
            assert g["model"] == "NVIDIA H100 80GB HBM3" and g["uuid"].startswith("GPU-")
        assert [g["xid"] for g in gpus] == [None, 79, None, None, None, None, None, None]
        assert {g["pod"] for g in gpus} == {"ml/llm-train-0", None}
        assert sum(1 for g in gpus if g["pod"] == "ml/llm-train-0") == 4
        rc, table, _ = await report_of("--kubeconfig", str(sim.kubeconfig_path))
        assert "GPU stack: gpu-operator in gpu-operator; ClusterPolicy cluster-policy: ready" in table
        assert "gpu-1: xid-errors: last XID GPU 1: XID 79" in table


# -- the demo: live changes, DRA, kubectl agreeing -----------------------------------------------

async def test_demo_operator_state_agrees_with_kubectl(demo, kubectl_demo):
    _, model = demo
    out = await asyncio.to_thread(kubectl_demo, "get", "clusterpolicies")
    name, status = re.split(r"\s{2,}", out.splitlines()[1])[:2]
    policy = model.stack().cluster_policy
    assert (policy.name, policy.state) == (name, status) == ("cluster-policy", "notReady")
    message = await asyncio.to_thread(kubectl_demo, "get", "clusterpolicy", name, "-o",
                                      "jsonpath={.status.conditions[?(@.type=='Ready')].message}")
    assert policy.message == message
    # the crash-looping exporter on h100-4, as kubectl shows its pod
    exporter = model.components("h100-4")["dcgm-exporter"]
    pod_name = exporter.pod.split("/", 1)[1]
    row = re.split(r"\s+", (await asyncio.to_thread(kubectl_demo, "get", "pod", "-n", OPERATOR_NS, pod_name)).splitlines()[1])
    assert (exporter.ready, exporter.detail, str(exporter.restarts)) == (row[1], row[2], row[3])
    assert exporter.state == CRASH_LOOPING and "component-failing" in codes(model, "h100-4")


async def test_dra_devices_with_holders_and_dra_held_gpus_counted_as_allocated(demo, kubectl_demo):
    sim, model = demo
    summary = model.summary("h100-dra-1")
    assert summary.gpu_node
    # 7 whole GPUs (GPU 7 is split into MIG devices); qwen-72b-serving-0 holds two of them through DRA: rows of
    # their DeviceClasses, never nvidia.com/gpu (the node advertises none)
    assert {name: (u.capacity, u.allocatable, u.allocated, u.free) for name, u in summary.usage.items()} == {
        "gpu.nvidia.com": (7, 7, 2, 5), "mig.nvidia.com": (7, 7, 1, 6)}
    held = {d.name: d.pods for d in summary.dra_devices if d.pods}
    assert held == {"gpu-0": ("inference/qwen-72b-serving-0",), "gpu-1": ("inference/qwen-72b-serving-0",),
                    "gpu-7-mig-1g10gb-19-0": ("inference/whisper-dra-0",)}
    devices = {d.name: d for d in summary.dra_devices}
    assert len(devices) == 14 and devices["gpu-0"].product == "NVIDIA H100 80GB HBM3"
    assert devices["gpu-7-mig-1g10gb-19-0"].mig_profile == "1g.10gb" and devices["gpu-0"].memory_mib == 81559
    # no device plugin is needed where DRA hands out the GPUs
    assert not {"plugin-not-registered", "plugin-not-running"} & set(codes(model, "h100-dra-1"))
    # kubectl sees the same claims holding the same devices
    claims = json.loads(await asyncio.to_thread(kubectl_demo, "get", "resourceclaims", "-n", "inference", "-o", "json"))["items"]
    by_kubectl = {r["device"]: c["status"]["reservedFor"][0]["name"] for c in claims for r in c["status"]["allocation"]["devices"]["results"]}
    assert {name: pods[0].split("/")[1] for name, pods in held.items()} == by_kubectl

    # a released claim frees its GPUs, live
    serving = next(c for c in claims if c["status"]["reservedFor"][0]["name"] == "qwen-72b-serving-0")
    changes: list[Change] = []
    unsubscribe = model.subscribe(changes.append)
    sim.store.delete("resourceclaims.resource.k8s.io", "inference", serving["metadata"]["name"])
    await until(lambda: model.summary("h100-dra-1").usage["gpu.nvidia.com"].allocated == 0, what="DRA GPUs released")
    unsubscribe()
    assert Change(RESOURCECLAIMS, ("inference", serving["metadata"]["name"])) in changes
    assert not [d for d in model.dra_devices("h100-dra-1") if d.name in ("gpu-0", "gpu-1") and d.pods]


async def test_cluster_policy_turning_ready_clears_operator_not_ready_live(demo):
    sim, model = demo
    changes: list[Change] = []
    unsubscribe = model.subscribe(changes.append)

    def ready(policy):
        policy["status"]["state"] = "ready"
        policy["status"]["conditions"] = [dict(c, status="True", message="") if c["type"] == "Ready" else c
                                          for c in policy["status"]["conditions"]]

    sim.store.mutate("clusterpolicies.nvidia.com", "", "cluster-policy", ready)
    await until(lambda: model.cluster_policy_state() == "ready", what="policy ready")
    unsubscribe()
    assert model.cluster_problems() == []
    assert Change(CLUSTERPOLICIES, ("", "cluster-policy")) in changes


async def test_forbidden_cluster_policies_leave_the_stack_found_by_its_daemonsets():
    async with SimCluster(stacks.gpu_operator_healthy(), faults=True, run_controllers=False) as sim:
        sim.faults.fail("clusterpolicies.nvidia.com", 403)
        async with await connect(str(sim.kubeconfig_path)) as conn:
            async with ClusterModel(conn.api, **FAST) as model:
                assert await model.wait_synced(10)
                found = model.stack()
                assert (found.kind, found.namespace, found.cluster_policy) == ("gpu-operator", OPERATOR_NS, None)
                assert model.cluster_policy_state().startswith("unknown (forbidden: ")
                assert model.cluster_problems() == []
                assert states(model, "gpu-1") == {c: RUNNING for c in COMPONENTS}
                sim.faults.clear()
                await until(lambda: model.cluster_policy_state() == "ready", timeout=5, what="policy readable again")


async def test_metrics_updates_reach_listeners(demo):
    _, model = demo
    changes: list[Change] = []
    unsubscribe = model.subscribe(changes.append)
    before = model.node_metrics("h100-2").at
    await model.metrics.poll_once(["h100-2"])
    unsubscribe()
    assert model.node_metrics("h100-2").at > before
    assert Change(METRICS, "h100-2") in changes


async def test_daemonset_status_updates_keep_summaries_and_a_removed_operand_shows(demo):
    sim, model = demo
    before = model.summary("h100-1")
    sim.store.mutate("daemonsets.apps", OPERATOR_NS, "nvidia-mig-manager", lambda ds: ds["status"].update(numberReady=1))
    await until(lambda: model.daemonset(OPERATOR_NS, "nvidia-mig-manager").ready == 1, what="status update")
    assert model.summary("h100-1") is before  # status counts do not touch the stack: nothing recomputed
    sim.store.delete("daemonsets.apps", OPERATOR_NS, "nvidia-mig-manager")
    await until(lambda: model.components("h100-1")["mig-manager"].state == MISSING, what="operand without DaemonSet")
    assert model.components("h100-1")["mig-manager"].detail == \
        "no DaemonSet runs it here though nvidia.com/gpu.deploy.mig-manager=true"


async def test_report_on_the_demo_names_the_operator_and_the_failing_component(demo):
    sim, _ = demo
    await until(lambda: sim.store.get("clusterpolicies.nvidia.com", "", "cluster-policy") is not None, what="policy")
    sim.store.mutate("clusterpolicies.nvidia.com", "", "cluster-policy",
                     lambda p: p["status"].update(state="notReady"))  # an earlier test made it ready
    rc, table, err = await report_of("--kubeconfig", str(sim.kubeconfig_path))
    assert rc == 1, err
    assert "GPU stack: gpu-operator in gpu-operator; ClusterPolicy cluster-policy: notReady" in table
    problems = table.split("\nProblems:\n", 1)[1]
    assert problems.startswith("  cluster: operator-not-ready: ClusterPolicy cluster-policy is notReady")
    assert "h100-4: component-failing: dcgm-exporter crash-looping" in problems
    rc, out, _ = await report_of("--kubeconfig", str(sim.kubeconfig_path), "-o", "json")
    # 100 columns, widened by what a name takes beyond its column's 42 (whole: it is for pasting into kubectl)
    longest = max(len(f"{p['namespace']}/{p['name']}") for p in json.loads(out)["pods"])
    assert "inference/llama-70b-serving-5d8f7c9b6d-964kc" in table and longest > 42
    assert max(len(line) for line in table.splitlines()) <= 100 + (longest - 42)
    nodes = {n["name"]: n for n in json.loads(out)["nodes"]}
    assert nodes["h100-4"]["components"]["dcgm-exporter"] == "crash-looping" and "gpus" not in nodes["h100-4"]
    assert len(nodes["h100-1"]["gpus"]) == 8 and nodes["h100-1"]["gpus"][2]["xid"] == 48
    assert nodes["h100-dra-1"]["gpu"]["gpu.nvidia.com"]["capacity"] == 7  # a DeviceClass of its own, not nvidia.com/gpu
