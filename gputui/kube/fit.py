"""What fits where: pure functions of the node summaries (no I/O).

Per GPU resource (MIG profiles and shared, time-sliced resources each count as
their own): how many nodes could take a pod of 1, 2, 4 and 8 now, the largest
free block on such a node, and the stranded free devices: free on a node no
GPU pod can go to now. A node can take a pod now when it is Ready, not
cordoned, and has no NoSchedule/NoExecute taint a GPU pod would not usually
tolerate. Free is the summaries' (allocatable - allocated), so GPUs that
Dynamic Resource Allocation hands out under an extended resource count as
the summaries count them.

These figures need the pods: while they are not listed (or cannot be read),
the caller has no fit to show (ClusterModel.fit() is None), never one made
from part of them.

A pod's own tolerations, node selector and affinity are not looked at: the
figures say what the cluster offers a GPU pod that tolerates the usual taints.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Iterable, Mapping

from .gpu import GPU, NodeSummary, sorted_resources
from .records import Node

SIZES = (1, 2, 4, 8)
NAMED = 3  # nodes named in a pending pod's fit line, most free first
# The taint GPU nodes carry to keep other pods off, which GPU pods tolerate (NVIDIA's docs, and GKE's
# ExtendedResourceToleration admission adds it to every pod requesting the resource); a taint named
# after the resource itself is tolerated the same way. Any other NoSchedule/NoExecute taint strands
# the node's free devices, the ones Kubernetes sets included (not-ready, unreachable, unschedulable,
# memory/disk/pid pressure): plain pods do not tolerate those for scheduling.
USUAL_GPU_TAINTS = frozenset({GPU})


@dataclass(frozen=True, slots=True)
class ResourceFit:
    resource: str
    nodes_for: tuple[int, ...]  # per SIZES: nodes that could take a pod of that many now
    largest: int  # the largest free block on a node that could take a pod now
    free: int  # free on the nodes that could take a pod now
    free_nodes: int  # how many of those have any free
    top: tuple[tuple[str, int], ...]  # the NAMED of them with most free: (node, free)
    biggest: int  # the most allocatable on one node that could take a pod now (what fits when it is empty)
    stranded: int  # free on nodes no GPU pod can go to now
    stranded_nodes: tuple[tuple[str, int, str], ...]  # (node, free, why), most free first

    def as_json(self) -> dict[str, int]:
        """The report's `fit` entry of this resource."""
        out = {str(size): n for size, n in zip(SIZES, self.nodes_for, strict=True)}
        out["largest"] = self.largest
        out["stranded"] = self.stranded
        return out


def blocked(node: Node, resource: str) -> str | None:
    """Why no pod asking for `resource` can go on the node now ("NotReady", "cordoned",
    "taint KEY=VALUE:EFFECT"); None when one could."""
    if node.ready is not True:
        return "NotReady" if node.ready is False else "no Ready condition"
    if node.unschedulable:
        return "cordoned"
    for t in node.taints:
        if t.effect in ("NoSchedule", "NoExecute") and t.key not in USUAL_GPU_TAINTS and t.key != resource:
            return f"taint {t.key}={t.value}:{t.effect}" if t.value else f"taint {t.key}:{t.effect}"
    return None


def cluster_fit(summaries: Iterable[NodeSummary]) -> dict[str, ResourceFit]:
    """Per GPU resource any node has, its fit (see the module docstring)."""
    usable: dict[str, list[tuple[int, int, str]]] = {}  # resource -> (free, allocatable, node)
    stranded: dict[str, list[tuple[str, int, str]]] = {}
    for s in summaries:
        for name, u in s.usage.items():
            free = max(0, u.free)
            why = blocked(s.node, name)
            if why is None:
                usable.setdefault(name, []).append((free, u.allocatable, s.name))
            else:
                usable.setdefault(name, [])
                if free:
                    stranded.setdefault(name, []).append((s.name, free, why))
    out = {}
    for name in sorted_resources(usable):
        nodes = usable[name]
        frees = [f for f, _, _ in nodes]
        lost = sorted(stranded.get(name, ()), key=lambda item: (-item[1], item[0]))
        top = heapq.nsmallest(NAMED, ((-f, n) for f, _, n in nodes if f))
        out[name] = ResourceFit(
            resource=name,
            nodes_for=tuple(sum(1 for f in frees if f >= size) for size in SIZES),
            largest=max(frees, default=0),
            free=sum(frees),
            free_nodes=sum(1 for f in frees if f),
            top=tuple((n, -f) for f, n in top),
            biggest=max((a for _, a, _ in nodes), default=0),
            stranded=sum(f for _, f, _ in lost),
            stranded_nodes=tuple(lost),
        )
    return out


def pending_line(requests: Mapping[str, int], fits: Mapping[str, ResourceFit]) -> str | None:
    """Why a pending pod's GPU requests fit no single node now, one clause per resource that does not
    fit ("needs 4 nvidia.com/gpu on one node; 6 free but at most 3 on any node: h100-2 3, h100-5 2,
    h100-9 1"); None when each fits on some node (the pod waits for something else)."""
    lines = []
    for name, wanted in requests.items():
        f = fits.get(name)
        if f is not None and f.largest >= wanted:
            continue
        head = f"needs {wanted} {name} on one node; "
        if f is None or f.biggest == 0:
            body = f"no Ready, schedulable node offers {name}"
        elif f.biggest < wanted:
            body = f"{f.free} free in the cluster, at most {f.biggest} on any node when empty"
        elif f.free == 0:
            body = "none free in the cluster"
        else:
            body = (f"{f.free} free but" if f.free >= wanted else f"only {f.free} free in the cluster,") + \
                f" at most {f.largest} on any node: " + _named(f)
        if f is not None and f.stranded:
            body += f"; {f.stranded} more free on cordoned, NotReady or tainted nodes"
        lines.append(head + body)
    return "; ".join(lines) or None


def _named(f: ResourceFit) -> str:
    text = ", ".join(f"{node} {free}" for node, free in f.top)
    more = f.free_nodes - len(f.top)
    return text + (f", +{more} more" if more > 0 else "")
