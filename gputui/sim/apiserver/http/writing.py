"""Writing: create, update (and the status subresource), patch, delete and deletecollection."""
from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from .. import admission, admission_plugins, deletion, patching, quota
from .base import ApiBase
from .request import Target, _int_param, _sort_key
from .responses import ApiError, _details, _invalid, bad_request, conflict, json_response, not_found, qualified

Obj = dict[str, Any]


class Writing(ApiBase):
    """Api's handlers for create, update, patch, delete and deletecollection."""

    # -- writing ---------------------------------------------------------
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
        obj = self._check_identity(t, await self._body(request, t.resource))
        # kube-apiserver's order: decoding, mutating admission, validation, validating admission, then storage.
        try:
            admission.check_decodable(r, obj)
            admission_plugins.mutate(self.store, r, obj)
            obj = admission.admit_create(r, obj)
            warnings = admission_plugins.validate(self.store, r, obj)
        except admission.Invalid as e:
            raise _invalid(r, e) from None
        except admission_plugins.Refused as e:
            raise _refusal(e) from None
        except admission.Undecodable as e:
            raise bad_request(str(e)) from None
        name = obj["metadata"].get("name")
        namespace = obj["metadata"].get("namespace", "")
        if name and self.store.find(r.key, namespace, name) is not None:
            raise ApiError(409, "AlreadyExists", f'{qualified(r)} "{name}" already exists', _details(r, name))
        if request.query.get("dryRun"):
            return _warned(json_response(obj, status=201), warnings)
        created = self.store.create(r.key, obj)
        if r.namespaced:
            # The ResourceQuota plugin charges what it admitted; a new quota gets its status (the quota controller's
            # first sync) after the answer's copy was taken, as on a real cluster.
            quota.sync_status(self.store, namespace)
        return _warned(json_response(created, status=201), warnings)

    def _write(self, t: Target, old: Obj, new: Obj) -> Obj:
        """Store an update unless it changes nothing (the real server then keeps the resourceVersion)."""
        wanted_rv = new.get("metadata", {}).get("resourceVersion")
        if wanted_rv and wanted_rv != old["metadata"]["resourceVersion"]:
            raise conflict(t.resource, t.name or "", "the object has been modified; please apply your changes to the latest version and try again")
        try:
            admission.check_decodable(t.resource, new)
            new = admission.prepare_update(t.resource, old, new, t.subresource)
        except admission.Invalid as e:
            raise _invalid(t.resource, e) from None
        except admission.Undecodable as e:
            raise bad_request(str(e)) from None
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        for key in ("uid", "creationTimestamp", "name", "namespace"):
            if key in old["metadata"]:
                new["metadata"][key] = old["metadata"][key]
        if new == old:
            return old
        stored = self.store.replace(t.resource.key, new)
        meta = stored["metadata"]
        if t.resource.kind not in ("Pod", "Namespace") and meta.get("deletionTimestamp") and not meta.get("finalizers") \
                and self.store.find(t.resource.key, t.namespace or "", meta["name"]) is not None:
            self.store.delete(t.resource.key, t.namespace or "", meta["name"])  # its last finalizer removed: it goes
        elif t.resource.key == quota.QUOTAS and t.subresource is None:
            quota.sync_status(self.store, t.namespace or "")  # the quota controller, for the new spec
        return stored

    async def update(self, request: web.Request, t: Target) -> web.Response:
        new = self._check_identity(t, await self._body(request, t.resource))
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
        if r.kind == "Namespace" and (why := admission_plugins.namespace_deletable(name)) is not None:
            raise _refusal(admission_plugins.forbidden(r, name, why))
        return deletion.delete_stored(store, self.cluster.logs, r, current, options.get("gracePeriodSeconds"))

    async def delete(self, request: web.Request, t: Target) -> web.Response:
        options = await self._delete_options(request)
        obj = self._delete_one(t, t.name or "", options)
        if t.resource.namespaced:
            quota.sync_status(self.store, t.namespace or "")  # the quota controller, at once
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
        if r.namespaced:
            for namespace in sorted({d["metadata"].get("namespace", "") for d in deleted}):
                quota.sync_status(self.store, namespace)
        return json_response({"kind": r.list_kind, "apiVersion": r.api_version, "metadata": {"resourceVersion": str(self.store.resource_version_of(r.key))}, "items": deleted})


def _warned(response: web.Response, warnings: list[str]) -> web.Response:
    """The admission plugins' warnings as HTTP Warning headers (`299 - "text"`), which kubectl prints."""
    for text in warnings:
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        response.headers.add("Warning", f'299 - "{escaped}"')
    return response


def _refusal(e: admission_plugins.Refused) -> ApiError:
    return ApiError(e.code, e.reason, e.message, e.details)
