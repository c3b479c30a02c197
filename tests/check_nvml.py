"""Check gputui's local-GPU reader against the real NVML of this machine.

    python tests/check_nvml.py

Prints one line per GPU (and its processes) and exits 0 when NVML answered
with at least one GPU; prints the one-line reason and exits 2 otherwise.
It is not a pytest module: run it by hand on a machine with NVIDIA GPUs.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gputui.kube.nvml import LocalGpus


def _fmt(value: float | None, unit: str) -> str:
    return "-" if value is None else f"{value:.0f}{unit}"


def main() -> int:
    reader = LocalGpus()
    started = time.perf_counter()
    snapshot = reader.snapshot()
    first_ms = (time.perf_counter() - started) * 1000
    if not snapshot.available:
        print(f"NVML unavailable: {snapshot.reason}")
        return 2
    started = time.perf_counter()
    reader.snapshot()
    again_ms = (time.perf_counter() - started) * 1000
    print(f"driver {snapshot.driver_version}, {len(snapshot.gpus)} GPU(s); first snapshot {first_ms:.1f} ms, next {again_ms:.1f} ms")
    for gpu in snapshot.gpus:
        if gpu.error:
            print(f"GPU {gpu.index}: {gpu.error}")
            continue
        print(
            f"GPU {gpu.index}: {gpu.name} {gpu.uuid} util {_fmt(gpu.util_percent, '%')} "
            f"mem {_fmt(gpu.mem_used_mib, '')}/{_fmt(gpu.mem_total_mib, ' MiB')} temp {_fmt(gpu.temp_c, 'C')} "
            f"power {_fmt(gpu.power_w, 'W')} MIG {gpu.mig_mode or 'not supported'}"
        )
        for proc in gpu.processes:
            print(f"    pid {proc.pid} {_fmt(proc.used_mib, ' MiB')}")
    reader.close()
    return 0 if any(not gpu.error for gpu in snapshot.gpus) else 2


if __name__ == "__main__":
    sys.exit(main())
