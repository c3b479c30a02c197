"""Planning: which GPU resource to ask for, the pod's name and manifest, what on the node will keep it off.

Pure: no API calls (api.plan_verification reads the node and its pods, then calls plan_for).
"""
from __future__ import annotations

import math
import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import dra
from ..gpu import GPU, GPU_SHARED, GpuResources, is_nvidia_resource, node_usage
from ..records import node_from, pod_from
from .options import CONTAINER, MANAGED_BY, MANAGED_BY_LABEL, NAME, NAME_LABEL, NODE_ANNOTATION, NODE_LABEL, RUN_AS_USER, VerifyOptions

_MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-(\d+)g\.(\d+)gb$")
_NAME_PREFIX = "gputui-verify-"
_RANDOM_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # as Kubernetes' generateName: no vowels, no look-alikes
_RANDOM_LEN = 5
_MAX_NAME = 63  # a pod name that is also a valid hostname and label value

# Dynamic Resource Allocation: the NVIDIA DRA driver's DeviceClass for whole GPUs, and the claim's one request.
DRA_DEVICE_CLASS = "gpu.nvidia.com"
CLAIM_REQUEST = "gpu"
CLAIMS_API = "resource.k8s.io/v1"


@dataclass(frozen=True)
class DraGpus:
    """What DRA offers on a node: its whole GPUs published by the NVIDIA driver, and how many no claim holds."""

    device_class: str | None  # the DeviceClass to ask, None when the cluster has none
    total: int
    free: int


@dataclass(frozen=True)
class Plan:
    """One verification pod, ready to create."""

    node: str
    namespace: str
    resource: str
    count: int
    manifest: dict[str, Any]
    node_labels: Mapping[str, str] = field(default_factory=dict)
    free: Mapping[str, int] = field(default_factory=dict)  # GPU resources free on the node when planned
    obstacles: tuple[str, ...] = ()  # what on the node itself will keep the pod off it, as seen when planned
    claim: dict[str, Any] | None = None  # the ResourceClaim to create first, when the GPU comes through DRA

    @property
    def name(self) -> str:
        return self.manifest["metadata"]["name"]

    @property
    def claim_name(self) -> str | None:
        return self.claim["metadata"]["name"] if self.claim else None

    def to_yaml(self) -> str:
        """What will be created, in order: the ResourceClaim (through DRA), then the pod."""
        import yaml  # noqa: PLC0415

        documents = [self.claim, self.manifest] if self.claim else [self.manifest]
        return yaml.safe_dump_all(documents, sort_keys=False, default_flow_style=False)


def mig_size(resource: str) -> tuple[int, int] | None:
    """(compute slices, memory GB) of a `nvidia.com/mig-<g>g.<mem>gb` resource."""
    m = _MIG_RESOURCE.match(resource)
    return (int(m.group(1)), int(m.group(2))) if m else None


def choose_resource(free: Mapping[str, int], allocatable: Mapping[str, int]) -> str:
    """The resource to ask one unit of: a whole GPU, else a shared one, else the smallest MIG slice.

    Free units first; when nothing is free, the same order over what the node
    advertises, so the scheduler can say why the pod does not fit. A node that
    advertises nothing still gets `nvidia.com/gpu`: "Insufficient nvidia.com/gpu"
    is the right answer for it.
    """
    for pool in (free, allocatable):
        for whole in (GPU, GPU_SHARED):
            if pool.get(whole, 0) > 0:
                return whole
        slices = sorted((size, r) for r, n in pool.items() if n > 0 and (size := mig_size(r)) is not None)
        if slices:
            return slices[0][1]
    return GPU


def pod_name(node: str, rng: random.Random | None = None) -> str:
    """`gputui-verify-<node>-<random>`: a DNS-1123 label, the node part cut to fit."""
    choice = rng.choice if rng is not None else random.choice
    suffix = "".join(choice(_RANDOM_ALPHABET) for _ in range(_RANDOM_LEN))
    room = _MAX_NAME - len(_NAME_PREFIX) - 1 - _RANDOM_LEN
    node_part = re.sub(r"[^a-z0-9-]+", "-", node.lower())
    node_part = re.sub(r"-{2,}", "-", node_part)[:room].strip("-")
    return f"{_NAME_PREFIX}{node_part}-{suffix}" if node_part else f"{_NAME_PREFIX}{suffix}"


def node_label_value(node: str) -> str:
    """The node's name as a label value (at most 63 characters, alphanumeric at both ends)."""
    value = re.sub(r"[^A-Za-z0-9._-]", "-", node)[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", value)


def gpu_usage(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> tuple[dict[str, int], dict[str, int]]:
    """(free, allocatable) per GPU resource of a node object, given the pods bound to it."""
    usage = node_usage(node_from(dict(node)), [pod_from(dict(p)) for p in pods], GpuResources())
    return {r: max(u.free, 0) for r, u in usage.items()}, {r: u.allocatable for r, u in usage.items()}


def build_pod(
    node: str,
    namespace: str,
    resource: str,
    options: VerifyOptions,
    *,
    hostname: str | None = None,
    name: str | None = None,
    claim: str | None = None,
) -> dict[str, Any]:
    """The pod manifest: pinned to the node, one GPU resource (or, with `claim`, the GPU of that
    ResourceClaim), nvidia-smi, small cpu and memory requests and limits (what a namespace's ResourceQuota
    asks every container to name), nothing privileged: it passes PodSecurity "restricted"."""
    own = {"cpu": options.cpu, "memory": options.memory}
    gpu = {} if claim else {resource: str(options.count)}
    resources: dict[str, Any] = {"limits": {**gpu, **own}, "requests": dict(own)}
    if claim:
        resources["claims"] = [{"name": CLAIM_REQUEST}]
    tolerations = [{"key": GPU, "operator": "Exists"}]
    tolerations += [{"key": key, "operator": "Exists"} for key in options.tolerate if key != GPU]
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        # The server-side backstop: the kubelet ends a running pod gputui could not delete.
        "activeDeadlineSeconds": max(1, math.ceil(options.timeout)),
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 1,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS_USER,
            "runAsGroup": RUN_AS_USER,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [hostname or node]}]}
                    ]
                }
            }
        },
        "tolerations": tolerations,
        "containers": [
            {
                "name": CONTAINER,
                "image": options.image,
                "command": ["nvidia-smi"],
                "resources": resources,
                "securityContext": {
                    "privileged": False,
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                },
            }
        ],
    }
    if claim:
        spec["resourceClaims"] = [{"name": CLAIM_REQUEST, "resourceClaimName": claim}]
    if options.runtime_class:
        spec["runtimeClassName"] = options.runtime_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name or pod_name(node),
            "namespace": namespace,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY, NAME_LABEL: NAME, NODE_LABEL: node_label_value(node)},
            "annotations": {NODE_ANNOTATION: node},
        },
        "spec": spec,
    }


