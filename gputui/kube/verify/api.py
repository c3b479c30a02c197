"""The API calls: raw JSON and watches, reading nodes and pods, planning from them, deleting a pod."""
from __future__ import annotations

import asyncio
import random
import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import orjson

from ..client import HttpError, path
from ..gpu import GpuResources, is_gpu_node, node_usage
from ..records import node_from
from .judging import FORBIDDEN, REFUSED
from .options import DELETE_CONFIRM_TIMEOUT, ApiError, VerifyError, VerifyOptions
from .plan import CLAIMS_API, DRA_DEVICE_CLASS, DraGpus, Plan, dra_gpus, gpu_usage, plan_for

if TYPE_CHECKING:
    from ..client import Client


# -- API helpers (raw JSON: no generated models) ---------------------------


async def _json(api: Client, method: str, url_path: str, *, params: dict[str, Any] | None = None, body: Any = None) -> dict[str, Any]:
    """The parsed answer; ApiError (the verification's) for a status of 300 or more."""
    resp = await api.request(method, url_path, params=params, body=body)
    try:
        data = await resp.read()
    finally:
        resp.release()
    if resp.status >= 300:
        raise ApiError.from_body(resp.status, data)
    return orjson.loads(data)


async def _lines(api: Client, url_path: str, params: dict[str, Any]) -> AsyncIterator[bytes]:
    """The lines of a watch response: one JSON event each."""
    resp = await api.request("GET", url_path, params=params)
    try:
        if resp.status >= 300:
            raise ApiError.from_body(resp.status, await resp.read())
        pending = b""
        async for chunk in resp:
            *complete, pending = (pending + chunk).split(b"\n")
            for line in complete:
                yield line
        if pending:
            yield pending
    finally:
        resp.close()


RETRY_PAUSE = 0.2  # seconds between reconnects; callers bound the whole wait with their own timeout


def _too_large(code: int, message: str, causes: Any = None) -> bool:
    """kube-apiserver's 504 for a resourceVersion from the future of the resource's etcd (Too large resource version)."""
    return code == 504 and (any(isinstance(c, dict) and c.get("reason") == "ResourceVersionTooLarge" for c in causes or ())
                            or "Too large resource version" in message)


async def _watch(api: Client, collection: str, field_selector: str, since: str | None) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """(type, object) from a watch that resumes where it ended, reconnects after connection errors (an API
    server restart) and, as client-go's reflector does, lists again (ADDED for each item) and watches from
    the list's resourceVersion after a 410 Expired or a 504 "Too large resource version". since=None: list
    first. A watch may start only from a resourceVersion of its own resource: another's (a pod's, for
    events kept in an etcd of their own) is from another sequence, far ahead or behind. Runs until the
    caller stops it."""
    relist = since is None
    while True:
        try:
            if relist:
                listed = await _json(api, "GET", collection, params={"fieldSelector": field_selector})
                for obj in listed.get("items") or []:
                    yield "ADDED", obj
                since = listed["metadata"]["resourceVersion"]
                relist = False
            params = {"fieldSelector": field_selector, "watch": "true", "resourceVersion": since,
                      "allowWatchBookmarks": "true", "timeoutSeconds": 300}
            stream = _lines(api, collection, params)
            async for line in stream:
                if not line.strip():
                    continue
                event = orjson.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    code, message = int(obj.get("code") or 500), str(obj.get("message") or "watch failed")
                    if code == 410 or _too_large(code, message, (obj.get("details") or {}).get("causes")):
                        relist = True
                        break
                    raise ApiError(code, message, str(obj.get("reason") or ""))
                since = (obj.get("metadata") or {}).get("resourceVersion") or since
                if kind != "BOOKMARK":
                    yield kind, obj
        except ApiError as e:
            if not (e.status == 410 or _too_large(e.status, e.message)):
                raise
            relist = True  # refused before the stream began
        except (OSError, HttpError):
            await asyncio.sleep(RETRY_PAUSE)


async def read_node(api: Client, node: str) -> dict[str, Any]:
    try:
        return await _json(api, "GET", path("v1", "nodes", node))
    except ApiError as e:
        if e.status == 404:
            raise VerifyError(f"node {node!r} not found") from None
        raise


async def pods_on_node(api: Client, node: str) -> list[dict[str, Any]]:
    listed = await _json(api, "GET", "/api/v1/pods", params={"fieldSelector": f"spec.nodeName={node}"})
    return listed.get("items") or []


async def gpu_node_names(api: Client) -> list[str]:
    """Every node with NVIDIA hardware labelled or GPU resources advertised, by name."""
    listed = await _json(api, "GET", "/api/v1/nodes")
    nodes = [node_from(obj) for obj in listed.get("items") or []]
    return sorted(n.name for n in nodes if is_gpu_node(n, node_usage(n, [], GpuResources())))


async def plan_verification(api: Client, node: str, options: VerifyOptions, namespace: str, rng: random.Random | None = None) -> Plan:
    """Read the node and what its pods hold, and plan its verification pod (rng: fixed names in tests)."""
    node_obj = await read_node(api, node)
    try:
        pods = await pods_on_node(api, node)
    except ApiError as e:
        if e.status != 403:
            raise
        pods = []  # may not list pods cluster-wide: choose from allocatable, the scheduler still judges fit
    offer = None
    if options.resource in (None, DRA_DEVICE_CLASS):
        _, allocatable = gpu_usage(node_obj, [])
        if options.resource == DRA_DEVICE_CLASS or not any(n > 0 for n in allocatable.values()):
            offer = await read_dra_gpus(api, node, namespace)
    return plan_for(node_obj, pods, namespace, options, rng, offer)


