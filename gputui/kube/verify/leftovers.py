"""Leftovers: verification pods, and the ResourceClaims of verifications through DRA, that an earlier, killed run
left behind (or whose deletion was not confirmed)."""
from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..client import path
from .api import _json, delete_claim, delete_pod
from .judging import pod_display_status
from .options import DELETE_CONFIRM_TIMEOUT, LEFTOVER_SELECTOR, NODE_ANNOTATION, NODE_LABEL, ApiError
from .plan import CLAIMS_API

if TYPE_CHECKING:
    from ..client import Client


@dataclass(frozen=True)
class Leftover:
    namespace: str
    name: str
    node: str
    status: str
    created: str  # RFC 3339
    kind: str = "Pod"  # or "ResourceClaim"


async def find_leftovers(api: Client, namespace: str | None = None) -> list[Leftover]:
    """Verification pods and ResourceClaims still in the cluster (an earlier run was killed, or a deletion was
    not confirmed). All namespaces when allowed, else the given one. Claims are left out where the cluster
    serves no resource.k8s.io/v1 or they may not be listed.
    """
    found = []
    for pod in await _labelled(api, "v1", "pods", namespace):
        meta = pod.get("metadata") or {}
        found.append(Leftover(meta.get("namespace", ""), meta["name"], _node(meta), pod_display_status(pod), meta.get("creationTimestamp") or ""))
    try:
        claims = await _labelled(api, CLAIMS_API, "resourceclaims", namespace)
    except ApiError as e:
        if e.status not in (403, 404):
            raise
        claims = []
    for claim in claims:
        meta = claim.get("metadata") or {}
        found.append(Leftover(meta.get("namespace", ""), meta["name"], _node(meta), _claim_status(claim),
                              meta.get("creationTimestamp") or "", kind="ResourceClaim"))
    return sorted(found, key=lambda lo: (lo.created, lo.namespace, lo.name, lo.kind != "Pod"))


async def _labelled(api: Client, group_version: str, resource: str, namespace: str | None) -> list[dict]:
    # From kube-apiserver's watch cache (resourceVersion=0), as a reflector's first list: a list by label without
    # one was read from etcd before 1.31 (consistent reads from the cache came then), every time the app opened.
    selector = {"labelSelector": LEFTOVER_SELECTOR, "resourceVersion": "0"}
    try:
        listed = await _json(api, "GET", path(group_version, resource), params=selector)
    except ApiError as e:
        if e.status != 403 or namespace is None:
            raise
        listed = await _json(api, "GET", path(group_version, resource, namespace=namespace), params=selector)
    return listed.get("items") or []


def _node(meta: dict) -> str:
    return (meta.get("annotations") or {}).get(NODE_ANNOTATION) or (meta.get("labels") or {}).get(NODE_LABEL) or ""


def _claim_status(claim: dict) -> str:
    if (claim.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    status = claim.get("status") or {}
    if status.get("reservedFor"):
        return "InUse"
    return "Allocated" if status.get("allocation") else "Pending"


async def delete_leftovers(api: Client, leftovers: Sequence[Leftover], confirm_timeout: float = DELETE_CONFIRM_TIMEOUT) -> list[Leftover]:
    """Delete them all (pods first: a claim goes once no pod holds it); returns those whose deletion could not be confirmed."""
    pods = [lo for lo in leftovers if lo.kind == "Pod"]
    claims = [lo for lo in leftovers if lo.kind != "Pod"]
    gone_pods = await asyncio.gather(*(delete_pod(api, lo.namespace, lo.name, confirm_timeout) for lo in pods))
    gone_claims = await asyncio.gather(*(delete_claim(api, lo.namespace, lo.name, confirm_timeout) for lo in claims))
    return [lo for lo, gone in zip(pods + claims, [*gone_pods, *gone_claims], strict=True) if not gone]
