"""The "idle-gpus" scenario: pods that hold GPUs and use them, or not (the exporters' `sim.gputui.io/gpu-util`
profiles, dcgm.py), for the Idle GPUs view and the report's `idle`.

    gpu-1 (8x H100)     ml/llm-train-0       4 GPUs, busy (90 %) for 6 hours
                        ml/notebook-alice    1 GPU, idle (0 %) since it started 3 hours ago
    gpu-2 (8x A100)     ml/batch-eval-0      2 GPUs, started 2 hours ago, busy for its first hour, idle since
                        research/sweep-0     1 GPU at 3 %: under the idle threshold (5 %) though not at 0
    mig-1 (H100, MIG)   research/notebook-bob  a 1g.10gb slice, idle (GR engine activity 0 on MIG)

The GPU Operator runs on the three GPU nodes with its DCGM exporter Service. Each exporter reports what its
pods' profiles say at the time of the scrape; what they did before gputui (or a Prometheus) started reading
is history nobody kept.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from .. import builders as b
from .cluster_builder import GPU_TOLERATION, OPERATOR_NS, ClusterBuilder
from ..exporters.dcgm import UTIL_ANNOTATION

Obj = dict[str, Any]

H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-80GB"
IMAGE = "nvcr.io/nvidia/pytorch:24.03-py3"
HOUR = 3600
# (namespace, name, node, resource, count, profile, running for)
PODS: tuple[tuple[str, str, str, str, int, str, int], ...] = (
    ("ml", "llm-train-0", "gpu-1", "nvidia.com/gpu", 4, "busy", 6 * HOUR),
    ("ml", "notebook-alice", "gpu-1", "nvidia.com/gpu", 1, "idle", 3 * HOUR),
    ("ml", "batch-eval-0", "gpu-2", "nvidia.com/gpu", 2, "stopped-after-1h", 2 * HOUR),
    ("research", "sweep-0", "gpu-2", "nvidia.com/gpu", 1, "3", HOUR),
    ("research", "notebook-bob", "mig-1", "nvidia.com/mig-1g.10gb", 1, "idle", 5 * HOUR),
)


def build(now: datetime | None = None) -> list[Obj]:
    c = ClusterBuilder(now)
    worker = {"node-role.kubernetes.io/worker": ""}
    c.add_node("cpu-1", cpu=32, memory_gib=128, labels={**worker, "node-pool": "cpu"})
    for node, product in (("gpu-1", H100), ("gpu-2", A100)):
        c.add_node(node, cpu=128, memory_gib=1024, labels={**worker, "node-pool": "gpu", **b.gfd_labels(product, 8)},
                   extra_resources={"nvidia.com/gpu": (8, 8)})
    mig = {**b.gfd_labels(H100, 1, mig_strategy="mixed", mig_config="all-1g.10gb"), **b.mig_labels(H100, {"1g.10gb": 7})}
    c.add_node("mig-1", cpu=64, memory_gib=512, labels={**worker, "node-pool": "gpu", **mig},
               extra_resources={"nvidia.com/gpu": (0, 0), "nvidia.com/mig-1g.10gb": (7, 7)})
    gpu_nodes = ["gpu-1", "gpu-2", "mig-1"]
    c.add_operator(gpu_nodes, ["cpu-1", *gpu_nodes], "cpu-1", gpu_nodes)
    c.add_cluster_policy()
    c.add_dcgm_service()
    for namespace, name, node, resource, count, profile, running_s in PODS:
        container = b.container("main", IMAGE, command=["python", f"{name.rsplit('-', 1)[0]}.py"], limits={resource: count},
                                requests={"cpu": "4", "memory": "32Gi"})
        pod = b.pod(name, namespace, [container], labels={"app": name.rsplit("-", 1)[0]}, annotations={UTIL_ANNOTATION: profile},
                    tolerations=[GPU_TOLERATION], age_s=running_s + 10, now=c.now)
        c.place(pod, node, running_s + 4)  # status.startTime: running_s ago
    return c.objects(["default", "kube-system", OPERATOR_NS, "ml", "research"])
