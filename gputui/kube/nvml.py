"""The GPUs of the machine gputui runs on, through NVML (pynvml).

`LocalGpus().snapshot()` never raises: without the library, the driver or a
GPU it returns an empty snapshot whose `reason` says why in one line.  NVML is
initialised once and kept open, so a snapshot costs a handful of NVML calls
per GPU (it is meant to be taken from a worker thread every few seconds).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

MIB = 1024 * 1024


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    used_mib: float | None  # None where the driver does not say (e.g. no permission)


@dataclass(frozen=True)
class LocalGpu:
    index: int
    name: str | None
    uuid: str | None
    util_percent: float | None  # None on MIG-enabled GPUs, where NVML does not report it
    mem_used_mib: float | None
    mem_total_mib: float | None
    temp_c: float | None
    power_w: float | None
    mig_mode: str | None  # "enabled", "disabled", "enabled, disabled after reset"...; None: not MIG-capable
    processes: tuple[GpuProcess, ...]
    error: str | None = None  # the device could not be read at all


@dataclass(frozen=True)
class LocalSnapshot:
    gpus: tuple[LocalGpu, ...]
    driver_version: str | None
    reason: str | None  # why there is nothing to show; None when NVML answered

    @property
    def available(self) -> bool:
        return self.reason is None


def _import_pynvml() -> Any:
    import pynvml  # noqa: PLC0415  (NVIDIA's nvidia-ml-py; loaded only when the local GPUs are read)

    return pynvml


class LocalGpus:
    """Reads local GPUs; `nvml` is the pynvml module, or a stand-in with its API."""

    def __init__(self, nvml: Any = None) -> None:
        self._nvml = nvml
        self._lock = threading.Lock()
        self._initialised = False
        self._init_failure: str | None = None

    def snapshot(self) -> LocalSnapshot:
        with self._lock:
            try:
                return self._snapshot()
            except Exception as exc:  # noqa: BLE001  (the contract is: never raise)
                # Re-initialise on the next snapshot (the driver may come back).
                self._initialised = False
                nvml = self._nvml
                if nvml is not None and isinstance(exc, nvml.NVMLError):
                    return LocalSnapshot((), None, _reason_for(nvml, exc))
                return LocalSnapshot((), None, f"NVML failed: {_one_line(exc)}")

    def close(self) -> None:
        with self._lock:
            if self._initialised:
                self._call(self._nvml.nvmlShutdown)
            self._initialised = False

    # -- internals

    def _snapshot(self) -> LocalSnapshot:
        reason = self._ensure_init()
        if reason:
            return LocalSnapshot((), None, reason)
        nvml = self._nvml
        count = nvml.nvmlDeviceGetCount()  # a failure here is the snapshot's reason
        driver = _text(self._call(nvml.nvmlSystemGetDriverVersion))
        if count == 0:
            return LocalSnapshot((), driver, "no NVIDIA GPU found on this host")
        gpus = []
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
            except nvml.NVMLError as exc:
                if self._is_fatal(exc):
                    raise
                gpus.append(LocalGpu(index, None, None, None, None, None, None, None, None, (), _reason_for(nvml, exc)))
                continue
            gpus.append(self._read_gpu(index, handle))
        return LocalSnapshot(tuple(gpus), driver, None)

    def _read_gpu(self, index: int, handle: Any) -> LocalGpu:
        nvml, call = self._nvml, self._call
        memory = call(nvml.nvmlDeviceGetMemoryInfo, handle)
        util = call(nvml.nvmlDeviceGetUtilizationRates, handle)
        power_mw = call(nvml.nvmlDeviceGetPowerUsage, handle)
        return LocalGpu(
            index=index,
            name=_text(call(nvml.nvmlDeviceGetName, handle)),
            uuid=_text(call(nvml.nvmlDeviceGetUUID, handle)),
            util_percent=float(util.gpu) if util is not None else None,
            mem_used_mib=memory.used / MIB if memory is not None else None,
            mem_total_mib=memory.total / MIB if memory is not None else None,
            temp_c=_number(call(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU)),
            power_w=power_mw / 1000 if power_mw is not None else None,
            mig_mode=self._mig_mode(handle),
            processes=self._processes(handle),
        )

    def _mig_mode(self, handle: Any) -> str | None:
        modes = self._call(self._nvml.nvmlDeviceGetMigMode, handle)
        if not modes:
            return None
        enabled = self._nvml.NVML_DEVICE_MIG_ENABLE
        current, pending = modes[0], modes[1]
        word = "enabled" if current == enabled else "disabled"
        if pending != current:
            word += ", " + ("enabled" if pending == enabled else "disabled") + " after reset"
        return word

    def _processes(self, handle: Any) -> tuple[GpuProcess, ...]:
        seen: dict[int, GpuProcess] = {}
        for query in (self._nvml.nvmlDeviceGetComputeRunningProcesses, self._nvml.nvmlDeviceGetGraphicsRunningProcesses):
            for proc in self._call(query, handle) or ():
                used = getattr(proc, "usedGpuMemory", None)
                if proc.pid not in seen:
                    seen[proc.pid] = GpuProcess(proc.pid, used / MIB if used is not None else None)
        return tuple(sorted(seen.values(), key=lambda p: p.pid))

    def _ensure_init(self) -> str | None:
        if self._initialised:
            return None
        if self._init_failure:
            return self._init_failure  # the library or driver will not appear by itself
        if self._nvml is None:
            try:
                self._nvml = _import_pynvml()
            except ImportError:
                self._init_failure = "no NVML: the nvidia-ml-py package (pynvml) is not installed"
                return self._init_failure
        try:
            self._nvml.nvmlInit()
        except self._nvml.NVMLError as exc:
            self._init_failure = _reason_for(self._nvml, exc)
            return self._init_failure
        self._initialised = True
        return None

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """One guarded NVML call: None when it fails (not supported, no permission...)."""
        try:
            return fn(*args)
        except self._nvml.NVMLError as exc:
            if self._is_fatal(exc):
                raise
            return None

    def _is_fatal(self, exc: Exception) -> bool:
        nvml = self._nvml
        return getattr(exc, "value", None) in (nvml.NVML_ERROR_UNINITIALIZED, nvml.NVML_ERROR_DRIVER_NOT_LOADED, nvml.NVML_ERROR_LIBRARY_NOT_FOUND)


def _reason_for(nvml: Any, exc: Exception) -> str:
    code = getattr(exc, "value", None)
    reasons = {
        nvml.NVML_ERROR_LIBRARY_NOT_FOUND: "no NVIDIA driver on this host (libnvidia-ml.so.1 not found)",
        nvml.NVML_ERROR_DRIVER_NOT_LOADED: "the NVIDIA driver is not loaded",
        nvml.NVML_ERROR_NO_PERMISSION: "no permission to use NVML",
        nvml.NVML_ERROR_GPU_IS_LOST: "the GPU is lost (fallen off the bus?)",
        nvml.NVML_ERROR_UNINITIALIZED: "NVML was shut down",
    }
    return reasons.get(code) or f"NVML failed: {_one_line(exc)}"


def _one_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value


def _number(value: Any) -> float | None:
    return float(value) if value is not None else None


_shared = LocalGpus()


def local_snapshot() -> LocalSnapshot:
    """A snapshot from the process-wide reader (safe from any thread)."""
    return _shared.snapshot()
