"""The "gpu-cluster" scenario: the GPU Operator's DRA-based stack (operator v26.x), a GPUCluster instead of a
ClusterPolicy, not ready for 2 hours.

    dra-1, dra-2 (8x H100)  the DRA driver's kubelet plugin and ResourceSlices; inference/vllm-0 holds gpu-0 of dra-1
    GPUCluster gpu-cluster  `nvidia.com/v1alpha1`, cluster-scoped (short name gc), status.state notReady since 2 hours

The GPUCluster's shape is from the operator's documentation (its CRD reference): spec.draDriver, dcgm,
dcgmExporter, hostPaths, daemonsets; status.state ready, notReady, disabled or ignored, status.namespace and
status.conditions. Assumed, as the documentation does not spell them out: the conditions are those a ClusterPolicy
has (Ready, with lastTransitionTime, and Error), and its not-ready message names the operand states as
ClusterPolicy's does.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from .. import builders as b
from .cluster_builder import DAY, GPU_TOLERATION, ClusterBuilder

Obj = dict[str, Any]

NAMESPACE = "gpu-operator"
HOUR = 3600


def gpu_cluster(state: str, since_s: float, now: datetime, message: str = "") -> Obj:
    since = b.ago(since_s, now)
    ready = state == "ready"
    return {
        "apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster",
        "metadata": {"name": "gpu-cluster", "uid": b.stable_uid("GPUCluster", "gpu-cluster"), "creationTimestamp": b.ago(3 * DAY, now),
                     "generation": 1, "labels": {"app.kubernetes.io/component": "gpu-operator", "app.kubernetes.io/managed-by": "Helm"}},
        "spec": {"draDriver": {"repository": "registry.k8s.io/dra-driver-nvidia", "image": "dra-driver-nvidia-gpu", "version": "v25.12.0",
                               "gpus": {"kubeletPlugin": {}}, "computeDomains": {"enabled": True}},
                 "dcgm": {"enabled": False}, "dcgmExporter": {"enabled": True}, "hostPaths": {}, "daemonsets": {}},
        "status": {"state": state, "namespace": NAMESPACE, "conditions": [
            {"type": "Ready", "status": "True" if ready else "False", "reason": "Reconciled" if ready else "OperandNotReady",
             "message": message, "lastTransitionTime": since},
            {"type": "Error", "status": "False" if ready else "True", "reason": "Ready" if ready else "OperandNotReady",
             "message": "" if ready else message, "lastTransitionTime": since},
        ]},
    }


def build(now: datetime | None = None) -> list[Obj]:
    c = ClusterBuilder(now)
    worker = {"node-role.kubernetes.io/worker": ""}
    c.add_node("cpu-1", cpu=32, memory_gib=128, labels={**worker, "node-pool": "cpu"})
    nfd = {k: v for k, v in b.gfd_labels("NVIDIA-H100-80GB-HBM3", 8).items() if k.startswith("feature.node.kubernetes.io/")}
    for node in ("dra-1", "dra-2"):
        c.add_node(node, cpu=192, memory_gib=2048, labels={**worker, "nvidia.com/dra-kubelet-plugin": "true", **nfd})
    c.add_dra_driver(["dra-1", "dra-2"])
    for node in ("dra-1", "dra-2"):
        c.add_resource_slice(node, "NVIDIA H100 80GB HBM3", 81559, 8)
    c.others.append(b.custom_resource_definition(
        "nvidia.com", "v1alpha1", "gpuclusters", "GPUCluster", namespaced=False,
        printer_columns=[("Status", "string", ".status.state"), ("Age", "string", ".metadata.creationTimestamp")],
        labels={"app.kubernetes.io/component": "gpu-operator"}, age_s=3 * DAY, now=c.now))
    c.others.append(gpu_cluster("notReady", 2 * HOUR, c.now, "GPUCluster is not ready; states not ready: [state-dra-driver]"))
    serve = b.pod("vllm-0", "inference", [b.container("main", "vllm/vllm-openai:v0.6.0", command=["vllm", "serve"],
                                                       requests={"cpu": "8", "memory": "64Gi"})],
                  labels={"app": "vllm"}, owner=("apps/v1", "StatefulSet", "vllm"), tolerations=[GPU_TOLERATION], age_s=5 * HOUR, now=c.now)
    serve["metadata"].pop("generateName", None)
    c.add_claimed_pod(serve, "dra-1", "gpus", "gpu.nvidia.com", ["gpu-0"], age_s=5 * HOUR)
    return c.objects(["default", "kube-system", NAMESPACE, "inference"])
