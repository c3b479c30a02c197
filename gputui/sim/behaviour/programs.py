"""What the simulated containers do: the log lines they write and how they exit.

A program is chosen per container (`program_for`) from its command, name and
image: nvidia-smi, the NVIDIA device plugin (every install style), the GPU
Operator's operands, a pod annotation that makes a container exit, or a
plain workload that runs until stopped. Programs talk to the kubelet only
through `Context`.
"""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Awaitable, Callable, Protocol

from .. import builders as b
from .nvidia_smi import DRIVER_FAILURE, DRIVER_FAILURE_EXIT_CODE, NodeGpus, is_nvidia_smi

Obj = dict[str, Any]

# Pod annotations a scenario can set (documented in controllers.py).
RUN_SECONDS = "sim.gputui.io/run-seconds"
EXIT_CODE = "sim.gputui.io/exit-code"


class Context(Protocol):
    pod: Obj
    container: Obj
    gpus: NodeGpus
    devices: list[str]  # device ids given to this container
    faults: frozenset[str]
    started: datetime  # when this container instance started (may be in the past for adopted ones)

    def log(self, text: str) -> None: ...
    def sleep(self, sim_seconds: float) -> Awaitable[None]: ...
    def now(self) -> datetime: ...


Program = Callable[[Context], Awaitable[int]]


class Ticker:
    """Successive timestamps a few hundred microseconds apart from a start, as a burst of log lines has."""

    def __init__(self, start: datetime, seed: str = "") -> None:
        self._at = start + timedelta(microseconds=int(b.digest("tick", seed, start, length=5), 16) % 400_000)
        self._seed = seed
        self._n = 0

    def __call__(self) -> datetime:
        self._n += 1
        self._at += timedelta(microseconds=40 + int(b.digest(self._seed, self._n, length=4), 16) % 900)
        return self._at


When = datetime | Ticker


def _at(when: When) -> datetime:
    return when() if isinstance(when, Ticker) else when


def klog(level: str, when: When, source: str, message: str) -> str:
    """A klog line: `I0624 22:58:05.486593       1 health.go:159] message`."""
    return f"{level}{_at(when):%m%d %H:%M:%S.%f} {1:>7} {source}] {message}"


def logfmt(when: When, level: str, message: str) -> str:
    """A logrus line, as the container toolkit, DCGM exporter and MIG manager write them."""
    return f'time="{_at(when):%Y-%m-%dT%H:%M:%SZ}" level={level} msg="{message}"'


async def forever(ctx: Context, every: float = 0.0, line: Callable[[], str] | None = None) -> int:
    """Run until stopped, optionally writing a line every `every` simulated seconds."""
    while True:
        await ctx.sleep(every or 3600)
        if line is not None and every:
            ctx.log(line())


# -- nvidia-smi ------------------------------------------------------------

NVIDIA_SMI_SECONDS = 0.8  # simulated seconds nvidia-smi takes (it initialises the driver first), as on a real node


async def nvidia_smi(ctx: Context) -> int:
    await ctx.sleep(NVIDIA_SMI_SECONDS)
    if "driver-broken" in ctx.faults:
        ctx.log(DRIVER_FAILURE)
        return DRIVER_FAILURE_EXIT_CODE
    if not ctx.devices:
        ctx.log("No devices were found")
        return 6
    ctx.log(ctx.gpus.render(ctx.devices, ctx.now()).rstrip("\n"))
    return 0


# -- the NVIDIA device plugin ---------------------------------------------

def _plugin_config(gpus: NodeGpus) -> str:
    labels = gpus.labels
    sharing: Obj = {"timeSlicing": {}}
    if "nvidia.com/gpu.shared" in gpus.capacity:
        sharing = {"timeSlicing": {"renameByDefault": True, "failRequestsGreaterThanOne": False,
                                   "resources": [{"name": "nvidia.com/gpu", "devices": "all", "replicas": gpus.replicas}]}}
    config = {
        "version": "v1",
        "flags": {
            "migStrategy": labels.get("nvidia.com/mig.strategy", "none"),
            "failOnInitError": True,
            "mpsRoot": "/run/nvidia/mps",
            "nvidiaDriverRoot": "/",
            "gdsEnabled": False,
            "mofedEnabled": False,
            "useNodeFeatureAPI": None,
            "plugin": {"passDeviceSpecs": False, "deviceListStrategy": ["envvar"], "deviceIDStrategy": "uuid",
                       "cdiAnnotationPrefix": "cdi.k8s.io/", "nvidiaCTKPath": "/usr/bin/nvidia-ctk",
                       "containerDriverRoot": "/driver-root"},
        },
        "resources": {"gpus": [{"pattern": "*", "name": "nvidia.com/gpu"}]},
        "sharing": sharing,
    }
    return json.dumps(config, indent=2)