async def read_dra_gpus(api: Client, node: str, namespace: str) -> DraGpus | None:
    """The node's GPUs under Dynamic Resource Allocation; None when the cluster serves no resource.k8s.io/v1
    or it may not be read (then the plan asks for the extended resource, and the scheduler answers)."""
    try:
        slices = (await _json(api, "GET", path(CLAIMS_API, "resourceslices"))).get("items") or []
        try:
            await _json(api, "GET", path(CLAIMS_API, "deviceclasses", DRA_DEVICE_CLASS))
            device_class: str | None = DRA_DEVICE_CLASS
        except ApiError as e:
            if e.status != 404:
                raise
            device_class = None
        try:
            claims = (await _json(api, "GET", path(CLAIMS_API, "resourceclaims"))).get("items") or []
        except ApiError as e:
            if e.status != 403:
                raise
            claims = (await _json(api, "GET", path(CLAIMS_API, "resourceclaims", namespace=namespace))).get("items") or []
    except ApiError as e:
        if e.status in (403, 404):
            return None
        raise
    return dra_gpus(node, slices, claims, device_class)


def create_denied_message(e: ApiError, namespace: str) -> str:
    if "cannot create resource" in str(e) or not str(e):
        return f"forbidden: you may not create pods in namespace {namespace} (RBAC: create pods in namespace {namespace})"
    return f"forbidden: {e}"


# `pods "x" is forbidden: ` (or `pods is forbidden: ` before a name was given): what the reason follows.
_FORBIDDEN_PREFIX = re.compile(r'^[a-z0-9.-]+(?: "[^"]*")? is forbidden: ')
_NAMESPACE_NOT_FOUND = re.compile(r'^namespaces "[^"]*" not found$')


def refusal(e: ApiError, kind: str, namespace: str) -> tuple[str, str] | None:
    """(verdict code, one line) for a create the API server refused, or None for another error. RBAC's 403 names
    the permission to ask for; an admission plugin's refusal (a ResourceQuota, PodSecurity, a namespace that is
    missing or being deleted) quotes the server's words, less the `pods "x" is forbidden: ` it starts with."""
    if e.status == 403 and ("cannot create resource" in str(e) or not e.message):
        if kind == "pod":
            return FORBIDDEN, create_denied_message(e, namespace)
        return FORBIDDEN, (f"forbidden: you may not create resourceclaims in namespace {namespace} "
                           f"(RBAC: create resourceclaims.resource.k8s.io in namespace {namespace}): {e}")
    if e.status == 403 or (e.status == 404 and _NAMESPACE_NOT_FOUND.match(e.message)):
        return REFUSED, f"the API server refused the {kind}: {_FORBIDDEN_PREFIX.sub('', e.message)}"
    return None


# -- deletion --------------------------------------------------------------


async def delete_pod(api: Client, namespace: str, name: str, confirm_timeout: float = DELETE_CONFIRM_TIMEOUT) -> bool:
    """Delete the pod and wait until it is gone; True once that is confirmed within confirm_timeout."""
    return await _delete_confirmed(api, "v1", "pods", namespace, name, confirm_timeout)


async def delete_claim(api: Client, namespace: str, name: str, confirm_timeout: float = DELETE_CONFIRM_TIMEOUT) -> bool:
    """Delete the ResourceClaim and wait until it is gone (deallocated, its finalizer removed); True once confirmed."""
    return await _delete_confirmed(api, CLAIMS_API, "resourceclaims", namespace, name, confirm_timeout)


async def _delete_confirmed(api: Client, group_version: str, resource: str, namespace: str, name: str, confirm_timeout: float) -> bool:
    try:
        async with asyncio.timeout(confirm_timeout):
            while True:
                try:
                    return await _delete_and_wait(api, namespace, name, group_version, resource)
                except (OSError, HttpError):
                    await asyncio.sleep(RETRY_PAUSE)  # the API server may be restarting: try again
    except (TimeoutError, ApiError, ValueError):
        return False


async def _delete_and_wait(api: Client, namespace: str, name: str, group_version: str = "v1", resource: str = "pods") -> bool:
    pod = path(group_version, resource, name, namespace=namespace)
    try:
        await _json(api, "DELETE", pod, body={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 1})
    except ApiError as e:
        if e.status == 404:
            return True
        raise
    while True:
        try:
            current = await _json(api, "GET", pod)
        except ApiError as e:
            if e.status == 404:
                return True
            raise
        since = current["metadata"]["resourceVersion"]
        async for kind, _obj in _watch(api, path(group_version, resource, namespace=namespace), f"metadata.name={name}", since):
            if kind == "DELETED":
                return True


async def _delete_shielded(api: Client, namespace: str, name: str, confirm_timeout: float, claim: bool = False) -> tuple[bool, bool]:
    """Run delete_pod (delete_claim) to its end even if the caller is cancelled meanwhile: (confirmed, was_cancelled)."""
    task = asyncio.ensure_future((delete_claim if claim else delete_pod)(api, namespace, name, confirm_timeout))
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    return task.result(), cancelled
