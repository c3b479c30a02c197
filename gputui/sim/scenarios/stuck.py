"""The "stuck" scenario: GPU plumbing stuck in each way gputui calls a verdict, there from the start (the problem
codes mig-stuck, driver-upgrade-stuck, left-cordoned), each state written as its component writes it (plumbing.py).

    mig-1 (H100, MIG)   the MIG manager failed to apply all-1g.10gb (nvidia.com/mig.config.state=failed): its
                        clients stay paused-for-mig-change with no change under way
    mig-2 (H100, MIG)   a change to all-3g.40gb pending (stuck once it lasted [stuck] mig_after: gputui cannot know
                        since when it was pending before its first look)
    up-1 (8x H100)      the GPU driver upgrade in wait-for-jobs-required for 2 hours (the controller's start-time
                        annotation): the node cordoned by the upgrade, its job still running
    up-2 (8x H100)      the GPU driver upgrade failed (upgrade-failed), the node cordoned by it
    nvs-1 (8x H100)     NVSentinel quarantined it 3 hours ago for GpuMemWatch, whose condition is healthy again
                        since 2 hours; its fault quarantine halted (circuit breaker tripped) before that: left cordoned
    nvl-1..nvl-4        ml/nvl-train, a ComputeDomain of NVIDIA's DRA driver made 2 hours ago for 4 nodes: the Job's
                        pods run on all four with their channel claims, but only nvl-1 (Ready) and nvl-2
                        (NotReady) joined: the domain is NotReady (compute-domain-not-ready)

The GPU Operator runs on the GPU nodes with a ready ClusterPolicy. `gputui sim fault mig-state|upgrade-state|
quarantine|heal|compute-domain ...` (faults.py) moves these states on the running cluster.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from .. import builders as b
from ..behaviour import plumbing
from ..builders import compute_domains as cd
from .cluster_builder import GPU_TOLERATION, OPERATOR_NS, ClusterBuilder

Obj = dict[str, Any]

H100 = "NVIDIA-H100-80GB-HBM3"
IMAGE = "nvcr.io/nvidia/pytorch:24.03-py3"
HOUR = 3600
NVL_NODES = ["nvl-1", "nvl-2", "nvl-3", "nvl-4"]
GPU_NODES = ["mig-1", "mig-2", "up-1", "up-2", "nvs-1", *NVL_NODES]


def build(now: datetime | None = None) -> list[Obj]:
    c = ClusterBuilder(now)
    worker = {"node-role.kubernetes.io/worker": ""}
    c.add_node("cpu-1", cpu=32, memory_gib=128, labels={**worker, "node-pool": "cpu"})
    for name, config in (("mig-1", "all-1g.10gb"), ("mig-2", "all-3g.40gb")):
        labels = {**b.gfd_labels(H100, 1, mig_strategy="mixed", mig_config=config), **b.mig_labels(H100, {"1g.10gb": 7})}
        c.add_node(name, cpu=64, memory_gib=512, labels={**worker, **labels},
                   extra_resources={"nvidia.com/gpu": (0, 0), "nvidia.com/mig-1g.10gb": (7, 7)})
    for name in ("up-1", "up-2", "nvs-1", *NVL_NODES):
        c.add_node(name, cpu=128, memory_gib=1024, labels={**worker, **b.gfd_labels(H100, 8)}, extra_resources={"nvidia.com/gpu": (8, 8)})
    c.add_operator(GPU_NODES, ["cpu-1", *GPU_NODES], "cpu-1", GPU_NODES)
    c.add_cluster_policy()
    c.add_dcgm_service()

    job = b.pod("llm-train-0", "ml", [b.container("main", IMAGE, command=["torchrun", "train.py"], limits={"nvidia.com/gpu": 8},
                                                  requests={"cpu": "16", "memory": "128Gi"})],
                labels={"app": "llm-train"}, owner=("batch/v1", "Job", "llm-train"), tolerations=[GPU_TOLERATION],
                age_s=5 * HOUR, now=c.now)
    c.place(job, "up-1", 5 * HOUR)

    domain = cd.compute_domain("nvl-train", "ml", len(NVL_NODES), [cd.node_entry("nvl-1", 0, "Ready"), cd.node_entry("nvl-2", 1, "NotReady")],
                               age_s=2 * HOUR, now=c.now)
    c.others += [cd.crd(c.now), domain]
    for index, node in enumerate(NVL_NODES):
        member = b.pod(f"nvl-train-{index}", "ml", [b.container("main", IMAGE, command=["torchrun", "train.py"], limits={"nvidia.com/gpu": 8},
                                                               requests={"cpu": "16", "memory": "128Gi"})],
                       labels={"app": "nvl-train"}, owner=("batch/v1", "Job", "nvl-train"), tolerations=[GPU_TOLERATION],
                       age_s=2 * HOUR, now=c.now)
        member["spec"]["resourceClaims"] = [{"name": "channel", "resourceClaimTemplateName": "nvl-train-channel"}]
        member["spec"]["containers"][0]["resources"]["claims"] = [{"name": "channel"}]
        c.place(member, node, 2 * HOUR)
        claim = cd.channel_claim(domain, member, node)
        member["status"]["resourceClaimStatuses"] = [{"name": "channel", "resourceClaimName": claim["metadata"]["name"]}]
        c.others.append(claim)

    plumbing.set_mig_state(c.nodes["mig-1"], "pending")
    plumbing.set_mig_state(c.nodes["mig-1"], "failed")  # the MIG manager stops on the error: its clients stay paused
    plumbing.set_mig_state(c.nodes["mig-2"], "pending")
    plumbing.set_upgrade_state(c.nodes["up-1"], "wait-for-jobs-required", c.now - timedelta(hours=2))
    plumbing.set_upgrade_state(c.nodes["up-2"], "drain-required", c.now - timedelta(hours=3))
    plumbing.set_upgrade_state(c.nodes["up-2"], "upgrade-failed", c.now - timedelta(hours=1))
    plumbing.quarantine(c.nodes["nvs-1"], "GpuMemWatch", "uncorrectable ECC errors on GPU 3", c.now - timedelta(hours=3))
    plumbing.heal(c.nodes["nvs-1"], "GpuMemWatch", c.now - timedelta(hours=2), halted=True)
    return c.objects(["default", "kube-system", OPERATOR_NS, "ml"])