async def device_plugin(ctx: Context) -> int:
    t = Ticker(ctx.started, ctx.pod["metadata"]["name"])
    lines = [
        klog("I", t, "main.go:199", "Starting FS watcher."),
        klog("I", t, "main.go:206", "Starting OS watcher."),
        klog("I", t, "main.go:221", "Starting Plugins."),
        klog("I", t, "main.go:278", "Loading configuration."),
        klog("I", t, "main.go:303", "Updating config with default resource matching patterns."),
        klog("I", t, "main.go:314", "\nRunning with config:\n" + _plugin_config(ctx.gpus)),
        klog("I", t, "main.go:317", "Retreiving plugins."),
    ]
    if "driver-broken" in ctx.faults:
        lines += [
            klog("E", t, "factory.go:68", "Failed to initialize NVML: ERROR_DRIVER_NOT_LOADED."),
            klog("E", t, "factory.go:69", "If this is a GPU node, did you set the docker default runtime to `nvidia`?"),
            klog("E", t, "factory.go:70", "You can check the prerequisites at: https://github.com/NVIDIA/k8s-device-plugin#prerequisites"),
            klog("E", t, "factory.go:71", "You can learn how to set the runtime at: https://github.com/NVIDIA/k8s-device-plugin#quick-start"),
            klog("E", t, "factory.go:72", "If this is not a GPU node, you should set up a toleration or nodeSelector to only deploy this plugin on GPU nodes"),
            klog("E", t, "main.go:132", "error starting plugins: error creating plugin manager: failed to initialize NVML: ERROR_DRIVER_NOT_LOADED"),
        ]
        ctx.log("\n".join(lines))
        return 1
    resources = [r for r, n in ctx.gpus.capacity.items() if n > 0]
    if not resources:
        lines.append(klog("I", t, "main.go:346", "No devices found. Waiting indefinitely."))
        ctx.log("\n".join(lines))
        return await forever(ctx)
    for resource in resources:
        socket = "nvidia-" + resource.removeprefix("nvidia.com/") + ".sock"
        lines += [
            klog("I", t, "server.go:216", f"Starting GRPC server for '{resource}'"),
            klog("I", t, "server.go:147", f"Starting to serve '{resource}' on /var/lib/kubelet/device-plugins/{socket}"),
            klog("I", t, "server.go:154", f"Registered device plugin for '{resource}' with Kubelet"),
        ]
    for resource in resources:
        for device in ctx.gpus.unhealthy_devices(resource):
            uuid = device.split("::")[0]
            lines += [
                klog("I", t, "health.go:159", f"Processing event {{Device:{{Handle:{_handle(uuid)}}} EventType:8 EventData:79 "
                                              "GpuInstanceId:4294967295 ComputeInstanceId:4294967295}"),
                klog("I", t, "health.go:185", f"XidCriticalError: Xid=79 on Device={uuid}; marking device as unhealthy."),
                klog("I", t, "server.go:276", f"'{resource}' device marked unhealthy: {device}"),
            ]
    ctx.log("\n".join(lines))
    handles = [_handle(g.uuid) for g in ctx.gpus.gpus] or ["0x7f75976470a8"]
    count = 0

    def health_line() -> str:
        nonlocal count
        count += 1
        # Xid 43 (a user application faulted) is on the plugin's skip list: it logs and moves on.
        return klog("I", ctx.now(), "health.go:159", f"Skipping event {{Device:{{Handle:{handles[count % len(handles)]}}} "
                                                     "EventType:8 EventData:43 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}")

    return await forever(ctx, 45, health_line)


def _handle(uuid: str) -> str:
    return "0x7f75" + b.digest("handle", uuid, length=8)


# -- GPU Operator operands and friends -------------------------------------

