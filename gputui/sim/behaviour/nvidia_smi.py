"""What `nvidia-smi` prints inside a simulated container, for the GPUs the pod was given.

A node's GPUs are described by its GPU Feature Discovery labels (product,
memory, count, driver and CUDA versions, MIG layout) and its advertised
resources. Devices are named as the NVIDIA device plugin names them: a GPU
UUID for `nvidia.com/gpu`, `<uuid>::<replica>` for a time-sliced
`nvidia.com/gpu.shared`, a MIG UUID for `nvidia.com/mig-<profile>`.

The table has the layout of drivers from R535 on (89 columns wide), see
/work/shared/fixtures/real/nvidia-smi/dgx-h100-8x-mig-mixed-all-balanced.txt.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .. import builders as b

Obj = dict[str, Any]

# Node annotation: the GPUs (indices, comma-separated) the device plugin's health check finds unhealthy; their
# devices (the GPU, its time-slicing replicas, its MIG devices) are the unhealthy ones, allocatable leaves them out
# (`gputui sim fault gpu-health`, faults.py, writes both).
UNHEALTHY_ANNOTATION = "sim.gputui.io/unhealthy-gpus"


def parse_unhealthy_annotation(text: str) -> frozenset[int]:
    """`sim.gputui.io/unhealthy-gpus` -> the GPU indices; ValueError with the reason if malformed."""
    items = [part.strip() for part in text.split(",") if part.strip()]
    if not all(item.isdigit() for item in items):
        raise ValueError(f"{UNHEALTHY_ANNOTATION}: {text!r} is not a comma-separated list of GPU indices")
    return frozenset(int(item) for item in items)


DRIVER_FAILURE = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running."
)
DRIVER_FAILURE_EXIT_CODE = 9

WIDTH = 89
_BORDER = "+" + "-" * (WIDTH - 2) + "+"
_GPU_RULE = "+" + "-" * 41 + "+" + "-" * 22 + "+" + "-" * 22 + "+"
_MIG_RULE = "+" + "-" * 18 + "+" + "-" * 32 + "+" + "-" * 11 + "+" + "-" * 23 + "+"

# GFD product label -> (name as nvidia-smi prints it, power cap W, idle power W, idle perf state, bus ids)
_PRODUCTS: dict[str, tuple[str, int, int, str, list[str]]] = {
    "NVIDIA-H100-80GB-HBM3": ("NVIDIA H100 80GB HBM3", 700, 70, "P0", ["1B", "43", "52", "61", "9D", "C3", "D1", "DF"]),
    "NVIDIA-A100-SXM4-80GB": ("NVIDIA A100-SXM4-80GB", 400, 61, "P0", ["07", "0F", "47", "4E", "87", "90", "B7", "BD"]),
    "Tesla-T4": ("Tesla T4", 70, 10, "P8", ["1B", "1C", "1D", "1E"]),
    "NVIDIA-L40S": ("NVIDIA L40S", 350, 34, "P8", ["01", "25", "41", "61", "81", "A1", "C1", "E1"]),
}

# MIG instance ids of an all-balanced layout, per profile (the ids nvidia-smi shows for GI).
_MIG_GI_IDS = {"3g.40gb": [2], "2g.20gb": [3], "1g.10gb": [9, 10]}


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    name: str
    bus_id: str
    memory_mib: int
    power_cap_w: int
    idle_power_w: int
    perf: str
    mig_capable: bool


@dataclass(frozen=True)
class MigDevice:
    gpu: int  # physical index of the parent GPU
    gi: int
    ci: int
    profile: str
    uuid: str


class NodeGpus:
    """The GPUs of one node and the devices its device plugin advertises."""

    def __init__(self, node: Obj) -> None:
        meta = node["metadata"]
        labels = meta.get("labels") or {}
        status = node.get("status") or {}
        self.node_name = meta["name"]
        self.labels = labels
        self.capacity = {k: int(b.parse_quantity(v)) for k, v in (status.get("capacity") or {}).items() if b.is_gpu_resource(k)}
        self.allocatable = {k: int(b.parse_quantity(v)) for k, v in (status.get("allocatable") or {}).items() if b.is_gpu_resource(k)}
        product = labels.get("nvidia.com/gpu.product", "").removesuffix("-SHARED")
        name, cap, idle, perf, buses = _PRODUCTS.get(product, (product.replace("-", " ") or "NVIDIA GPU", 300, 40, "P0", []))
        count = int(labels.get("nvidia.com/gpu.count") or self.capacity.get("nvidia.com/gpu") or 0)
        memory = int(labels.get("nvidia.com/gpu.memory") or 0)
        mig_capable = labels.get("nvidia.com/mig.capable") == "true"
        self.driver = labels.get("nvidia.com/cuda.driver-version.full") or ".".join(
            labels.get(f"nvidia.com/cuda.driver.{p}", "0") for p in ("major", "minor", "rev"))
        self.cuda = labels.get("nvidia.com/cuda.runtime-version.full") or ".".join(
            labels.get(f"nvidia.com/cuda.runtime.{p}", "0") for p in ("major", "minor"))
        self.gpus = [
            Gpu(i, b.gpu_uuid(self.node_name, i), name, f"00000000:{buses[i] if i < len(buses) else f'{0x10 + 8 * i:02X}'}:00.0",
                memory, cap, idle, perf, mig_capable)
            for i in range(count)
        ]
        self.replicas = max(1, int(labels.get("nvidia.com/gpu.replicas") or 1))
        self.migs = self._mig_devices()
        try:
            self.unhealthy_gpus = parse_unhealthy_annotation((meta.get("annotations") or {}).get(UNHEALTHY_ANNOTATION, ""))
        except ValueError:
            self.unhealthy_gpus = frozenset()

    def _mig_devices(self) -> dict[str, list[MigDevice]]:
        out: dict[str, list[MigDevice]] = {}
        if not self.gpus:
            return out
        for resource, total in self.capacity.items():
            if not resource.startswith("nvidia.com/mig-") or total <= 0:
                continue
            profile = resource.removeprefix("nvidia.com/mig-")
            per_gpu = max(1, total // len(self.gpus))
            gi_ids = _MIG_GI_IDS.get(profile) or [1 + k for k in range(per_gpu)]
            devices = []
            for n in range(total):
                gpu, k = divmod(n, per_gpu)
                gi = gi_ids[k] if k < len(gi_ids) else gi_ids[-1] + k
                devices.append(MigDevice(gpu % len(self.gpus), gi, 0, profile, b.mig_uuid(self.node_name, gpu, gi)))
            out[resource] = devices
        return out

    def add_dra_devices(self, devices: list[Obj]) -> list[str]:
        """Know the GPUs and MIG devices of ResourceSlice devices (the DRA driver publishes them, GFD may not
        label them); returns their device ids (UUIDs) for a container given them."""
        def attr(d: Obj, name: str) -> Any:
            entry = (d.get("attributes") or {}).get(name) or {}
            return next((entry[k] for k in ("string", "int", "version", "bool") if k in entry), None)

        ids = []
        for d in devices:
            uuid = attr(d, "uuid")
            if not uuid:
                continue
            index = attr(d, "parentIndex") if attr(d, "type") == "mig" else attr(d, "index")
            index = int(index) if isinstance(index, int) else len(self.gpus)
            version = attr(d, "driverVersion")
            if version and not self.labels.get("nvidia.com/cuda.driver-version.full"):
                self.driver = str(version)
            cuda = attr(d, "cudaDriverVersion")
            if cuda and not self.labels.get("nvidia.com/cuda.runtime-version.full"):
                self.cuda = ".".join(str(cuda).split(".")[:2])
            while len(self.gpus) <= index:
                n = len(self.gpus)
                parent = attr(d, "parentUUID") if n == index and attr(d, "type") == "mig" else None
                product = str(attr(d, "productName") or "NVIDIA GPU")
                memory = d.get("capacity", {}).get("memory", {}).get("value", "0") if attr(d, "type") != "mig" else "0"
                self.gpus.append(Gpu(n, parent or b.gpu_uuid(self.node_name, n), product, f"00000000:{0x18 + 0x10 * n:02X}:00.0",
                                     int(b.parse_quantity(memory) // 2**20), 700, 70, "P0", attr(d, "type") == "mig"))
            if attr(d, "type") == "mig":
                profile = str(attr(d, "profile") or "1g.10gb")
                resource = f"nvidia.com/mig-{profile}"
                known = self.migs.setdefault(resource, [])
                if not any(m.uuid == uuid for m in known):
                    known.append(MigDevice(index, 1 + len(known), 0, profile, str(uuid)))
            elif self.gpus[index].uuid != uuid:
                g = self.gpus[index]
                memory = d.get("capacity", {}).get("memory", {}).get("value")
                self.gpus[index] = Gpu(g.index, str(uuid), str(attr(d, "productName") or g.name), g.bus_id,
                                       int(b.parse_quantity(memory) // 2**20) if memory else g.memory_mib, g.power_cap_w,
                                       g.idle_power_w, g.perf, g.mig_capable)
            ids.append(str(uuid))
        return ids

    @property
    def mig_enabled(self) -> bool:
        return bool(self.migs)

    def devices(self, resource: str) -> list[str]:
        """Device ids the plugin advertises for the resource, healthy ones first (as many as allocatable)."""
        total = self.capacity.get(resource, 0)
        if resource == "nvidia.com/gpu":
            ids = [g.uuid for g in self.gpus]
        elif resource == "nvidia.com/gpu.shared":
            ids = [f"{g.uuid}::{r}" for g in self.gpus for r in range(self.replicas)]
        elif resource in self.migs:
            ids = [d.uuid for d in self.migs[resource]]
        else:
            ids = [f"{resource}-{n}" for n in range(total)]
        while len(ids) < total:  # capacity beyond what the labels describe
            ids.append(f"{resource}-{len(ids)}")
        return ids[:total]

    def gpu_of(self, device_id: str) -> int | None:
        """The index of the GPU a device id is on (a GPU, a replica of one, a MIG device); None if unknown."""
        for devices in self.migs.values():
            for mig in devices:
                if mig.uuid == device_id:
                    return mig.gpu
        uuid = device_id.split("::")[0]
        return next((g.index for g in self.gpus if g.uuid == uuid), None)

    def is_unhealthy(self, device_id: str) -> bool:
        return bool(self.unhealthy_gpus) and self.gpu_of(device_id) in self.unhealthy_gpus

    def _by_health(self, resource: str) -> list[str]:
        """The advertised devices, those on a GPU marked unhealthy last."""
        devices = self.devices(resource)
        if not self.unhealthy_gpus:
            return devices
        return [d for d in devices if not self.is_unhealthy(d)] + [d for d in devices if self.is_unhealthy(d)]

    def healthy_devices(self, resource: str) -> list[str]:
        return self._by_health(resource)[: self.allocatable.get(resource, 0)]

    def unhealthy_devices(self, resource: str) -> list[str]:
        return self._by_health(resource)[self.allocatable.get(resource, 0):]

    def resolve(self, device_ids: list[str]) -> tuple[list[Gpu], list[MigDevice]]:
        """The GPUs (and MIG devices) a container given these device ids sees."""
        by_uuid = {g.uuid: g for g in self.gpus}
        mig_by_uuid = {d.uuid: d for devices in self.migs.values() for d in devices}
        gpus: dict[int, Gpu] = {}
        migs: list[MigDevice] = []
        for device in device_ids:
            if device in mig_by_uuid:
                mig = mig_by_uuid[device]
                migs.append(mig)
                gpus[mig.gpu] = self.gpus[mig.gpu]
            elif device.split("::")[0] in by_uuid:
                gpu = by_uuid[device.split("::")[0]]
                gpus[gpu.index] = gpu
        return [gpus[i] for i in sorted(gpus)], migs

    def render(self, device_ids: list[str], now: datetime | None = None) -> str:
        gpus, migs = self.resolve(device_ids)
        return render_table(gpus, migs, self.driver, self.cuda, mig_enabled=self.mig_enabled, now=now)


def _reading(gpu: Gpu, node_hint: str) -> tuple[int, int]:
    """A stable idle temperature and power draw for a GPU."""
    n = int(b.digest("reading", node_hint, gpu.uuid, length=8), 16)
    return 25 + n % 9, gpu.idle_power_w + (n >> 4) % 5


def render_table(gpus: list[Gpu], migs: list[MigDevice], driver: str, cuda: str, *, mig_enabled: bool = False,
                 readings: list[tuple[int, int]] | None = None, now: datetime | None = None) -> str:
    """The default nvidia-smi table. Container GPU indexes count from 0 in the order of the physical ones."""
    lines = [(now or b.utcnow()).strftime("%a %b %d %H:%M:%S %Y       "), _BORDER]
    lines.append(f"| NVIDIA-SMI {driver:<23}Driver Version: {driver:<13}CUDA Version: {cuda:<9}|")
    lines.append("|" + "-" * 41 + "+" + "-" * 22 + "+" + "-" * 22 + "+")
    lines.append("| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |")
    lines.append("| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |")
    lines.append("|                                         |                      |               MIG M. |")
    lines.append("|" + "=" * 41 + "+" + "=" * 22 + "+" + "=" * 22 + "|")
    local = {g.index: n for n, g in enumerate(gpus)}
    for n, gpu in enumerate(gpus):
        temp, power = readings[n] if readings else _reading(gpu, driver)
        power_text = f"{power}W / {gpu.power_cap_w}W"
        memory_text = "N/A" if mig_enabled else f"{1 + n % 3}MiB / {gpu.memory_mib}MiB"
        util = "N/A" if mig_enabled else "0%"
        ecc = "On" if mig_enabled else "0"
        mig_mode = ("Enabled" if mig_enabled else "Disabled") if gpu.mig_capable else "N/A"
        lines.append(f"|{n:>4}  {gpu.name[:29]:<29}{'On':>4}  | {gpu.bus_id} Off |{ecc:>21} |")
        lines.append(f"|{'N/A':>4}{temp:>5}C{gpu.perf:>6}{power_text:>24} |{memory_text:>21} |{util:>8}{'Default':>13} |")
        lines.append(f"|{'':41}|{'':22}|{mig_mode:>21} |")
        lines.append(_GPU_RULE)
    if mig_enabled:
        lines += ["", _BORDER, f"| {'MIG devices:':<{WIDTH - 3}}|", _MIG_RULE]
        lines.append("| GPU  GI  CI  MIG |                   Memory-Usage |        Vol|      Shared           |")
        lines.append("|      ID  ID  Dev |                     BAR1-Usage | SM     Unc| CE ENC DEC OFA JPG    |")
        lines.append("|                  |                                |        ECC|                       |")
        lines.append("|" + "=" * 18 + "+" + "=" * 32 + "+" + "=" * 11 + "+" + "=" * 23 + "|")
        if not migs:
            lines.append(f"|  {'No MIG devices found':<{WIDTH - 4}}|")
            lines.append(_BORDER)
        per_gpu: dict[int, int] = {}
        for mig in sorted(migs, key=lambda m: (local.get(m.gpu, 0), m.gi)):
            dev_index = per_gpu[mig.gpu] = per_gpu.get(mig.gpu, -1) + 1
            facts = b.MIG_PROFILES.get(mig.profile, b.MIG_PROFILES["1g.10gb"])
            memory_text = f"{facts['used']}MiB / {facts['memory']:>5}MiB"
            bar1_text = f"0MiB / {facts['bar1']:>5}MiB"
            lines.append(f"|{local.get(mig.gpu, 0):>3}{mig.gi:>5}{mig.ci:>4}{dev_index:>4}  |{memory_text:>30}  |"
                         f" {facts['multiprocessors']:>2}{0:>7} |{facts['copy']:>3}{facts['encoder']:>4}{facts['decoder']:>5}"
                         f"{facts['ofa']:>5}{facts['jpeg']:>5} |")
            lines.append(f"|{'':18}|{bar1_text:>30}  |{'':11}|{'':23}|")
            lines.append(_MIG_RULE)
    lines += ["", _BORDER, f"| {'Processes:':<{WIDTH - 3}}|"]
    lines.append("|  GPU   GI   CI        PID   Type   Process name                            GPU Memory |")
    lines.append("|        ID   ID                                                             Usage      |")
    lines.append("|" + "=" * (WIDTH - 2) + "|")
    lines.append(f"|  {'No running processes found':<{WIDTH - 4}}|")
    lines.append(_BORDER)
    return "\n".join(lines) + "\n"


def is_nvidia_smi(container: Obj) -> bool:
    """Whether the container runs nvidia-smi (in its command or args, e.g. `sh -c "nvidia-smi && ..."`)."""
    words = [str(w) for w in (container.get("command") or []) + (container.get("args") or [])]
    return any("nvidia-smi" in w for w in words)
