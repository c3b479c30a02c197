"""gputui's figures against independently computed ones and against the seed's kubectl/jq recipes.

The seed's recipes are right about node capacity/allocatable. Its pod recipe
is wrong in three ways, each shown here: a pod with two GPU containers is
printed twice, finished pods are listed, and a GPU asked for only by an init
container is missed. Its plugin recipe finds only the static-manifest install.
"""
from __future__ import annotations

import asyncio
import shutil
from collections import Counter

import pytest
import pytest_asyncio

from gputui.kube.config import connect
from gputui.kube.model import ClusterModel
from gputui.sim.behaviour import dra as sim_dra
from gputui.sim.cluster import SimCluster
from tests.model.scenario import FAST, matches_fresh_list, small_cluster, until

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(not (shutil.which("kubectl") and shutil.which("jq")), reason="needs kubectl and jq"),
]
GPU_NAMES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")


# -- an independent oracle: straight from the raw objects ---------------------------
def oracle_count(quantity) -> int:
    return int(quantity) if quantity is not None else 0


def oracle_pod_request(pod, resource: str) -> int:
    """Effective request: max(sum over app containers, largest init container); no sidecars in these scenarios."""
    def of(c):
        res = c.get("resources") or {}
        value = (res.get("requests") or {}).get(resource, (res.get("limits") or {}).get(resource))
        return oracle_count(value)
    app = sum(of(c) for c in pod["spec"].get("containers") or [])
    init = max([of(c) for c in pod["spec"].get("initContainers") or []] or [0])
    return max(app, init)


def oracle_dra(store) -> dict[tuple[str, str], tuple[int, int, int, int]]:
    """Per (node, DeviceClass): the NVIDIA GPU driver's devices the class selects (the simulated scheduler's own
    CEL), those a claim could get or holds, those allocated, and those free (no claim, no NoSchedule/NoExecute taint).
    The node advertises none of them: they are rows of their own, never nvidia.com/gpu."""
    allocated = {(r["driver"], r["pool"], r["device"]) for c in store.objects("resourceclaims.resource.k8s.io")
                 for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []}
    table: dict[tuple[str, str], list[int]] = {}
    for device_class in store.objects("deviceclasses.resource.k8s.io"):
        selectors = device_class["spec"].get("selectors") or []
        for s in store.objects("resourceslices.resource.k8s.io"):
            spec = s["spec"]
            if spec["driver"] != "gpu.nvidia.com":
                continue
            for device in spec["devices"]:
                if not all(sim_dra.matches(sel["cel"]["expression"], device, spec["driver"]) for sel in selectors):
                    continue
                row = table.setdefault((spec["nodeName"], device_class["metadata"]["name"]), [0, 0, 0, 0])
                held = (spec["driver"], spec["pool"]["name"], device["name"]) in allocated
                tainted = any(t["effect"] in ("NoSchedule", "NoExecute") for t in device.get("taints") or [])
                row[0] += 1
                row[1] += held or not tainted
                row[2] += held
                row[3] += not held and not tainted
    return {key: (cap, alloc, used, free) for key, (cap, alloc, used, free) in table.items()}


def oracle(store):
    resources = set()
    for n in store.objects("nodes"):
        resources |= {k for k in n["status"].get("capacity", {}) if k.startswith("nvidia.com/")}
    table = {}
    for n in store.objects("nodes"):
        name = n["metadata"]["name"]
        for r in resources:
            cap = oracle_count(n["status"].get("capacity", {}).get(r))
            alloc = oracle_count(n["status"].get("allocatable", {}).get(r))
            used = sum(
                oracle_pod_request(p, r)
                for p in store.objects("pods")
                if p["spec"].get("nodeName") == name and p["status"].get("phase") not in ("Succeeded", "Failed")
            )
            if cap or alloc or used:
                table[(name, r)] = (cap, alloc, used, alloc - used)
    return {**table, **oracle_dra(store)}


def model_table(model):
    return {
        (s.name, r): (u.capacity, u.allocatable, u.allocated, u.free)
        for s in model.node_summaries()
        for r, u in s.usage.items()
    }


# -- running the seed's recipes -----------------------------------------------------------
async def sh(command: str, kubeconfig, cache) -> str:
    proc = await asyncio.create_subprocess_shell(
        command.replace("kubectl ", f"kubectl --kubeconfig {kubeconfig} --cache-dir {cache} "),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    return out.decode()


SEED_CAPACITY = (
    "kubectl get nodes -o custom-columns='NODE:.metadata.name,GPU_CAPACITY:.status.capacity.nvidia\\.com/gpu,"
    "GPU_ALLOCATABLE:.status.allocatable.nvidia\\.com/gpu'"
)
SEED_TOTALS = """kubectl get nodes -o json | jq -r '.items[] | [.metadata.name, (.status.allocatable["nvidia.com/gpu"] // "0")] | @tsv'"""
SEED_PODS = (
    """kubectl get pods -A -o json | jq -r '.items[] | select(.spec.containers[].resources.requests["nvidia.com/gpu"] != null)"""
    """ | [.metadata.namespace, .metadata.name] | @tsv'"""
)
SEED_PLUGIN = "kubectl get pods -n kube-system -l name=nvidia-device-plugin-ds -o wide"
SEED_PLUGIN_GREP = "kubectl get pods -A | grep -i device-plugin || true"


async def synced_model(sim):
    conn = await connect(str(sim.kubeconfig_path))
    model = ClusterModel(conn.api, **FAST)
    await model.start()
    assert await model.wait_synced(10)
    await until(lambda: matches_fresh_list(model, sim.store), what="model equals the store")
    return conn, model


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["small", "demo"])
async def cluster(request, tmp_path_factory):
    scenario = small_cluster() if request.param == "small" else "demo"
    async with SimCluster(scenario, speed=1000.0 if request.param == "demo" else 1.0) as sim:
        conn, model = await synced_model(sim)
        cache = tmp_path_factory.mktemp("kubectl-cache")
        yield request.param, sim, model, cache
        await model.stop()
        await conn.close()


