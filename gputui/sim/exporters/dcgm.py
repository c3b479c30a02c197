"""The text a simulated dcgm-exporter serves on :9400/metrics.

`exposition(node, pods, now, hostname_label)` is a pure function of a Node
object, the pods bound to it and the time: the same inputs give the same text,
and values drift smoothly as `now` advances.  The GPUs come from the node's
GPU Feature Discovery labels (product, memory, count, MIG mixed-strategy
counts) or, lacking those, its capacity; pods holding GPU resources are
attributed to devices in a stable order (oldest pod first).

Scenario hooks:

- the node annotation `sim.gputui.io/xid` injects XIDs, as comma-separated
  `[GPU_INDEX:]CODE` items: "79" puts XID 79 on GPU 0, "3:79,5:48" puts 79 on
  GPU 3 and 48 on GPU 5.  Every MIG instance of a GPU reports its GPU's XID.
- the pod annotation `sim.gputui.io/gpu-util` sets the utilisation of the
  pod's GPUs as a function of the time since the pod started (its
  `status.startTime`): "idle" (0 %), "busy" (90 %), a number ("37.5": that
  percent), or "stopped-after-DURATION" (busy for DURATION, e.g. "1h", "90s",
  "1h30m", after the pod started, 0 % from then on: started two hours ago with
  "stopped-after-1h", the job stopped using its GPUs an hour ago).  The
  profile's GPUs report exactly that figure (GPU_UTIL, or GR_ENGINE_ACTIVE as a
  ratio on MIG), and a constant framebuffer use: (0.2 + 0.6 x the working
  percent / 100) x the device's memory, rounded (a stopped job keeps its
  memory).  A GPU shared by several pods reports the highest of its holders'.
  Without the annotation, a held GPU's use is a smooth wave.

Pods are named on a device's series as dcgm-exporter's pod mapper names them from the kubelet's pod-resources
list (its `ExporterOptions`, read from the exporter container's flags and environment, as the exporter reads
them): only devices of `nvidia.com/gpu`, `nvidia.com/mig-*` and the resources `--nvidia-resource-names`
(NVIDIA_RESOURCE_NAMES) lists, so a renamed `nvidia.com/gpu.shared` is attributed to nobody unless listed; one pod
per device, so of the pods sharing a time-sliced GPU only one (the kubelet's last; here the newest) is named; with
`--kubernetes-virtual-gpus` (KUBERNETES_VIRTUAL_GPUS) one series per pod holding the device, each with its
replica as `vgpu`, and none at all for a device no pod holds. A device no pod is named on carries no `pod`,
`namespace` or `container` label at all. A field the GPU does not support (memory temperature on GDDR boards)
has no series, as the exporter skips DCGM's blank values.

`parse_xid_annotation` and `parse_util_annotation` validate the values (scenario
loaders can call them to refuse a bad one); `exposition` ignores a bad value.
"""
from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .. import builders
from ..behaviour.nvidia_smi import NodeGpus

XID_ANNOTATION = "sim.gputui.io/xid"
UTIL_ANNOTATION = "sim.gputui.io/gpu-util"
BUSY_PERCENT = 90.0
HOSTNAME_LABELS = ("Hostname", "hostname")  # older releases, newer releases

# The XID series' err_msg label (exporters from 3.3.6-3.4.2 on label DCGM_FI_DEV_XID_ERRORS with err_code, the value
# as text, and err_msg, the catalogue's short description of a known code); the simulator's own short wording.
XID_MESSAGES: dict[int, str] = {
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "Preemptive cleanup, due to previous errors",
    48: "Double Bit ECC Error",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    119: "GSP RPC Timeout",
}


GPU_RESOURCE = "nvidia.com/gpu"
SHARED_RESOURCE = "nvidia.com/gpu.shared"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


@dataclass(frozen=True)
class _Board:
    model: str  # modelName as NVML prints it
    idle_w: float
    max_w: float
    sm_mhz: int
    mem_mhz: int
    hbm: bool  # HBM boards report memory temperature


