"""SimCluster: the simulated GPU cluster, started in-process on a free loopback port.

    async with SimCluster(scenario="demo") as sim:
        sim.kubeconfig_path   # a kubeconfig (context "gputui-sim") for kubectl and the clients
        sim.url               # http://127.0.0.1:PORT
        sim.store             # the objects (tests may write through it directly)
        sim.faults            # test-only fault hooks

The HTTP layer lives in server/, the cluster's behaviour (scheduler,
kubelets, device plugins) in controllers.py, scenarios in scenarios.py.
"""
from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from .logs import LogBook
from .store import Store

CONTEXT_NAME = "gputui-sim"


def kubeconfig_for(url: str, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT_NAME, "cluster": {"server": url}}],
        "users": [{"name": CONTEXT_NAME, "user": {"token": "gputui-sim"}}],
        "contexts": [{"name": CONTEXT_NAME, "context": {"cluster": CONTEXT_NAME, "user": CONTEXT_NAME, "namespace": namespace}}],
        "current-context": CONTEXT_NAME,
        "preferences": {},
    }


class SimCluster:
    def __init__(
        self,
        scenario: str | Path | list[dict[str, Any]] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        kubeconfig_out: str | Path | None = None,
        speed: float = 1.0,
        bookmark_interval: float = 10.0,
        faults: bool = False,
        nodes: int | None = None,
        pods: int | None = None,
        run_controllers: bool = True,
    ) -> None:
        from .faults import Faults  # noqa: PLC0415  (kept local: small import graph for the CLI)

        self.host = host
        self.port = port
        self.speed = speed  # >1 makes simulated kubelets faster (tests), <1 slower (demo realism)
        self.bookmark_interval = bookmark_interval
        # How long a list or watch from a resourceVersion in the future waits for it before failing with
        # "Too large resource version" (kube-apiserver's watch cache waits 3 s).
        self.too_large_wait = 3.0
        self.store = Store()
        self.logs = LogBook()
        self.faults = Faults(enabled=faults, cluster=self)
        self._scenario = scenario
        self._synthetic = (nodes, pods) if nodes is not None else None
        self._kubeconfig_out = Path(kubeconfig_out) if kubeconfig_out else None
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None
        self._runner: web.AppRunner | None = None
        self.controllers = None
        # False: a static cluster (no scheduler, no kubelets), for tests of the HTTP layer alone.
        self._run_controllers = run_controllers
        self.url = ""
        self.kubeconfig_path: Path | None = None

    async def start(self) -> "SimCluster":
        from .controllers import Controllers  # noqa: PLC0415

        self._populate()
        self.controllers = Controllers(self)
        await self._serve()
        self.url = f"http://{self.host}:{self.port}"
        if self._run_controllers:
            self.controllers.start()
        self.kubeconfig_path = self.write_kubeconfig(self._kubeconfig_out)
        return self

    def _populate(self) -> None:
        from . import scenarios  # noqa: PLC0415

        if self._synthetic is not None:
            objects = scenarios.synthetic(*self._synthetic)
        elif self._scenario is not None:
            objects = scenarios.load(self._scenario)
        else:
            objects = []
        scenarios.populate(self.store, objects)

    async def _serve(self) -> None:
        from . import server  # noqa: PLC0415

        # handler_cancellation: a client that goes away ends its watch or log stream at once.
        self._runner = web.AppRunner(
            server.make_app(self), access_log=None, handle_signals=False, handler_cancellation=True, shutdown_timeout=1.0
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        try:
            await site.start()
        except BaseException:
            await self._runner.cleanup()
            self._runner = None
            raise
        sock = site._server.sockets[0]  # type: ignore[union-attr]
        self.port = sock.getsockname()[1]

    async def restart(self, downtime: float = 0.5, *, fresh: bool = False) -> None:
        """Stop serving (connections refused, open streams end), then serve again on the same port and state.

        fresh=True: the state starts again from the scenario, resourceVersions low again (an etcd restore, a
        rebuilt test cluster): what clients knew is gone, and their resourceVersions are from its future."""
        from .controllers import Controllers  # noqa: PLC0415

        self.store.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if fresh:
            if self.controllers is not None and self._run_controllers:
                await self.controllers.stop()
            self.store = Store()
            self.logs = LogBook()
            self._populate()
            self.controllers = Controllers(self)
        await asyncio.sleep(downtime)
        await self._serve()
        if fresh and self._run_controllers:
            self.controllers.start()

    def write_kubeconfig(self, path: Path | None = None) -> Path:
        if path is None:
            if self._tmpdir is None:
                self._tmpdir = tempfile.TemporaryDirectory(prefix="gputui-sim-")
            path = Path(self._tmpdir.name) / "kubeconfig"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(kubeconfig_for(self.url)))
        os.chmod(path, 0o600)
        return path

    async def stop(self) -> None:
        if self.controllers is not None and self._run_controllers:
            await self.controllers.stop()
        self.store.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    async def __aenter__(self) -> "SimCluster":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
