"""Discovery: /version, the health probes, /api, /apis, each group and its resource list."""
from __future__ import annotations

from typing import Any

from aiohttp import web

from .base import ApiBase
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
SUBRESOURCE_KINDS = {"binding": "Binding", "proxy": None, "log": None}
SUBRESOURCE_VERBS = {
    "status": ["get", "patch", "update"],
    "log": ["get"],
    "binding": ["create"],
    "proxy": ["create", "delete", "get", "patch", "update"],
}


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

    def _resource_list(self, group: str, version: str) -> Obj | None:
        served = [r for r in self.store.resources.values() if r.group == group and r.version == version and self.served(r)]
        if not served:
            return None
        entries: list[Obj] = []
        for r in served:
            entry: Obj = {
                "name": r.plural,
                "singularName": r.singular or r.kind.lower(),
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": sorted(set(r.verbs) | ({"deletecollection"} if "delete" in r.verbs else set())),
            }
            if r.short_names:
                entry["shortNames"] = list(r.short_names)
            if r.categories:
                entry["categories"] = list(r.categories)
            entries.append(entry)
            for sub in r.subresources:
                kind = SUBRESOURCE_KINDS.get(sub, r.kind) or f"{r.kind}{sub.capitalize()}Options"
                entries.append({
                    "name": f"{r.plural}/{sub}",
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "kind": kind,
                    "verbs": SUBRESOURCE_VERBS.get(sub, ["get"]),
                })
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": entries}