_BOARDS: dict[str, _Board] = {
    "NVIDIA-H100-80GB-HBM3": _Board("NVIDIA H100 80GB HBM3", 70, 700, 1980, 2619, True),
    "NVIDIA-H200": _Board("NVIDIA H200", 75, 700, 1980, 3201, True),
    "NVIDIA-A100-SXM4-40GB": _Board("NVIDIA A100-SXM4-40GB", 55, 400, 1410, 1215, True),
    "NVIDIA-A100-SXM4-80GB": _Board("NVIDIA A100-SXM4-80GB", 60, 400, 1410, 1593, True),
    "NVIDIA-A100-PCIE-40GB": _Board("NVIDIA A100-PCIE-40GB", 35, 250, 1410, 1215, True),
    "NVIDIA-L4": _Board("NVIDIA L4", 16, 72, 2040, 6251, False),
    "NVIDIA-L40S": _Board("NVIDIA L40S", 35, 350, 2520, 9001, False),
    "Tesla-T4": _Board("Tesla T4", 10, 70, 1590, 5001, False),
}

# (name, help, type, format): the default counters' order and wording.
_METRICS: tuple[tuple[str, str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", "gauge", "int"),
    ("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", "gauge", "int"),
    ("DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C).", "gauge", "int"),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "gauge", "int"),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "gauge", "float"),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).", "counter", "int"),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "Total number of PCIe retries.", "counter", "int"),
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "gauge", "int"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", "gauge", "int"),
    ("DCGM_FI_DEV_ENC_UTIL", "Encoder utilization (in %).", "gauge", "int"),
    ("DCGM_FI_DEV_DEC_UTIL", "Decoder utilization (in %).", "gauge", "int"),
    ("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", "gauge", "int"),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", "gauge", "int"),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "gauge", "int"),
    ("DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB).", "gauge", "int"),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "Total number of NVLink bandwidth counters for all lanes.", "counter", "int"),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "vGPU License status", "gauge", "int"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for uncorrectable errors", "counter", "int"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for correctable errors", "counter", "int"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "Whether remapping of rows has failed", "gauge", "int"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.", "gauge", "float"),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active.", "gauge", "float"),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the device memory interface is active sending or receiving data.", "gauge", "float"),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.", "gauge", "int"),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.", "gauge", "int"),
)


@dataclass(frozen=True)
class ExporterOptions:
    """The dcgm-exporter options that decide which pods a device's series name."""

    virtual_gpus: bool = False  # --kubernetes-virtual-gpus, KUBERNETES_VIRTUAL_GPUS
    resource_names: tuple[str, ...] = ()  # --nvidia-resource-names, NVIDIA_RESOURCE_NAMES: more resources to attribute

    @classmethod
    def of_container(cls, container: dict) -> "ExporterOptions":
        """The options an exporter container runs with: its flags, else its environment (urfave/cli's order)."""
        env = {str(e.get("name")): str(e.get("value", "")) for e in container.get("env") or [] if isinstance(e, dict)}
        virtual: str | None = env.get("KUBERNETES_VIRTUAL_GPUS")
        names = [n for n in env.get("NVIDIA_RESOURCE_NAMES", "").split(",") if n]
        flags = [str(a) for a in [*(container.get("command") or [])[1:], *(container.get("args") or [])]]
        named: list[str] = []
        for at, arg in enumerate(flags):
            flag, _, value = arg.lstrip("-").partition("=")
            if not arg.startswith("-"):
                continue
            if flag == "kubernetes-virtual-gpus":
                virtual = value or "true"
            elif flag == "nvidia-resource-names":
                value = value or (flags[at + 1] if at + 1 < len(flags) else "")
                named += [n for n in value.split(",") if n]
        return cls(str(virtual).lower() in ("1", "t", "true"), tuple(named or names))

    def attributes(self, resource: str) -> bool:
        return resource == GPU_RESOURCE or resource.startswith(MIG_RESOURCE_PREFIX) or resource in self.resource_names


@dataclass
class _Device:
    """A full GPU or one MIG instance, and the containers holding it (each with the resource it holds it by)."""

    index: int
    uuid: str
    memory_mib: int
    mig_profile: str | None = None
    mig_instance: int | None = None
    slots: int = 1  # how many containers may share it (time-slicing replicas)
    holders: list[tuple[str, str, str]] = field(default_factory=list)  # (namespace, pod, container)
    resources: list[str] = field(default_factory=list)  # the resource each holder holds it by

    @property
    def free(self) -> bool:
        return len(self.holders) < self.slots

    def named(self, options: ExporterOptions) -> list[tuple[tuple[str, str, str], str | None]]:
        """The holders the exporter names on the device's series: with virtual GPUs every one, each with its replica
        (`vgpu`) on a time-sliced GPU; else the last of them (its pod-resources map keeps one pod per device)."""
        shown = [(holder, str(replica) if self.slots > 1 and options.virtual_gpus else None)
                 for replica, (holder, resource) in enumerate(zip(self.holders, self.resources, strict=True))
                 if options.attributes(resource)]
        return shown if options.virtual_gpus else shown[-1:]


