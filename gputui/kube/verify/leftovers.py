"""Leftovers: verification pods an earlier, killed run left behind (or whose deletion was not confirmed)."""
from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..client import path
from .api import _json, delete_pod
from .judging import pod_display_status
from .options import DELETE_CONFIRM_TIMEOUT, LEFTOVER_SELECTOR, NODE_ANNOTATION, NODE_LABEL, ApiError

if TYPE_CHECKING:
    from ..client import Client


@dataclass(frozen=True)
class Leftover:
    namespace: str
    name: str
    node: str
    status: str
    created: str  # RFC 3339


async def find_leftovers(api: Client, namespace: str | None = None) -> list[Leftover]:
    """Verification pods still in the cluster (an earlier run was killed, or a deletion was not confirmed).

    All namespaces when allowed, else the given one.
    """
    selector = {"labelSelector": LEFTOVER_SELECTOR}
    try:
        listed = await _json(api, "GET", "/api/v1/pods", params=selector)
    except ApiError as e:
        if e.status != 403 or namespace is None:
            raise
        listed = await _json(api, "GET", path("v1", "pods", namespace=namespace), params=selector)
    found = []
    for pod in listed.get("items") or []:
        meta = pod.get("metadata") or {}
        node = (meta.get("annotations") or {}).get(NODE_ANNOTATION) or (meta.get("labels") or {}).get(NODE_LABEL) or ""
        found.append(Leftover(meta.get("namespace", ""), meta["name"], node, pod_display_status(pod), meta.get("creationTimestamp") or ""))
    return sorted(found, key=lambda lo: (lo.created, lo.namespace, lo.name))


async def delete_leftovers(api: Client, leftovers: Sequence[Leftover], confirm_timeout: float = DELETE_CONFIRM_TIMEOUT) -> list[Leftover]:
    """Delete them all; returns those whose deletion could not be confirmed."""
    results = await asyncio.gather(*(delete_pod(api, lo.namespace, lo.name, confirm_timeout) for lo in leftovers))
    return [lo for lo, gone in zip(leftovers, results) if not gone]
