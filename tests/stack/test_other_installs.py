"""The clusters people really run: device plugins gputui does not know by name, and GPU Operator installs
other than the default (operator 1.x, OpenShift, deploy labels other than true/false).

Each scenario (gputui.sim.scenarios.stacks) is served by the simulator and read by the model over HTTP, as
tests/model/test_stack_model.py does; kubectl reads the same cluster as the independent check, the
report's JSON says what the model says, and the app shows it in words (Pilot)."""
from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from typing import AsyncIterator, Callable

import pytest

from gputui.cli import report
from gputui.kube import stack as stack_module
from gputui.kube.config import connect
from gputui.kube.gpu import GpuResources
from gputui.kube.model import ClusterModel
from gputui.kube.records import (
    daemonset_from,
    mounts_device_plugin_dir,
    node_from,
    pod_from,
)
from gputui.kube.stack import (
    CRASH_LOOPING,
    FAILED,
    MISSING,
    NOT_EXPECTED,
    RUNNING,
    SUCCEEDED,
    advertised_resources,
)
from gputui.sim import SimCluster
from gputui.sim.scenarios import stacks
from gputui.ui.demo import BackgroundCluster
from gputui.ui.launch import make_app
from gputui.ui.screens import NodeDetailsScreen
from gputui.ui.stack import StackScreen

FAST = dict(backoff_initial=0.05, backoff_max=0.2, forbidden_retry=0.3)
PLUGIN_DIR = "/var/lib/kubelet/device-plugins"


@contextlib.asynccontextmanager
async def cluster(scenario: list[dict]) -> AsyncIterator[tuple[SimCluster, ClusterModel]]:
    """A static simulated cluster (the stored state is the truth) and a synced model."""
    async with SimCluster(scenario, run_controllers=False) as sim:
        async with await connect(str(sim.kubeconfig_path)) as conn:
            async with ClusterModel(conn.api, metrics_timeout=2.0, **FAST) as model:
                assert await model.wait_synced(10)
                yield sim, model