@dataclass
class Chatter:
    """A program that writes some startup lines, then a line every `every` seconds (or nothing), forever."""

    startup: Callable[[Ticker, Context], list[str]]
    every: float = 0.0
    periodic: Callable[[datetime, Context], str] | None = None
    exit_code: int | None = None  # exits with this code after the startup lines (init containers)

    async def __call__(self, ctx: Context) -> int:
        ctx.log("\n".join(self.startup(Ticker(ctx.started, ctx.pod["metadata"]["name"] + ctx.container["name"]), ctx)))
        if self.exit_code is not None:
            await ctx.sleep(1)
            return self.exit_code
        periodic = self.periodic
        return await forever(ctx, self.every, (lambda: periodic(ctx.now(), ctx)) if periodic else None)


def _driver_lines(t: When, ctx: Context) -> list[str]:
    driver = ctx.gpus.driver
    return [
        "========== NVIDIA Software Installer ==========",
        f"Starting installation of NVIDIA driver version {driver} for Linux kernel version {b.KERNEL}",
        "Stopping NVIDIA persistence daemon...",
        "Unloading NVIDIA driver kernel modules...",
        "Installing NVIDIA driver kernel modules...",
        "Loading ipmi and i2c_core kernel modules...",
        "Loading NVIDIA driver kernel modules...",
        "+ modprobe nvidia",
        "+ modprobe nvidia-uvm",
        "+ modprobe nvidia-modeset",
        "Starting NVIDIA persistence daemon...",
        "Mounting NVIDIA driver rootfs...",
        "Done, now waiting for signal",
    ]


async def operator_driver(ctx: Context) -> int:
    """The GPU Operator's driver container: installs and waits, or (driver-broken) fails to load the module."""
    if "driver-broken" not in ctx.faults:
        return await Chatter(_driver_lines)(ctx)
    t = ctx.started
    ctx.log("\n".join([
        "========== NVIDIA Software Installer ==========",
        f"Starting installation of NVIDIA driver version {ctx.gpus.driver} for Linux kernel version {b.KERNEL}",
        "Stopping NVIDIA persistence daemon...",
        "Unloading NVIDIA driver kernel modules...",
        "Installing NVIDIA driver kernel modules...",
        "Loading ipmi and i2c_core kernel modules...",
        "Loading NVIDIA driver kernel modules...",
        "+ modprobe nvidia",
        "modprobe: ERROR: could not insert 'nvidia': No such device",
        f"{t:%b %d %H:%M:%S} ERROR: Unable to load the kernel module 'nvidia.ko'.",
        "Stopping NVIDIA persistence daemon...",
        "Unloading NVIDIA driver kernel modules...",
        "Unmounting NVIDIA driver rootfs...",
    ]))
    await ctx.sleep(2)
    return 1


async def dcgm_exporter(ctx: Context) -> int:
    """The DCGM exporter: serves metrics, or (dcgm-broken) cannot start its host engine and exits."""
    if "dcgm-broken" not in ctx.faults:
        return await Chatter(_dcgm_lines)(ctx)
    t = ctx.started
    ctx.log("\n".join([
        logfmt(t, "info", "Starting dcgm-exporter"),
        logfmt(t, "fatal", "Error connecting to nv-hostengine: DCGM initialization error"),
    ]))
    await ctx.sleep(1)
    return 1


async def validation_init(ctx: Context) -> int:
    """An operand's `*-validation` init container: passes, or (driver-broken) waits for the driver forever."""
    if "driver-broken" not in ctx.faults:
        return await Chatter(_validation_init_lines, exit_code=0)(ctx)
    waiting = ("waiting for the driver validations to be ready..." if ctx.container["name"] == "driver-validation"
               else "waiting for nvidia container stack to be setup")
    ctx.log(waiting)
    return await forever(ctx, 5, lambda: waiting)


def _toolkit_lines(t: When, ctx: Context) -> list[str]:
    return [
        logfmt(t, "info", "Parsing arguments"),
        logfmt(t, "info", "Starting nvidia-toolkit"),
        logfmt(t, "info", "Installing NVIDIA container toolkit to '/usr/local/nvidia/toolkit'"),
        logfmt(t, "info", "Setting up runtime"),
        logfmt(t, "info", "Loading config from /runtime/config-dir/config.toml"),
        logfmt(t, "info", "Successfully parsed arguments"),
        logfmt(t, "info", "Sending SIGHUP signal to containerd"),
        logfmt(t, "info", "Successfully signaled containerd"),
        logfmt(t, "info", "Completed 'setup' for containerd"),
        logfmt(t, "info", "Waiting for signal"),
    ]


