"""What fits where: pure functions of the node summaries and the DRA pools (no I/O).

Per GPU resource (MIG profiles and shared, time-sliced resources each count as
their own) and per DeviceClass of Dynamic Resource Allocation (its own row: a
pod asking for nvidia.com/gpu cannot have a DRA device, kube-scheduler's
NodeResourcesFit reads only the node's allocatable): how many nodes could take
a pod of 1, 2, 4 and 8 (devices of one claim) now, the largest free block on
such a node, and the stranded free devices: free on a node no GPU pod can go
to now. A node can take a pod now when it is Ready, not cordoned, and has no
NoSchedule/NoExecute taint a GPU pod would not usually tolerate. Free is the
node's allocatable - allocated for a resource; for a DeviceClass, the devices
it selects that no claim holds and no NoSchedule/NoExecute device taint keeps
off (kube/dra.py).

These figures need the pods: while they are not listed (or cannot be read),
the caller has no fit to show (ClusterModel.fit() is None), never one made
from part of them.

A pod's own tolerations, node selector and affinity are not looked at: the
figures say what the cluster offers a GPU pod that tolerates the usual taints.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from .dra import Claim, ClassDevices, DeviceClass, DeviceRequest, DraDevice, Pool, RequestPool, SelectorError, request_pools
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
    usable: tuple[tuple[str, int], ...]  # the nodes that could take a pod now: (node, free), most free first
    biggest: int  # the most allocatable on one node that could take a pod now (what fits when it is empty)
    stranded: int  # free on nodes no GPU pod can go to now
    stranded_nodes: tuple[tuple[str, int, str], ...]  # (node, free, why), most free first
    device_class: bool = False  # a DeviceClass's devices (DRA), not an extended resource
    unknown: str | None = None  # why the figures are not known (a DeviceClass selector gputui cannot evaluate)

    @property
    def top(self) -> tuple[tuple[str, int], ...]:
        """The NAMED nodes with most free: (node, free)."""
        return tuple(item for item in self.usable[:NAMED] if item[1])

    def fits_on(self, size: int) -> tuple[str, ...]:
        """The nodes a pod of `size` (devices of one claim, for a DeviceClass) fits on now."""
        return tuple(node for node, free in self.usable if free >= size)

    def as_json(self) -> dict[str, int | str | None]:
        """The report's `fit` entry of this resource or DeviceClass."""
        if self.unknown is not None:
            return {"unknown": self.unknown}
        out: dict[str, int | str | None] = {str(size): n for size, n in zip(SIZES, self.nodes_for, strict=True)}
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


def cluster_fit(summaries: Iterable[NodeSummary], classes: ClassDevices | None = None) -> dict[str, ResourceFit]:
    """Per GPU resource any node has, then per DeviceClass selecting NVIDIA GPU devices, its fit (see the module
    docstring). `classes`: the DRA pools (model.dra_view); the summaries' rows of those classes are left to them."""
    classes = classes or ClassDevices()
    dra_rows = {p.device_class for p in classes.pools} | set(classes.unknown)
    nodes: dict[str, Node] = {}
    offers: dict[str, list[tuple[Node, int, int]]] = {}  # resource -> (node, free, allocatable)
    for s in summaries:
        nodes[s.name] = s.node
        for name, u in s.usage.items():
            if name not in dra_rows:
                offers.setdefault(name, []).append((s.node, max(0, u.free), u.allocatable))
    out = {name: _fit(name, offers[name]) for name in sorted_resources(offers)}
    by_class: dict[str, list[Pool]] = {}
    for pool in classes.pools:
        by_class.setdefault(pool.device_class, []).append(pool)
    for name in sorted(dra_rows):
        if name in classes.unknown:
            out[name] = ResourceFit(name, (0,) * len(SIZES), 0, 0, 0, (), 0, 0, (), device_class=True, unknown=classes.unknown[name])
            continue
        per_node: dict[str, tuple[int, int]] = {}  # node -> (free, devices a claim could get when none is allocated)
        for pool in by_class[name]:
            if pool.node in nodes:  # a pool of no node (network-attached devices) is not a node's to offer
                free, most = per_node.get(pool.node, (0, 0))
                per_node[pool.node] = (free + pool.free, most + pool.free + pool.allocated)
        out[name] = _fit(name, [(nodes[n], free, most) for n, (free, most) in per_node.items()], device_class=True)
    return out


def _fit(name: str, offers: Iterable[tuple[Node, int, int]], device_class: bool = False) -> ResourceFit:
    """One row's figures from each node's (record, free, allocatable)."""
    usable: list[tuple[int, int, str]] = []  # (free, allocatable, node)
    lost: list[tuple[str, int, str]] = []
    for node, free, allocatable in offers:
        why = blocked(node, name)
        if why is None:
            usable.append((free, allocatable, node.name))
        elif free:
            lost.append((node.name, free, why))
    lost.sort(key=lambda item: (-item[1], item[0]))
    frees = [f for f, _, _ in usable]
    return ResourceFit(
        resource=name,
        nodes_for=tuple(sum(1 for f in frees if f >= size) for size in SIZES),
        largest=max(frees, default=0),
        free=sum(frees),
        free_nodes=sum(1 for f in frees if f),
        usable=tuple((n, f) for f, _, n in sorted(usable, key=lambda item: (-item[0], item[2]))),
        biggest=max((a for _, a, _ in usable), default=0),
        stranded=sum(f for _, f, _ in lost),
        stranded_nodes=tuple(lost),
        device_class=device_class,
    )


