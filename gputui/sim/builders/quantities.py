"""Quantities and resource requests, as the API server and scheduler read them."""
from __future__ import annotations

import functools
from typing import Any

Obj = dict[str, Any]

GPU_RESOURCE_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-")


def parse_quantity(value: object) -> float:
    """A Kubernetes quantity as a number (cpu in cores, memory in bytes)."""
    if isinstance(value, (int, float)):
        return float(value)
    return _parse_quantity_text(str(value))


@functools.lru_cache(maxsize=4096)  # clusters repeat a few quantities over and over
def _parse_quantity_text(text: str) -> float:
    s = text.strip()
    binary = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
    decimal = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
    for unit, factor in binary.items():
        if s.endswith(unit):
            return float(s[: -len(unit)]) * factor
    if s and s[-1] in decimal and not s[-1].isdigit():
        return float(s[:-1]) * decimal[s[-1]]
    return float(s)


def container_requests(container: Obj) -> dict[str, float]:
    """Requests, with extended resources (and missing requests) defaulted from limits as the API server does."""
    resources = container.get("resources") or {}
    out = {k: parse_quantity(v) for k, v in (resources.get("limits") or {}).items()}
    out.update({k: parse_quantity(v) for k, v in (resources.get("requests") or {}).items()})
    return out


def pod_requests(pod: Obj) -> dict[str, float]:
    """The pod's effective request, as the scheduler computes it.

    max(sum of app containers plus restartable (sidecar) init containers,
    each regular init container plus the sidecars started before it).
    """
    spec = pod.get("spec") or {}
    total: dict[str, float] = {}
    for c in spec.get("containers") or []:
        for k, v in container_requests(c).items():
            total[k] = total.get(k, 0) + v
    sidecars: dict[str, float] = {}
    init_peak: dict[str, float] = {}
    for c in spec.get("initContainers") or []:
        req = container_requests(c)
        if c.get("restartPolicy") == "Always":
            for k, v in req.items():
                sidecars[k] = sidecars.get(k, 0) + v
                total[k] = total.get(k, 0) + v
        else:
            for k in set(req) | set(sidecars):
                init_peak[k] = max(init_peak.get(k, 0), req.get(k, 0) + sidecars.get(k, 0))
    for k, v in init_peak.items():
        total[k] = max(total.get(k, 0), v)
    for k, v in (spec.get("overhead") or {}).items():
        total[k] = total.get(k, 0) + parse_quantity(v)
    return total


def is_gpu_resource(name: str) -> bool:
    return name.startswith(GPU_RESOURCE_PREFIXES)
