"""The built-in scenarios by name, for `scenarios.load` and `gputui sim --scenario NAME`.

    "demo"                       the demo cluster (demo.py)
    "fragmented"                 free GPUs spread thin and stranded, a pending 4-GPU pod, a gated pod (fragmented.py)
    "gpu-cluster"                the GPU Operator's DRA-based stack: a GPUCluster (no ClusterPolicy) not ready for 2 hours
                                 (gpu_cluster.py)
    "health"                     bad GPUs and the work on them: an XID, a plugin-unhealthy shared GPU, a MIG GPU's XID,
                                 a tainted DRA device, a health condition (health.py)
    "idle-gpus"                  pods holding GPUs: a busy trainer, idle notebooks, a job that stopped (idle_gpus.py)
    "kueue-quota"                Kueue: a ClusterQueue's GPU quota used up, a gated pod and a suspended job waiting (kueue_quota.py)
    "restricted"                 namespaces with PodSecurity restricted, ResourceQuotas (GPU, cpu and memory) and a
                                 LimitRange; one being deleted (restricted.py)
    "stuck"                      GPU plumbing stuck: a failed MIG change with its operands paused, one pending, a
                                 driver upgrade waiting for jobs for hours, one failed, a node NVSentinel left
                                 cordoned (stuck.py)
    "gpu-operator-healthy", ...  the GPU stack scenarios (stacks.SCENARIOS)

This registry sits above the scenario modules and below scenarios.py, so that
neither needs the other.
"""
from __future__ import annotations

from typing import Any, Callable

from . import demo, fragmented, gpu_cluster, health, idle_gpus, kueue_quota, restricted, stacks, stuck

Obj = dict[str, Any]

BUILTIN: dict[str, Callable[[], list[Obj]]] = {"demo": demo.build, "fragmented": fragmented.build, "gpu-cluster": gpu_cluster.build, "health": health.build, "idle-gpus": idle_gpus.build,
                                              "kueue-quota": kueue_quota.build, "restricted": restricted.build, "stuck": stuck.build,
                                              **stacks.SCENARIOS}
