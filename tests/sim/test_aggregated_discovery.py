"""Aggregated discovery (KEP-3352), as kube-apiserver serves it: GET /api and /apis with an Accept that asks for an
apidiscovery.k8s.io/v2 APIGroupDiscoveryList answer every group's resources at once, with an ETag that a matching
If-None-Match turns into a 304 without a body; what they name is what the legacy documents name; the real kubectl
reads them (and revalidates its cache with the ETag)."""
from __future__ import annotations

import asyncio
from typing import Any

import orjson

from gputui.sim.apiserver.resources import CRD_KEY
from gputui.sim.builders.crds import custom_resource_definition
from gputui.sim.cluster import SimCluster
from tests.model.scenario import small_cluster

V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
KUBECTL_ACCEPT = f"{V2},{V2BETA1},application/json"  # client-go's discovery client


async def get(http: Any, url: str, accept: str | None = None, etag: str | None = None) -> tuple[int, dict[str, str], bytes]:
    headers = {k: v for k, v in (("Accept", accept), ("If-None-Match", etag)) if v is not None}
    async with http.get(url, headers=headers) as resp:
        return resp.status, {k.title(): v for k, v in resp.headers.items()}, await resp.read()


async def legacy_resources(http: Any, base: str) -> dict[str, set[tuple]]:
    """"group/version" -> its resources from the legacy documents, as aggregated discovery says them:
    (resource, kind, scope, singular, verbs, shortNames, categories), a subresource as (resource/sub, kind, verbs)."""
    async with http.get(f"{base}/apis") as resp:
        gvs = ["v1"] + [v["groupVersion"] for g in (await resp.json())["groups"] for v in g["versions"]]
    out: dict[str, set[tuple]] = {}
    for gv in gvs:
        async with http.get(f"{base}/api/v1" if gv == "v1" else f"{base}/apis/{gv}") as resp:
            assert resp.status == 200, gv
            out[gv] = {(r["name"], r["kind"], tuple(r["verbs"])) if "/" in r["name"] else
                       (r["name"], r["kind"], "Namespaced" if r["namespaced"] else "Cluster", r["singularName"], tuple(r["verbs"]),
                        tuple(r.get("shortNames", [])), tuple(r.get("categories", [])))
                       for r in (await resp.json())["resources"]}
    return out


def aggregated_resources(*docs: dict) -> dict[str, set[tuple]]:
    out: dict[str, set[tuple]] = {}
    for doc in docs:
        for group in doc["items"]:
            name = group["metadata"].get("name", "")
            for version in group["versions"]:
                assert version["freshness"] == "Current"
                entries = out[f"{name}/{version['version']}" if name else version["version"]] = set()
                for r in version["resources"]:
                    entries.add((r["resource"], r["responseKind"]["kind"], r["scope"], r["singularResource"], tuple(r["verbs"]),
                                 tuple(r.get("shortNames", [])), tuple(r.get("categories", []))))
                    entries.update((f"{r['resource']}/{s['subresource']}", s["responseKind"]["kind"], tuple(s["verbs"]))
                                   for s in r.get("subresources", []))
    return out


