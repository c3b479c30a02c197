"""Pilot tests: pods holding GPUs through DRA ResourceClaims in the GPU pods pane and in node details."""
from __future__ import annotations

import pytest

from gputui.kube.config import connect
from gputui.sim import builders as b
from gputui.sim.scenarios.cluster_builder import ClusterBuilder
from gputui.ui.screens import details_text
from tests.ui.ui_helpers import app_on, screen_text, start_cluster, wait_for
from tests.ui.ui_scenario import NOW_TS

NODE = "dra-1"


def objects() -> list[dict]:
    c = ClusterBuilder()
    c.add_node(NODE, cpu=64, memory_gib=512, labels={"feature.node.kubernetes.io/pci-10de.present": "true"})
    c.add_dra_driver([NODE])
    c.add_resource_slice(NODE, "NVIDIA H100 80GB HBM3", 81559, 4)
    serve = b.pod("serve-0", "default", [b.container("vllm", "vllm/vllm-openai:v0.10.1")], age_s=3600, now=c.now)
    c.add_claimed_pod(serve, NODE, "gpus", "gpu.nvidia.com", ["gpu-0", "gpu-1"])
    return c.objects(["default"])


@pytest.fixture(scope="module")
def cluster():
    yield from start_cluster(objects())


async def test_dra_holders_in_pods_pane_and_node_details(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_for(pilot, lambda: "default/serve-0" in app.pods_table.shown_keys, what="the DRA pod's row")
        await wait_for(pilot, lambda: "2 gpu.nvidia.com" in screen_text(app), what="its devices, counted by DeviceClass")
        details = details_text(app.row_details.node_details(NODE), NOW_TS, 160).plain
        pods_section = details.split("Pods on this node holding GPUs", 1)[1]
        line = next(ln for ln in pods_section.splitlines() if "default/serve-0" in ln)
        assert "2 gpu.nvidia.com" in line and "claim default/serve-0-gpus-" in line and "gpu-0,gpu-1" in line

        # A pod and claim made through the API: the row counts the device once the scheduler allocates it.
        conn = await connect(str(cluster.kubeconfig_path))
        try:
            claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "one-gpu", "namespace": "default"},
                     "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train-0", "namespace": "default"},
                   "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "one-gpu"}],
                            "containers": [{"name": "t", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}]}}
            for url, body in (("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", claim), ("/api/v1/namespaces/default/pods", pod)):
                resp = await conn.api.request("POST", url, body=body)
                assert resp.status == 201, await resp.text()
                resp.release()
            await wait_for(pilot, lambda: "1 gpu.nvidia.com" in screen_text(app), what="the new holder's device")
            held = details_text(app.row_details.node_details(NODE), NOW_TS, 160).plain.split("Pods on this node holding GPUs", 1)[1]
            assert "gpu-2" in next(ln for ln in held.splitlines() if "default/train-0" in ln)
        finally:
            await conn.close()
