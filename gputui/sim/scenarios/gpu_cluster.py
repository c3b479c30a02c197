"""The "gpu-cluster" scenario: the GPU Operator's DRA-based stack (operator v26.x), a GPUCluster instead of a
ClusterPolicy, not ready for 2 hours.

    dra-1, dra-2 (8x H100)  the DRA driver's kubelet plugin and ResourceSlices; inference/vllm-0 holds gpu-0 of dra-1
    GPUCluster gpu-cluster  `nvidia.com/v1alpha1`, cluster-scoped (short name gc), status.state notReady since 2 hours

The GPUCluster as NVIDIA/gpu-operator writes it (api/nvidia/v1alpha1/gpucluster_types.go, its CRD
config/crd/bases/nvidia.com_gpuclusters.yaml, controllers/gpucluster_controller.go, internal/conditions/gpucluster.go):
a singleton named gpu-cluster; spec.draDriver, dcgm, dcgmExporter, hostPaths, daemonsets; status.state one of
ready, notReady, disabled (the controller writes ready or notReady; no "ignored", there is only one),
status.namespace, and the conditions Ready and Error. Ready: Ready=True (Reconciled, "All resources have been
successfully reconciled"), Error=False (reason Ready). Not ready: Ready=False (reason Error, no message), Error=True
with the reason and message: OperandNotReady "Waiting for operand pods to be ready", ReconcileFailed "Error syncing
state <state>: <error>", or PrerequisiteNotMet (a ClusterPolicy exists).
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from .. import builders as b
from .cluster_builder import DAY, GPU_TOLERATION, ClusterBuilder

Obj = dict[str, Any]

NAMESPACE = "gpu-operator"
HOUR = 3600


STATES = ("ready", "notReady", "disabled")  # the CRD's enum
WAITING = "Waiting for operand pods to be ready"


def gpu_cluster(state: str, since_s: float, now: datetime, message: str = WAITING, reason: str = "OperandNotReady") -> Obj:
    """The GPUCluster in `state` since `since_s` ago; not ready: the Error condition's `reason` and `message`."""
    if state not in STATES:
        raise ValueError(f"GPUCluster state {state!r}: one of {', '.join(STATES)}")
    since = b.ago(since_s, now)

    def condition(kind: str, status: bool, why: str, words: str = "") -> Obj:
        return {"type": kind, "status": str(status), "reason": why, "message": words, "lastTransitionTime": since}

    ready = state == "ready"
    conditions = ([condition("Ready", True, "Reconciled", "All resources have been successfully reconciled"),
                   condition("Error", False, "Ready")] if ready else
                  [condition("Ready", False, "Error"), condition("Error", True, reason, message)])
    return {
        "apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster",
        "metadata": {"name": "gpu-cluster", "uid": b.stable_uid("GPUCluster", "gpu-cluster"), "creationTimestamp": b.ago(3 * DAY, now),
                     "generation": 1, "labels": {"app.kubernetes.io/component": "gpu-operator", "app.kubernetes.io/managed-by": "Helm"}},
        "spec": {"draDriver": {"repository": "registry.k8s.io/dra-driver-nvidia", "image": "dra-driver-nvidia-gpu", "version": "v25.12.0",
                               "gpus": {"kubeletPlugin": {}}, "computeDomains": {"enabled": True}},
                 "dcgm": {"enabled": False}, "dcgmExporter": {"enabled": True}, "hostPaths": {}, "daemonsets": {}},
        "status": {"state": state, "namespace": NAMESPACE, "conditions": conditions},
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
        printer_columns=[("Status", "string", ".status.state"), ("Age", "date", ".metadata.creationTimestamp")],
        labels={"app.kubernetes.io/component": "gpu-operator"}, age_s=3 * DAY, now=c.now))
    c.others.append(gpu_cluster("notReady", 2 * HOUR, c.now))
    serve = b.pod("vllm-0", "inference", [b.container("main", "vllm/vllm-openai:v0.6.0", command=["vllm", "serve"],
                                                       requests={"cpu": "8", "memory": "64Gi"})],
                  labels={"app": "vllm"}, owner=("apps/v1", "StatefulSet", "vllm"), tolerations=[GPU_TOLERATION], age_s=5 * HOUR, now=c.now)
    serve["metadata"].pop("generateName", None)
    c.add_claimed_pod(serve, "dra-1", "gpus", "gpu.nvidia.com", ["gpu-0"], age_s=5 * HOUR)
    return c.objects(["default", "kube-system", NAMESPACE, "inference"])
