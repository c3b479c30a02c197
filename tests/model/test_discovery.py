"""Absent kinds found through discovery (kube/discovery.py), counted at the simulator: one /apis a read, no request
for a kind whose group/version is not served, and a CRD installed meanwhile watched after the next read."""
from __future__ import annotations

from gputui.kube.config import connect
from gputui.kube.discovery import group_version
from gputui.kube.model import ALL_KINDS, CLUSTERPOLICIES, KUEUE_KINDS, NODES, ClusterModel
from gputui.sim.builders.crds import custom_resource_definition
from gputui.sim.cluster import SimCluster
from gputui.sim.resources import CRD_KEY
from tests.model.scenario import FAST, small_cluster, stop, until


def test_group_version():
    assert group_version("/apis/nvidia.com/v1/clusterpolicies") == "nvidia.com/v1"
    assert group_version("/api/v1/pods") is None


async def test_absent_kinds_are_not_asked_for_and_appear_once_discovery_finds_them():
    async with SimCluster(small_cluster(), run_controllers=False) as sim:
        conn = await connect(str(sim.kubeconfig_path))
        model = ClusterModel(conn.api, kinds=ALL_KINDS, discovery_interval=0.05, **FAST)
        await model.start()
        try:
            assert await model.wait_synced(10)
            absent = [kind for kind, state in model.states.items() if state.phase == "absent"]
            assert CLUSTERPOLICIES in absent and set(KUEUE_KINDS) <= set(absent)
            # A path naming no served resource counts as "other" (as /version does, which nothing asked for here)
            assert sim.api_counts.requests.get("other", 0) == 0, sim.api_counts.requests
            reads = model.watches.discovery.reads
            before = dict(sim.api_counts.requests)
            await until(lambda: model.watches.discovery.reads >= reads + 5, what="five more reads of /apis")
            after = sim.api_counts.requests
            assert after.get("discovery", 0) - before.get("discovery", 0) >= 5
            assert {verb: n - before.get(verb, 0) for verb, n in after.items() if verb != "discovery" and n != before.get(verb, 0)} == {}
            assert model.states[CLUSTERPOLICIES].phase == "absent" and model.states[NODES].phase == "live"

            sim.store.create(CRD_KEY, custom_resource_definition("nvidia.com", "v1", "clusterpolicies", "ClusterPolicy", namespaced=False))
            sim.store.create("clusterpolicies.nvidia.com", {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
                                                           "metadata": {"name": "cluster-policy"}, "status": {"state": "ready"}})
            await until(lambda: model.states[CLUSTERPOLICIES].phase == "live" and model.cluster_policies.records,
                        what="the ClusterPolicy watched once discovery finds nvidia.com/v1")
        finally:
            await stop(conn, model)
