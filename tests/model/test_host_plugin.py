"""A device plugin outside Kubernetes (Bottlerocket, some managed node images run it as a host service): a node
whose allocatable NVIDIA GPUs the kubelet reports, with no plugin DaemonSet whose nodeSelector, affinity and
tolerations would place a pod on it, has a registered plugin and no problem; a plugin DaemonSet that should run
there and does not stays `plugin-not-running`. Against the simulator's host-plugin scenario."""
from __future__ import annotations

import json

import pytest

from gputui.kube import stack
from gputui.kube.stack import MISSING, NOT_EXPECTED, RUNNING
from tests.model.scenario import until
from tests.model.test_report import report_of
from tests.model.test_stack_model import cluster, codes

pytestmark = pytest.mark.asyncio(loop_scope="function")


async def test_a_host_plugin_is_registered_and_no_problem():
    async with cluster("host-plugin") as (sim, model):
        plugin = model.components("gpu-2")["device-plugin"]
        assert (plugin.state, plugin.detail) == (NOT_EXPECTED, stack.HOST_PLUGIN)
        assert stack.HOST_PLUGIN == "registered (plugin not run by Kubernetes)"
        assert "plugin-not-running" not in codes(model, "gpu-2")
        assert codes(model, "gpu-2") == []
        assert model.components("gpu-1")["device-plugin"].state == RUNNING and codes(model, "gpu-1") == []
        rc, out, err = await report_of("-o", "json", "--kubeconfig", str(sim.kubeconfig_path))
        assert rc == 0, err
        nodes = {n["name"]: n for n in json.loads(out)["nodes"]}
        assert nodes["gpu-2"]["problems"] == [] and nodes["gpu-2"]["components"]["device-plugin"] == NOT_EXPECTED


async def test_a_plugin_daemonset_meant_to_run_there_that_does_not_stays_a_problem():
    async with cluster("host-plugin") as (sim, model):
        # gpu-2 joins the static plugin's pool: its DaemonSet should now run there (no controllers run: it never will).
        sim.store.mutate("nodes", "", "gpu-2", lambda n: n["metadata"]["labels"].update({"node-pool": "gpu"}))
        await until(lambda: model.components("gpu-2")["device-plugin"].state == MISSING, what="the plugin missing on gpu-2")
        assert "plugin-not-running" in codes(model, "gpu-2")


async def test_without_allocatable_gpus_nothing_says_a_plugin_registered():
    async with cluster("host-plugin") as (sim, model):
        def unhealthy(node: dict) -> None:
            node["status"]["allocatable"]["nvidia.com/gpu"] = "0"
        sim.store.mutate("nodes", "", "gpu-2", unhealthy)
        await until(lambda: "plugin-not-running" in codes(model, "gpu-2"), what="plugin-not-running on gpu-2")
        assert model.components("gpu-2")["device-plugin"].detail != stack.HOST_PLUGIN
