"""The simulated kube-apiserver's HTTP layer (aiohttp).

Everything in resources.RESOURCES is served generically by one catch-all
route: `/api/v1/...` and `/apis/{group}/{version}/...`, namespaced and
cluster-scoped, with subresources (status, log, binding, proxy: proxy.py). A
custom resource is served only while its CustomResourceDefinition exists.
Lists are built by
joining each object's stored JSON (Entry.raw), never re-serialising objects
per request. Error bodies are `Status` objects worded like the real server's.
"""
from __future__ import annotations

import asyncio
import base64
import bisect
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Callable

import orjson
from aiohttp import web

from . import admission, patching, tables
from .faults import FAULT_USER
from .proxy import Proxy, ProxyError, split_name_port
from .resources import CRD_KEY, RESOURCES, ResourceType, find, groups
from .selectors import SelectorError, both, field_selector, label_selector
from .store import CLOSED, Entry, Gone, NotFound, now_rfc3339

if TYPE_CHECKING:
    from .cluster import SimCluster

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
JSON = "application/json"
# How often a quiet watch checks that its client is still there.
WATCH_IDLE_CHECK = 5.0


class ApiError(Exception):
    """Answered as a `Status` object."""

    def __init__(self, code: int, reason: str, message: str, details: Obj | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details


def status_body(code: int, reason: str, message: str, details: Obj | None = None) -> Obj:
    body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason}
    if details:
        body["details"] = details
    body["code"] = code
    return body


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type=JSON)


def raw_response(raw: bytes, status: int = 200) -> web.Response:
    return web.Response(body=raw, status=status, content_type=JSON)


LARGE_BODY = 1 << 20


async def send_large(request: web.Request, body: bytes) -> web.StreamResponse:
    """A big JSON body written in slices of itself: aiohttp's plain Response copies it whole
    into the transport's buffer, which makes a 100 MB list several times slower."""
    if len(body) <= LARGE_BODY:
        return raw_response(body)
    response = web.StreamResponse(headers={"Content-Type": JSON})
    response.content_length = len(body)
    await response.prepare(request)
    view = memoryview(body)
    for offset in range(0, len(body), LARGE_BODY):
        await response.write(view[offset:offset + LARGE_BODY])
    await response.write_eof()
    return response


def qualified(r: ResourceType) -> str:
    """How the real server names a resource in messages: `pods`, `daemonsets.apps`."""
    return r.key


def _details(r: ResourceType, name: str | None) -> Obj:
    details: Obj = {}
    if name:
        details["name"] = name
    if r.group:
        details["group"] = r.group
    details["kind"] = r.plural
    return details


