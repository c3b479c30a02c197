"""Service objects."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from .ids import ago, digest, stable_uid

Obj = dict[str, Any]


def cluster_ip(namespace: str, name: str) -> str:
    """A stable address in the default service range 10.96.0.0/12."""
    h = digest("service", namespace, name, length=4)
    return f"10.96.{int(h[:2], 16)}.{max(1, int(h[2:], 16))}"


def service(
    name: str,
    namespace: str,
    selector: dict[str, str] | None,
    ports: list[tuple[str, int, int | str]],
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    ip: str | None = None,
    age_s: float = 86400 * 30,
    now: datetime | None = None,
) -> Obj:
    """A ClusterIP Service. ports: (name, port, targetPort)."""
    address = ip or cluster_ip(namespace, name)
    meta: Obj = {"name": name, "namespace": namespace, "uid": stable_uid("Service", namespace, name),
                 "creationTimestamp": ago(age_s, now), "labels": dict(labels or {})}
    if annotations:
        meta["annotations"] = dict(annotations)
    spec: Obj = {
        "clusterIP": address,
        "clusterIPs": [address],
        "internalTrafficPolicy": "Cluster",
        "ipFamilies": ["IPv4"],
        "ipFamilyPolicy": "SingleStack",
        "ports": [{"name": n, "port": p, "protocol": "TCP", "targetPort": t} if n else {"port": p, "protocol": "TCP", "targetPort": t}
                  for n, p, t in ports],
        "sessionAffinity": "None",
        "type": "ClusterIP",
    }
    if selector:
        spec["selector"] = dict(selector)
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec, "status": {"loadBalancer": {}}}
