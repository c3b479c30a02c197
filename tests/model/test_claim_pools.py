"""A pending pod waiting on a ResourceClaim says which pool lacks what (issues 22 and 24): from the published
ResourceSlices, the DeviceClasses and the claims, not from the scheduler's words."""
from __future__ import annotations

from typing import Any

import pytest

from gputui.sim import builders as b
from gputui.sim.cluster import SimCluster
from gputui.sim.scenarios.cluster_builder import ClusterBuilder
from tests.model.scenario import model_on, until

NODE = "dra-1"
PRODUCT = "NVIDIA H100 80GB HBM3"


def objects() -> list[dict]:
    c = ClusterBuilder()
    c.add_node(NODE, cpu=64, memory_gib=512, labels={"feature.node.kubernetes.io/pci-10de.present": "true"})
    c.add_dra_driver([NODE])
    c.add_resource_slice(NODE, PRODUCT, 81559, 4)
    serve = b.pod("serve-0", "default", [b.container("vllm", "vllm/vllm-openai:v0.10.1")], age_s=3600, now=c.now)
    c.add_claimed_pod(serve, NODE, "gpus", "gpu.nvidia.com", ["gpu-0", "gpu-1"])
    return c.objects(["default"])


async def claim_and_pod(api: Any, name: str, request: dict[str, Any]) -> None:
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": "default"},
             "spec": {"devices": {"requests": [{"name": "gpus", "exactly": request}]}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
           "spec": {"resourceClaims": [{"name": "gpus", "resourceClaimName": name}],
                    "containers": [{"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpus"}]}}]}}
    await api.json("POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", body=claim)
    await api.json("POST", "/api/v1/namespaces/default/pods", body=pod)


@pytest.mark.asyncio
async def test_a_pending_pod_on_a_claim_names_the_pool_and_what_it_lacks():
    async with SimCluster(objects(), speed=50) as sim, model_on(sim) as model:
        await claim_and_pod(model.api, "big", {"deviceClassName": "gpu.nvidia.com", "count": 4})
        await claim_and_pod(model.api, "b200", {"deviceClassName": "gpu.nvidia.com", "selectors": [
            {"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'"}}]})

        def reasons() -> dict[str, str]:
            return {g.pod.name: g.reason or "" for g in model.gpu_pods() if g.pod.node is None}

        def refused() -> bool:  # the scheduler has answered both (its message first), and the model has seen it
            return all("cannot allocate all claims" in reasons().get(name, "") for name in ("big", "b200"))

        await until(refused, what="both pods refused by the scheduler")
        big = next(g for g in model.gpu_pods() if g.pod.name == "big")
        assert big.gpu == {"gpu.nvidia.com": 4}  # a pod waiting on a claim is a GPU pod, counted by its DeviceClass
        assert ("claim default/big request gpus: needs 4 devices of one pool; pool dra-1/gpu.nvidia.com: 2 of 4 devices "
                "free matching DeviceClass gpu.nvidia.com (2 allocated)") in big.reason
        assert ("claim default/b200 request gpus: no published device matches DeviceClass gpu.nvidia.com and the claim's "
                "selectors") in reasons()["b200"]

        # The holder goes: the pool has 4 free, and the scheduler binds the pod; no pool is said to lack anything.
        await model.api.json("DELETE", "/api/v1/namespaces/default/pods/serve-0", params={"gracePeriodSeconds": 0})
        await until(lambda: next((g for g in model.gpu_pods() if g.pod.name == "big" and g.pod.node), None),
                    what="the big pod bound once the pool is free")
        assert "big" not in reasons() and "pool dra-1" not in reasons()["b200"]
