"""Discovery: /version, the health probes, /api, /apis, each group and its resource list; and /api and /apis as
aggregated discovery (an APIGroupDiscoveryList, KEP-3352) for a client whose Accept asks for it, with an ETag."""
from __future__ import annotations

import hashlib
from typing import Any

import orjson
from aiohttp import web

from .base import ApiBase
from ..resources import ResourceType
from .responses import json_response

Obj = dict[str, Any]

VERSION_INFO = {
    "major": "1",
    "minor": "34",
    "emulationMajor": "1",
    "emulationMinor": "34",
    "minCompatibilityMajor": "1",
    "minCompatibilityMinor": "33",
    "gitVersion": "v1.34.1",
    "gitCommit": "93248f9ae092f571eb870b7664c534bfc7d00f03",
    "gitTreeState": "clean",
    "buildDate": "2025-09-09T19:37:58Z",
    "goVersion": "go1.24.6",
    "compiler": "gc",
    "platform": "linux/amd64",
}
SUBRESOURCE_KINDS = {"binding": "Binding", "proxy": None}  # else the resource's own kind (pods/log: Pod)
SUBRESOURCE_VERBS = {
    "status": ["get", "patch", "update"],
    "log": ["get"],
    "binding": ["create"],
    "proxy": ["create", "delete", "get", "patch", "update"],
}
# Aggregated discovery's media type: apidiscovery.k8s.io/v2 (1.30+); v2beta1 served from 1.27 until 1.33, where the
# AggregatedDiscoveryRemoveBetaType gate (on by default) stops it (aggregated/negotiation.go).
AGGREGATED_GROUP, AGGREGATED_KIND = "apidiscovery.k8s.io", "APIGroupDiscoveryList"


def aggregated_version(accept: str, minor: int) -> str | None:
    """The apidiscovery.k8s.io version the Accept header asks /api or /apis for, or None: the legacy documents. Its
    clauses by q, as kube-apiserver weighs them; one naming a kind or a version not served here is passed over
    (IsAggregatedDiscoveryGVK), the first other one decides."""
    served = {"v2"} if minor >= 33 else {"v2", "v2beta1"} if minor >= 30 else {"v2beta1"} if minor >= 27 else set()
    clauses: list[tuple[float, str, dict[str, str]]] = []
    for clause in accept.split(","):
        media, *params = (part.strip() for part in clause.split(";"))
        args = {k.strip(): v.strip() for k, _, v in (p.partition("=") for p in params)}
        try:
            q = float(args.pop("q", "1"))
        except ValueError:
            continue
        if media and q > 0:
            clauses.append((q, media, args))
    for _, media, args in sorted(clauses, key=lambda c: -c[0]):
        if not {"g", "v", "as"} & args.keys():
            return None
        if media == "application/json" and args.get("g") == AGGREGATED_GROUP and args.get("as") == AGGREGATED_KIND \
                and args.get("v") in served:
            return args["v"]
    return None


def aggregated_content_type(version: str) -> str:
    return f"application/json;g={AGGREGATED_GROUP};v={version};as={AGGREGATED_KIND}"


