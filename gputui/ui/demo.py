"""`gputui --demo` and `gputui --from`: the simulated cluster in a thread of its own.

The simulator gets its own event loop in a daemon thread, so its scheduler,
kubelets and HTTP server never stall the UI's loop; the app reaches it over
loopback through the same client code as a real cluster. `dump_app` serves a
dump (gputui.sim.scenarios.dump) the same way, as it was dumped.
"""
from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any


class BackgroundCluster:
    """Start with `start()` (returns the kubeconfig path once the server answers); `stop()` ends it."""

    def __init__(self, **sim_kwargs: Any) -> None:
        self._sim_kwargs = sim_kwargs
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.sim: Any = None
        self.kubeconfig_path: Path | None = None

    def start(self, timeout: float = 30.0) -> Path:
        self.begin()
        return self.wait_ready(timeout)

    def begin(self) -> None:
        """Start the simulator's thread and return at once (see wait_ready)."""
        self._thread = threading.Thread(target=self._run, name="gputui-sim", daemon=True)
        self._thread.start()

    def wait_ready(self, timeout: float = 30.0) -> Path:
        """Block until the simulator answers; its kubeconfig path. RuntimeError if it cannot start."""
        if not self._ready.wait(timeout):
            raise RuntimeError(f"the simulated cluster did not start within {timeout:.0f} s")
        if self._error is not None:
            raise RuntimeError(f"the simulated cluster did not start: {self._error}") from self._error
        assert self.kubeconfig_path is not None
        return self.kubeconfig_path

    def _run(self) -> None:
        from gputui.sim.cluster import SimCluster  # noqa: PLC0415  (imported in the thread: overlaps the UI's imports)

        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            self.sim = SimCluster(**self._sim_kwargs)
            loop.run_until_complete(self.sim.start())
            self.kubeconfig_path = self.sim.kubeconfig_path
        except BaseException as error:  # noqa: BLE001  (reported to the starting thread)
            self._error = error
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self.sim.stop())
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

    def call(self, fn: Any, *args: Any) -> Any:
        """Run fn(*args) on the simulator's loop and wait for its result (coroutine functions too)."""
        assert self._loop is not None

        async def invoke() -> Any:
            result = fn(*args)
            if asyncio.iscoroutine(result):
                result = await result
            return result

        return asyncio.run_coroutine_threadsafe(invoke(), self._loop).result(timeout=30)

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread is None:
            return
        self._ready.wait(timeout)  # a start in progress finishes first, then stops
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)

    def __enter__(self) -> "BackgroundCluster":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def dump_app(dump: Any, config: Any, extra_resources: list[str] | tuple[str, ...] = (), **options: Any) -> tuple[Any, BackgroundCluster]:
    """The app on a dump (a gputui.sim.scenarios.dump.Dump) and the cluster serving it, started when the app connects:
    nothing runs on it, no DCGM metrics are read ("not in the dump"), and the app is read-only (`v` refuses).
    Stop the cluster once the app has ended. options: make_app's (namespaces...)."""
    from gputui.kube.quantities import dump_taken  # noqa: PLC0415
    from gputui.sim.scenarios.dump import NOT_IN_DUMP  # noqa: PLC0415

    from .launch import make_app, verify_settings  # noqa: PLC0415

    served = BackgroundCluster(**dump.cluster_options())

    def started() -> Path:
        served.begin()
        return served.wait_ready()

    metrics = {**config.model_options(), "metrics_unavailable": NOT_IN_DUMP}
    app = make_app(None, None, extra_resources, kubeconfig_from=started, verify=verify_settings(config, True), metrics=metrics, **options)
    app.dump_paths = dump.paths
    app.dump_taken = dump_taken(dump.loaded.objects)
    return app, served