def build_claim(name: str, namespace: str, node: str, device_class: str, count: int) -> dict[str, Any]:
    """The ResourceClaim of a verification through DRA: `count` devices of the DeviceClass, labelled and named
    like its pod (the pod's node affinity pins where the scheduler allocates them)."""
    return {
        "apiVersion": CLAIMS_API,
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY, NAME_LABEL: NAME, NODE_LABEL: node_label_value(node)},
            "annotations": {NODE_ANNOTATION: node},
        },
        "spec": {"devices": {"requests": [
            {"name": CLAIM_REQUEST, "exactly": {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": count}},
        ]}},
    }


def dra_gpus(node: str, slices: Iterable[Mapping[str, Any]], claims: Iterable[Mapping[str, Any]], device_class: str | None) -> DraGpus:
    """The node's whole GPUs published by the NVIDIA DRA driver, and those no claim has allocated."""
    devices = [d for d in dra.parse_slices(dict(s) for s in slices)
               if d.node == node and d.driver == dra.NVIDIA_GPU_DRIVER and d.type in (None, "gpu")]
    taken = {a.device for a in dra.parse_claims(dict(c) for c in claims)}
    return DraGpus(device_class, len(devices), sum(1 for d in devices if d.id not in taken))


def uses_dra(allocatable: Mapping[str, int], options: VerifyOptions, gpus: DraGpus | None) -> bool:
    """Verify through a ResourceClaim: asked for the DeviceClass, or no resource asked for and the node advertises
    no NVIDIA GPU resource while DRA publishes GPUs on it (and the cluster has the DeviceClass)."""
    if gpus is None or not gpus.device_class:
        return False
    if options.resource is not None:
        return options.resource == gpus.device_class
    return gpus.total > 0 and not any(is_nvidia_resource(r) and n > 0 for r, n in allocatable.items())


def node_obstacles(node: Mapping[str, Any], resource: str, count: int, free: Mapping[str, int], tolerated: Iterable[str]) -> list[str]:
    """Plain reasons the node will refuse the pod: the scheduler's message counts every node, this names ours."""
    record = node_from(dict(node))
    found = []
    if record.unschedulable:
        found.append(f"node {record.name} is cordoned")
    if record.ready is not True:
        found.append(f"node {record.name} is not Ready")
    # Taints the node lifecycle controller sets say the same as "cordoned" and "not Ready" above.
    skip = set(tolerated) | {"node.kubernetes.io/unschedulable", "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
    effects: dict[str, list[str]] = {}
    for taint in record.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and taint.key not in skip:
            effects.setdefault(taint.key, []).append(taint.effect)
    for key, kinds in effects.items():
        found.append(f"untolerated taint {key} ({', '.join(kinds)}; add --tolerate {key})")
    if resource not in free:
        found.append(f"node advertises no {resource} (is its device plugin running?)")
    elif free[resource] < count:
        found.append(f"only {free[resource]} {resource} free on the node")
    return found


def plan_for(
    node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], namespace: str, options: VerifyOptions, rng: random.Random | None = None,
    dra_offer: DraGpus | None = None,
) -> Plan:
    """The plan for a node object and the pods bound to it (pure: no API calls; rng: the name's suffix).

    `dra_offer`: the node's GPUs under Dynamic Resource Allocation (see `uses_dra`); then the plan is a
    ResourceClaim for `count` devices of the NVIDIA driver's DeviceClass and a pod using it.
    """
    meta = node.get("metadata") or {}
    node_name = meta["name"]
    labels = meta.get("labels") or {}
    free, allocatable = gpu_usage(node, pods)
    name = pod_name(node_name, rng)
    claim = None
    if uses_dra(allocatable, options, dra_offer):
        assert dra_offer is not None and dra_offer.device_class
        resource = dra_offer.device_class
        free = {resource: dra_offer.free}
        claim = build_claim(name, namespace, node_name, resource, options.count)
    else:
        resource = options.resource or choose_resource(free, allocatable)
    manifest = build_pod(
        node_name, namespace, resource, options, hostname=labels.get("kubernetes.io/hostname"), name=name,
        claim=claim["metadata"]["name"] if claim else None,
    )
    tolerated = [t["key"] for t in manifest["spec"]["tolerations"]]
    obstacles = tuple(node_obstacles(node, resource, options.count, free, tolerated))
    return Plan(node_name, namespace, resource, options.count, manifest, dict(labels), free, obstacles, claim)