async def until(condition: Callable[[], object], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def problems(model: ClusterModel, node: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in model.summary(node).problems:
        out.setdefault(p.code, []).append(p.message)
    return out


def run_report(*argv: str) -> tuple[int, dict]:
    """`gputui report ARGV -o json` in a thread (the simulator serves in the test's loop): exit status, JSON."""
    import argparse
    import io

    parser = argparse.ArgumentParser(prog="gputui")
    report.add_parser(parser.add_subparsers())
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        args = parser.parse_args(["report", *argv, "-o", "json"])
        rc = args.run(args)
    return rc, json.loads(out.getvalue())


async def report_json(sim: SimCluster) -> tuple[int, dict]:
    return await asyncio.to_thread(run_report, "--kubeconfig", str(sim.kubeconfig_path))


# -- what a device plugin advertises, from its DaemonSet ------------------------------------------

def _plugin_daemonset(args: list[str] = (), env: dict[str, str] | None = None, path: str = PLUGIN_DIR) -> dict:
    container = {"name": "plugin", "image": "x", "args": list(args), "env": [{"name": k, "value": v} for k, v in (env or {}).items()]}
    return {"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "p"}},
            "spec": {"selector": {"matchLabels": {"app": "p"}},
                     "template": {"metadata": {"labels": {"app": "p"}},
                                  "spec": {"containers": [container], "volumes": [{"name": "dp", "hostPath": {"path": path}}]}}}}


@pytest.mark.parametrize("args, env, resources", [
    (["--resource-name=nvidia.com/gpu"], None, ("nvidia.com/gpu",)),
    (["--resource-name", "amd.com/gpu"], None, ("amd.com/gpu",)),
    (["--resource-prefix=rdma", "--resource-name=hca_shared_devices_a"], None, ("rdma/hca_shared_devices_a",)),
    ([], {"RESOURCE_NAME": "xilinx.com/fpga-u250"}, ("xilinx.com/fpga-u250",)),
    (["/bin/plugin", "--config=/etc/x.yaml"], {"DP_RESOURCE_NAME": "nvidia.com/mig-1g.10gb"}, ("nvidia.com/mig-1g.10gb",)),
    (["serve", "advertise nvidia.com/gpu.shared with 4 replicas"], None, ("nvidia.com/gpu.shared",)),
    (["--node-label=nvidia.com/gpu.present"], {"NVIDIA_VISIBLE_DEVICES": "all"}, ()),  # a label, not a resource
    ([], None, ()),
])
def test_the_resource_a_plugin_advertises_comes_from_its_args_or_env(args, env, resources):
    ds = daemonset_from(_plugin_daemonset(args, env))
    assert ds.plugin_dir and stack_module.classify_daemonset(ds) == ("device-plugin", "other")
    assert advertised_resources(ds) == resources


def test_only_a_host_path_at_or_below_the_device_plugin_directory_makes_a_device_plugin():
    for path, plugin in [(PLUGIN_DIR, True), (PLUGIN_DIR + "/", True), ("/var/lib/kubelet//device-plugins/x", True),
                         ("/var/lib/kubelet", False), ("/var/lib/kubelet/device-plugins-old", False),
                         ("/var/lib/kubelet/plugins_registry", False)]:
        spec = _plugin_daemonset(path=path)["spec"]["template"]["spec"]
        assert mounts_device_plugin_dir(spec) is plugin, path
        assert (stack_module.classify_daemonset(daemonset_from(_plugin_daemonset(path=path))) is not None) is plugin, path


def test_a_gpu_resource_of_the_users_counts_as_a_gpu_and_another_does_not():
    found = stack_module.detect_stack([daemonset_from(_plugin_daemonset(["--resource-name=amd.com/gpu"]))],
                                      resources=GpuResources(frozenset({"amd.com/gpu"})))
    assert [(p.gpu, p.nvidia) for p in found.plugins] == [(True, False)] and found.kind == "none"
    found = stack_module.detect_stack([daemonset_from(_plugin_daemonset(["--resource-name=amd.com/gpu"]))])
    assert [(p.gpu, p.nvidia) for p in found.plugins] == [(False, False)]


def test_two_plugins_naming_no_resource_are_not_guessed_at():
    node = node_from({"metadata": {"name": "g", "labels": {}}, "spec": {},
                      "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}}})
    sets = []
    for name in ("a", "b"):
        ds = _plugin_daemonset()
        ds["metadata"]["name"] = name
        sets.append(daemonset_from(ds))
    here = stack_module.node_stack(stack_module.detect_stack(sets), node, [])
    assert [p.nvidia for p in here.plugins] == [None, None]  # either could be the GPU plugin: neither is said to be
    assert here.components["device-plugin"].state == NOT_EXPECTED and here.plugin_pods == ()


# -- unknown device plugins -------------------------------------------------------------------------

async def test_unknown_plugins_take_part_in_the_plugin_verdicts_and_kubectl_agrees(make_kubectl):
    async with cluster(stacks.unknown_plugin()) as (sim, model):
        found = model.stack()
        assert (found.kind, found.install, found.namespace) == ("device-plugin", "static", "kube-system")
        assert [(p.ref, p.install, p.resources, p.gpu) for p in found.plugins] == [
            ("kube-system/nvidia-device-plugin-daemonset", "static", (), True),
            ("acme-gpu/acme-gpu-device-plugin", "other", ("nvidia.com/gpu",), True),
            ("network-operator/rdma-shared-dp-ds", "other", ("rdma/hca_shared_devices_a",), False),
            ("vendor-gpu/vendor-gpu-plugin", "other", (), None),
        ]
        kubectl = make_kubectl(sim.kubeconfig_path)
        listed = json.loads(await asyncio.to_thread(kubectl, "get", "daemonsets", "-A", "-o", "json"))["items"]
        mounting = {f"{d['metadata']['namespace']}/{d['metadata']['name']}" for d in listed
                    if any((v.get("hostPath") or {}).get("path", "").startswith(PLUGIN_DIR) for v in d["spec"]["template"]["spec"]["volumes"])}
        assert mounting == {p.ref for p in found.plugins}  # every DaemonSet mounting the directory, as kubectl lists them

        # gpu-1: acme's plugin advertises nvidia.com/gpu beside the static one, and crash-loops
        gpu1 = problems(model, "gpu-1")
        acme = model.components("gpu-1")["device-plugin"]
        assert acme.state == CRASH_LOOPING and acme.pod.startswith("acme-gpu/acme-gpu-device-plugin-")
        assert gpu1["plugin-not-running"] == [f"device-plugin pod {acme.pod} is crash-looping (14 restarts)"]
        assert gpu1["several-plugins"] == ["several device plugins target this node: "
                                           "kube-system/nvidia-device-plugin-daemonset, acme-gpu/acme-gpu-device-plugin"]
        assert model.plugin_pod("gpu-1").name == acme.pod.split("/")[1]  # the plugin pane follows the one in trouble
        row = re.split(r"\s+", (await asyncio.to_thread(kubectl, "get", "pod", "-n", "acme-gpu", acme.pod.split("/")[1])).splitlines()[1])
        assert (acme.ready, acme.detail, str(acme.restarts)) == (row[1], row[2], row[3])
        # the RDMA plugin is listed for its resource and takes no part
        assert [(p.daemonset.name, p.nvidia, p.state.state) for p in model.summary("gpu-1").plugins if not p.nvidia] == [
            ("rdma-shared-dp-ds", False, RUNNING)]

        # gpu-2: the vendor plugin names no resource; the node's nvidia.com/gpu says it is the GPU plugin
        vendor = model.components("gpu-2")["device-plugin"]
        assert vendor.state == RUNNING and vendor.daemonsets == ("vendor-gpu/vendor-gpu-plugin",)
        assert vendor.note == "vendor-gpu/vendor-gpu-plugin names no resource in its args or env: taken for the plugin of the node's nvidia.com/gpu"
        assert problems(model, "gpu-2") == {}

        # live: it crash-loops; the plugin verdict follows, as for NVIDIA's own
        pod = vendor.pod.split("/")[1]

        def crash(obj: dict) -> None:
            status = obj["status"]
            status["phase"] = "Running"
            status["conditions"] = [dict(c, status="False") if c["type"] in ("Ready", "ContainersReady") else c for c in status["conditions"]]
            status["containerStatuses"][0].update(ready=False, started=False, restartCount=3,
                                                  state={"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}})

        sim.store.mutate("pods", "vendor-gpu", pod, crash)
        await until(lambda: "plugin-not-running" in problems(model, "gpu-2"), "the vendor plugin's verdict")
        assert problems(model, "gpu-2")["plugin-not-running"] == [f"device-plugin pod vendor-gpu/{pod} is crash-looping (3 restarts)"]

        rc, data = await report_json(sim)
        assert rc == 1
        nodes = {n["name"]: n for n in data["nodes"]}
        assert nodes["gpu-1"]["plugins"] == [
            {"daemonset": "kube-system/nvidia-device-plugin-daemonset", "install": "static", "resources": [], "nvidia": True, "state": "running"},
            {"daemonset": "acme-gpu/acme-gpu-device-plugin", "install": "other", "resources": ["nvidia.com/gpu"], "nvidia": True,
             "state": "crash-looping"},
            {"daemonset": "network-operator/rdma-shared-dp-ds", "install": "other", "resources": ["rdma/hca_shared_devices_a"],
             "nvidia": False, "state": "running"},
        ]
        assert [p["code"] for p in nodes["gpu-1"]["problems"]] == [p.code for p in model.summary("gpu-1").problems]
        assert nodes["gpu-2"]["components"]["device-plugin"] == "crash-looping" and nodes["cpu-1"]["plugins"] == []


# -- other GPU Operator installs -----------------------------------------------------------------------

async def test_operator_1x_namespace_state_only_policy_and_validation_pods(make_kubectl):
    async with cluster(stacks.operator_1x()) as (sim, model):
        found = model.stack()
        assert (found.kind, found.namespace) == ("gpu-operator", "gpu-operator-resources")  # from its DaemonSets
        assert found.cluster_policy.to_json() == {"name": "cluster-policy", "state": "ready", "message": None, "kind": "ClusterPolicy", "since": None}
        assert model.cluster_problems() == []
        kubectl = make_kubectl(sim.kubeconfig_path)
        assert re.split(r"\s{2,}", (await asyncio.to_thread(kubectl, "get", "clusterpolicies")).splitlines()[1])[1] == "ready"

        passed = model.components("gpu-1")["validator"]
        assert passed.state == SUCCEEDED and passed.detail == "Completed" and passed.pod.startswith("gpu-operator-resources/nvidia-")
        assert problems(model, "gpu-1") == {}
        failed = model.components("gpu-2")["validator"]
        assert failed.state == FAILED and failed.pod.startswith("gpu-operator-resources/nvidia-device-plugin-validator-")
        assert problems(model, "gpu-2") == {"component-failing": [
            f"validator failed ({failed.pod.split('/')[1]}: Error, last Error (exit 1))"]}
        pods = json.loads(await asyncio.to_thread(kubectl, "get", "pods", "-n", "gpu-operator-resources", "-l",
                                                  "app=nvidia-device-plugin-validator", "-o", "json"))["items"]
        assert {p["spec"]["nodeName"]: p["status"]["phase"] for p in pods} == {"gpu-1": "Succeeded", "gpu-2": "Failed"}
        assert model.components("gpu-1")["nfd-worker"].pod.startswith("gpu-operator/")  # NFD in the operator's namespace

        rc, data = await report_json(sim)
        assert rc == 1 and data["stack"]["namespace"] == "gpu-operator-resources"
        assert {n["name"]: n["components"].get("validator") for n in data["nodes"]} == {"gpu-1": "succeeded", "gpu-2": "failed", "cpu-1": None}

        # notReady with nothing but the state: said, with no message made up
        sim.store.mutate("clusterpolicies.nvidia.com", "", "cluster-policy", lambda p: p.update(status={"state": "notReady"}))
        await until(lambda: model.cluster_policy_state() == "notReady", "the policy notReady")
        assert [(p.code, p.message) for p in model.cluster_problems()] == [("operator-not-ready", "ClusterPolicy cluster-policy is notReady")]


async def test_openshift_operator_with_operands_paused_for_a_mig_change():
    async with cluster(stacks.openshift_operator()) as (sim, model):
        assert (model.stack().kind, model.stack().namespace) == ("gpu-operator", "nvidia-gpu-operator")
        driver = model.components("gpu-1")["driver"]
        assert driver.state == RUNNING and driver.daemonsets == ("nvidia-gpu-operator/nvidia-driver-daemonset-414.92.202406251923-0",)
        paused = model.components("gpu-2")
        for component, label in (("device-plugin", "device-plugin"), ("gfd", "gpu-feature-discovery"), ("dcgm-exporter", "dcgm-exporter")):
            state = paused[component]
            assert (state.state, state.deploy) == (NOT_EXPECTED, "paused-for-mig-change")
            assert state.detail == f"paused for MIG change (nvidia.com/gpu.deploy.{label}=paused-for-mig-change)"
        assert paused["driver"].state == RUNNING and paused["mig-manager"].state == RUNNING
        assert problems(model, "gpu-2") == {} and model.plugin_pod("gpu-2") is None  # not expected while paused: no verdict

        # the MIG manager puts the labels back; until the DaemonSet controller makes the pods, they are missing
        def restore(node: dict) -> None:
            for key, value in node["metadata"]["labels"].items():
                if value == "paused-for-mig-change":
                    node["metadata"]["labels"][key] = "true"

        sim.store.mutate("nodes", "", "gpu-2", restore)
        await until(lambda: model.components("gpu-2")["device-plugin"].state == MISSING, "the plugin missing")
        assert problems(model, "gpu-2")["plugin-not-running"] == ["no NVIDIA device-plugin pod runs on this node"]
        assert "gfd missing: no pod of DaemonSet nvidia-gpu-operator/gpu-feature-discovery on this node" in problems(model, "gpu-2")["component-failing"]


async def test_a_pre_installed_driver_is_not_expected_and_an_unknown_value_is_said_as_it_is():
    async with cluster(stacks.operator_preinstalled_driver()) as (sim, model):
        driver = model.components("gpu-2")["driver"]
        assert (driver.state, driver.deploy, driver.detail) == (
            NOT_EXPECTED, "pre-installed", "pre-installed on the host (nvidia.com/gpu.deploy.driver=pre-installed)")
        assert problems(model, "gpu-2") == {}
        exporter = model.components("gpu-1")["dcgm-exporter"]
        assert exporter.state == NOT_EXPECTED and exporter.detail == (
            "gpu-operator/nvidia-dcgm-exporter: its nodeSelector wants nvidia.com/gpu.deploy.dcgm-exporter=true; "
            "the node has nvidia.com/gpu.deploy.dcgm-exporter=maintenance")
        # without its DaemonSet, the value is still named, neither true nor false
        sim.store.delete("daemonsets.apps", "gpu-operator", "nvidia-dcgm-exporter")
        await until(lambda: model.daemonset("gpu-operator", "nvidia-dcgm-exporter") is None, "the exporter DaemonSet gone")
        exporter = model.components("gpu-1")["dcgm-exporter"]
        assert (exporter.state, exporter.deploy, exporter.detail) == (
            NOT_EXPECTED, "maintenance", "the node has nvidia.com/gpu.deploy.dcgm-exporter=maintenance, neither true nor false")
        assert model.components("gpu-2")["dcgm-exporter"].state == MISSING  # =true there: it should run


def test_a_failed_validation_pod_is_worse_than_a_running_validator():
    node = node_from({"metadata": {"name": "g", "labels": {"nvidia.com/gpu.present": "true"}}, "spec": {}, "status": {}})
    pod = pod_from({"metadata": {"name": "nvidia-cuda-validator-x", "namespace": "gpu-operator", "labels": {"app": "nvidia-cuda-validator"}},
                    "spec": {"nodeName": "g", "containers": [{"name": "c"}]},
                    "status": {"phase": "Failed", "containerStatuses": [
                        {"name": "c", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}})
    state = stack_module.node_components(stack_module.detect_stack([]), node, [pod])["validator"]
    assert (state.state, state.detail, state.last_termination) == (FAILED, "Error", "Error (exit 1)")


# -- in the app ---------------------------------------------------------------------------------------

async def _open_stack(app, pilot) -> StackScreen:
    await _wait(pilot, lambda: app.model is not None and all(r.settled.is_set() for r in app.model.reflectors.values())
                and app.nodes_table.row_count > 0, "the model")
    await pilot.press("s")
    await _wait(pilot, lambda: isinstance(app.screen, StackScreen) and app.screen.table.row_count > 0, "the matrix")
    return app.screen


async def _wait(pilot, condition: Callable[[], object], what: str, timeout: float = 8.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await pilot.pause(0.02)


async def _details(app, pilot, node: str) -> str:
    app.row_details.show_node(node)
    await _wait(pilot, lambda: isinstance(app.screen, NodeDetailsScreen) and app.screen.text, f"{node}'s details")
    return app.screen.text


def _cell(screen: StackScreen, node: str, component: str) -> str:
    return screen.table.get_row(node)[screen.table.column_keys.index(component)].plain


async def test_the_app_names_unknown_plugins_and_their_resources():
    with BackgroundCluster(scenario=stacks.unknown_plugin(), run_controllers=False) as sim:
        app = make_app(str(sim.kubeconfig_path))
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await _open_stack(app, pilot)
            assert ("device plugins: kube-system/nvidia-device-plugin-daemonset (static manifest), "
                    "acme-gpu/acme-gpu-device-plugin (other: nvidia.com/gpu), "
                    "network-operator/rdma-shared-dp-ds (other: rdma/hca_shared_devices_a, not a GPU), "
                    "vendor-gpu/vendor-gpu-plugin (other: resource not named)") in screen.text
            assert _cell(screen, "gpu-1", "device-plugin").startswith("✗CL")
            screen.table.move_cursor(row=screen.table.row_index("gpu-2"), column=screen.table.column_keys.index("device-plugin"))
            await pilot.pause()
            assert "names no resource in its args or env: taken for the plugin of the node's nvidia.com/gpu" in screen.text
            await pilot.press("escape")
            text = await _details(app, pilot, "gpu-1")
            words = " ".join(text.split())  # at 80 columns the line wraps, indented
            assert "other plugin ✓ running network-operator/rdma-shared-dp-ds (other: rdma/hca_shared_devices_a, not a GPU)" in words
            assert "several device plugins target this node" in text


async def test_the_app_says_an_operand_is_paused_for_a_mig_change():
    with BackgroundCluster(scenario=stacks.openshift_operator(), run_controllers=False) as sim:
        app = make_app(str(sim.kubeconfig_path))
        async with app.run_test(size=(130, 30)) as pilot:
            screen = await _open_stack(app, pilot)
            assert _cell(screen, "gpu-2", "device-plugin") == "n/a paused" and _cell(screen, "gpu-1", "device-plugin") == "✓ running"
            assert "namespace nvidia-gpu-operator" in screen.text
            await pilot.press("escape")
            text = await _details(app, pilot, "gpu-2")
            assert re.search(r"device-plugin\s+not-expected\s+paused for MIG change "
                             r"\(nvidia.com/gpu.deploy.device-plugin=paused-for-mig-change\)", text), text
