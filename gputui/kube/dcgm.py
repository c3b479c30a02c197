"""Per-GPU readings from dcgm-exporter's Prometheus text.

dcgm-exporter publishes one series per GPU (or per MIG instance, or, with pod
attribution on a shared GPU, per GPU and pod) for each DCGM field.  This module
folds those series back into one `GpuReading` per device, keeps a short
utilisation history per device for a sparkline, and turns XIDs into the
`xid-errors` verdict.  Parsing uses prometheus_client's own text parser.
"""
from __future__ import annotations

import math
import re
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Iterable

from .gpu import Problem
from .verdicts import Verdict

# DCGM reports "no value" with sentinels: 2**47 (+0..3) for doubles and
# 0x7ffffffffffffff0 (+0..3) for int64.  None of the gauges read here can
# legitimately reach 2**47, so anything at or above it is a missing reading.
_DCGM_BLANK_FLOOR = 2.0**47

UTIL = "DCGM_FI_DEV_GPU_UTIL"
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # a ratio 0..1
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"
POWER = "DCGM_FI_DEV_POWER_USAGE"
XID = "DCGM_FI_DEV_XID_ERRORS"
DRIVER_VERSION_LABEL = "DCGM_FI_DRIVER_VERSION"
_READ_METRICS = frozenset({UTIL, GR_ENGINE_ACTIVE, FB_USED, FB_FREE, GPU_TEMP, POWER, XID})

