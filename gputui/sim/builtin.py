"""The built-in scenarios by name, for `scenarios.load` and `gputui sim --scenario NAME`.

    "demo"                       the demo cluster (demo.py)
    "gpu-operator-healthy", ...  the GPU stack scenarios (stacks.SCENARIOS)

This registry sits above the scenario modules and below scenarios.py, so that
neither needs the other.
"""
from __future__ import annotations

from typing import Any, Callable

from . import demo, stacks

Obj = dict[str, Any]

BUILTIN: dict[str, Callable[[], list[Obj]]] = {"demo": demo.build, **stacks.SCENARIOS}
