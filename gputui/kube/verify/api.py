"""The API calls: raw JSON and watches, reading nodes and pods, planning from them, deleting a pod.

The Kubernetes client and aiohttp are imported inside the functions that use them (start-up time).
"""
from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import orjson

from ..gpu import GpuResources, is_gpu_node, node_usage
from ..records import node_from
from .options import DELETE_CONFIRM_TIMEOUT, ApiError, VerifyError, VerifyOptions
from .plan import Plan, plan_for

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient, CoreV1Api


# -- API helpers (raw JSON: no generated models) ---------------------------


async def _json(request: Awaitable[Any]) -> dict[str, Any]:
    resp = await request
    try:
        body = await resp.read()
    finally:
        resp.release()
    if resp.status >= 300:
        raise ApiError.from_body(resp.status, body)
    return orjson.loads(body)


async def _lines(request: Awaitable[Any]) -> AsyncIterator[bytes]:
    """The lines of a watch response: one JSON event each."""
    resp = await request
    try:
        if resp.status >= 300:
            raise ApiError.from_body(resp.status, await resp.read())
        pending = b""
        async for chunk in resp.content.iter_any():
            *complete, pending = (pending + chunk).split(b"\n")
            for line in complete:
                yield line
        if pending:
            yield pending
    finally:
        resp.close()


RETRY_PAUSE = 0.2  # seconds between reconnects; callers bound the whole wait with their own timeout


async def _watch(
    list_call: Callable[..., Awaitable[Any]], namespace: str, field_selector: str, since: str
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """(type, object) from a watch that resumes where it ended, reconnects after connection
    errors (an API server restart) and lists again after a 410. Runs until the caller stops it."""
    import aiohttp  # noqa: PLC0415

    while True:
        expired = False
        try:
            stream = _lines(
                list_call(
                    namespace, field_selector=field_selector, watch=True, resource_version=since,
                    allow_watch_bookmarks=True, timeout_seconds=300, _preload_content=False,
                )
            )
            async for line in stream:
                if not line.strip():
                    continue
                event = orjson.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        expired = True
                        break
                    raise ApiError(int(obj.get("code") or 500), str(obj.get("message") or "watch failed"), str(obj.get("reason") or ""))
                since = (obj.get("metadata") or {}).get("resourceVersion") or since
                if kind != "BOOKMARK":
                    yield kind, obj
            if expired:
                listed = await _json(list_call(namespace, field_selector=field_selector, _preload_content=False))
                for obj in listed.get("items") or []:
                    yield "ADDED", obj
                since = listed["metadata"]["resourceVersion"]
        except (OSError, aiohttp.ClientError):
            await asyncio.sleep(RETRY_PAUSE)


def _core(api: ApiClient) -> CoreV1Api:
    # The client is imported when first used, not with this module: the app imports
    # this module before its first frame, and the client takes longer to import than that.
    from kubernetes_asyncio.client import CoreV1Api  # noqa: PLC0415

    return CoreV1Api(api)


async def read_node(api: ApiClient, node: str) -> dict[str, Any]:
    try:
        return await _json(_core(api).read_node(node, _preload_content=False))
    except ApiError as e:
        if e.status == 404:
            raise VerifyError(f"node {node!r} not found") from None
        raise


async def pods_on_node(api: ApiClient, node: str) -> list[dict[str, Any]]:
    listed = await _json(_core(api).list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}", _preload_content=False))
    return listed.get("items") or []


async def gpu_node_names(api: ApiClient) -> list[str]:
    """Every node with NVIDIA hardware labelled or GPU resources advertised, by name."""
    listed = await _json(_core(api).list_node(_preload_content=False))
    nodes = [node_from(obj) for obj in listed.get("items") or []]
    return sorted(n.name for n in nodes if is_gpu_node(n, node_usage(n, [], GpuResources())))


async def plan_verification(api: ApiClient, node: str, options: VerifyOptions, namespace: str, rng: random.Random | None = None) -> Plan:
    """Read the node and what its pods hold, and plan its verification pod (rng: fixed names in tests)."""
    node_obj = await read_node(api, node)
    try:
        pods = await pods_on_node(api, node)
    except ApiError as e:
        if e.status != 403:
            raise
        pods = []  # may not list pods cluster-wide: choose from allocatable, the scheduler still judges fit
    return plan_for(node_obj, pods, namespace, options, rng)


def create_denied_message(e: ApiError, namespace: str) -> str:
    if "cannot create resource" in str(e) or not str(e):
        return f"forbidden: you may not create pods in namespace {namespace} (RBAC: create pods in namespace {namespace})"
    return f"forbidden: {e}"


# -- deletion --------------------------------------------------------------


async def delete_pod(api: ApiClient, namespace: str, name: str, confirm_timeout: float = DELETE_CONFIRM_TIMEOUT) -> bool:
    """Delete the pod and wait until it is gone; True once that is confirmed within confirm_timeout."""
    import aiohttp  # noqa: PLC0415

    core = _core(api)
    try:
        async with asyncio.timeout(confirm_timeout):
            while True:
                try:
                    return await _delete_and_wait(core, namespace, name)
                except (OSError, aiohttp.ClientError):
                    await asyncio.sleep(RETRY_PAUSE)  # the API server may be restarting: try again
    except (TimeoutError, ApiError, ValueError):
        return False


async def _delete_and_wait(core: CoreV1Api, namespace: str, name: str) -> bool:
    try:
        await _json(core.delete_namespaced_pod(name, namespace, grace_period_seconds=1, _preload_content=False))
    except ApiError as e:
        if e.status == 404:
            return True
        raise
    while True:
        try:
            current = await _json(core.read_namespaced_pod(name, namespace, _preload_content=False))
        except ApiError as e:
            if e.status == 404:
                return True
            raise
        since = current["metadata"]["resourceVersion"]
        async for kind, _obj in _watch(core.list_namespaced_pod, namespace, f"metadata.name={name}", since):
            if kind == "DELETED":
                return True


async def _delete_shielded(api: ApiClient, namespace: str, name: str, confirm_timeout: float) -> tuple[bool, bool]:
    """Run delete_pod to its end even if the caller is cancelled meanwhile: (confirmed, was_cancelled)."""
    task = asyncio.ensure_future(delete_pod(api, namespace, name, confirm_timeout))
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    return task.result(), cancelled
