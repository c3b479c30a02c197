"""The labels GPU Feature Discovery, NFD and the GPU Operator put on GPU nodes, MIG profiles included."""
from __future__ import annotations

from .nodes import KERNEL


GPU_MODELS: dict[str, dict[str, str]] = {
    # GFD product label -> facts GFD reports about it
    "NVIDIA-H100-80GB-HBM3": {"memory": "81559", "family": "hopper", "compute.major": "9", "compute.minor": "0",
                              "machine": "PIO-4124GS-TNR-01-NC24B"},
    "NVIDIA-A100-SXM4-80GB": {"memory": "81920", "family": "ampere", "compute.major": "8", "compute.minor": "0",
                              "machine": "DGXA100-920-23687-2530-000"},
    "Tesla-T4": {"memory": "15360", "family": "turing", "compute.major": "7", "compute.minor": "5",
                 "machine": "g4dn.12xlarge"},
    "NVIDIA-L40S": {"memory": "46068", "family": "ada-lovelace", "compute.major": "8", "compute.minor": "9",
                    "machine": "SYS-421GE-TNRT"},
}


def gfd_labels(
    product: str,
    count: int,
    *,
    driver: str = "550.54.15",
    cuda: str = "12.4",
    operator: bool = True,
    mig_strategy: str = "single",
    mig_config: str | None = None,
    replicas: int = 1,
    sharing: str = "none",
    renamed_shared: bool = False,
) -> dict[str, str]:
    """The labels NFD, GFD, the device plugin and the GPU Operator put on a GPU node (shape of the real ones)."""
    facts = GPU_MODELS[product]
    major, minor, rev = (driver.split(".") + ["0", "0"])[:3]
    cuda_major, cuda_minor = cuda.split(".")[:2]
    labels = {
        "feature.node.kubernetes.io/cpu-model.vendor_id": "AMD",
        "feature.node.kubernetes.io/kernel-version.full": KERNEL,
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
        "nvidia.com/cuda.driver-version.full": driver,
        "nvidia.com/cuda.driver-version.major": major,
        "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": rev,
        "nvidia.com/cuda.driver.major": major,
        "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": rev,
        "nvidia.com/cuda.runtime-version.full": cuda,
        "nvidia.com/cuda.runtime-version.major": cuda_major,
        "nvidia.com/cuda.runtime-version.minor": cuda_minor,
        "nvidia.com/cuda.runtime.major": cuda_major,
        "nvidia.com/cuda.runtime.minor": cuda_minor,
        "nvidia.com/gfd.timestamp": "1715703041",
        "nvidia.com/gpu.compute.major": facts["compute.major"],
        "nvidia.com/gpu.compute.minor": facts["compute.minor"],
        "nvidia.com/gpu.count": str(count),
        "nvidia.com/gpu.family": facts["family"],
        "nvidia.com/gpu.machine": facts["machine"],
        "nvidia.com/gpu.memory": facts["memory"],
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product + ("-SHARED" if sharing != "none" and not renamed_shared else ""),
        "nvidia.com/gpu.replicas": str(0 if mig_strategy == "mixed" else replicas),
        "nvidia.com/gpu.sharing-strategy": sharing,
        "nvidia.com/mig.capable": "true" if facts["family"] in ("ampere", "hopper") else "false",
        "nvidia.com/mig.strategy": mig_strategy,
        "nvidia.com/mps.capable": "false",
    }
    if operator:
        for component in ("container-toolkit", "dcgm", "dcgm-exporter", "device-plugin", "driver",
                          "gpu-feature-discovery", "node-status-exporter", "operator-validator"):
            labels[f"nvidia.com/gpu.deploy.{component}"] = "true"
        labels["nvidia.com/gpu-driver-upgrade-state"] = "upgrade-done"
        if labels["nvidia.com/mig.capable"] == "true":
            labels["nvidia.com/gpu.deploy.mig-manager"] = "true"
            labels["nvidia.com/mig.config"] = mig_config or "all-disabled"
            labels["nvidia.com/mig.config.state"] = "success"
    return labels


# Facts about MIG profiles on an H100 80GB, as GFD labels them and nvidia-smi shows them.
MIG_PROFILES: dict[str, dict[str, int]] = {
    "1g.10gb": {"memory": 9984, "multiprocessors": 16, "copy": 1, "decoder": 1, "encoder": 0, "jpeg": 1, "ofa": 0,
                "slices": 1, "bar1": 16383, "used": 5},
    "2g.20gb": {"memory": 20096, "multiprocessors": 32, "copy": 2, "decoder": 2, "encoder": 0, "jpeg": 2, "ofa": 0,
                "slices": 2, "bar1": 32767, "used": 11},
    "3g.40gb": {"memory": 40448, "multiprocessors": 60, "copy": 3, "decoder": 3, "encoder": 0, "jpeg": 3, "ofa": 0,
                "slices": 3, "bar1": 65535, "used": 16},
}


def mig_labels(product: str, per_node: dict[str, int]) -> dict[str, str]:
    """GFD's per-profile labels for a MIG mixed node (per_node: profile -> device count)."""
    labels: dict[str, str] = {}
    for profile, count in per_node.items():
        facts = MIG_PROFILES[profile]
        prefix = f"nvidia.com/mig-{profile}"
        labels[f"{prefix}.count"] = str(count)
        for engine in ("copy", "decoder", "encoder", "jpeg", "ofa"):
            labels[f"{prefix}.engines.{engine}"] = str(facts[engine])
        labels[f"{prefix}.memory"] = str(facts["memory"] if profile != "3g.40gb" else 40320)
        labels[f"{prefix}.multiprocessors"] = str(facts["multiprocessors"])
        labels[f"{prefix}.product"] = f"{product}-MIG-{profile}"
        labels[f"{prefix}.replicas"] = "1"
        labels[f"{prefix}.sharing-strategy"] = "none"
        labels[f"{prefix}.slices.ci"] = str(facts["slices"])
        labels[f"{prefix}.slices.gi"] = str(facts["slices"])
    return labels
