"""The "health" scenario: bad GPUs and the work on them, one signal of each kind (the Health view, the report's
`bad_gpus`).

    gpu-1 (8x H100)          ml/llm-train-0 (Job llm-train) holds GPUs 0-3; the DCGM exporter reports XID 79 on
                             GPU 1 (its pod label names the pod) and XID 48 on GPU 6, which no pod holds
    ts-1 (4x T4, shared 4x)  research/notebook-a and notebook-b share GPU 0 (time-slicing); the device plugin finds
                             GPU 0 unhealthy: allocatable 12 of 16, both pods' allocatedResourcesStatus say Unhealthy
    mig-1 (H100, MIG)        research/notebook-bob holds a 1g.10gb slice of GPU 0; XID 94 on GPU 0 (every MIG
                             instance of a GPU reports its XID)
    dra-1 (8x H100, DRA)     inference/vllm-0 (StatefulSet vllm) holds gpu-0 through a ResourceClaim; the DRA driver
                             tainted gpu-0 gpu.nvidia.com/xid=43:NoSchedule on its ResourceSlice 20 minutes ago
    cond-1 (8x H100)         a health monitor's node condition, GpuXidError=True for 25 minutes (node-problem-detector
                             style: True is the problem), a node-level signal that names no GPU; ml/eval-0 runs there

The GPU Operator runs on the GPU nodes (with its DCGM exporter Service); the DRA driver's kubelet plugin on dra-1.
`gputui sim fault xid|gpu-health|taint-device ...` (faults.py) changes these signals on the running cluster.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from .. import builders as b
from .cluster_builder import GPU_TOLERATION, OPERATOR_NS, ClusterBuilder
from ..exporters.dcgm import XID_ANNOTATION
from ..behaviour.nvidia_smi import UNHEALTHY_ANNOTATION

Obj = dict[str, Any]

H100 = "NVIDIA-H100-80GB-HBM3"
T4 = "Tesla-T4"
IMAGE = "nvcr.io/nvidia/pytorch:24.03-py3"
HOUR = 3600
CONDITION = "GpuXidError"  # a monitor's own condition type: not one of the kubelet's


def _pod(c: ClusterBuilder, namespace: str, name: str, resource: str | None, count: int, running_s: int,
         owner: tuple[str, str, str] | None = None) -> Obj:
    limits = {resource: count} if resource else {}
    container = b.container("main", IMAGE, command=["python", "main.py"], limits=limits, requests={"cpu": "4", "memory": "32Gi"})
    return b.pod(name, namespace, [container], labels={"app": name.rsplit("-", 1)[0]}, owner=owner,
                 tolerations=[GPU_TOLERATION], age_s=running_s + 10, now=c.now)


def build(now: datetime | None = None) -> list[Obj]:
    c = ClusterBuilder(now)
    worker = {"node-role.kubernetes.io/worker": ""}
    c.add_node("cpu-1", cpu=32, memory_gib=128, labels={**worker, "node-pool": "cpu"})
    c.add_node("gpu-1", cpu=128, memory_gib=1024, labels={**worker, **b.gfd_labels(H100, 8)},
               extra_resources={"nvidia.com/gpu": (8, 8)}, annotations={XID_ANNOTATION: "1:79,6:48"})
    shared = b.gfd_labels(T4, 4, replicas=4, sharing="time-slicing", renamed_shared=True)
    shared["nvidia.com/gpu.shared.replicas"] = "4"
    c.add_node("ts-1", cpu=48, memory_gib=192, labels={**worker, **shared},
               extra_resources={"nvidia.com/gpu.shared": (16, 12)}, annotations={UNHEALTHY_ANNOTATION: "0"})
    mig = {**b.gfd_labels(H100, 1, mig_strategy="mixed", mig_config="all-1g.10gb"), **b.mig_labels(H100, {"1g.10gb": 7})}
    c.add_node("mig-1", cpu=64, memory_gib=512, labels={**worker, **mig},
               extra_resources={"nvidia.com/gpu": (0, 0), "nvidia.com/mig-1g.10gb": (7, 7)}, annotations={XID_ANNOTATION: "0:94"})
    nfd = {k: v for k, v in b.gfd_labels(H100, 8).items() if k.startswith("feature.node.kubernetes.io/")}
    c.add_node("dra-1", cpu=192, memory_gib=2048, labels={**worker, "nvidia.com/dra-kubelet-plugin": "true", **nfd})
    cond = c.add_node("cond-1", cpu=128, memory_gib=1024, labels={**worker, **b.gfd_labels(H100, 8)},
                      extra_resources={"nvidia.com/gpu": (8, 8)})
    since = b.ago(25 * 60, c.now)
    cond["status"]["conditions"].append(b.node_condition(CONDITION, "True", "XidCriticalError",
                                                         "XID 119 on a GPU (GSP RPC timeout)", since, b.rfc3339(c.now)))
    gpu_nodes = ["gpu-1", "ts-1", "mig-1", "cond-1"]
    c.add_operator(gpu_nodes, ["cpu-1", *gpu_nodes, "dra-1"], "cpu-1", gpu_nodes)
    c.add_cluster_policy()
    c.add_dcgm_service()

    c.place(_pod(c, "ml", "llm-train-0", "nvidia.com/gpu", 4, 6 * HOUR, ("batch/v1", "Job", "llm-train")), "gpu-1", 6 * HOUR)
    for name in ("notebook-a", "notebook-b"):
        c.place(_pod(c, "research", name, "nvidia.com/gpu.shared", 1, 2 * HOUR), "ts-1", 2 * HOUR)
    c.place(_pod(c, "research", "notebook-bob", "nvidia.com/mig-1g.10gb", 1, 5 * HOUR), "mig-1", 5 * HOUR)
    c.place(_pod(c, "ml", "eval-0", "nvidia.com/gpu", 2, HOUR), "cond-1", HOUR)

    c.add_dra_driver(["dra-1"])
    slice_obj = c.add_resource_slice("dra-1", "NVIDIA H100 80GB HBM3", 81559, 8)
    slice_obj["spec"]["devices"][0]["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "43", "effect": "NoSchedule",
                                                  "timeAdded": b.ago(20 * 60, c.now)}]
    serve = _pod(c, "inference", "vllm-0", None, 0, 9 * HOUR, ("apps/v1", "StatefulSet", "vllm"))
    serve["metadata"].pop("generateName", None)
    c.add_claimed_pod(serve, "dra-1", "gpus", "gpu.nvidia.com", ["gpu-0"], age_s=9 * HOUR)
    return c.objects(["default", "kube-system", OPERATOR_NS, "ml", "research", "inference"])