async def test_aggregated_discovery_names_what_the_legacy_documents_name():
    async with SimCluster(small_cluster(), run_controllers=False) as sim, sim.http_session() as http:
        docs = []
        for path in ("/api", "/apis"):
            status, headers, body = await get(http, f"{sim.url}{path}", KUBECTL_ACCEPT)
            assert status == 200 and headers["Content-Type"] == V2 and headers["Etag"].startswith('"')
            assert headers["Vary"] == "Accept"
            docs.append(orjson.loads(body))
            assert docs[-1]["kind"] == "APIGroupDiscoveryList" and docs[-1]["apiVersion"] == "apidiscovery.k8s.io/v2"
        assert [g["metadata"] for g in docs[0]["items"]] == [{"creationTimestamp": None}]  # the core group, unnamed
        legacy = await legacy_resources(http, sim.url)
        assert aggregated_resources(*docs) == legacy
        assert ("pods", "Pod", "Namespaced", "pod", ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"),
                ("po",), ("all",)) in legacy["v1"]
        assert ("nodes", "Node", "Cluster") == next(e for e in legacy["v1"] if e[0] == "nodes")[:3]
        assert ("pods/log", "Pod", ("get",)) in legacy["v1"]  # pods/log's kind is Pod, as kube-apiserver says

        for accept in (None, "application/json", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"):
            status, headers, body = await get(http, f"{sim.url}/apis", accept)
            assert status == 200 and headers["Content-Type"] == "application/json" and "Etag" not in headers
            assert b'"kind":"APIGroupList"' in body


async def test_a_matching_etag_is_a_304_and_a_crd_changes_it():
    async with SimCluster(small_cluster(), run_controllers=False) as sim, sim.http_session() as http:
        url = f"{sim.url}/apis"
        _, headers, _ = await get(http, url, V2)
        etag = headers["Etag"]
        status, headers, body = await get(http, url, V2, etag)
        assert (status, body, headers["Etag"], sim.api_counts.not_modified) == (304, b"", etag, 1)
        assert (await get(http, url, V2, '"another"'))[0] == 200
        assert (await get(http, url, "application/json", etag))[0] == 200  # the legacy document has no ETag

        sim.store.create(CRD_KEY, custom_resource_definition("nvidia.com", "v1", "clusterpolicies", "ClusterPolicy", namespaced=False))
        status, headers, body = await get(http, url, V2, etag)
        assert status == 200 and headers["Etag"] != etag and sim.api_counts.not_modified == 1
        group = next(g for g in orjson.loads(body)["items"] if g["metadata"].get("name") == "nvidia.com")
        (policies,) = group["versions"][0]["resources"]  # a CRD's responseKind names its group and version
        assert policies["responseKind"] == {"group": "nvidia.com", "version": "v1", "kind": "ClusterPolicy"}
        assert policies["scope"] == "Cluster" and [s["subresource"] for s in policies["subresources"]] == ["status"]

        sim.store.delete(CRD_KEY, "", "clusterpolicies.nvidia.com")
        assert (await get(http, url, V2, etag))[0] == 304  # served as before: the same document, the same ETag


async def test_v2beta1_only_where_the_release_still_serves_it():
    """apidiscovery.k8s.io/v2beta1 is gone from 1.33 (AggregatedDiscoveryRemoveBetaType): a client asking for it and
    plain JSON gets the legacy document; 1.32 still answers it, with the same ETag as v2."""
    async with SimCluster(small_cluster(), run_controllers=False) as sim, sim.http_session() as http:
        status, headers, body = await get(http, f"{sim.url}/apis", f"{V2BETA1},application/json")
        assert status == 200 and headers["Content-Type"] == "application/json" and b'"kind":"APIGroupList"' in body
    async with SimCluster(small_cluster(), run_controllers=False, server_minor=32) as sim, sim.http_session() as http:
        _, v2, _ = await get(http, f"{sim.url}/apis", V2)
        status, headers, body = await get(http, f"{sim.url}/apis", f"{V2BETA1},application/json")
        assert status == 200 and headers["Content-Type"] == V2BETA1 and b'"apiVersion":"apidiscovery.k8s.io/v2beta1"' in body
        assert headers["Etag"] == v2["Etag"]


async def test_kubectl_lists_the_resources_from_aggregated_discovery_and_revalidates_them(make_kubectl):
    async with SimCluster(small_cluster(), run_controllers=False) as sim, sim.http_session() as http:
        kubectl = make_kubectl(sim.kubeconfig_path)
        out = await asyncio.to_thread(kubectl, "api-resources", "-o", "name")
        before = dict(sim.api_counts.requests)
        assert before.get("discovery") == 2  # /api and /apis, aggregated: no group's own document asked for
        legacy = await legacy_resources(http, sim.url)
        named = {e[0] + (f".{gv.split('/')[0]}" if "/" in gv else "") for gv, entries in legacy.items() for e in entries if "/" not in e[0]}
        assert set(out.split()) == named

        await asyncio.to_thread(kubectl, "api-resources")  # not --cached: asked again, with the ETags kubectl kept
        assert sim.api_counts.not_modified == 2