def pending_line(requests: Mapping[str, int], fits: Mapping[str, ResourceFit]) -> str | None:
    """Why a pending pod's GPU requests fit no single node now, one clause per resource that does not
    fit ("needs 4 nvidia.com/gpu on one node; 6 free but at most 3 on any node: h100-2 3, h100-5 2,
    h100-9 1"); None when each fits on some node (the pod waits for something else)."""
    lines = []
    for name, wanted in requests.items():
        f = fits.get(name)
        if f is not None and (f.unknown is not None or f.largest >= wanted):
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


def claim_line(claims: Iterable[Claim], classes: Mapping[str, DeviceClass], devices: Iterable[DraDevice],
               nodes: Mapping[str, Node]) -> str | None:
    """Why a pending pod's unallocated ResourceClaims get no devices now, from the published devices: per request no
    pool could serve, the pools that match its DeviceClass (and its own selectors) and what they lack ("claim ml/big
    request gpus: needs 8 devices of one pool; pool h100-dra-1/gpu.nvidia.com: 5 of 7 devices free matching DeviceClass
    gpu.nvidia.com (2 allocated)"), or that no device matches. None when each request alone could be served somewhere
    (the pod waits for something these inputs do not show) or where a selector cannot be evaluated here."""
    listed = list(devices)
    lines = []
    for claim in claims:
        if claim.allocated:
            continue
        for request in claim.requests:
            line = _request_line(request, classes, listed, nodes)
            if line:
                lines.append(f"claim {claim.key} request {request.name}: {line}")
    return "; ".join(lines) or None


def _request_line(request: DeviceRequest, classes: Mapping[str, DeviceClass], devices: list[DraDevice],
                  nodes: Mapping[str, Node]) -> str | None:
    if request.subrequests:  # firstAvailable: the first subrequest that can be served is taken; said only when none can
        lines = []
        for number, sub in enumerate(request.subrequests, 1):
            line = _request_line(sub, classes, devices, nodes)
            if line is None:
                return None
            lines.append(f"{number}. {sub.name.split('/', 1)[-1]} ({sub.words}): {line}")
        return "firstAvailable, none of its subrequests can be served now: " + " · ".join(lines)
    if not request.device_class or request.admin_access:
        return None  # adminAccess may be given devices in use: not judged here
    device_class = classes.get(request.device_class)
    if device_class is None:
        return f"DeviceClass {request.device_class} does not exist"
    try:
        pools = request_pools(request, device_class, devices)
    except SelectorError:
        return None
    matching = f"DeviceClass {device_class.name}" + (" and the claim's selectors" if request.selectors else "")
    if not pools:
        return f"no published device matches {matching}"

    def blocked_by(node_name: str | None) -> str | None:
        if node_name is None:
            return None  # not tied to one node (network-attached devices)
        node = nodes.get(node_name)
        return "not listed" if node is None else blocked(node, device_class.name)

    def lacks(allocated: int, devices: int, tainted: int, taints: Iterable[str], node: str | None) -> str:
        parts = []
        if allocated:
            parts.append(f"all {allocated} allocated" if allocated == devices else f"{allocated} allocated")
        if tainted:
            parts.append(f"{tainted} tainted {', '.join(sorted(set(taints)))}")
        if (why := blocked_by(node)) is not None:
            parts.append(f"node {node} {why}" if why in ("cordoned", "NotReady") else f"node {node}: {why}")
        return f" ({'; '.join(parts)})" if parts else ""

    if request.all_devices:
        return _all_line(pools, matching, blocked_by, lacks)
    if any(pool.free >= request.count and blocked_by(pool.node) is None for pool in pools):
        return None
    described = [f"pool {pool.pool}/{pool.driver}: {pool.free} of {pool.devices} device{'s' if pool.devices != 1 else ''} free "
                 f"matching {matching}" + lacks(pool.allocated, pool.devices, pool.tainted, pool.taints, pool.node) for pool in pools[:NAMED]]
    more = len(pools) - NAMED
    need = f"{request.count} device{'s' if request.count != 1 else ''} of one pool"
    return f"needs {need}; " + "; ".join(described) + (f"; +{more} more pools" if more > 0 else "")


def _all_line(pools: list[RequestPool], matching: str, blocked_by: Callable[[str | None], str | None],
              lacks: Callable[[int, int, int, Iterable[str], str | None], str]) -> str | None:
    """allocationMode All, as kube-scheduler's allocator serves it: on the node the pod is to run on, every matching device
    of every pool that node sees, at least one, each not allocated and without a taint the request does not tolerate."""
    if any(pool.node is None for pool in pools):
        return None  # which nodes see a device not tied to one node is not known here
    by_node: dict[str, list[RequestPool]] = {}
    for pool in pools:
        by_node.setdefault(pool.node or "", []).append(pool)
    totals = []
    for node, members in by_node.items():
        devices, free = sum(p.devices for p in members), sum(p.free for p in members)
        if free == devices and blocked_by(node) is None:
            return None
        totals.append((node, devices, free, sum(p.allocated for p in members), sum(p.tainted for p in members),
                       [t for p in members for t in p.taints]))
    totals.sort(key=lambda t: (t[2] - t[1], t[0]))  # the fewest missing first
    described = [f"node {node}: {free} of {devices} device{'s' if devices != 1 else ''} free matching {matching}"
                 + lacks(allocated, devices, tainted, taints, node) for node, devices, free, allocated, tainted, taints in totals[:NAMED]]
    more = len(totals) - NAMED
    return ("needs all matching devices of its node, each free (allocationMode All); " + "; ".join(described)
            + (f"; +{more} more nodes" if more > 0 else ""))
