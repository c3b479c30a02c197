"""Core v1 Events."""
from __future__ import annotations

from typing import Any

from .ids import digest, rfc3339, utcnow

Obj = dict[str, Any]


def event(
    involved: Obj,
    reason: str,
    message: str,
    *,
    kind: str = "Normal",
    component: str = "kubelet",
    host: str | None = None,
    field_path: str | None = None,
    count: int = 1,
    first: str | None = None,
    last: str | None = None,
    serial: int = 0,
) -> Obj:
    """A core v1 Event about an object."""
    meta = involved["metadata"]
    namespace = meta.get("namespace") or "default"
    stamp = first or rfc3339(utcnow())
    ref: Obj = {
        "apiVersion": involved.get("apiVersion", "v1"),
        "kind": involved.get("kind", "Pod"),
        "name": meta["name"],
        "namespace": meta.get("namespace", ""),
        "resourceVersion": meta.get("resourceVersion", ""),
        "uid": meta.get("uid", ""),
    }
    if field_path:
        ref["fieldPath"] = field_path
    if not meta.get("namespace"):
        del ref["namespace"]
    source: Obj = {"component": component}
    if host:
        source["host"] = host
    name_hash = digest("event", namespace, meta["name"], reason, message, serial, length=16)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{name_hash}", "namespace": namespace},
        "involvedObject": ref,
        "reason": reason,
        "message": message,
        "type": kind,
        "source": source,
        "count": count,
        "firstTimestamp": stamp,
        "lastTimestamp": last or stamp,
        "eventTime": None,
        "reportingComponent": component,
        "reportingInstance": host or component,
    }