# What an operator should know about the XIDs seen most on data-centre GPUs
# (NVIDIA's XID catalogue).  The first group is usually the application's fault.
XID_MEANINGS: dict[int, str] = {
    13: "graphics engine exception, usually the application",
    31: "GPU memory page fault, usually the application",
    43: "GPU stopped processing, usually the application",
    45: "preemptive cleanup after an earlier error",
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failed",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}


class MetricsParseError(ValueError):
    """The text is not valid Prometheus exposition."""


@dataclass(frozen=True)
class GpuReading:
    """One GPU, or one MIG instance of a GPU, at the time of a scrape."""

    uuid: str
    index: int | None
    model: str | None
    host: str | None
    mig_profile: str | None  # GPU_I_PROFILE, e.g. "1g.10gb"
    mig_instance: str | None  # GPU_I_ID
    util: float | None  # percent; GR engine activity on MIG instances
    fb_used_mib: float | None
    fb_free_mib: float | None
    temp_c: float | None
    power_w: float | None
    xid: int | None  # last XID; None when there was none
    pods: tuple[str, ...]  # "namespace/name" of each pod the device is attributed to
    driver_version: str | None
    xid_message: str | None = None  # the exporter's err_msg for the XID (dcgm-exporter 3.3.6-3.4.2 on)

    @property
    def key(self) -> str:
        """Stable identity of the device across scrapes."""
        return f"{self.uuid}/{self.mig_instance}" if self.mig_instance else self.uuid

    @property
    def pod(self) -> str | None:
        return self.pods[0] if self.pods else None

    @property
    def model_name(self) -> str | None:
        """The model, with the MIG profile for a MIG instance ("NVIDIA H100 80GB HBM3 MIG 1g.10gb")."""
        if self.mig_profile:
            return f"{self.model or 'GPU'} MIG {self.mig_profile}"
        return self.model

    def to_json(self) -> dict:
        """One entry of the report's per-node "gpus" list: exactly the contract's keys
        (a MIG instance's profile goes into "model")."""
        return {
            "index": self.index,
            "uuid": self.uuid,
            "model": self.model_name,
            "util": self.util,
            "fb_used_mib": self.fb_used_mib,
            "fb_free_mib": self.fb_free_mib,
            "temp_c": self.temp_c,
            "power_w": self.power_w,
            "xid": self.xid,
            "pod": self.pod,
        }


def reading_value(value: float) -> float | None:
    """A sample's value, or None for NaN and DCGM's no-value sentinels."""
    if value is None or math.isnan(value) or value >= _DCGM_BLANK_FLOOR:
        return None
    return value


def _label(labels: dict[str, str], *names: str) -> str | None:
    for name in names:
        value = labels.get(name)
        if value:
            return value
    return None


def _as_int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


class _Accumulator:
    """The fields of one device, gathered from all its series."""

    def __init__(self, labels: dict[str, str]) -> None:
        self.labels = labels
        self.values: dict[str, float | None] = {}
        self.pods: list[str] = []
        self.xid_message: str | None = None

    def add(self, metric: str, labels: dict[str, str], value: float) -> None:
        # With several pods on one GPU every pod gets its own copy of the
        # series; the values are the same, so the first one is kept.
        if metric in _READ_METRICS:
            self.values.setdefault(metric, reading_value(value))
        namespace, pod = labels.get("namespace"), labels.get("pod")
        if pod:
            name = f"{namespace}/{pod}" if namespace else pod
            if name not in self.pods:
                self.pods.append(name)
        if metric == XID and labels.get("err_msg"):
            self.xid_message = labels["err_msg"]
        if DRIVER_VERSION_LABEL not in self.labels and labels.get(DRIVER_VERSION_LABEL):
            self.labels = {**self.labels, DRIVER_VERSION_LABEL: labels[DRIVER_VERSION_LABEL]}

    def reading(self) -> GpuReading:
        labels, values = self.labels, self.values
        mig_instance = _label(labels, "GPU_I_ID")
        if mig_instance is not None:
            # GPU_UTIL reads 0 on MIG instances; GR engine activity is the real figure.
            ratio = values.get(GR_ENGINE_ACTIVE)
            util = round(ratio * 100.0, 2) if ratio is not None else None
        else:
            util, active = values.get(UTIL), values.get(GR_ENGINE_ACTIVE)
            if util is None and active is not None:
                util = round(active * 100.0, 2)
        xid = values.get(XID)
        return GpuReading(
            uuid=labels.get("UUID", ""),
            index=_as_int(labels.get("gpu")),
            model=_label(labels, "modelName"),
            host=_label(labels, "Hostname", "hostname"),
            mig_profile=_label(labels, "GPU_I_PROFILE"),
            mig_instance=mig_instance,
            util=util,
            fb_used_mib=values.get(FB_USED),
            fb_free_mib=values.get(FB_FREE),
            temp_c=values.get(GPU_TEMP),
            power_w=values.get(POWER),
            xid=int(xid) if xid else None,
            pods=tuple(self.pods),
            driver_version=_label(labels, DRIVER_VERSION_LABEL),
            xid_message=self.xid_message if xid else None,
        )


_SAMPLE_NAME = re.compile(r"\s*([a-zA-Z_:][a-zA-Z0-9_:]*)[{\s]")


def _samples_worth_parsing(text: str) -> str:
    """The text without comments and without samples of metrics not read here.

    An exporter serves many more fields than gputui shows; skipping them before
    the (slow) Prometheus parser makes a scrape several times cheaper.  The
    first metric is kept whatever it is, so a device the exporter lists without
    any of the read fields still appears; lines that are not samples at all
    are kept too, so malformed text still fails.
    """
    kept = []
    first = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _SAMPLE_NAME.match(line)
        if match:
            name = match.group(1)
            first = first or name
            if name not in _READ_METRICS and name != first:
                continue
        kept.append(line)
    return "\n".join(kept) + "\n" if kept else ""


def parse_metrics(text: str) -> list[GpuReading]:
    """Readings for every GPU and MIG instance in one exporter's text.

    Sorted by host, GPU index and MIG instance.  Raises MetricsParseError with
    a one-line reason when the text is not Prometheus exposition.
    """
    from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415  (not on the app's start-up path)

    devices: dict[tuple[str | None, str, str | None], _Accumulator] = {}
    try:
        for family in text_string_to_metric_families(_samples_worth_parsing(text)):
            for sample in family.samples:
                labels = sample.labels
                uuid = labels.get("UUID") or labels.get("uuid")
                if not uuid:
                    continue
                if labels.get("UUID") is None:
                    labels = {**labels, "UUID": uuid}
                device = (_label(labels, "Hostname", "hostname"), uuid, labels.get("GPU_I_ID") or None)
                acc = devices.get(device)
                if acc is None:
                    acc = devices[device] = _Accumulator(labels)
                acc.add(sample.name, labels, sample.value)
    except ValueError as exc:
        raise MetricsParseError(f"not Prometheus text: {exc}") from None
    readings = [acc.reading() for acc in devices.values()]
    readings.sort(key=lambda r: (r.host or "", r.index if r.index is not None else 1 << 30, _as_int(r.mig_instance) or 0, r.uuid))
    return readings


def xid_meaning(code: int, exporter_says: str | None = None) -> str | None:
    """What the XID means: gputui's words for the usual ones, else the exporter's err_msg."""
    return XID_MEANINGS.get(code) or exporter_says


def xid_problems(readings: Iterable[GpuReading]) -> list[Problem]:
    """The `xid-errors` verdict for one node's readings: [] or one problem."""
    seen: list[str] = []
    for reading in readings:
        if not reading.xid:
            continue
        where = f"GPU {reading.index}" if reading.index is not None else reading.uuid
        if reading.mig_profile:
            where += f" MIG {reading.mig_profile}"
        meaning = xid_meaning(reading.xid)
        text = f"{where}: XID {reading.xid}" + (f" ({meaning})" if meaning else "")
        if text not in seen:
            seen.append(text)
    if not seen:
        return []
    return [Problem(Verdict.XID_ERRORS, "last XID " + "; ".join(seen))]


class UtilisationHistory:
    """The last `samples` utilisation readings of each device, for sparklines.

    Bounded twice: `samples` values per device and `devices` devices (the
    device not updated for longest is forgotten first).
    """

    def __init__(self, samples: int = 60, devices: int = 4096) -> None:
        self.samples = samples
        self.devices = devices
        self._series: OrderedDict[str, deque[float]] = OrderedDict()

    def record(self, readings: Iterable[GpuReading]) -> None:
        for reading in readings:
            if reading.util is None:
                continue
            series = self._series.get(reading.key)
            if series is None:
                series = self._series[reading.key] = deque(maxlen=self.samples)
            else:
                self._series.move_to_end(reading.key)
            series.append(reading.util)
        while len(self._series) > self.devices:
            self._series.popitem(last=False)

    def series(self, key: str) -> list[float]:
        """Oldest first; [] for a device never seen."""
        return list(self._series.get(key, ()))

    def __len__(self) -> int:
        return len(self._series)