class Discovery(ApiBase):
    """Api's handlers for /version, the probes, and the API discovery documents."""

    # -- discovery -------------------------------------------------------
    async def version(self, request: web.Request) -> web.Response:
        if getattr(self.cluster, "version_unknown", False):  # a dump: which release served it is not in it
            return json_response({key: "" for key in VERSION_INFO})
        minor = str(getattr(self.cluster, "server_minor", VERSION_INFO["minor"]))
        if minor == VERSION_INFO["minor"]:
            return json_response(VERSION_INFO)
        return json_response({**VERSION_INFO, "minor": minor, "emulationMinor": minor, "minCompatibilityMinor": str(int(minor) - 1),
                              "gitVersion": f"v1.{minor}.0"})

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    def _core_versions(self, request: web.Request) -> Obj:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": request.host}],
        }

    @staticmethod
    def _group(name: str, versions: list[str]) -> Obj:
        gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
        return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}

    def _group_list(self) -> Obj:
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [self._group(g, vs) for g, vs in self._groups().items()]}

    def _served_in(self, group: str, version: str) -> list[ResourceType]:
        return [r for r in self.store.resources.values() if r.group == group and r.version == version and self.served(r)]

    def _resource_list(self, group: str, version: str) -> Obj | None:
        served = self._served_in(group, version)
        if not served:
            return None
        entries: list[Obj] = []
        for r in served:
            entry: Obj = {
                "name": r.plural,
                "singularName": r.singular or r.kind.lower(),
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": _verbs(r),
            }
            if r.short_names:
                entry["shortNames"] = list(r.short_names)
            if r.categories:
                entry["categories"] = list(r.categories)
            entries.append(entry)
            for sub in r.subresources:
                entries.append({
                    "name": f"{r.plural}/{sub}",
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "kind": _subresource_kind(r, sub),
                    "verbs": SUBRESOURCE_VERBS.get(sub, ["get"]),
                })
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": entries}

    # -- aggregated discovery (staging/src/k8s.io/apiserver/pkg/endpoints/discovery/aggregated) ---------------------
    def _aggregated_items(self, core: bool) -> list[Obj]:
        """The APIGroupDiscovery items: /api's one (the core group, named ""), /apis's one a group, in the order of
        the APIGroupList; each version's resources as in its APIResourceList, their subresources within them. Keys
        in the order of the Go types (apidiscovery/v2), which the ETag hashes."""
        groups = {"": ["v1"]} if core else self._groups()
        items: list[Obj] = []
        for name, versions in groups.items():
            metadata: Obj = {"name": name, "creationTimestamp": None} if name else {"creationTimestamp": None}
            items.append({"metadata": metadata, "versions": [
                {"version": v, "resources": [_resource_discovery(r) for r in self._served_in(name, v)], "freshness": "Current"}
                for v in versions]})
        return items

    def aggregated(self, request: web.Request, core: bool, version: str) -> web.Response:
        """An APIGroupDiscoveryList, with its ETag (the upper-case hex SHA-512 of the v2 list's JSON, quoted: etag.go);
        304 without a body where If-None-Match is that ETag."""
        items = self._aggregated_items(core)
        etag = '"' + hashlib.sha512(orjson.dumps({"metadata": {}, "items": items})).hexdigest().upper() + '"'
        headers = {"ETag": etag, "Vary": "Accept", "Cache-Control": "public"}
        if request.headers.get("If-None-Match") == etag:
            self.cluster.api_counts.not_modified += 1
            return web.Response(status=304, headers=headers)
        body = {"kind": AGGREGATED_KIND, "apiVersion": f"{AGGREGATED_GROUP}/{version}", "metadata": {}, "items": items}
        return web.Response(body=orjson.dumps(body), headers={**headers, "Content-Type": aggregated_content_type(version)})


def _verbs(r: ResourceType) -> list[str]:
    return sorted(set(r.verbs) | ({"deletecollection"} if "delete" in r.verbs else set()))


def _subresource_kind(r: ResourceType, sub: str) -> str:
    return SUBRESOURCE_KINDS.get(sub, r.kind) or f"{r.kind}{sub.capitalize()}Options"


def _response_kind(r: ResourceType, kind: str) -> Obj:
    """A built-in's responseKind names only its kind (converted from its APIResource, group and version empty); a
    custom resource's names its group and version too (the CRDs' discovery controller)."""
    return {"group": r.group if r.custom else "", "version": r.version if r.custom else "", "kind": kind}


def _resource_discovery(r: ResourceType) -> Obj:
    entry: Obj = {"resource": r.plural, "responseKind": _response_kind(r, r.kind),
                  "scope": "Namespaced" if r.namespaced else "Cluster", "singularResource": r.singular or r.kind.lower(),
                  "verbs": _verbs(r)}
    if r.short_names:
        entry["shortNames"] = list(r.short_names)
    if r.categories:
        entry["categories"] = list(r.categories)
    if r.subresources:
        entry["subresources"] = [{"subresource": sub, "responseKind": _response_kind(r, _subresource_kind(r, sub)),
                                  "verbs": SUBRESOURCE_VERBS.get(sub, ["get"])} for sub in r.subresources]
    return entry