def _gfd_lines(t: When, ctx: Context) -> list[str]:
    return [
        klog("I", t, "main.go:163", "Starting OS watcher."),
        klog("I", t, "main.go:168", "Loading configuration."),
        klog("I", t, "main.go:180", "\nRunning with config:\n" + _plugin_config(ctx.gpus)),
        klog("I", t, "factory.go:48", "Detected NVML platform: found NVML library"),
        klog("I", t, "factory.go:64", "Using NVML manager"),
        klog("I", t, "main.go:210", "Start running"),
        klog("I", t, "main.go:274", "Creating Labels"),
        klog("I", t, "output.go:82", "Writing labels to output file /etc/kubernetes/node-feature-discovery/features.d/gfd"),
        klog("I", t, "main.go:283", "Sleeping for 60000000000"),
    ]


def _gfd_periodic(t: datetime, ctx: Context) -> str:
    return klog("I", t, "main.go:283", "Sleeping for 60000000000")


def _dcgm_lines(t: When, ctx: Context) -> list[str]:
    t = _at(t)
    return [
        logfmt(t, "info", "Starting dcgm-exporter"),
        logfmt(t, "info", "DCGM successfully initialized!"),
        logfmt(t, "info", "Collecting DCP Metrics"),
        logfmt(t, "info", "Falling back to metric file '/etc/dcgm-exporter/dcp-metrics-included.csv'"),
        logfmt(t, "info", "Initializing system entities of type: GPU"),
        logfmt(t, "info", "Kubernetes metrics collection enabled!"),
        logfmt(t, "info", "Pipeline starting"),
        logfmt(t, "info", "Starting webserver"),
        f'time="{t:%Y-%m-%dT%H:%M:%SZ}" level=info msg="Listening on" address="[::]:9400"',
        f'time="{t:%Y-%m-%dT%H:%M:%SZ}" level=info msg="TLS is disabled." address="[::]:9400" http2=false',
    ]


def _mig_manager_lines(t: When, ctx: Context) -> list[str]:
    config = ctx.gpus.labels.get("nvidia.com/mig.config", "all-disabled")
    return [
        logfmt(t, "info", "Waiting for change to 'nvidia.com/mig.config' label"),
        logfmt(t, "info", f"Updating to MIG config: {config}"),
        logfmt(t, "info", "Asserting that the requested configuration is present in the configuration file"),
        logfmt(t, "info", "Selected MIG configuration is valid"),
        logfmt(t, "info", "MIG configuration applied successfully"),
        logfmt(t, "info", "Setting node label: nvidia.com/mig.config.state=success"),
        logfmt(t, "info", "Waiting for change to 'nvidia.com/mig.config' label"),
    ]


def _validator_lines(t: When, ctx: Context) -> list[str]:
    return ["all validations are successful"]


def _validation_init_lines(t: When, ctx: Context) -> list[str]:
    name = ctx.container["name"]
    component = name.removesuffix("-validation")
    lines = [logfmt(t, "info", f"version: {b.digest('validator', length=8)}, commit: {b.digest('commit', length=7)}")]
    if component == "driver":
        lines.append(logfmt(t, "info", "Detected pre-installed driver on the host"))
        lines.append(logfmt(t, "info", "running command chroot with args [/host nvidia-smi]"))
    lines.append(f"{component} validation is successful" if component != "plugin" else "device-plugin validation is successful")
    return lines


def _config_manager_lines(t: When, ctx: Context) -> list[str]:
    return [
        klog("I", t, "main.go:246", "Waiting for change to 'nvidia.com/device-plugin.config' label"),
        klog("I", t, "main.go:248", "Label change detected: nvidia.com/device-plugin.config="),
        klog("I", t, "main.go:360", "No value set. Selecting default name: default"),
        klog("I", t, "main.go:304", "Updating to config: default"),
        klog("I", t, "main.go:312", "Successfully updated to config: default"),
    ]


def _nfd_worker_lines(t: When, ctx: Context) -> list[str]:
    return [
        klog("I", t, "main.go:66", '"-server is deprecated, will be removed in a future release along with the deprecated gRPC API"'),
        klog("I", t, "nfd-worker.go:219", '"Node Feature Discovery Worker" version="v0.15.4" nodeName="' + (ctx.pod["spec"].get("nodeName") or "") + '" namespace="gpu-operator"'),
        klog("I", t, "nfd-worker.go:520", '"configuration file parsed" path="/etc/kubernetes/node-feature-discovery/nfd-worker.conf"'),
        klog("I", t, "nfd-worker.go:600", '"starting feature discovery..."'),
        klog("I", t, "nfd-worker.go:613", '"feature discovery completed"'),
    ]


