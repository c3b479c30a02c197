"""Absent kinds found through discovery (kube/discovery.py), counted at the simulator: one /apis a read, no request
for a kind whose group/version is not served, and a CRD installed meanwhile watched after the next read."""
from __future__ import annotations

from gputui.kube.config import connect
from gputui.kube.discovery import Discovery, group_version, served_of
from gputui.kube.model import ALL_KINDS, CLUSTERPOLICIES, KUEUE_KINDS, NODES, ClusterModel
from gputui.sim.builders.crds import custom_resource_definition
from gputui.sim.cluster import SimCluster
from gputui.sim.apiserver.resources import CRD_KEY
from tests.model.scenario import FAST, small_cluster, stop, until


def test_group_version():
    assert group_version("/apis/nvidia.com/v1/clusterpolicies") == "nvidia.com/v1"
    assert group_version("/api/v1/pods") is None


def test_aggregated_discovery_names_each_resource():
    """An APIGroupDiscoveryList (apidiscovery.k8s.io/v2, as kube-apiserver 1.30+ answers kubectl's Accept) says which
    resources each group/version serves: a kind missing from a served group is absent without being asked for."""
    doc = {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": [
        {"metadata": {"name": "kueue.x-k8s.io"}, "versions": [
            {"version": "v1beta1", "freshness": "Current", "resources": [
                {"resource": "clusterqueues", "responseKind": {"group": "kueue.x-k8s.io", "version": "v1beta1", "kind": "ClusterQueue"},
                 "scope": "Cluster", "verbs": ["get", "list", "watch"]}]}]}]}
    discovery = Discovery(None)  # type: ignore[arg-type]  # never reads: only what it holds
    assert discovery.serves("/apis/kueue.x-k8s.io/v1beta1/clusterqueues") is None  # nothing read yet
    discovery.served, discovery.resources = served_of(doc, aggregated=True)
    assert discovery.served == {"kueue.x-k8s.io/v1beta1"}
    assert discovery.serves("/apis/kueue.x-k8s.io/v1beta1/clusterqueues") is True
    assert discovery.serves("/apis/kueue.x-k8s.io/v1beta1/workloads") is False
    assert discovery.serves("/apis/nvidia.com/v1/clusterpolicies") is False and discovery.serves("/api/v1/pods") is True
    legacy = {"kind": "APIGroupList", "groups": [{"name": "nvidia.com", "versions": [{"groupVersion": "nvidia.com/v1", "version": "v1"}]}]}
    discovery.served, discovery.resources = served_of(legacy, aggregated=False)
    assert discovery.serves("/apis/nvidia.com/v1/clusterpolicies") is True  # an APIGroupList names no resources: asked


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
            await until(lambda: model.watches.discovery.watching, what="the CRDs watched")
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


async def test_a_crd_installed_or_deleted_while_the_model_runs_is_known_at_once():
    """No timer: the CRDs' watch has /apis read again once one changes (a 120 s timer would not be waited for here)."""
    async with SimCluster(small_cluster(), run_controllers=False) as sim:
        conn = await connect(str(sim.kubeconfig_path))
        model = ClusterModel(conn.api, kinds=ALL_KINDS, discovery_interval=3600, **FAST)
        await model.start()
        try:
            discovery = model.watches.discovery
            assert await model.wait_synced(10)
            await until(lambda: discovery.watching, what="the CRDs watched")
            reads, requests = discovery.reads, sum(sim.api_counts.requests.values())
            assert model.states[CLUSTERPOLICIES].phase == "absent"

            crd = custom_resource_definition("nvidia.com", "v1", "clusterpolicies", "ClusterPolicy", namespaced=False)
            await conn.api.json("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd)
            sim.store.create("clusterpolicies.nvidia.com", {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
                                                           "metadata": {"name": "cluster-policy"}, "status": {"state": "ready"}})
            await until(lambda: model.states[CLUSTERPOLICIES].phase == "live" and model.cluster_policies.records,
                        what="the ClusterPolicy watched once its CRD is")
            assert discovery.reads - reads <= 2  # one read for the change (its second only where the first found nothing new)
            assert sum(sim.api_counts.requests.values()) - requests <= 6  # the CRD's POST, /apis, the ClusterPolicies' WatchList

            await conn.api.json("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/clusterpolicies.nvidia.com")
            await until(lambda: discovery.serves("/apis/nvidia.com/v1/clusterpolicies") is False, what="nvidia.com/v1 known gone once its CRD is")
        finally:
            await stop(conn, model)


async def test_discovery_reads_aggregated_discovery_and_a_steady_server_answers_304():
    """kube-apiserver 1.30+ answers kubectl's Accept with an APIGroupDiscoveryList and an ETag: the read names each
    served resource, and a read of an unchanged server is a 304 without a body; a CRD changes the ETag."""
    async with SimCluster(small_cluster(), run_controllers=False) as sim:
        conn = await connect(str(sim.kubeconfig_path))
        try:
            discovery = Discovery(conn.api)
            assert await discovery.read_once() is True
            assert discovery.resources is not None and "apps/v1/daemonsets" in discovery.resources  # aggregated
            assert discovery.etag and sim.api_counts.not_modified == 0
            served, etag = discovery.served, discovery.etag
            assert await discovery.read_once() is False
            assert sim.api_counts.not_modified == 1 and (discovery.served, discovery.etag) == (served, etag)

            sim.store.create(CRD_KEY, custom_resource_definition("nvidia.com", "v1", "clusterpolicies", "ClusterPolicy", namespaced=False))
            assert await discovery.read_once() is True
            assert sim.api_counts.not_modified == 1 and discovery.etag != etag
            assert discovery.serves("/apis/nvidia.com/v1/clusterpolicies") is True
        finally:
            await conn.close()
