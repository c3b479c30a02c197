"""NVIDIA's ComputeDomains (k8s-dra-driver-gpu, `resource.nvidia.com/v1beta1`, namespaced) and their channel claims,
shaped as the driver's API types and templates have them (imported as a module: `builders.compute_domains`).

- `spec.numNodes` (the IMEX daemons expected; 0: not counted) and `spec.channel.resourceClaimTemplate.name`;
- `status.status` Ready once as many daemons are Ready as numNodes asks, else NotReady (the controller's rule;
  Failed on error), `status.nodes[]` one entry per daemon that started: name, ipAddress, cliqueID, index, status;
- a workload pod's channel claim: request `channel` of DeviceClass `compute-domain-default-channel.nvidia.com`,
  whose opaque config for driver `compute-domain.nvidia.com` names the domain (`domainID`: its uid), allocated on
  the pod's node."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from .crds import custom_resource_definition
from .ids import ago, stable_uid

Obj = dict[str, Any]

GROUP, VERSION = "resource.nvidia.com", "v1beta1"
DRIVER = "compute-domain.nvidia.com"
CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"
READY, NOT_READY = "Ready", "NotReady"


def crd(now: datetime | None = None) -> Obj:
    return custom_resource_definition(GROUP, VERSION, "computedomains", "ComputeDomain", namespaced=True,
                                      labels={"app.kubernetes.io/name": "nvidia-dra-driver-gpu"}, now=now)


def node_entry(node: str, index: int, status: str, clique: str = "d5a8f0c2-7b1e-4c3a-9f6d-2e8b1a4c7d90.1") -> Obj:
    return {"name": node, "ipAddress": f"10.0.{index // 250}.{10 + index % 250}", "cliqueID": clique, "index": index, "status": status}


def set_nodes(domain: Obj, entries: list[Obj]) -> None:
    """status.nodes as given, and status.status as the controller sets it from them."""
    num = domain["spec"]["numNodes"]
    ready = sum(1 for e in entries if e.get("status") == READY)
    domain["status"] = {"status": READY if num > 0 and ready >= num else NOT_READY, "nodes": entries}


def compute_domain(name: str, namespace: str, num_nodes: int, entries: list[Obj], *, age_s: float, now: datetime | None) -> Obj:
    domain = {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ComputeDomain",
        "metadata": {"name": name, "namespace": namespace, "uid": stable_uid("ComputeDomain", namespace, name),
                     "creationTimestamp": ago(age_s, now), "generation": 1,
                     "finalizers": ["resource.nvidia.com/computeDomain"]},
        "spec": {"numNodes": num_nodes, "channel": {"resourceClaimTemplate": {"name": f"{name}-channel"}, "allocationMode": "Single"}},
    }
    set_nodes(domain, entries)
    return domain


def channel_claim(domain: Obj, pod: Obj, node: str) -> Obj:
    """The ResourceClaim the claim controller makes from the domain's channel template for `pod`, allocated on `node`."""
    meta, pod_meta = domain["metadata"], pod["metadata"]
    name = f"{pod_meta['name']}-channel-{stable_uid('claim', pod_meta['name'])[:5]}"
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "generateName": f"{pod_meta['name']}-channel-", "namespace": pod_meta["namespace"],
                     "uid": stable_uid("ResourceClaim", pod_meta["namespace"], name), "creationTimestamp": pod_meta["creationTimestamp"],
                     "annotations": {"resource.kubernetes.io/pod-claim-name": "channel"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod_meta["name"], "uid": pod_meta["uid"],
                                          "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"devices": {
            "requests": [{"name": "channel", "exactly": {"deviceClassName": CHANNEL_CLASS, "allocationMode": "ExactCount", "count": 1}}],
            "config": [{"requests": ["channel"], "opaque": {"driver": DRIVER, "parameters": {
                "apiVersion": f"{GROUP}/{VERSION}", "kind": "ComputeDomainChannelConfig", "domainID": meta["uid"]}}}],
        }},
        "status": {
            "allocation": {
                "devices": {"results": [{"request": "channel", "driver": DRIVER, "pool": node, "device": "channel-0"}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]},
            },
            "reservedFor": [{"resource": "pods", "name": pod_meta["name"], "uid": pod_meta["uid"]}],
        },
    }
