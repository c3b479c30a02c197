"""The "fragmented" scenario: free GPUs spread so thinly that a 4-GPU pod fits nowhere, and free GPUs
no GPU pod can reach (stranded), for the fit figures (gputui/kube/fit.py).

    h100-1 .. h100-3  Ready, 8 GPUs each, 3, 2 and 1 free
    h100-4            Ready, tainted nvidia.com/gpu=present:NoSchedule (GPU pods tolerate it), 2 free
    h100-5            cordoned, 4 free                          } stranded: 4 + 8 + 2 = 14
    h100-6            NotReady (its not-ready taints), 8 free   }
    h100-7            tainted example.com/reserved=team-a:NoSchedule, 2 free (its pod tolerates it)
    mig-1             MIG mixed: 7 mig-1g.10gb (3 taken, 4 free) and 2 mig-3g.40gb (both free)
    cpu-1             no GPUs

Pending: ml/llm-train-4gpu asks for 4 nvidia.com/gpu (the scheduler finds no node for it), and
ml/queued-job-0 asks for 2 (which h100-1 could take) but is held by Kueue's scheduling gate
`kueue.x-k8s.io/admission`, with the condition the API server gives such a pod.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from .. import builders as b
from .cluster_builder import GPU_TAINT, GPU_TOLERATION, ClusterBuilder

Obj = dict[str, Any]

H100 = "NVIDIA-H100-80GB-HBM3"
IMAGE = "nvcr.io/nvidia/pytorch:24.03-py3"
RESERVED_TAINT = {"key": "example.com/reserved", "value": "team-a", "effect": "NoSchedule"}
RESERVED_TOLERATION = {"key": "example.com/reserved", "operator": "Equal", "value": "team-a", "effect": "NoSchedule"}
KUEUE_GATE = "kueue.x-k8s.io/admission"
# name -> (GPUs taken by its running pods, node options); every H100 node has 8.
GPU_NODES: dict[str, tuple[tuple[int, ...], dict[str, Any]]] = {
    "h100-1": ((4, 1), {}),
    "h100-2": ((4, 2), {}),
    "h100-3": ((4, 2, 1), {}),
    "h100-4": ((4, 2), {"taints": [GPU_TAINT]}),
    "h100-5": ((4,), {"unschedulable": True}),
    "h100-6": ((), {"ready": "False", "taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
                                                  {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]}),
    "h100-7": ((6,), {"taints": [RESERVED_TAINT]}),
}


def _job(name: str, limits: dict[str, int], c: ClusterBuilder, *, age_s: float, tolerations: tuple[Obj, ...] = (),
         labels: dict[str, str] | None = None) -> Obj:
    container = b.container("main", IMAGE, command=["torchrun", "train.py"], limits=limits, requests={"cpu": "4", "memory": "32Gi"})
    return b.pod(name, "ml", [container], labels={"app": name.rsplit("-", 1)[0], **(labels or {})},
                 tolerations=[GPU_TOLERATION, *tolerations], age_s=age_s, now=c.now)


def build(now: datetime | None = None) -> list[Obj]:
    c = ClusterBuilder(now)
    c.add_node("cpu-1", cpu=32, memory_gib=128, labels={"node-role.kubernetes.io/worker": "", "node-pool": "cpu"})
    gpu_labels = {"node-role.kubernetes.io/worker": "", "node-pool": "gpu"}
    for node, (_, options) in GPU_NODES.items():
        c.add_node(node, cpu=192, memory_gib=2048, labels={**gpu_labels, **b.gfd_labels(H100, 8, operator=False)},
                   extra_resources={"nvidia.com/gpu": (8, 8)}, **options)
    mig = {**b.gfd_labels(H100, 1, operator=False, mig_strategy="mixed"), **b.mig_labels(H100, {"1g.10gb": 7, "3g.40gb": 2})}
    c.add_node("mig-1", cpu=64, memory_gib=512, labels={**gpu_labels, **mig},
               extra_resources={"nvidia.com/gpu": (0, 0), "nvidia.com/mig-1g.10gb": (7, 7), "nvidia.com/mig-3g.40gb": (2, 2)})
    c.add_static_plugin([*GPU_NODES, "mig-1"], {"node-pool": "gpu"}, tolerations=(RESERVED_TOLERATION,))

    for node, (taken, _) in GPU_NODES.items():
        for i, gpus in enumerate(taken):
            tolerations = (RESERVED_TOLERATION,) if node == "h100-7" else ()
            c.place(_job(f"train-{node}-{i}", {"nvidia.com/gpu": gpus}, c, age_s=5 * 3600, tolerations=tolerations), node, 5 * 3600)
    for i in range(3):
        c.place(_job(f"notebook-{i}", {"nvidia.com/mig-1g.10gb": 1}, c, age_s=2 * 3600), "mig-1", 2 * 3600)

    c.pods.append(_job("llm-train-4gpu", {"nvidia.com/gpu": 4}, c, age_s=600))  # the scheduler finds it no node
    gated = _job("queued-job-0", {"nvidia.com/gpu": 2}, c, age_s=300, labels={"kueue.x-k8s.io/queue-name": "team-a"})
    gated["spec"]["schedulingGates"] = [{"name": KUEUE_GATE}]
    gated["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "lastProbeTime": None, "lastTransitionTime": None,
                                      "reason": "SchedulingGated", "message": "Scheduling is blocked due to non-empty scheduling gates"}]
    c.pods.append(gated)
    return c.objects(["default", "kube-system", "ml"])