def _nfd_periodic(t: datetime, ctx: Context) -> str:
    return klog("I", t, "nfd-worker.go:613", '"feature discovery completed"')


def _operator_lines(t: When, ctx: Context) -> list[str]:
    stamp = _at(t).strftime("%Y-%m-%dT%H:%M:%SZ")
    return [json.dumps({"level": "info", "ts": stamp, "logger": "controllers.ClusterPolicy", "msg": message, "name": "cluster-policy"})
            for message in ("Reconciliate ClusterPolicies", "Found Resource, updating...", "ClusterPolicy step completed",
                            "ClusterPolicy is ready as all resources have been successfully reconciled")]


def _operator_periodic(t: datetime, ctx: Context) -> str:
    return json.dumps({"level": "info", "ts": t.strftime("%Y-%m-%dT%H:%M:%SZ"), "logger": "controllers.ClusterPolicy",
                       "msg": "ClusterPolicy is ready as all resources have been successfully reconciled", "name": "cluster-policy"})


# -- choosing a program ----------------------------------------------------

def _exit_after(seconds: float, code: int) -> Program:
    async def run(ctx: Context) -> int:
        await ctx.sleep(seconds)
        return code
    return run


# How long an adopted crash-looping container runs before it crashes again (simulated seconds).
CRASH_AFTER = 2.0


def crashing(program: Program, code: int, message: str | None = None) -> Program:
    """A container given in CrashLoopBackOff: it runs its program (startup lines and all) and crashes again with
    its last exit code, unless the program exits sooner by itself; the simulator never heals it on its own."""
    async def run(ctx: Context) -> int:
        inner = asyncio.ensure_future(program(ctx))
        timer = asyncio.ensure_future(ctx.sleep(CRASH_AFTER))
        try:
            await asyncio.wait({inner, timer}, return_when=asyncio.FIRST_COMPLETED)
            if inner.done() and not inner.cancelled() and inner.exception() is None:
                return inner.result()
            ctx.log(message or f"fatal: exited with status {code}")
            return code
        finally:
            inner.cancel()
            timer.cancel()
    return run


async def _short_init(ctx: Context) -> int:
    await ctx.sleep(1)
    return 0


def program_for(pod: Obj, container: Obj, *, init: bool) -> Program:
    name = container.get("name", "")
    image = container.get("image", "")
    words = " ".join(str(w) for w in (container.get("command") or []) + (container.get("args") or []))
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if is_nvidia_smi(container) and not name.endswith("-validation"):
        return nvidia_smi
    if RUN_SECONDS in annotations and not init:
        try:
            seconds = float(annotations[RUN_SECONDS])
            code = int(annotations.get(EXIT_CODE, "0"))
        except ValueError:
            seconds, code = 0.0, 1
        return _exit_after(seconds, code)
    if init:
        if name.endswith("-validation"):
            return validation_init
        if name == "config-manager-init":
            return Chatter(_config_manager_lines, exit_code=0)
        if container.get("restartPolicy") != "Always":
            return _short_init
    if name in ("nvidia-device-plugin-ctr", "nvidia-device-plugin", "nvidia-gpu-device-plugin") or "nvidia-device-plugin" in words:
        return device_plugin
    if "gpu-feature-discovery" in name or "gpu-feature-discovery" in words:
        return Chatter(_gfd_lines, 60, _gfd_periodic)
    if "dcgm-exporter" in name or "dcgm-exporter" in image:
        return dcgm_exporter
    if name == "nvidia-driver-ctr" or "nvidia-driver" in words:
        return operator_driver
    if "container-toolkit" in name or "container-toolkit" in image:
        return Chatter(_toolkit_lines)
    if "mig-manager" in name:
        return Chatter(_mig_manager_lines)
    if name == "nvidia-operator-validator":
        return Chatter(_validator_lines)
    if name == "config-manager":
        return Chatter(_config_manager_lines)
    if "node-feature-discovery" in image and "nfd-worker" in words:
        return Chatter(_nfd_worker_lines, 60, _nfd_periodic)
    if name == "gpu-operator":
        return Chatter(_operator_lines, 30, _operator_periodic)
    return forever
