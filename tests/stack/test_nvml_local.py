"""gputui.kube.nvml: the no-NVML path on this machine, and NVML's error paths.

The error paths use a stand-in for the pynvml module that keeps pynvml's
real exception classes and constants and answers like a driver would.
"""
from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from gputui.kube.nvml import MIB, GpuProcess, LocalGpus, local_snapshot

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import pynvml

ROOT = Path(__file__).resolve().parents[2]


def test_this_machine_has_no_nvml_and_says_so_in_one_line():
    snapshot = local_snapshot()
    if snapshot.available:
        pytest.skip("this machine has a working NVIDIA driver")
    assert snapshot.gpus == ()
    assert snapshot.reason and "\n" not in snapshot.reason
    assert local_snapshot() == snapshot  # asking again is harmless


def test_check_script_prints_the_reason_and_exits_2_without_nvml():
    result = subprocess.run([sys.executable, str(ROOT / "tests/check_nvml.py")], capture_output=True, text=True, timeout=60)
    if local_snapshot().available:
        assert result.returncode == 0, result.stdout + result.stderr
        return
    assert result.returncode == 2
    assert result.stdout.count("\n") == 1 and result.stdout.startswith("NVML unavailable: ")
    assert result.stderr == ""


class FakeNvml:
    """Answers like NVML on a host with the given GPUs; `fail` maps call names to error codes."""

    def __init__(self, gpus: list[dict], fail: dict[str, int] | None = None, init_error: int | None = None):
        for name in dir(pynvml):
            if name.startswith(("NVML_", "NVMLError")):
                setattr(self, name, getattr(pynvml, name))
        self.gpus = gpus
        self.fail = dict(fail or {})
        self.init_error = init_error
        self.init_calls = 0

    def _check(self, name: str) -> None:
        if name in self.fail:
            raise pynvml.NVMLError(self.fail[name])

    def nvmlInit(self):
        self.init_calls += 1
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        self._check("count")
        return len(self.gpus)

    def nvmlSystemGetDriverVersion(self):
        return "580.95.05"

    def nvmlDeviceGetHandleByIndex(self, index):
        self._check(f"handle{index}")
        return self.gpus[index]

    def nvmlDeviceGetName(self, h):
        return h["name"]

    def nvmlDeviceGetUUID(self, h):
        return h["uuid"]

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(used=h["used_mib"] * MIB, total=h["total_mib"] * MIB, free=0)

    def nvmlDeviceGetUtilizationRates(self, h):
        if h.get("mig", [0])[0] == pynvml.NVML_DEVICE_MIG_ENABLE:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return SimpleNamespace(gpu=h["util"], memory=0)

    def nvmlDeviceGetTemperature(self, h, sensor):
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return h["temp"]

    def nvmlDeviceGetPowerUsage(self, h):
        self._check("power")
        return h["power_mw"]

    def nvmlDeviceGetMigMode(self, h):
        if "mig" not in h:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return h["mig"]

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        self._check("processes")
        return [SimpleNamespace(pid=pid, usedGpuMemory=mem) for pid, mem in h.get("procs", [])]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h):
        return []


H100 = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-aaa", "used_mib": 1024, "total_mib": 81559, "util": 37,
        "temp": 41, "power_mw": 123456, "mig": [0, 0], "procs": [(4242, 512 * MIB), (17, None)]}
T4 = {"name": b"Tesla T4", "uuid": "GPU-bbb", "used_mib": 0, "total_mib": 15360, "util": 0, "temp": 30, "power_mw": 9000}


def test_a_snapshot_of_two_gpus():
    snapshot = LocalGpus(FakeNvml([H100, T4])).snapshot()
    assert snapshot.available and snapshot.driver_version == "580.95.05"
    h100, t4 = snapshot.gpus
    assert (h100.name, h100.uuid, h100.util_percent, h100.mem_used_mib, h100.mem_total_mib) == ("NVIDIA H100 80GB HBM3", "GPU-aaa", 37, 1024, 81559)
    assert (h100.temp_c, h100.power_w, h100.mig_mode) == (41, 123.456, "disabled")
    assert h100.processes == (GpuProcess(17, None), GpuProcess(4242, 512))
    assert t4.name == "Tesla T4" and t4.mig_mode is None and t4.processes == ()


def test_mig_enabled_gpu_has_no_utilisation_and_a_pending_change_is_shown():
    gpu = {**H100, "mig": [1, 0]}
    [reading] = LocalGpus(FakeNvml([gpu])).snapshot().gpus
    assert reading.util_percent is None
    assert reading.mig_mode == "enabled, disabled after reset"


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "no NVIDIA driver"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "driver is not loaded"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "no permission"),
        (pynvml.NVML_ERROR_UNKNOWN, "NVML failed"),
    ],
)
def test_init_failures_are_one_line_reasons_and_not_retried(code, words):
    nvml = FakeNvml([H100], init_error=code)
    reader = LocalGpus(nvml)
    first = reader.snapshot()
    assert first.gpus == () and words in first.reason and "\n" not in first.reason
    assert reader.snapshot() == first
    assert nvml.init_calls == 1


def test_no_gpu():
    snapshot = LocalGpus(FakeNvml([])).snapshot()
    assert snapshot.gpus == () and snapshot.reason == "no NVIDIA GPU found on this host"


def test_unsupported_or_forbidden_fields_are_none_not_errors():
    nvml = FakeNvml([H100], fail={"power": pynvml.NVML_ERROR_NOT_SUPPORTED, "processes": pynvml.NVML_ERROR_NO_PERMISSION})
    [gpu] = LocalGpus(nvml).snapshot().gpus
    assert gpu.power_w is None and gpu.processes == () and gpu.error is None
    assert gpu.temp_c == 41


def test_a_lost_gpu_is_reported_and_the_others_still_read():
    nvml = FakeNvml([H100, T4], fail={"handle0": pynvml.NVML_ERROR_GPU_IS_LOST})
    lost, t4 = LocalGpus(nvml).snapshot().gpus
    assert lost.error == "the GPU is lost (fallen off the bus?)" and lost.name is None
    assert t4.name == "Tesla T4" and t4.error is None


def test_driver_unloaded_mid_run_gives_a_reason_then_recovers():
    nvml = FakeNvml([H100])
    reader = LocalGpus(nvml)
    assert reader.snapshot().available
    nvml.fail["power"] = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    broken = reader.snapshot()
    assert broken.gpus == () and broken.reason == "the NVIDIA driver is not loaded"
    del nvml.fail["power"]
    assert reader.snapshot().available
    assert nvml.init_calls == 2


def test_unexpected_exception_is_contained():
    nvml = FakeNvml([H100])
    nvml.nvmlDeviceGetCount = lambda: (_ for _ in ()).throw(RuntimeError("boom\nsecond line"))
    snapshot = LocalGpus(nvml).snapshot()
    assert snapshot.reason == "NVML failed: boom"
