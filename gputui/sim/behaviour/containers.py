"""A container as the simulated kubelet tracks it, what its program sees (programs.Context), and the
container runtime's error wordings the kubelet reports."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .. import builders as b

if TYPE_CHECKING:
    from .pod_runner import PodRunner

Obj = dict[str, Any]


def registry_error(image: str) -> str:
    ref = b.full_image(image)
    host, _, rest = ref.partition("/")
    repo, _, tag = rest.rpartition(":")
    api_host = "registry-1.docker.io" if host == "docker.io" else host
    return (f'failed to pull and unpack image "{ref}": failed to resolve reference "{ref}": failed to do request: '
            f'Head "https://{api_host}/v2/{repo}/manifests/{tag}": dial tcp: lookup {api_host}: i/o timeout')


RUNTIME_HOOK_ERROR = (
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: "
    "unable to start container process: error during container init: error running hook #0: error running hook: "
    "exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\n"
    "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open shared object file: "
    "no such file or directory: unknown"
)


class Stopped(Exception):
    """The container was stopped from outside (pod deleted, deadline, node gone)."""


@dataclass
class Container:
    spec: Obj
    init: bool
    restarts: int = 0
    state: Obj = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    last_state: Obj = field(default_factory=dict)
    ready: bool = False
    started: bool = False
    pulled: bool = False
    ran: bool = False  # has been started at least once
    devices: list[str] = field(default_factory=list)
    plugin_devices: dict[str, list[str]] = field(default_factory=dict)  # resource -> the device plugin's device ids
    # Given in CrashLoopBackOff: it keeps crashing with this exit code (and message), whatever its program does.
    crash_code: int | None = None
    crash_message: str | None = None
    # The kubelet's back-off entry for the container (sim seconds; None: none yet, its next exit restarts at
    # once), and when it was last set (time.monotonic()).
    backoff: float | None = None
    backoff_at: float = 0.0

    @property
    def name(self) -> str:
        return self.spec["name"]

    @property
    def sidecar(self) -> bool:
        return self.init and self.spec.get("restartPolicy") == "Always"

    @property
    def running(self) -> bool:
        return "running" in self.state

    @property
    def exit_code(self) -> int | None:
        term = self.state.get("terminated")
        return None if term is None else term.get("exitCode", 0)


class ProgramContext:
    """What a container's program sees (see programs.Context)."""

    def __init__(self, runner: "PodRunner", ctr: Container, started: datetime, *, instant: bool = False) -> None:
        self.runner = runner
        self.instant = instant  # replaying a past run: its sleeps take no time
        self.pod = runner.pod
        self.container = ctr.spec
        self.gpus = runner.kubelet.gpus
        self.devices = list(ctr.devices)
        self.faults = runner.kubelet.faults
        self.started = started
        self._name = ctr.name

    def log(self, text: str) -> None:
        self.runner.kubelet.logs.append(self.runner.namespace, self.runner.name, self._name, text)

    async def sleep(self, sim_seconds: float) -> None:
        if self.instant:
            await asyncio.sleep(0)
            return
        await self.runner.kubelet.controllers.sleep(sim_seconds)

    def now(self) -> datetime:
        return b.utcnow()
