"""Node objects as the kubelet reports them."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from .ids import ago, digest, stable_uid, utcnow

Obj = dict[str, Any]

KUBELET_VERSION = "v1.32.4"
CONTAINERD_VERSION = "containerd://1.7.27"
KERNEL = "5.15.0-102-generic"
OS_IMAGE = "Ubuntu 22.04.4 LTS"


def node_condition(kind: str, status: str, reason: str, message: str, since: str, heartbeat: str) -> Obj:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastHeartbeatTime": heartbeat,
        "lastTransitionTime": since,
    }


def node(
    name: str,
    index: int,
    *,
    labels: dict[str, str] | None = None,
    extra_resources: dict[str, tuple[int, int]] | None = None,
    cpu: int = 96,
    memory_gib: int = 1024,
    ready: str = "True",
    unschedulable: bool = False,
    taints: Iterable[Obj] = (),
    annotations: dict[str, str] | None = None,
    age_s: float = 86400 * 30,
    now: datetime | None = None,
) -> Obj:
    """A node as the kubelet reports it. extra_resources: name -> (capacity, allocatable)."""
    now = now or utcnow()
    created = ago(age_s, now)
    ip = f"10.0.{index // 250}.{10 + index % 250}"
    base_labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
    }
    base_labels.update(labels or {})
    mem_ki = memory_gib * 1024 * 1024
    capacity = {
        "cpu": str(cpu),
        "ephemeral-storage": "1843238896Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{mem_ki}Ki",
        "pods": "110",
    }
    allocatable = {
        "cpu": str(cpu) if cpu < 8 else f"{cpu * 1000 - 500}m",
        "ephemeral-storage": "1698714478591",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{mem_ki - 1048576}Ki",
        "pods": "110",
    }
    for res, (cap, alloc) in (extra_resources or {}).items():
        capacity[res] = str(cap)
        allocatable[res] = str(alloc)
    heartbeat = ago(20, now) if ready == "True" else ago(3600, now)
    if ready == "True":
        ready_cond = node_condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", created, heartbeat)
    elif ready == "Unknown":
        ready_cond = node_condition("Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.", ago(3500, now), heartbeat)
    else:
        ready_cond = node_condition("Ready", "False", "KubeletNotReady", "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized", ago(3500, now), heartbeat)
    pressure_status = "Unknown" if ready == "Unknown" else "False"
    pressure = [
        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ]
    conditions = [
        node_condition(kind, pressure_status, reason if ready != "Unknown" else "NodeStatusUnknown",
                       msg if ready != "Unknown" else "Kubelet stopped posting node status.", created, heartbeat)
        for kind, reason, msg in pressure
    ]
    conditions.append(ready_cond)
    spec: Obj = {
        "podCIDR": f"10.244.{index}.0/24",
        "podCIDRs": [f"10.244.{index}.0/24"],
        "providerID": f"gputui-sim://{name}",
    }
    taint_list = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
        if not any(t.get("key") == "node.kubernetes.io/unschedulable" for t in taint_list):
            taint_list.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": ago(7200, now)})
    if taint_list:
        spec["taints"] = taint_list
    meta_annotations = {
        "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock",
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
    }
    meta_annotations.update(annotations or {})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": stable_uid("node", name),
            "creationTimestamp": created,
            "labels": base_labels,
            "annotations": meta_annotations,
        },
        "spec": spec,
        "status": {
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "allocatable": allocatable,
            "capacity": capacity,
            "conditions": conditions,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": stable_uid("boot", name),
                "containerRuntimeVersion": CONTAINERD_VERSION,
                "kernelVersion": KERNEL,
                "kubeProxyVersion": KUBELET_VERSION,
                "kubeletVersion": KUBELET_VERSION,
                "machineID": digest("machine", name, length=32),
                "operatingSystem": "linux",
                "osImage": OS_IMAGE,
                "systemUUID": stable_uid("system", name),
            },
        },
    }


def node_ip(node_obj: Obj) -> str:
    for addr in (node_obj.get("status") or {}).get("addresses") or []:
        if addr.get("type") == "InternalIP":
            return addr.get("address", "")
    return ""


def node_is_ready(node_obj: Obj) -> bool:
    for cond in (node_obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False
