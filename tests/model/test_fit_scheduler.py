"""Fit agrees with the scheduler (issue 22): on every built-in scenario, each of gputui's "a pod of N fits now on
these nodes" answers (kube/fit.py, through the model) is put to the simulated kube-scheduler with a probe pod
created through the API: N of a device-plugin resource, or a ResourceClaim of N devices of a DeviceClass. Where
gputui names nodes the probe must bind to one of them; where it names none, the scheduler must refuse it."""
from __future__ import annotations

import time
from typing import Any

import pytest

from gputui.kube import fleet
from gputui.kube.fit import ResourceFit
from gputui.sim.scenarios.builtin import BUILTIN
from gputui.sim.cluster import SimCluster
from tests.model.scenario import model_on, until

NAMESPACE = "fit-probe"
TOLERATE_GPU = {"key": "nvidia.com/gpu", "operator": "Exists"}  # the usual GPU taint: fit's probe tolerates it


def scheduled(pod: dict[str, Any]) -> str | None:
    """Where the scheduler put the pod: its node, "refused: <message>", or None while it has not looked at it."""
    if (pod.get("spec") or {}).get("nodeName"):
        return pod["spec"]["nodeName"]
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition["type"] == "PodScheduled" and condition["status"] == "False" and condition.get("reason") == "Unschedulable":
            return "refused: " + condition.get("message", "")
    return None


def scheduler_settled(sim: SimCluster) -> bool:
    """The scenario's own pods have had the scheduler's first look: bound, refused, gated or finished."""
    return all(scheduled(p) is not None or (p.get("spec") or {}).get("schedulingGates") or p["metadata"].get("deletionTimestamp")
               or (p.get("status") or {}).get("phase") in ("Succeeded", "Failed") for p in sim.store.objects("pods"))


class Prober:
    """Probe pods (and claims) through the API, each deleted once the scheduler has answered."""

    def __init__(self, api: Any, sim: SimCluster) -> None:
        self.api, self.sim, self.made = api, sim, 0

    async def create(self, row: ResourceFit, size: int) -> str:
        self.made += 1
        name = f"probe-{self.made}"
        container: dict[str, Any] = {"name": "probe", "image": "busybox"}
        spec: dict[str, Any] = {"containers": [container], "tolerations": [TOLERATE_GPU, {"key": row.resource, "operator": "Exists"}]}
        if row.device_class:
            claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
                     "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": row.resource, "count": size}}]}}}
            await self.api.json("POST", f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims", body=claim)
            spec["resourceClaims"] = [{"name": "gpus", "resourceClaimName": name}]
            container["resources"] = {"claims": [{"name": "gpus"}]}
        else:
            container["resources"] = {"limits": {row.resource: str(size)}}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}
        await self.api.json("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body=pod)
        return name

    async def answer(self, name: str) -> str:
        return await until(lambda: scheduled(self.sim.store.get("pods", NAMESPACE, name)), what=f"the scheduler's answer for {name}")

    async def remove(self, name: str, claim: bool) -> None:
        await self.api.json("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}", params={"gracePeriodSeconds": 0})
        await until(lambda: self.sim.store.find("pods", NAMESPACE, name) is None, what=f"{name} gone")
        if claim:  # the claim controller deallocates it once its pod is gone; then it may go
            await until(lambda: not (self.sim.store.get("resourceclaims.resource.k8s.io", NAMESPACE, name).get("status") or {})
                        .get("allocation"), what=f"claim {name} deallocated")
            await self.api.json("DELETE", f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims/{name}")
            await until(lambda: self.sim.store.find("resourceclaims.resource.k8s.io", NAMESPACE, name) is None, what=f"claim {name} gone")


def probe_sizes(row: ResourceFit) -> list[int]:
    """1, 4 (the issue's pod), the largest free block and one more."""
    return sorted({1, 4, row.largest, row.largest + 1} - {0})


async def compare(scenario: str) -> list[str]:
    """Where gputui's answers and the scheduler's decisions differ on one scenario (each probe: row, N, both answers)."""
    differences: list[str] = []
    async with SimCluster(BUILTIN[scenario](), speed=50) as sim:
        await until(lambda: scheduler_settled(sim), what="the scheduler's first pass")
        async with model_on(sim) as model:
            fits = model.fit()
            assert fits is not None
            api = model.api
            await api.json("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
            prober = Prober(api, sim)
            refused: list[tuple[str, ResourceFit, int]] = []
            for row in fits.values():
                assert row.unknown is None, f"{scenario}: {row.resource} not known: {row.unknown}"
                for size in probe_sizes(row):
                    expected = row.fits_on(size)
                    if not expected:  # refused probes change nothing: made all at once
                        refused.append((await prober.create(row, size), row, size))
                        continue
                    name = await prober.create(row, size)
                    answer = await prober.answer(name)
                    if answer not in expected:
                        differences.append(f"{scenario}: {row.resource} x{size}: gputui says {', '.join(expected)}; scheduler: {answer}")
                    await prober.remove(name, row.device_class)
            for name, row, size in refused:
                answer = await prober.answer(name)
                if not answer.startswith("refused"):
                    differences.append(f"{scenario}: {row.resource} x{size}: gputui says no node; scheduler: {answer}")
    return differences


@pytest.mark.asyncio
async def test_every_scenarios_fit_answers_are_the_schedulers_decisions():
    differences = [d for scenario in BUILTIN for d in await compare(scenario)]
    assert differences == []


@pytest.mark.asyncio
async def test_the_demo_dra_node_offers_devices_of_its_classes_not_nvidia_gpu():
    """The issue's case: a 4-GPU pod does not fit h100-dra-1 (the node advertises no nvidia.com/gpu); its DRA devices
    are rows of their own, MIG devices included."""
    async with SimCluster(BUILTIN["demo"](), speed=50) as sim:
        await until(lambda: scheduler_settled(sim), what="the scheduler's first pass")
        async with model_on(sim) as model:
            fits = model.fit()
            assert "h100-dra-1" not in fits["nvidia.com/gpu"].fits_on(1)
            assert fits["gpu.nvidia.com"].fits_on(4) == ("h100-dra-1",) and fits["gpu.nvidia.com"].device_class
            assert fits["mig.nvidia.com"].as_json() == {"1": 1, "2": 1, "4": 1, "8": 0, "largest": 6, "stranded": 0}
            notebook = next(g for g in model.gpu_pods() if g.pod.name == "notebook-bob-0")
            assert "Insufficient nvidia.com/gpu" in notebook.reason and "needs 4 nvidia.com/gpu on one node" in notebook.reason
            held = {g.pod.name: g.gpu for g in model.gpu_pods(node="h100-dra-1")}
            assert held == {"qwen-72b-serving-0": {"gpu.nvidia.com": 2}, "whisper-dra-0": {"mig.nvidia.com": 1}}
            assert model.totals()["mig.nvidia.com"].as_dict() == {"capacity": 7, "allocatable": 7, "allocated": 1, "free": 6}
            # the fleet's by_model: whole GPUs under the model, MIG slices per profile (issue 22: `H100 73/153` mixed them)
            by_model = (await fleet.figures("demo", model, time.time()))["by_model"]
            h100 = "NVIDIA-H100-80GB-HBM3"
            whole = sum(s.usage["nvidia.com/gpu"].capacity for s in model.node_summaries()
                        if s.facts.product == h100 and "nvidia.com/gpu" in s.usage)
            assert by_model[h100].capacity == whole and by_model[f"{h100} mig-1g.10gb"].capacity == 16
