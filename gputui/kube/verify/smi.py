"""nvidia-smi's output, parsed, and where it contradicts the node's GPU Feature Discovery labels."""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..gpu import GPU


@dataclass(frozen=True)
class SmiGpu:
    index: int
    name: str
    memory_mib: int | None = None  # total framebuffer; None when nvidia-smi shows N/A (MIG)
    bus_id: str | None = None


@dataclass(frozen=True)
class SmiMig:
    gpu: int
    profile: str | None = None  # e.g. "3g.40gb" (the -L form names it; the table does not)
    memory_mib: int | None = None


@dataclass(frozen=True)
class SmiReport:
    driver: str | None
    cuda: str | None
    gpus: tuple[SmiGpu, ...]
    migs: tuple[SmiMig, ...] = ()

    @property
    def models(self) -> list[str]:
        return sorted({g.name for g in self.gpus})


_SMI_HEADER = re.compile(r"Driver Version:\s*(\S+)(?:\s+CUDA Version:\s*(\S+))?")
_SMI_GPU_ROW = re.compile(r"^\|\s*(\d+)\s+(.+?)\s+(?:On|Off)\s*\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])")
_SMI_MEMORY = re.compile(r"(\d+)MiB\s*/\s*(\d+)MiB")
_SMI_MIG_ROW = re.compile(r"^\|\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\|\s*(\d+)MiB\s*/\s*(\d+)MiB")
_SMI_LIST_GPU = re.compile(r"^GPU (\d+): (.+?) \(UUID: ")
_SMI_LIST_MIG = re.compile(r"^\s+MIG (\S+)\s+Device\s+\d+:")


def parse_nvidia_smi(text: str) -> SmiReport:
    """Driver, CUDA version, GPUs and MIG devices from nvidia-smi's table or `nvidia-smi -L`."""
    driver = cuda = None
    gpus: list[SmiGpu] = []
    migs: list[SmiMig] = []
    lines = text.splitlines()
    in_mig_section = False
    for i, line in enumerate(lines):
        if driver is None and (m := _SMI_HEADER.search(line)):
            driver, cuda = m.group(1), m.group(2)
            continue
        if "MIG devices:" in line:
            in_mig_section = True
        elif "Processes:" in line:
            in_mig_section = False
        if m := _SMI_GPU_ROW.match(line):
            memory = None
            if i + 1 < len(lines) and (mem := _SMI_MEMORY.search(lines[i + 1])):
                memory = int(mem.group(2))
            gpus.append(SmiGpu(int(m.group(1)), m.group(2).strip(), memory, m.group(3)))
        elif in_mig_section and (m := _SMI_MIG_ROW.match(line)):
            migs.append(SmiMig(int(m.group(1)), None, int(m.group(6))))
        elif m := _SMI_LIST_GPU.match(line):
            gpus.append(SmiGpu(int(m.group(1)), m.group(2).strip()))
        elif (m := _SMI_LIST_MIG.match(line)) and gpus:
            migs.append(SmiMig(gpus[-1].index, m.group(1)))
    return SmiReport(driver, cuda, tuple(gpus), tuple(migs))


def _label_version(labels: Mapping[str, str], full: str, parts: Sequence[str]) -> str | None:
    if labels.get(full):
        return labels[full]
    values = [labels.get(p) for p in parts]
    if values[0] is None:
        return None
    return ".".join(v for v in values if v is not None)


def gfd_driver_version(labels: Mapping[str, str]) -> str | None:
    found = _label_version(
        labels,
        "nvidia.com/cuda.driver-version.full",
        ("nvidia.com/cuda.driver-version.major", "nvidia.com/cuda.driver-version.minor", "nvidia.com/cuda.driver-version.revision"),
    )
    return found or _label_version(labels, "", ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev"))


def gfd_cuda_version(labels: Mapping[str, str]) -> str | None:
    found = _label_version(
        labels, "nvidia.com/cuda.runtime-version.full", ("nvidia.com/cuda.runtime-version.major", "nvidia.com/cuda.runtime-version.minor")
    )
    return found or _label_version(labels, "", ("nvidia.com/cuda.runtime.major", "nvidia.com/cuda.runtime.minor"))


def _model_key(name: str) -> str:
    """A GPU model as GFD spells it: spaces as dashes, without sharing or MIG suffixes."""
    key = re.sub(r"\s+", "-", name.strip())
    key = re.sub(r"-MIG-\d+g\.\d+gb$", "", key)
    key = re.sub(r"-SHARED$", "", key)
    return key.lower()


def _same_model(smi_name: str, gfd_product: str) -> bool:
    smi_key, gfd_key = _model_key(smi_name), _model_key(gfd_product)
    if smi_key.endswith("..."):  # nvidia-smi cuts long names in its narrow table
        return gfd_key.startswith(smi_key[:-3])
    return smi_key == gfd_key


def disagreements(report: SmiReport, labels: Mapping[str, str], resource: str, count: int) -> list[str]:
    """Where nvidia-smi inside the pod contradicts the node's GPU Feature Discovery labels."""
    found: list[str] = []
    product = labels.get("nvidia.com/gpu.product")
    if product:
        for model in report.models:
            if not _same_model(model, product):
                found.append(f"model: nvidia-smi shows {model!r}, label nvidia.com/gpu.product is {product!r}")
    driver = gfd_driver_version(labels)
    if driver and report.driver and report.driver != driver:
        found.append(f"driver: nvidia-smi shows {report.driver}, GFD labels say {driver}")
    cuda = gfd_cuda_version(labels)
    if cuda and report.cuda and report.cuda != cuda:
        found.append(f"CUDA: nvidia-smi shows {report.cuda}, GFD labels say {cuda}")
    memory = labels.get("nvidia.com/gpu.memory")
    if memory and memory.isdigit() and not report.migs:
        for gpu in report.gpus:
            if gpu.memory_mib is not None and gpu.memory_mib != int(memory):
                found.append(f"memory: GPU {gpu.index} has {gpu.memory_mib} MiB, label nvidia.com/gpu.memory is {memory} MiB")
    label_count = labels.get("nvidia.com/gpu.count")
    if label_count and label_count.isdigit() and len(report.gpus) > int(label_count):
        found.append(f"count: nvidia-smi lists {len(report.gpus)} GPUs, label nvidia.com/gpu.count is {label_count}")
    elif resource == GPU and not report.migs and report.gpus and len(report.gpus) != count:
        found.append(f"count: nvidia-smi lists {len(report.gpus)} GPUs, the pod asked for {count} {GPU}")
    return found