def gpu_uuid(node_name: str, index: int) -> str:
    """The stable UUID the simulator gives GPU `index` of `node_name`: the one nvidia-smi, the device plugin and
    DRA's ResourceSlices show for it too."""
    return builders.gpu_uuid(node_name, index)


def parse_xid_annotation(text: str) -> dict[int, int]:
    """`sim.gputui.io/xid` → {gpu_index: xid}; ValueError with the reason if malformed."""
    xids: dict[int, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        match = re.fullmatch(r"(?:(\d+):)?(\d+)", item)
        if not match:
            raise ValueError(f"{XID_ANNOTATION}: {item!r} is not [GPU_INDEX:]CODE")
        xids[int(match.group(1) or 0)] = int(match.group(2))
    return xids


@dataclass(frozen=True)
class UtilProfile:
    """A pod's GPU use over its life (the `sim.gputui.io/gpu-util` annotation)."""

    working: float  # percent while it works
    stops_after: float | None = None  # seconds after the pod started; 0 % from then on

    def util(self, running_s: float) -> float:
        return 0.0 if self.stops_after is not None and running_s >= self.stops_after else self.working

    def fb_used(self, memory_mib: int) -> int:
        return round(memory_mib * (0.2 + 0.6 * self.working / 100))


def parse_util_annotation(text: str) -> UtilProfile:
    """`sim.gputui.io/gpu-util` → its profile; ValueError with the reason if malformed."""
    text = text.strip()
    if text == "idle":
        return UtilProfile(0.0)
    if text == "busy":
        return UtilProfile(BUSY_PERCENT)
    stopped = re.fullmatch(r"stopped-after-(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
    if stopped and any(stopped.groups()):
        hours, minutes, seconds = (int(g or 0) for g in stopped.groups())
        return UtilProfile(BUSY_PERCENT, hours * 3600.0 + minutes * 60.0 + seconds)
    try:
        percent = float(text)
    except ValueError:
        percent = -1.0
    if not 0 <= percent <= 100:
        raise ValueError(f'{UTIL_ANNOTATION}: {text!r} is not "idle", "busy", "stopped-after-DURATION" or a percent from 0 to 100')
    return UtilProfile(percent)


def _started(pod: dict) -> float:
    """The pod's start (status.startTime, else its creation) in epoch seconds; 0 when it has neither."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    for stamp in (status.get("startTime"), meta.get("creationTimestamp")):
        try:
            return datetime.fromisoformat(str(stamp)).timestamp()
        except ValueError:
            continue
    return 0.0


def _profiles(pods: list[dict]) -> dict[tuple[str, str], tuple[UtilProfile, float]]:
    """(namespace, name) -> (profile, start) for the pods annotated with a valid profile."""
    out = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        text = (meta.get("annotations") or {}).get(UTIL_ANNOTATION)
        if text is None:
            continue
        try:
            out[(meta.get("namespace", ""), meta.get("name", ""))] = (parse_util_annotation(text), _started(pod))
        except ValueError:
            continue
    return out


def _unit(*parts: object) -> float:
    """A deterministic number in [0, 1) for the given seed parts."""
    digest = hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _int_label(labels: dict[str, str], name: str) -> int | None:
    try:
        return int(labels[name])
    except (KeyError, ValueError):
        return None


def _quantity(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def _base_product(product: str) -> str:
    product = product.removesuffix("-SHARED")
    return re.sub(r"-MIG-\d+g\.\d+gb$", "", product)


def _profile_memory_mib(labels: dict[str, str], profile: str) -> int:
    from_label = _int_label(labels, f"nvidia.com/mig-{profile}.memory")
    if from_label:
        return from_label
    match = re.search(r"\.(\d+)gb$", profile)
    return int(match.group(1)) * 1024 if match else 0


def _devices(node: dict) -> tuple[list[_Device], _Board]:
    name = node.get("metadata", {}).get("name", "")
    labels = node.get("metadata", {}).get("labels") or {}
    capacity = node.get("status", {}).get("capacity") or {}
    product = _base_product(labels.get("nvidia.com/gpu.product", ""))
    board = _BOARDS.get(product) or _Board(product.replace("-", " ") or "NVIDIA GPU", 50, 300, 1500, 1500, False)
    memory = _int_label(labels, "nvidia.com/gpu.memory") or 16384
    strategy = labels.get("nvidia.com/mig.strategy", "none")
    replicas = max(1, _int_label(labels, "nvidia.com/gpu.replicas") or 1)

    # MIG profiles and how many instances of each the node has.
    mig_counts: dict[str, int] = {}
    for key, value in labels.items():
        match = re.fullmatch(r"nvidia\.com/mig-(\d+g\.\d+gb)\.count", key)
        if match and _quantity(value) > 0:
            mig_counts[match.group(1)] = _quantity(value)
    for key, value in capacity.items():
        if key.startswith(MIG_RESOURCE_PREFIX) and _quantity(value) > 0:
            mig_counts.setdefault(key.removeprefix(MIG_RESOURCE_PREFIX), _quantity(value))
    single_profile = re.search(r"-MIG-(\d+g\.\d+gb)$", labels.get("nvidia.com/gpu.product", ""))

    count = _int_label(labels, "nvidia.com/gpu.count") or _quantity(capacity.get(GPU_RESOURCE, 0)) // replicas
    if strategy == "single" and single_profile:
        # Under the single strategy GFD counts MIG devices, not boards.
        profile = single_profile.group(1)
        per_board = max(1, 7 // int(profile.split("g", 1)[0]))
        mig_counts = {profile: count}
        count = max(1, math.ceil(count / per_board))
        memory = _int_label(labels, "nvidia.com/gpu.memory") or memory
    if strategy not in ("single", "mixed"):
        mig_counts = {}

    devices: list[_Device] = []
    migs = NodeGpus(node).migs if strategy == "mixed" and mig_counts else {}
    if migs:
        # The MIG devices the device plugin advertises (capacity) with the GPU instance ids nvidia-smi shows, so the
        # exporter lists every instance the kubelet can hand out; boards without MIG devices are whole GPUs.
        boards = {m.gpu for found in migs.values() for m in found}
        for index in range(max([count, *(m + 1 for m in boards)])):
            uuid = gpu_uuid(name, index)
            here = sorted((m for found in migs.values() for m in found if m.gpu == index), key=lambda m: m.gi)
            if not here:
                devices.append(_Device(index, uuid, memory, slots=replicas))
            for m in here:
                devices.append(_Device(index, uuid, _profile_memory_mib(labels, m.profile), m.profile, m.gi))
        return devices, board
    for index in range(count):
        uuid = gpu_uuid(name, index)
        if not mig_counts:
            devices.append(_Device(index, uuid, memory, slots=replicas))
            continue
        instance = 1
        # Largest slices first, spread evenly over the boards.
        for profile in sorted(mig_counts, key=lambda p: -int(p.split("g", 1)[0])):
            total = mig_counts[profile]
            on_board = total // count + (1 if index < total % count else 0)
            for _ in range(on_board):
                devices.append(_Device(index, uuid, _profile_memory_mib(labels, profile), profile, instance))
                instance += 1
    return devices, board


def _requests(container: dict) -> dict[str, int]:
    resources = container.get("resources") or {}
    limits = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
    return {k: _quantity(v) for k, v in limits.items() if k in (GPU_RESOURCE, SHARED_RESOURCE) or k.startswith(MIG_RESOURCE_PREFIX)}


def _attribute(devices: list[_Device], node_name: str, pods: list[dict]) -> None:
    """Give each GPU-holding container of the node's live pods its devices."""
    mig_single = all(d.mig_profile for d in devices) and len({d.mig_profile for d in devices}) == 1
    live = [
        p for p in pods
        if (p.get("spec") or {}).get("nodeName") == node_name
        and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]
    live.sort(key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"].get("namespace", ""), p["metadata"].get("name", "")))
    for pod in live:
        meta = pod["metadata"]
        for container in pod.get("spec", {}).get("containers") or []:
            holder = (meta.get("namespace", ""), meta.get("name", ""), container.get("name", ""))
            for resource, wanted in _requests(container).items():
                if resource.startswith(MIG_RESOURCE_PREFIX):
                    profile = resource.removeprefix(MIG_RESOURCE_PREFIX)
                    candidates = [d for d in devices if d.mig_profile == profile]
                elif mig_single:
                    candidates = devices
                else:
                    candidates = [d for d in devices if d.mig_profile is None]
                for device in [d for d in candidates if d.free][:wanted]:
                    device.holders.append(holder)
                    device.resources.append(resource)


def _fmt(value: float, kind: str) -> str:
    return f"{value:.6f}" if kind == "float" else str(int(round(value)))


Profiles = dict[tuple[str, str], tuple[UtilProfile, float]]


def _held_profiles(device: _Device, profiles: Profiles) -> list[tuple[UtilProfile, float]]:
    return [profiles[(ns, pod)] for ns, pod, _ in device.holders if (ns, pod) in profiles]


def _util(device: _Device, now: float, node_name: str, profiles: Profiles) -> float:
    """Percent busy: 0 when no pod holds the device, its holders' profile where they have one, else a
    smooth wave around a per-device level."""
    if not device.holders:
        return 0.0
    profiled = _held_profiles(device, profiles)
    levels = [profile.util(now - started) for profile, started in profiled]
    if len(profiled) == len(device.holders):
        return max(levels)
    key = (node_name, device.uuid, device.mig_instance)
    wave = 30 * math.sin(2 * math.pi * (now / 97 + _unit(*key, "slow"))) + 8 * math.sin(2 * math.pi * (now / 13 + _unit(*key, "fast")))
    return max([min(100.0, max(3.0, 48 + 25 * _unit(*key, "level") + wave)), *levels])


def _fb_used(device: _Device, now: float, node_name: str, profiles: Profiles) -> float:
    if not device.holders:
        return 0.0
    profiled = _held_profiles(device, profiles)
    if profiled:
        return max(profile.fb_used(device.memory_mib) for profile, _ in profiled)
    key = (node_name, device.uuid, device.mig_instance)
    return device.memory_mib * (0.3 + 0.5 * _unit(*key, "memory")) + 0.02 * device.memory_mib * math.sin(now / 31)


def _values(device: _Device, util: float, used: float, board_util: float, board: _Board, now: float, xid: int,
            node_name: str) -> dict[str, str | None]:
    """Every metric of one device; temperature and power belong to the whole board."""
    reserved = round(device.memory_mib * 0.007) if device.mig_profile is None else 0
    temp = 30 + 6 * _unit(node_name, device.index, "ambient") + 0.4 * board_util
    power = board.idle_w + (board.max_w - board.idle_w) * 0.85 * board_util / 100
    return {
        "DCGM_FI_DEV_SM_CLOCK": _fmt(board.sm_mhz if board_util else 345, "int"),
        "DCGM_FI_DEV_MEM_CLOCK": _fmt(board.mem_mhz, "int"),
        "DCGM_FI_DEV_MEMORY_TEMP": _fmt(temp + 4, "int") if board.hbm else None,  # blank on GDDR boards
        "DCGM_FI_DEV_GPU_TEMP": _fmt(temp, "int"),
        "DCGM_FI_DEV_POWER_USAGE": _fmt(power, "float"),
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": _fmt(now * (board.idle_w + 0.3 * (board.max_w - board.idle_w)) * 1000, "int"),
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "0",
        # MIG instances report 0 here; their activity is GR_ENGINE_ACTIVE.
        "DCGM_FI_DEV_GPU_UTIL": _fmt(0 if device.mig_profile else util, "int"),
        "DCGM_FI_DEV_MEM_COPY_UTIL": _fmt(0 if device.mig_profile else util * 0.4, "int"),
        "DCGM_FI_DEV_ENC_UTIL": "0",
        "DCGM_FI_DEV_DEC_UTIL": "0",
        "DCGM_FI_DEV_XID_ERRORS": str(xid),
        "DCGM_FI_DEV_FB_FREE": _fmt(device.memory_mib - reserved - used, "int"),
        "DCGM_FI_DEV_FB_USED": _fmt(used, "int"),
        "DCGM_FI_DEV_FB_RESERVED": _fmt(reserved, "int"),
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": _fmt(now * 25_000, "int"),  # counters only grow
        "DCGM_FI_DEV_VGPU_LICENSE_STATUS": "0",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "0",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": "0",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE": "0",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": _fmt(util / 100, "float"),
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": _fmt(util / 100 * 0.45, "float"),
        "DCGM_FI_PROF_DRAM_ACTIVE": _fmt(util / 100 * 0.6, "float"),
        "DCGM_FI_PROF_PCIE_TX_BYTES": _fmt(2e5 + util * 4e6, "int"),
        "DCGM_FI_PROF_PCIE_RX_BYTES": _fmt(3e5 + util * 9e6, "int"),
    }


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def exposition(node: dict, pods: list[dict], now: float, hostname_label: str = "Hostname",
               options: ExporterOptions = ExporterOptions()) -> str:
    """The exporter's /metrics text for `node` at time `now` (seconds), run with `options`."""
    if hostname_label not in HOSTNAME_LABELS:
        raise ValueError(f"hostname_label must be one of {HOSTNAME_LABELS}, not {hostname_label!r}")
    meta = node.get("metadata") or {}
    node_name = meta.get("name", "")
    labels = meta.get("labels") or {}
    try:
        xids = parse_xid_annotation((meta.get("annotations") or {}).get(XID_ANNOTATION, ""))
    except ValueError:
        xids = {}
    devices, board = _devices(node)
    _attribute(devices, node_name, pods)
    driver = labels.get("nvidia.com/cuda.driver-version.full")

    profiles = _profiles(pods)
    utils = [_util(device, now, node_name, profiles) for device in devices]
    board_utils: dict[int, float] = {}  # memory-weighted mean over a board's MIG instances
    for index in {d.index for d in devices}:
        on_board = [(d.memory_mib, u) for d, u in zip(devices, utils, strict=True) if d.index == index]
        weight = sum(m for m, _ in on_board) or 1
        board_utils[index] = sum(m * u for m, u in on_board) / weight

    series: list[tuple[str, dict[str, str | None]]] = []  # (label text, values) per series
    xid_series: list[tuple[str, dict[str, str | None]]] = []  # the same with the XID's err_code and err_msg labels
    measured: set[str] = set()  # the fields some device has a value of: those listed, even without a series left
    for device, util in zip(devices, utils, strict=True):
        base = [
            ("gpu", str(device.index)),
            ("UUID", device.uuid),
            ("pci_bus_id", f"00000000:{0x18 + 0x10 * device.index:02X}:00.0"),
            ("device", f"nvidia{device.index}"),
            ("modelName", board.model),
        ]
        if device.mig_profile:
            base += [("GPU_I_PROFILE", device.mig_profile), ("GPU_I_ID", str(device.mig_instance))]
        base.append((hostname_label, node_name))
        if driver:
            base.append(("DCGM_FI_DRIVER_VERSION", driver))
        used = _fb_used(device, now, node_name, profiles)
        values = _values(device, util, used, board_utils[device.index], board, now, xids.get(device.index, 0), node_name)
        measured.update(name for name, value in values.items() if value is not None)
        xid = values["DCGM_FI_DEV_XID_ERRORS"] or "0"
        xid_labels = [("err_code", xid)] + ([("err_msg", XID_MESSAGES[int(xid)])] if int(xid) in XID_MESSAGES else [])
        named: list[tuple[tuple[str, str, str] | None, str | None]] = list(device.named(options))
        # The series of a device no pod is named on, or one per pod named (virtual GPUs: none without any).
        for holder, replica in named or ([] if options.virtual_gpus else [(None, None)]):
            label_list = list(base)
            if holder is not None:
                namespace, pod, container = holder
                label_list += [("container", container), ("namespace", namespace), ("pod", pod)]
            if replica is not None:
                label_list.append(("vgpu", replica))
            text = ",".join(f'{k}="{_escape(v)}"' for k, v in label_list)
            series.append((text, values))
            xid_series.append((",".join(f'{k}="{_escape(v)}"' for k, v in label_list + xid_labels), values))

    lines: list[str] = []
    for name, help_text, metric_type, _ in _METRICS:
        if name not in measured:
            continue  # a field no GPU here supports: the exporter skips every blank value, and so the field
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {metric_type}")
        shown = xid_series if name == "DCGM_FI_DEV_XID_ERRORS" else series
        lines.extend(f"{name}{{{text}}} {values[name]}" for text, values in shown if values[name] is not None)
    return "".join(f"{line}\n" for line in lines)
