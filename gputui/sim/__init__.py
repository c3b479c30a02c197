"""The simulated GPU cluster: a Kubernetes API server on loopback with a scheduler and kubelets.

An independent oracle for the tests, the demo and the benchmarks: it imports nothing of gputui
outside this package. `SimCluster` (cluster.py) loads aiohttp, so it is imported on first use.
Grouped by job: `apiserver/` (the store, admission, the HTTP layer), `behaviour/` (scheduler,
kubelets, controllers), `exporters/` (dcgm-exporter, kube-state-metrics), `scenarios/` (what a
cluster starts with); `builders/` (object shapes) serve them all.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cluster import SimCluster

__all__ = ["SimCluster"]


def __getattr__(name: str) -> Any:
    if name == "SimCluster":
        from .cluster import SimCluster  # noqa: PLC0415  (a submodule's import need not load the server)

        return SimCluster
    raise AttributeError(name)