async def test_figures_equal_an_independent_computation(cluster):
    _, sim, model, _ = cluster
    await until(lambda: model_table(model) == oracle(sim.store), what="model figures equal the oracle")
    expected_totals = Counter()
    for (_, r), (cap, alloc, used, free) in oracle(sim.store).items():
        for k, v in zip(("capacity", "allocatable", "allocated", "free"), (cap, alloc, used, free), strict=True):
            expected_totals[(r, k)] += v
    assert {(r, k): v for r, u in model.totals().items() for k, v in u.as_dict().items()} == dict(expected_totals)


async def test_seed_capacity_recipes_agree(cluster):
    _, sim, model, cache = cluster
    lines = (await sh(SEED_CAPACITY, sim.kubeconfig_path, cache)).splitlines()
    assert lines[0].split() == ["NODE", "GPU_CAPACITY", "GPU_ALLOCATABLE"]
    # The seed sees what nodes advertise, as gputui's nvidia.com/gpu does (DRA devices are rows of their own).
    for line in lines[1:]:
        name, cap, alloc = line.split()
        usage = model.summary(name).usage.get("nvidia.com/gpu")
        advertised = (usage.capacity, usage.allocatable) if usage else (0, 0)
        if advertised == (0, 0):  # the seed prints <none> or a stale 0: no nvidia.com/gpu on this node
            assert cap in ("<none>", "0") and alloc in ("<none>", "0")
        else:
            assert (int(cap), int(alloc)) == advertised
    totals = dict(line.split("\t") for line in (await sh(SEED_TOTALS, sim.kubeconfig_path, cache)).splitlines())
    assert set(totals) == set(model.nodes.records)
    for name, alloc in totals.items():
        usage = model.summary(name).usage.get("nvidia.com/gpu")
        assert int(alloc) == (usage.allocatable if usage else 0)


async def test_seed_pod_recipe_is_wrong_where_gputui_is_right(cluster):
    param, sim, model, cache = cluster
    seed = Counter(tuple(line.split("\t")) for line in (await sh(SEED_PODS, sim.kubeconfig_path, cache)).splitlines())
    ours = {(g.pod.namespace, g.pod.name) for g in model.gpu_pods() if "nvidia.com/gpu" in g.gpu}
    store_pods = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in sim.store.objects("pods")}

    printed_twice = {k for k, n in seed.items() if n > 1}
    finished = {k for k in seed if store_pods[k]["status"].get("phase") in ("Succeeded", "Failed")}
    init_only = {
        k for k, p in store_pods.items()
        if oracle_pod_request(p, "nvidia.com/gpu") and k not in seed and p["status"].get("phase") not in ("Succeeded", "Failed")
    }
    # every difference is one of the seed's mistakes (DRA devices are no nvidia.com/gpu: gpu.nvidia.com rows)
    assert set(seed) - finished == ours - init_only
    assert not (finished & ours)
    if param == "small":
        assert printed_twice == {("ml", "two-containers")}
        assert finished == {("ml", "finished")}
        assert init_only == {("ml", "init-only")} and ("ml", "init-only") in ours
        assert model.pod("ml", "two-containers").requests == {"nvidia.com/gpu": 2}


async def test_seed_plugin_recipes_find_only_some_installs(cluster):
    param, sim, model, cache = cluster
    seed_static = {line.split()[0] for line in (await sh(SEED_PLUGIN, sim.kubeconfig_path, cache)).splitlines()[1:]}
    by_grep = {line.split()[1] for line in (await sh(SEED_PLUGIN_GREP, sim.kubeconfig_path, cache)).splitlines()}
    ours = {s.name: s.plugin.name for s in model.node_summaries() if s.plugin is not None}
    assert seed_static <= set(ours.values())
    if param == "small":
        assert seed_static == {"plugin-static-gpu-1"}  # the helm and operator installs are missed
        assert ours == {"gpu-1": "plugin-static-gpu-1", "gpu-2": "plugin-helm-gpu-2", "mig-1": "plugin-operator-mig-1"}
    else:
        assert by_grep == set(ours.values())  # the demo's plugin pods are named after the plugin
