"""The cluster builder the GPU stack scenarios (stacks.py) and the demo (demo.py) share.

    base.py        ClusterBase: nodes, pods placed on them, DaemonSets, crash-looping and stuck pods;
                   the shared constants (DAY, GPU_TAINT, GPU_TOLERATION, FAULT_ANNOTATION)
    gpu_stack.py   the NVIDIA stack's installs (GPU Operator, ClusterPolicy, device plugins, DCGM Service)
    dra.py         Dynamic Resource Allocation (DRA driver, ResourceSlices, claimed pods)
"""
from __future__ import annotations

from .base import DAY, DS_TOLERATIONS, FAULT_ANNOTATION, GPU_TAINT, GPU_TOLERATION, ClusterBase
from .dra import DRA_DRIVER, DRA_IMAGE, DRA_NAMESPACE, MIG_PROFILE_IDS, DraInstalls
from .gpu_stack import (
    DCGM_EXPORTER_IMAGE,
    DCGM_EXPORTER_PORT,
    OPERATOR_NS,
    OPERATOR_STATES,
    OPERATOR_VERSION,
    PLUGIN_IMAGE,
    STATIC_PLUGIN_IMAGE,
    GpuStackInstalls,
)

__all__ = [
    "DAY", "DCGM_EXPORTER_IMAGE", "DCGM_EXPORTER_PORT", "DRA_DRIVER", "DRA_IMAGE", "DRA_NAMESPACE", "DS_TOLERATIONS",
    "FAULT_ANNOTATION", "GPU_TAINT", "GPU_TOLERATION", "MIG_PROFILE_IDS", "OPERATOR_NS", "OPERATOR_STATES",
    "OPERATOR_VERSION", "PLUGIN_IMAGE", "STATIC_PLUGIN_IMAGE", "ClusterBase", "ClusterBuilder",
]


class ClusterBuilder(GpuStackInstalls, DraInstalls):
    """Collects a cluster's objects; pods are given the status of ones that have been running on their node."""
