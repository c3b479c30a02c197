"""Test-only fault hooks of the simulated cluster.

Off unless the cluster was started with faults enabled; every hook is then
refused, and the server's per-request check costs one attribute read.

    sim.faults.compact()                  # every older watch gets 410 Expired
    sim.faults.drop_watches()             # every open watch stream ends
    sim.faults.fail("pods", 403)          # 403 Forbidden (or 500) for pods, every verb
    sim.faults.fail("pods/proxy", 403)    # only that subresource (here: no pods/proxy RBAC)
    sim.faults.slow("nodes", 1.5)         # delay every nodes response
    sim.faults.clear("pods")              # or clear() for all resources
    await sim.faults.restart(downtime=.5) # connections refused, then back, same port and state
    await sim.faults.restart(fresh=True)  # same port, state from the scenario again, resourceVersions low again
    sim.faults.corrupt_next()             # the next API response's body is broken JSON
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .cluster import SimCluster

FAULT_USER = "system:serviceaccount:gputui:viewer"


class FaultsDisabled(RuntimeError):
    pass


@dataclass
class Fault:
    code: int | None = None
    delay: float = 0.0
    retry_after: int = 1  # seconds, the Retry-After of a 429 or 503
    refused: int = 0  # requests answered with `code` so far: how often a client tried


class Faults:
    def __init__(self, enabled: bool = False, cluster: "SimCluster | None" = None) -> None:
        self.enabled = enabled
        self.cluster = cluster
        self.active: dict[str, Fault] = {}  # resource key -> fault
        self.corrupt = 0  # how many of the next API responses get a broken JSON body
        self._answering = asyncio.Event()  # cleared by silence()
        self._answering.set()

    def _require(self) -> "SimCluster":
        if not self.enabled:
            raise FaultsDisabled("fault hooks are off: start the simulator with faults enabled (--faults)")
        if self.cluster is None:
            raise FaultsDisabled("fault hooks are not attached to a cluster")
        return self.cluster

    def _resource_key(self, key: str) -> str:
        """A resource key (`pods`), or one with a subresource (`pods/proxy`)."""
        cluster = self._require()
        resource, _, sub = key.partition("/")
        if resource not in cluster.store.resources:
            raise ValueError(f"unknown resource {resource!r}; served: {', '.join(cluster.store.resources)}")
        if sub and sub not in cluster.store.resources[resource].subresources:
            raise ValueError(f"{resource} has no subresource {sub!r}")
        return key

    def compact(self) -> None:
        self._require().store.compact()

    def drop_watches(self) -> int:
        return self._require().store.drop_watches()

    def fail(self, resource_key: str, code: int, retry_after: int = 1) -> None:
        """Answer every request for the resource with 403, 500, or 429/503 with Retry-After: retry_after seconds."""
        if code not in (403, 429, 500, 503):
            raise ValueError("fail() answers 403, 429, 500 or 503")
        fault = self.active.setdefault(self._resource_key(resource_key), Fault())
        fault.code, fault.retry_after = code, retry_after

    def slow(self, resource_key: str, seconds: float) -> None:
        self.active.setdefault(self._resource_key(resource_key), Fault()).delay = seconds

    def corrupt_next(self, count: int = 1) -> None:
        """The next `count` API responses with a body (not watch or log streams) end mid-JSON."""
        self._require()
        self.corrupt += max(0, count)

    def take_corrupt(self) -> bool:
        """The server's check: whether to break this response (and count it)."""
        if self.corrupt <= 0:
            return False
        self.corrupt -= 1
        return True

    def silence(self) -> None:
        """Accept connections and answer nothing: every request waits, /version too, and open watches send
        nothing more (a hung API server, a black-holed load balancer), until clear()."""
        self._require()
        self._answering.clear()

    async def answering(self) -> None:
        """Returns once the server answers (at once unless silence() is on)."""
        if not self._answering.is_set():
            await self._answering.wait()

    def clear(self, resource_key: str | None = None) -> None:
        self._require()
        if resource_key is None:
            self.active.clear()
            self.corrupt = 0
            self._answering.set()
        else:
            self.active.pop(resource_key, None)

    async def restart(self, downtime: float = 0.5, *, fresh: bool = False, writes_while_down: int = 0) -> None:
        await self._require().restart(downtime=downtime, fresh=fresh, writes_while_down=writes_while_down)

    def describe(self) -> dict[str, object]:
        """What is active, for the control endpoint."""
        return {"faults": {k: {"code": f.code, "delay": f.delay} for k, f in sorted(self.active.items())},
                "corruptNext": self.corrupt, "silent": not self._answering.is_set()}

    def lookup(self, resource_key: str) -> Fault | None:
        """The server's per-request check (`pods` or `pods/proxy`)."""
        if not self.active:
            return None
        return self.active.get(resource_key)