def not_found(r: ResourceType, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{qualified(r)} "{name}" not found', _details(r, name))


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def conflict(r: ResourceType, name: str, why: str) -> ApiError:
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {qualified(r)} "{name}": {why}', _details(r, name))


PATH_NOT_FOUND = ApiError(404, "NotFound", "the server could not find the requested resource", {})


@dataclass
class Target:
    resource: ResourceType
    namespace: str | None  # None: every namespace (or a cluster-scoped kind)
    name: str | None  # for proxy: `name[:port]` as given
    subresource: str | None
    proxy_path: str = "/"  # the path after `/proxy`


def parse_resource_path(segments: list[str], served: Callable[[ResourceType], bool] = lambda r: True) -> Target:
    """Resolve `/api/v1/...` or `/apis/g/v/...` (split, without the prefix) to a Target."""
    if segments[0] == "api":
        group, version, rest = "", segments[1], segments[2:]
    else:
        group, version, rest = segments[1], segments[2], segments[3:]
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        r = find(group, version, rest[2])
        if r is not None and r.namespaced:
            namespace, rest = rest[1], rest[2:]
    r = find(group, version, rest[0])
    if r is None or not served(r) or (len(rest) > 3 and rest[2] != "proxy"):
        raise PATH_NOT_FOUND
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if sub is not None and sub not in r.subresources:
        raise PATH_NOT_FOUND
    if r.namespaced and name is not None and namespace is None:
        raise PATH_NOT_FOUND
    return Target(r, namespace if r.namespaced else None, name, sub, "/" + "/".join(rest[3:]))


def _flag(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1")


def _int_param(query: Any, name: str) -> int | None:
    value = query.get(name)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError:
        raise bad_request(f'invalid value for {name}: "{value}"') from None


def _wants_table(request: web.Request) -> bool:
    accept = request.headers.get("Accept", "")
    return "as=Table" in accept and "g=meta.k8s.io" in accept


def _sort_key(entry: Entry) -> tuple[str, str]:
    meta = entry.obj["metadata"]
    return meta.get("namespace", ""), meta["name"]


def _encode_continue(rv: int, key: tuple[str, str]) -> str:
    return base64.urlsafe_b64encode(orjson.dumps({"rv": rv, "start": list(key)})).decode()


def _decode_continue(token: str) -> tuple[str, str]:
    try:
        data = orjson.loads(base64.urlsafe_b64decode(token.encode() + b"=" * (-len(token) % 4)))
        ns, name = data["start"]
        return str(ns), str(name)
    except Exception:  # noqa: BLE001  (any malformed token is the client's error)
        raise bad_request("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)") from None


class Api:
    def __init__(self, cluster: "SimCluster") -> None:
        self.cluster = cluster
        self.store = cluster.store
        self.proxy = Proxy(cluster.store)

    def served(self, r: ResourceType) -> bool:
        """A built-in kind always; a custom one while its CustomResourceDefinition exists."""
        return not r.custom or self.store.find(CRD_KEY, "", r.key) is not None

    def _groups(self) -> dict[str, list[str]]:
        return groups(self.served)

    # -- discovery -------------------------------------------------------
    async def version(self, request: web.Request) -> web.Response:
        return json_response(VERSION_INFO)

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
        served = [r for r in RESOURCES if r.group == group and r.version == version and self.served(r)]
        if not served:
            return None
        entries: list[Obj] = []
        for r in served:
            entry: Obj = {
                "name": r.plural,
                "singularName": r.singular or r.kind.lower(),
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": sorted(set(r.verbs) | {"deletecollection"}),
            }
            if r.short_names:
                entry["shortNames"] = list(r.short_names)
            if r.kind in ("Pod", "DaemonSet"):
                entry["categories"] = ["all"]
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

    # -- routing ---------------------------------------------------------
    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._dispatch(request)
        except ApiError as e:
            return json_response(status_body(e.code, e.reason, e.message, e.details), status=e.code)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        segments = [s for s in request.path.split("/") if s]
        if not segments or segments[0] not in ("api", "apis"):
            raise PATH_NOT_FOUND
        if segments == ["api"]:
            return json_response(self._core_versions(request))
        if segments == ["apis"]:
            return json_response(self._group_list())
        if segments[0] == "apis" and len(segments) == 2:
            versions = self._groups().get(segments[1])
            if not versions:
                raise PATH_NOT_FOUND
            return json_response({"kind": "APIGroup", "apiVersion": "v1", **self._group(segments[1], versions)})
        if (segments[0] == "api" and len(segments) == 2) or (segments[0] == "apis" and len(segments) == 3):
            group, version = ("", segments[1]) if segments[0] == "api" else (segments[1], segments[2])
            body = self._resource_list(group, version)
            if body is None:
                raise PATH_NOT_FOUND
            return json_response(body)
        target = parse_resource_path(segments, self.served)
        query = request.query
        watching = request.method == "GET" and target.name is None and _flag(query.get("watch"))
        await self._apply_faults(request, target, watching)
        return await self._handle(request, target, watching)

    async def _handle(self, request: web.Request, t: Target, watching: bool) -> web.StreamResponse:
        method, sub = request.method, t.subresource
        if t.name is None:
            if method == "GET":
                return await (self.watch(request, t) if watching else self.list(request, t))
            if method == "POST":
                return await self.create(request, t)
            if method == "DELETE":
                return await self.delete_collection(request, t)
        elif sub == "log" and method == "GET":
            return await self.logs(request, t)
        elif sub == "binding" and method == "POST":
            return await self.bind(request, t)
        elif sub == "proxy" and t.resource.kind in ("Pod", "Service") and method in ("GET", "HEAD"):
            return self.proxied(t)
        elif sub in (None, "status"):
            if method == "GET":
                return self.get(request, t)
            if method == "PUT":
                return await self.update(request, t)
            if method == "PATCH":
                return await self.patch(request, t)
            if method == "DELETE" and sub is None:
                return await self.delete(request, t)
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource", _details(t.resource, t.name))

    async def _apply_faults(self, request: web.Request, t: Target, watching: bool) -> None:
        faults = self.cluster.faults
        if not faults.enabled:
            return
        fault = (t.subresource and faults.lookup(f"{t.resource.key}/{t.subresource}")) or faults.lookup(t.resource.key)
        if fault is None:
            return
        if fault.delay:
            await asyncio.sleep(fault.delay)
        if fault.code == 403:
            verb = _verb(request.method, t, watching)
            resource = t.resource.plural + (f"/{t.subresource}" if t.subresource else "")
            scope = f'in the namespace "{t.namespace}"' if t.namespace else "at the cluster scope"
            subject = qualified(t.resource) + (f' "{t.name}"' if t.name else "")
            message = (
                f'{subject} is forbidden: User "{FAULT_USER}" cannot {verb} resource "{resource}" '
                f'in API group "{t.resource.group}" {scope}'
            )
            raise ApiError(403, "Forbidden", message, _details(t.resource, t.name))
        if fault.code == 500:
            cause = f"simulated failure serving {qualified(t.resource)}"
            raise ApiError(500, "InternalError", f"Internal error occurred: {cause}", {"causes": [{"message": cause}]})

    # -- reading ---------------------------------------------------------
    def _selectors(self, request: web.Request, r: ResourceType) -> Callable[[Obj], bool]:
        labels = request.query.get("labelSelector", "")
        fields = request.query.get("fieldSelector", "")
        try:
            return both(label_selector(labels), field_selector(fields, r.kind))
        except SelectorError as e:
            # kubectl itself prefixes 'Unable to find "/v1, Resource=pods" that match ...'.
            raise bad_request(str(e)) from None

    def _table(self, r: ResourceType, entries: list[Entry], request: web.Request, meta: Obj, with_columns: bool = True) -> bytes:
        include = request.query.get("includeObject", "Metadata")
        now = datetime.now(timezone.utc)
        rows = []
        for e in entries:
            row: Obj = {"cells": tables.cells(r.kind, e.obj, now)}
            if include == "Object":
                row["object"] = orjson.Fragment(e.raw)
            elif include != "None":
                row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": e.obj["metadata"]}
            rows.append(row)
        body: Obj = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
        if with_columns:
            body["columnDefinitions"] = tables.column_definitions(r.kind)
        body["rows"] = rows
        return orjson.dumps(body)

    async def list(self, request: web.Request, t: Target) -> web.StreamResponse:
        r = t.resource
        matches = self._selectors(request, r)
        limit = _int_param(request.query, "limit") or 0
        token = request.query.get("continue")
        rv = self.store.resource_version
        idents = self.store.sorted_idents(r.key)
        # Pages continue after the last key served, so each page costs its own size, not the list's.
        lo = bisect.bisect_right(idents, _decode_continue(token)) if token else 0
        hi = len(idents)
        if t.namespace is not None:
            lo = max(lo, bisect.bisect_left(idents, (t.namespace, "")))
            hi = bisect.bisect_left(idents, (t.namespace + "\x00", ""))
        selected: list[Entry] = []
        more = False
        index = lo
        for index in range(lo, hi):
            e = self.store.entry_at(r.key, idents[index])
            if matches(e.obj):
                if limit and len(selected) == limit:
                    more = True
                    break
                selected.append(e)
        meta: Obj = {"resourceVersion": str(rv)}
        if more:
            meta["continue"] = _encode_continue(rv, _sort_key(selected[-1]))
            if not request.query.get("labelSelector") and not request.query.get("fieldSelector"):
                meta["remainingItemCount"] = hi - index
        if _wants_table(request):
            return await send_large(request, self._table(r, selected, request, meta))
        head = orjson.dumps({"kind": r.list_kind, "apiVersion": r.api_version, "metadata": meta})[:-1] + b',"items":['
        # One join, one copy: the list body is the stored JSON of each object, comma-separated.
        parts = [head]
        for e in selected:
            parts.append(e.raw)
            parts.append(b",")
        if selected:
            parts.pop()
        parts.append(b"]}")
        return await send_large(request, b"".join(parts))

    def _entry(self, t: Target) -> Entry:
        try:
            return self.store.get_entry(t.resource.key, t.namespace or "", t.name or "")
        except NotFound:
            raise not_found(t.resource, t.name or "") from None

    def get(self, request: web.Request, t: Target) -> web.Response:
        entry = self._entry(t)
        if _wants_table(request):
            return raw_response(self._table(t.resource, [entry], request, {"resourceVersion": entry.obj["metadata"]["resourceVersion"]}))
        return raw_response(entry.raw)

    # -- watching --------------------------------------------------------
    async def watch(self, request: web.Request, t: Target) -> web.StreamResponse:
        r, store = t.resource, self.store
        matches = self._selectors(request, r)
        namespace = t.namespace
        as_table = _wants_table(request)
        timeout = _int_param(request.query, "timeoutSeconds")
        bookmarks = _flag(request.query.get("allowWatchBookmarks"))
        initial_events = _flag(request.query.get("sendInitialEvents"))
        rv_param = request.query.get("resourceVersion", "")
        if rv_param in ("", "0") or initial_events:
            since = None
        else:
            try:
                since = int(rv_param)
            except ValueError:
                raise bad_request(f'invalid resource version "{rv_param}"') from None

        response = web.StreamResponse(headers={"Content-Type": JSON, "Cache-Control": "no-cache, private"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        first_table = True

        def visible(obj: Obj | None) -> bool:
            if obj is None:
                return False
            if namespace is not None and obj["metadata"].get("namespace") != namespace:
                return False
            return matches(obj)

        def encode(kind: str, raw: bytes, obj: Obj) -> bytes:
            nonlocal first_table
            if as_table:
                raw = self._table(r, [Entry(obj, raw)], request, {"resourceVersion": obj["metadata"].get("resourceVersion", "")}, first_table)
                first_table = False
            return b'{"type":"' + kind.encode() + b'","object":' + raw + b"}\n"

        try:
            w, replay = store.watch(r.key, since)
        except Gone as e:
            await response.write(b'{"type":"ERROR","object":' + orjson.dumps(status_body(410, "Expired", str(e))) + b"}\n")
            await response.write_eof()
            return response
        try:
            if since is None:
                initial = sorted(store.entries(r.key, namespace), key=_sort_key)
                backlog = [("ADDED", e.raw, e.obj) for e in initial if visible(e.obj)]
            else:
                backlog = [ev for ev in (self._translate(e, visible) for e in replay) if ev]
            for kind, raw, obj in backlog:
                await response.write(encode(kind, raw, obj))
            if initial_events:
                await response.write(self._bookmark(r, {"k8s.io/initial-events-end": "true"}))
            deadline = time.monotonic() + timeout if timeout else None
            interval = self.cluster.bookmark_interval
            next_bookmark = time.monotonic() + interval
            while True:
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    break
                wait = WATCH_IDLE_CHECK
                if deadline is not None:
                    wait = min(wait, deadline - now)
                if bookmarks:
                    wait = min(wait, max(0.0, next_bookmark - now))
                try:
                    item = await asyncio.wait_for(w.queue.get(), timeout=wait)
                except asyncio.TimeoutError:
                    if request.transport is None or request.transport.is_closing():
                        break
                    if bookmarks and time.monotonic() >= next_bookmark:
                        await response.write(self._bookmark(r))
                        next_bookmark = time.monotonic() + interval
                    continue
                if item is CLOSED:
                    break
                translated = self._translate(item, visible)  # type: ignore[arg-type]
                if translated:
                    await response.write(encode(*translated))
            await response.write_eof()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            w.close()
        return response

    @staticmethod
    def _translate(event: Any, visible: Callable[[Obj | None], bool]) -> tuple[str, bytes, Obj] | None:
        """The event a filtered watch sees: objects moving into or out of the selection become ADDED/DELETED."""
        now_visible = event.type != "DELETED" and visible(event.obj)
        was_visible = visible(event.old)
        if event.type == "DELETED":
            return ("DELETED", event.entry.raw, event.obj) if was_visible else None
        if now_visible:
            return ("MODIFIED" if was_visible else "ADDED", event.entry.raw, event.obj)
        if was_visible:
            # Left the selection: the last state it was seen in, at the event's resourceVersion.
            old = orjson.loads(orjson.dumps(event.old))
            old["metadata"]["resourceVersion"] = str(event.rv)
            return ("DELETED", orjson.dumps(old), old)
        return None

    def _bookmark(self, r: ResourceType, annotations: dict[str, str] | None = None) -> bytes:
        meta: Obj = {"resourceVersion": str(self.store.resource_version)}
        if annotations:
            meta["annotations"] = annotations
        return orjson.dumps({"type": "BOOKMARK", "object": {"kind": r.kind, "apiVersion": r.api_version, "metadata": meta}}) + b"\n"

    # -- writing ---------------------------------------------------------
    async def _body(self, request: web.Request) -> Any:
        data = await request.read()
        if not data:
            raise bad_request("the body of the request was empty")
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as e:
            raise bad_request(f"the body of the request was in an unknown format: {e}") from None

    def _check_identity(self, t: Target, obj: Any) -> Obj:
        r = t.resource
        if not isinstance(obj, dict):
            raise bad_request(f"the body of the request is not a {r.kind} object")
        if obj.get("kind") not in (None, "", r.kind) or obj.get("apiVersion") not in (None, "", r.api_version):
            raise bad_request(
                f"the API version in the data ({obj.get('apiVersion')}) does not match the expected API version ({r.api_version})"
                if obj.get("apiVersion") not in (None, "", r.api_version)
                else f'the kind in the data ({obj.get("kind")}) does not match the expected kind ({r.kind})'
            )
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if r.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and t.namespace and body_ns != t.namespace:
                raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
            meta["namespace"] = t.namespace or body_ns or "default"
        else:
            meta.pop("namespace", None)
        if t.name is not None and meta.get("name") not in (None, "", t.name):
            raise bad_request(f"the name of the object ({meta.get('name')}) does not match the name on the URL ({t.name})")
        return obj

    async def create(self, request: web.Request, t: Target) -> web.Response:
        r = t.resource
        obj = self._check_identity(t, await self._body(request))
        try:
            obj = admission.admit_create(r, obj)
        except admission.Invalid as e:
            raise _invalid(r, e) from None
        name = obj["metadata"].get("name")
        if name and self.store.find(r.key, obj["metadata"].get("namespace", ""), name) is not None:
            raise ApiError(409, "AlreadyExists", f'{qualified(r)} "{name}" already exists', _details(r, name))
        if request.query.get("dryRun"):
            return json_response(obj, status=201)
        return json_response(self.store.create(r.key, obj), status=201)

    def _write(self, t: Target, old: Obj, new: Obj) -> Obj:
        """Store an update unless it changes nothing (the real server then keeps the resourceVersion)."""
        wanted_rv = new.get("metadata", {}).get("resourceVersion")
        if wanted_rv and wanted_rv != old["metadata"]["resourceVersion"]:
            raise conflict(t.resource, t.name or "", "the object has been modified; please apply your changes to the latest version and try again")
        new = admission.prepare_update(t.resource, old, new, t.subresource)
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        for key in ("uid", "creationTimestamp", "name", "namespace"):
            if key in old["metadata"]:
                new["metadata"][key] = old["metadata"][key]
        if new == old:
            return old
        return self.store.replace(t.resource.key, new)

    async def update(self, request: web.Request, t: Target) -> web.Response:
        new = self._check_identity(t, await self._body(request))
        old = self.store.find(t.resource.key, t.namespace or "", t.name or "")
        if old is None:
            raise not_found(t.resource, t.name or "")
        return json_response(self._write(t, old, new))

    async def patch(self, request: web.Request, t: Target) -> web.Response:
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        if content_type not in patching.PATCH_TYPES:
            raise ApiError(
                415, "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: {', '.join(patching.PATCH_TYPES)}",
            )
        body = await self._body(request)
        old = self.store.find(t.resource.key, t.namespace or "", t.name or "")
        if old is None:
            raise not_found(t.resource, t.name or "")
        try:
            new = patching.apply(content_type, orjson.loads(orjson.dumps(old)), body)
        except (patching.PatchError, IndexError, KeyError, ValueError, TypeError) as e:
            raise ApiError(422 if "testing value" in str(e) else 400, "Invalid" if "testing value" in str(e) else "BadRequest", str(e)) from None
        if not isinstance(new, dict):
            raise bad_request("the patch does not result in an object")
        new = self._check_identity(t, new)
        if new.get("metadata", {}).get("resourceVersion") == old["metadata"]["resourceVersion"]:
            new["metadata"].pop("resourceVersion")
        return json_response(self._write(t, old, new))

    async def _delete_options(self, request: web.Request) -> Obj:
        data = await request.read()
        options: Obj = {}
        if data:
            try:
                options = orjson.loads(data) or {}
            except orjson.JSONDecodeError as e:
                raise bad_request(f"the body of the request was in an unknown format: {e}") from None
        grace = _int_param(request.query, "gracePeriodSeconds")
        if grace is not None:
            options["gracePeriodSeconds"] = grace
        return options

    def _delete_one(self, t: Target, name: str, options: Obj) -> Obj:
        r, store = t.resource, self.store
        ns = t.namespace or ""
        current = store.find(r.key, ns, name)
        if current is None:
            raise not_found(r, name)
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != current["metadata"].get("uid"):
            raise conflict(r, name, f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {current['metadata'].get('uid')}")
        if pre.get("resourceVersion") and pre["resourceVersion"] != current["metadata"].get("resourceVersion"):
            raise conflict(r, name, "the object has been modified; please apply your changes to the latest version and try again")
        if r.kind != "Pod":
            return store.delete(r.key, ns, name)
        grace = options.get("gracePeriodSeconds")
        if grace is None:
            grace = (current.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        unbound = not (current.get("spec") or {}).get("nodeName")
        finished = (current.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if grace <= 0 or unbound or finished:
            deleted = store.delete(r.key, ns, name)
            self.cluster.logs.forget_pod(ns, name)
            return deleted
        meta = current["metadata"]
        if meta.get("deletionTimestamp") and meta.get("deletionGracePeriodSeconds", grace) <= grace:
            return current  # already terminating with a shorter or equal grace period

        def mark(pod: Obj) -> None:
            when = datetime.now(timezone.utc) + timedelta(seconds=grace)
            pod["metadata"]["deletionTimestamp"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
            pod["metadata"]["deletionGracePeriodSeconds"] = grace

        return store.mutate(r.key, ns, name, mark)

    async def delete(self, request: web.Request, t: Target) -> web.Response:
        options = await self._delete_options(request)
        obj = self._delete_one(t, t.name or "", options)
        if t.resource.kind in ("Pod", "Namespace"):
            return json_response(obj)
        details = _details(t.resource, t.name)
        details["uid"] = obj["metadata"].get("uid", "")
        return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})

    async def delete_collection(self, request: web.Request, t: Target) -> web.Response:
        r = t.resource
        matches = self._selectors(request, r)
        options = await self._delete_options(request)
        deleted = []
        for entry in sorted(self.store.entries(r.key, t.namespace), key=_sort_key):
            if matches(entry.obj):
                target = Target(r, entry.obj["metadata"].get("namespace") if r.namespaced else None, entry.obj["metadata"]["name"], None)
                deleted.append(self._delete_one(target, target.name or "", options))
        return json_response({"kind": r.list_kind, "apiVersion": r.api_version, "metadata": {"resourceVersion": str(self.store.resource_version)}, "items": deleted})

    async def bind(self, request: web.Request, t: Target) -> web.Response:
        body = await self._body(request)
        node = ((body or {}).get("target") or {}).get("name") if isinstance(body, dict) else None
        if not node:
            raise ApiError(422, "Invalid", f'Binding "{t.name}" is invalid: target.name: Required value',
                           {"name": t.name, "kind": "Binding", "causes": [{"reason": "FieldValueRequired", "message": "Required value", "field": "target.name"}]})
        pod = self.store.find("pods", t.namespace or "", t.name or "")
        if pod is None:
            raise not_found(t.resource, t.name or "")
        if pod["metadata"].get("deletionTimestamp"):
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{t.name}": pod {t.name} is being deleted, cannot be assigned to a host', {"name": t.name, "kind": "pods/binding"})
        if (pod.get("spec") or {}).get("nodeName"):
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{t.name}": pod {t.name} is already assigned to node "{pod["spec"]["nodeName"]}"', {"name": t.name, "kind": "pods/binding"})

        def assign(p: Obj) -> None:
            p.setdefault("spec", {})["nodeName"] = node
            conditions = [c for c in (p.setdefault("status", {}).get("conditions") or []) if c.get("type") != "PodScheduled"]
            conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now_rfc3339()})
            p["status"]["conditions"] = conditions

        self.store.mutate("pods", t.namespace or "", t.name or "", assign)
        return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, status=201)

    # -- proxy -----------------------------------------------------------
    def proxied(self, t: Target) -> web.Response:
        at = self.proxy.pod if t.resource.kind == "Pod" else self.proxy.service
        try:
            status, content_type, body = at(t.namespace or "", t.name or "", t.proxy_path)
        except ProxyError as e:
            details = _details(t.resource, split_name_port(t.name or "")[0]) if e.code == 404 else None
            raise ApiError(e.code, e.reason, e.message, details) from None
        response = web.Response(body=body, status=status)
        response.headers["Content-Type"] = content_type
        return response

    # -- logs ------------------------------------------------------------
    async def logs(self, request: web.Request, t: Target) -> web.StreamResponse:
        pod = self._entry(t).obj
        query = request.query
        container = self._log_container(pod, query.get("container", ""))
        previous = _flag(query.get("previous"))
        follow = _flag(query.get("follow"))
        tail = _int_param(query, "tailLines")
        limit = _int_param(query, "limitBytes")
        if not (pod.get("spec") or {}).get("nodeName"):
            return web.Response(body=b"", content_type="text/plain")
        self._check_log_state(pod, container, previous)
        ns, name = t.namespace or "", t.name or ""
        if not follow or previous:
            lines = self.cluster.logs.read(ns, name, container, previous=previous, tail=tail) or []
            data = b"".join(lines)
            return web.Response(body=data[:limit] if limit else data, content_type="text/plain")
        response = web.StreamResponse(headers={"Content-Type": "text/plain", "Cache-Control": "no-cache, private"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        sent = 0
        try:
            async for line in self.cluster.logs.follow(ns, name, container, tail=tail):
                if limit:
                    line = line[: limit - sent]
                await response.write(line)
                sent += len(line)
                if limit and sent >= limit:
                    break
            await response.write_eof()
        except (ConnectionError, asyncio.CancelledError):
            pass
        return response

    @staticmethod
    def _log_container(pod: Obj, container: str) -> str:
        spec = pod.get("spec") or {}
        names = [c.get("name", "") for c in spec.get("containers") or []]
        init_names = [c.get("name", "") for c in spec.get("initContainers") or []]
        pod_name = pod["metadata"]["name"]
        if not container:
            if len(names) == 1:
                return names[0]
            message = f"a container name must be specified for pod {pod_name}, choose one of: [{' '.join(names)}]"
            if init_names:
                message += f" or one of the init containers: [{' '.join(init_names)}]"
            raise bad_request(message)
        if container not in names and container not in init_names:
            raise bad_request(f"container {container} is not valid for pod {pod_name}")
        return container

    @staticmethod
    def _check_log_state(pod: Obj, container: str, previous: bool) -> None:
        """The kubelet's refusals for a container with no logs to show."""
        status = pod.get("status") or {}
        statuses = (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or [])
        cs = next((s for s in statuses if s.get("name") == container), None)
        pod_name = pod["metadata"]["name"]
        state = (cs or {}).get("state") or {}
        last = (cs or {}).get("lastState") or {}
        if previous:
            if not last.get("terminated"):
                raise bad_request(f'previous terminated container "{container}" in pod "{pod_name}" not found')
            return
        if state.get("running") is not None or state.get("terminated") or last.get("terminated"):
            return
        reason = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
        if reason == "ErrImagePull":
            reason = "image can't be pulled"
        elif reason == "ImagePullBackOff":
            reason = "trying and failing to pull image"
        raise bad_request(f'container "{container}" in pod "{pod_name}" is waiting to start: {reason}')


def _verb(method: str, t: Target, watching: bool) -> str:
    if method == "GET":
        return "watch" if watching else ("list" if t.name is None else "get")
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete" if t.name else "deletecollection"}.get(method, method.lower())


def _invalid(r: ResourceType, e: admission.Invalid) -> ApiError:
    details: Obj = {"name": e.name, "kind": r.kind}
    if r.group:
        details["group"] = r.group
    details["causes"] = [{"reason": c.reason, "message": c.message, "field": c.field} for c in e.causes]
    return ApiError(422, "Invalid", str(e), details)


def make_app(cluster: "SimCluster") -> web.Application:
    api = Api(cluster)
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_get("/version", api.version)
    app.router.add_get("/version/", api.version)  # the Python clients' VersionApi asks here
    for probe in ("/healthz", "/livez", "/readyz"):
        app.router.add_get(probe, api.health)
    app.router.add_route("*", "/{tail:.*}", api.dispatch)
    return app
