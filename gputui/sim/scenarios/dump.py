"""A dump of a real cluster, served as it was dumped: what `gputui report --from` and `gputui --from` read.

    dump = Dump.read(["cluster.yaml", "must-gather/"])   # ScenarioError: one line naming the file, the item, why
    dump.summary()                                        # "412 objects from 9 files; 6 files skipped (...)"
    SimCluster(**dump.cluster_options())                  # BackgroundCluster(...) too, for the app
    async with dump.served() as sim: sim.kubeconfig_path  # on loopback, for the same client as a live cluster

What a dump may hold is scenarios.read's: `kubectl get ... -A -o yaml` Lists, single
objects, several files, directories such as the GPU Operator's must-gather writes.
Nothing runs on a served dump: no scheduler, kubelet or DaemonSet controller changes an
object, and no DCGM exporter answers the proxy (a dump holds no metrics: NOT_IN_DUMP is
the reason a client gives).  /version answers empty strings: which release served the
dump is not in it.  The kubeconfig's context is `dump:PATH[,PATH...]`.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Sequence

from . import Loaded, read

CONTEXT_PREFIX = "dump:"
NOT_IN_DUMP = "not in the dump"


@dataclass(frozen=True)
class Dump:
    paths: tuple[str, ...]
    loaded: Loaded

    @classmethod
    def read(cls, paths: Sequence[str | Path]) -> "Dump":
        """Every object of the files and directories given; raises scenarios.ScenarioError."""
        return cls(tuple(str(p) for p in paths), read(paths))

    @property
    def context(self) -> str:
        return CONTEXT_PREFIX + ",".join(self.paths)

    def summary(self) -> str:
        return self.loaded.summary()

    def cluster_options(self) -> dict[str, Any]:
        """SimCluster's (and BackgroundCluster's) keyword arguments: the cluster as it was dumped."""
        return {"scenario": self.loaded, "run_controllers": False, "exporters": False, "context": self.context,
                "version_unknown": True}

    @contextlib.asynccontextmanager
    async def served(self) -> AsyncIterator[Any]:
        """The dump served on loopback for as long as the block runs: the started SimCluster."""
        from ..cluster import SimCluster  # noqa: PLC0415  (cluster imports the server: only when serving)

        sim = SimCluster(**self.cluster_options())
        try:
            yield await sim.start()
        finally:
            await sim.stop()
