"""A small GPU cluster for the verification tests: one node per case the verdicts must tell apart."""
from __future__ import annotations

from typing import Any

from gputui.sim import builders as b

FAULT = "sim.gputui.io/fault"  # see gputui/sim/behaviour/controllers.py
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def _gpu_node(name: str, index: int, resources: dict[str, int], labels: dict[str, str], **kw: Any) -> dict[str, Any]:
    return b.node(name, index, labels=labels, extra_resources={r: (n, n) for r, n in resources.items()}, taints=[GPU_TAINT], **kw)


def objects() -> list[dict[str, Any]]:
    h100 = b.gfd_labels("NVIDIA-H100-80GB-HBM3", 2)
    mig = {**b.gfd_labels("NVIDIA-H100-80GB-HBM3", 1, mig_strategy="mixed", mig_config="all-balanced"),
           **b.mig_labels("NVIDIA-H100-80GB-HBM3", {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1})}
    shared = b.gfd_labels("Tesla-T4", 1, sharing="time-slicing", replicas=4, renamed_shared=True)
    nodes = [
        _gpu_node("gpu-ok", 1, {"nvidia.com/gpu": 2}, h100),
        _gpu_node("gpu-mig", 2, {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-2g.20gb": 1, "nvidia.com/mig-3g.40gb": 1}, mig),
        _gpu_node("gpu-shared", 3, {"nvidia.com/gpu.shared": 4}, shared),
        _gpu_node("gpu-full", 4, {"nvidia.com/gpu": 1}, b.gfd_labels("NVIDIA-H100-80GB-HBM3", 1)),
        _gpu_node("gpu-cordoned", 5, {"nvidia.com/gpu": 2}, h100, unschedulable=True),
        _gpu_node("gpu-driver-broken", 6, {"nvidia.com/gpu": 2}, h100, annotations={FAULT: "driver-broken"}),
        _gpu_node("gpu-image-pull", 7, {"nvidia.com/gpu": 2}, h100, annotations={FAULT: "image-pull"}),
        _gpu_node("gpu-runtime-hook", 8, {"nvidia.com/gpu": 2}, h100, annotations={FAULT: "runtime-hook"}),
        b.node("cpu-only", 9),
    ]
    trainer = b.container("trainer", "nvcr.io/nvidia/pytorch:24.05-py3", limits={"nvidia.com/gpu": 1}, command=["sleep", "infinity"])
    busy = b.pod("trainer-0", "default", [trainer], node_name="gpu-full", tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])
    return nodes + [busy]


def verification_pods(sim: Any) -> list[str]:
    """Names of the verification pods (and the ResourceClaims of verifications through DRA, as "claim NAME")
    the cluster holds now."""
    from gputui.kube.verify import MANAGED_BY_LABEL

    ours = lambda o: (o["metadata"].get("labels") or {}).get(MANAGED_BY_LABEL) == "gputui"  # noqa: E731
    return [p["metadata"]["name"] for p in sim.store.objects("pods") if ours(p)] + \
        [f"claim {c['metadata']['name']}" for c in sim.store.objects("resourceclaims.resource.k8s.io") if ours(c)]
