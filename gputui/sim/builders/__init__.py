"""Builders for complete, realistic Kubernetes objects (nodes, pods, daemonsets, events).

The demo scenario, the synthetic generator and the simulated kubelets all
build their objects here, so every object the simulator serves carries the
fields the real API server and kubelet would set (the generated models of
the Python clients refuse objects without them).

    ids.py          time stamps, stable ids and names, image references
    quantities.py   quantities, container and pod requests, GPU resource names
    nodes.py        nodes as the kubelet reports them
    pods.py         pods and containers as admitted
    pod_status.py   pod conditions, container states, the status of a running pod
    daemonsets.py   DaemonSets and their controller's status
    events.py       core v1 Events
    gpu_labels.py   GFD / NFD / GPU Operator node labels, MIG profiles
    services.py     Services
    crds.py         CustomResourceDefinitions
    namespaces.py   Namespaces
    kueue.py        Kueue's CRDs, ResourceFlavors, ClusterQueues, LocalQueues and Workloads (imported as a module)
    compute_domains.py  NVIDIA's ComputeDomains and their channel claims (imported as a module)

Every name is re-exported here: `from gputui.sim import builders as b; b.node(...)`.
"""
from __future__ import annotations

from typing import Any

from .crds import custom_resource_definition
from .daemonsets import daemonset, daemonset_status, matches_labels
from .events import event
from .gpu_labels import GPU_MODELS, MIG_PROFILES, gfd_labels, mig_labels
from .ids import ago, digest, full_image, gpu_uuid, image_id, mig_uuid, rfc3339, stable_uid, suffix, utcnow
from .namespaces import namespace
from .nodes import CONTAINERD_VERSION, KERNEL, KUBELET_VERSION, OS_IMAGE, node, node_condition, node_ip, node_is_ready
from .pod_status import (
    INITIAL_BACKOFF,
    MAX_BACKOFF,
    back_off_message,
    container_id,
    crash_loop_backoff,
    go_duration,
    pod_condition,
    pod_ip,
    pod_is_ready,
    running_container_status,
    set_running,
    terminated_state,
)
from .pods import container, pod, qos_class
from .quantities import GPU_RESOURCE_PREFIXES, container_requests, is_gpu_resource, parse_quantity, pod_requests
from .services import cluster_ip, service

Obj = dict[str, Any]

__all__ = [
    "CONTAINERD_VERSION", "GPU_MODELS", "GPU_RESOURCE_PREFIXES", "INITIAL_BACKOFF", "KERNEL", "KUBELET_VERSION", "MAX_BACKOFF",
    "MIG_PROFILES", "OS_IMAGE", "Obj",
    "ago", "back_off_message", "cluster_ip", "container", "container_id", "container_requests", "crash_loop_backoff",
    "custom_resource_definition", "daemonset",
    "daemonset_status", "digest", "event", "full_image", "gfd_labels", "go_duration", "gpu_uuid", "image_id", "is_gpu_resource",
    "matches_labels", "mig_labels", "mig_uuid", "namespace", "node", "node_condition", "node_ip", "node_is_ready",
    "parse_quantity", "pod", "pod_condition", "pod_ip", "pod_is_ready", "pod_requests", "qos_class", "rfc3339",
    "running_container_status", "service", "set_running", "stable_uid", "suffix", "terminated_state", "utcnow",
]
