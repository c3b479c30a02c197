"""Hand-written API objects for the model tests, shaped like a real server's."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

FIXTURES = Path("/work/shared/fixtures/real")
T0 = "2025-01-01T00:00:00Z"


def node(
    name: str,
    *,
    capacity: dict[str, Any] | None = None,
    allocatable: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    ready: str = "True",
    unschedulable: bool = False,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    capacity = {"cpu": "16", "memory": "64Gi", "pods": "110", **{k: str(v) for k, v in (capacity or {}).items()}}
    allocatable = capacity if allocatable is None else {"cpu": "16", "memory": "64Gi", "pods": "110", **{k: str(v) for k, v in allocatable.items()}}
    spec: dict[str, Any] = {}
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = taints
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}, "creationTimestamp": T0},
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady" if ready == "True" else "KubeletNotReady", "message": ""}],
            "nodeInfo": {"kubeletVersion": "v1.32.0"},
        },
    }


def container(name: str, gpu: dict[str, int] | None = None, *, requests_too: bool = True, restart_policy: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "busybox"}
    if gpu:
        limits = {k: str(v) for k, v in gpu.items()}
        c["resources"] = {"limits": limits, **({"requests": dict(limits)} if requests_too else {})}
    if restart_policy:
        c["restartPolicy"] = restart_policy
    return c


def pod(
    namespace: str,
    name: str,
    *,
    node: str | None = None,
    gpu: dict[str, int] | None = None,
    containers: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    phase: str | None = None,
    labels: dict[str, str] | None = None,
    ready: bool = True,
    waiting_reason: str | None = None,
    restarts: int = 0,
    deleting: bool = False,
    unschedulable_message: str | None = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
) -> dict[str, Any]:
    """A pod; unbound ones carry PodScheduled=False with unschedulable_message (None: no condition yet)."""
    containers = containers if containers is not None else [container("main", gpu)]
    phase = phase or ("Running" if node else "Pending")
    meta: dict[str, Any] = {"namespace": namespace, "name": name, "uid": f"uid-{namespace}-{name}", "creationTimestamp": T0, "labels": labels or {}}
    if deleting:
        meta["deletionTimestamp"] = T0
    spec: dict[str, Any] = {"containers": containers}
    if init_containers:
        spec["initContainers"] = init_containers
    if node:
        spec["nodeName"] = node
    status: dict[str, Any] = {"phase": phase, "conditions": []}
    if node and phase == "Running":
        if waiting_reason:
            state: dict[str, Any] = {"waiting": {"reason": waiting_reason}}
        else:
            state = {"running": {"startedAt": T0}}
        status["containerStatuses"] = [
            {"name": c["name"], "ready": ready and not waiting_reason, "restartCount": restarts, "state": state, "image": "busybox", "imageID": ""}
            for c in containers
        ]
        status["conditions"].append({"type": "Ready", "status": "True" if ready and not waiting_reason else "False"})
    elif node and phase in ("Succeeded", "Failed"):
        status["containerStatuses"] = [
            {"name": c["name"], "ready": False, "restartCount": 0, "image": "busybox", "imageID": "",
             "state": {"terminated": {"exitCode": 0 if phase == "Succeeded" else 1, "reason": "Completed" if phase == "Succeeded" else "Error"}}}
            for c in containers
        ]
    if not node and unschedulable_message is not None:
        status["conditions"].append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": unschedulable_message})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def plugin_pod(node_name: str, style: str = "static", *, ready: bool = True, waiting_reason: str | None = None, restarts: int = 0) -> dict[str, Any]:
    styles = {
        "static": ("kube-system", {"name": "nvidia-device-plugin-ds"}, ["nvidia-device-plugin-ctr"]),
        "helm": ("nvidia-device-plugin", {"app.kubernetes.io/name": "nvidia-device-plugin", "app.kubernetes.io/instance": "nvdp"}, ["nvidia-device-plugin-sidecar", "nvidia-device-plugin-ctr"]),
        "operator": ("gpu-operator", {"app": "nvidia-device-plugin-daemonset", "app.kubernetes.io/managed-by": "gpu-operator"}, ["nvidia-device-plugin", "config-manager"]),
        "gke": ("kube-system", {"k8s-app": "nvidia-gpu-device-plugin"}, ["nvidia-gpu-device-plugin"]),
    }
    namespace, labels, names = styles[style]
    return pod(namespace, f"plugin-{style}-{node_name}", node=node_name, labels=labels,
               containers=[container(n) for n in names], ready=ready, waiting_reason=waiting_reason, restarts=restarts)


def event(namespace: str, name: str, *, kind: str, object_name: str, reason: str, message: str,
          object_namespace: str | None = None, last: str = T0, type_: str = "Warning") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"namespace": namespace, "name": name, "creationTimestamp": last},
        "involvedObject": {"kind": kind, "name": object_name, "namespace": namespace if object_namespace is None else object_namespace},
        "reason": reason, "message": message, "type": type_, "count": 1,
        "lastTimestamp": last, "firstTimestamp": last, "source": {"component": "default-scheduler"},
    }


def fixture_labels(name: str) -> dict[str, str]:
    return json.loads((FIXTURES / "nodes" / name).read_text())


def fixture_resources(name: str) -> tuple[dict[str, str], dict[str, str]]:
    """(capacity, allocatable) read from a `kubectl describe node` fixture."""
    blocks: dict[str, dict[str, str]] = {"Capacity": {}, "Allocatable": {}}
    current = None
    for line in (FIXTURES / "nodes" / name).read_text().splitlines():
        head = line.strip().rstrip(":")
        if head in blocks and line.strip().endswith(":"):
            current = blocks[head]
            continue
        match = re.match(r"^\s*([\w./-]+):\s+(\S+)\s*$", line)
        if current is not None and match:
            current[match.group(1)] = match.group(2)
        elif current is not None:
            current = None
    return blocks["Capacity"], blocks["Allocatable"]
