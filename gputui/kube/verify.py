"""The verification pod: run nvidia-smi on one chosen node, watch it, judge it, always clean up.

For one node:
    plan = await plan_verification(api, "gpu-node-1", options, namespace="default")
    print(plan.to_yaml())                      # what will be created, for a confirmation
    verdict = await run_plan(api, plan, options, on_update=print)

`run_plan` creates the pod, watches it and its events, streams its logs and
judges the outcome; the pod is deleted (and its deletion confirmed) on every
path: pass, fail, timeout, an exception or the task being cancelled. Progress
reaches a live view as `Update`s through the callback, or through the async
iterator `updates()`. `run_plans` verifies several nodes with bounded
concurrency; `find_leftovers` finds pods an earlier, killed run left behind.

Everything read from the cluster (names, events, logs) is plain text here;
whoever renders it must escape it. No Textual in this module.
"""
from __future__ import annotations

import asyncio
import math
import random
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import orjson

from .config import describe_network_error
from .gpu import GPU, GPU_SHARED, GpuResources, is_gpu_node, node_usage
from .logs import LogError, stream_logs
from .records import display_status, node_from, pod_from

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient, CoreV1Api

DEFAULT_IMAGE = "nvidia/cuda:12.4.0-base-ubuntu22.04"
DEFAULT_TIMEOUT = 120.0
DELETE_CONFIRM_TIMEOUT = 30.0
CONTAINER = "nvidia-smi"

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "gputui"
NAME_LABEL = "app.kubernetes.io/name"
NAME = "gputui-verify"
NODE_LABEL = "gputui.io/verify-node"  # the node, cut to a valid label value
NODE_ANNOTATION = "gputui.io/verify-node"  # the node's full name
LEFTOVER_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY},{NAME_LABEL}={NAME}"

_MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-(\d+)g\.(\d+)gb$")
_NAME_PREFIX = "gputui-verify-"
_RANDOM_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # as Kubernetes' generateName: no vowels, no look-alikes
_RANDOM_LEN = 5
_MAX_NAME = 63  # a pod name that is also a valid hostname and label value
MAX_LOG_LINE = 64 * 1024  # bytes kept of one log line

IMAGE_PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "RegistryUnavailable"})
RUNTIME_REASONS = frozenset({"RunContainerError", "CreateContainerError", "StartError", "ContainerCannotRun", "CreateContainerConfigError"})
RUNTIME_EVENT_REASONS = frozenset({"FailedCreatePodSandBox", "FailedCreatePodContainer"})

# Verdict codes. The first is the only pass; the last two mean the check could not be made.
PASS = "pass"
UNSCHEDULABLE = "unschedulable"
IMAGE_PULL = "image-pull"
RUNTIME = "runtime"
NVIDIA_SMI = "nvidia-smi"
TIMEOUT = "timeout"
POD_FAILED = "pod-failed"
CANCELLED = "cancelled"
FORBIDDEN = "forbidden"
API_ERROR = "api-error"
CHECK_NOT_MADE = frozenset({FORBIDDEN, API_ERROR})


class VerifyError(Exception):
    """The verification cannot start (node missing, read-only mode, API trouble)."""


class ReadOnlyError(VerifyError):
    pass


class ApiError(VerifyError):
    def __init__(self, status: int, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason

    @classmethod
    def from_body(cls, status: int, body: bytes) -> "ApiError":
        try:
            data = orjson.loads(body)
            message = str(data.get("message") or "")
            reason = str(data.get("reason") or "")
        except (orjson.JSONDecodeError, AttributeError):
            message, reason = body.decode(errors="replace").strip()[:300], ""
        return cls(status, message or f"HTTP {status}", reason)


# -- options and plan ------------------------------------------------------


@dataclass(frozen=True)
class VerifyOptions:
    image: str = DEFAULT_IMAGE
    resource: str | None = None  # None: choose from what the node has free
    count: int = 1
    runtime_class: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    tolerate: tuple[str, ...] = ()  # taint keys to tolerate besides nvidia.com/gpu
    read_only: bool = False
    delete_timeout: float = DELETE_CONFIRM_TIMEOUT


@dataclass(frozen=True)
class Plan:
    """One verification pod, ready to create."""

    node: str
    namespace: str
    resource: str
    count: int
    manifest: dict[str, Any]
    node_labels: Mapping[str, str] = field(default_factory=dict)
    free: Mapping[str, int] = field(default_factory=dict)  # GPU resources free on the node when planned
    obstacles: tuple[str, ...] = ()  # what on the node itself will keep the pod off it, as seen when planned

    @property
    def name(self) -> str:
        return self.manifest["metadata"]["name"]

    def to_yaml(self) -> str:
        import yaml  # noqa: PLC0415

        return yaml.safe_dump(self.manifest, sort_keys=False, default_flow_style=False)


def mig_size(resource: str) -> tuple[int, int] | None:
    """(compute slices, memory GB) of a `nvidia.com/mig-<g>g.<mem>gb` resource."""
    m = _MIG_RESOURCE.match(resource)
    return (int(m.group(1)), int(m.group(2))) if m else None


def choose_resource(free: Mapping[str, int], allocatable: Mapping[str, int]) -> str:
    """The resource to ask one unit of: a whole GPU, else a shared one, else the smallest MIG slice.

    Free units first; when nothing is free, the same order over what the node
    advertises, so the scheduler can say why the pod does not fit. A node that
    advertises nothing still gets `nvidia.com/gpu`: "Insufficient nvidia.com/gpu"
    is the right answer for it.
    """
    for pool in (free, allocatable):
        for whole in (GPU, GPU_SHARED):
            if pool.get(whole, 0) > 0:
                return whole
        slices = sorted((size, r) for r, n in pool.items() if n > 0 and (size := mig_size(r)) is not None)
        if slices:
            return slices[0][1]
    return GPU


def pod_name(node: str, rng: random.Random | None = None) -> str:
    """`gputui-verify-<node>-<random>`: a DNS-1123 label, the node part cut to fit."""
    rng = rng or random
    suffix = "".join(rng.choice(_RANDOM_ALPHABET) for _ in range(_RANDOM_LEN))
    room = _MAX_NAME - len(_NAME_PREFIX) - 1 - _RANDOM_LEN
    node_part = re.sub(r"[^a-z0-9-]+", "-", node.lower())
    node_part = re.sub(r"-{2,}", "-", node_part)[:room].strip("-")
    return f"{_NAME_PREFIX}{node_part}-{suffix}" if node_part else f"{_NAME_PREFIX}{suffix}"


def node_label_value(node: str) -> str:
    """The node's name as a label value (at most 63 characters, alphanumeric at both ends)."""
    value = re.sub(r"[^A-Za-z0-9._-]", "-", node)[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", value)


def gpu_usage(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> tuple[dict[str, int], dict[str, int]]:
    """(free, allocatable) per GPU resource of a node object, given the pods bound to it."""
    usage = node_usage(node_from(dict(node)), [pod_from(dict(p)) for p in pods], GpuResources())
    return {r: max(u.free, 0) for r, u in usage.items()}, {r: u.allocatable for r, u in usage.items()}


def build_pod(
    node: str,
    namespace: str,
    resource: str,
    options: VerifyOptions,
    *,
    hostname: str | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """The pod manifest: pinned to the node, one GPU resource, nvidia-smi, nothing privileged."""
    tolerations = [{"key": GPU, "operator": "Exists"}]
    tolerations += [{"key": key, "operator": "Exists"} for key in options.tolerate if key != GPU]
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        # The server-side backstop: the kubelet ends a running pod gputui could not delete.
        "activeDeadlineSeconds": max(1, math.ceil(options.timeout)),
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 1,
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [hostname or node]}]}
                    ]
                }
            }
        },
        "tolerations": tolerations,
        "containers": [
            {
                "name": CONTAINER,
                "image": options.image,
                "command": ["nvidia-smi"],
                "resources": {"limits": {resource: str(options.count)}},
                "securityContext": {
                    "privileged": False,
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                },
            }
        ],
    }
    if options.runtime_class:
        spec["runtimeClassName"] = options.runtime_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name or pod_name(node),
            "namespace": namespace,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY, NAME_LABEL: NAME, NODE_LABEL: node_label_value(node)},
            "annotations": {NODE_ANNOTATION: node},
        },
        "spec": spec,
    }


def node_obstacles(node: Mapping[str, Any], resource: str, count: int, free: Mapping[str, int], tolerated: Iterable[str]) -> list[str]:
    """Plain reasons the node will refuse the pod: the scheduler's message counts every node, this names ours."""
    record = node_from(dict(node))
    found = []
    if record.unschedulable:
        found.append(f"node {record.name} is cordoned")
    if record.ready is not True:
        found.append(f"node {record.name} is not Ready")
    # Taints the node lifecycle controller sets say the same as "cordoned" and "not Ready" above.
    skip = set(tolerated) | {"node.kubernetes.io/unschedulable", "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
    effects: dict[str, list[str]] = {}
    for taint in record.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and taint.key not in skip:
            effects.setdefault(taint.key, []).append(taint.effect)
    for key, kinds in effects.items():
        found.append(f"untolerated taint {key} ({', '.join(kinds)}; add --tolerate {key})")
    if resource not in free:
        found.append(f"node advertises no {resource} (is its device plugin running?)")
    elif free[resource] < count:
        found.append(f"only {free[resource]} {resource} free on the node")
    return found


def plan_for(
    node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], namespace: str, options: VerifyOptions, rng: random.Random | None = None
) -> Plan:
    """The plan for a node object and the pods bound to it (pure: no API calls; rng: the name's suffix)."""
    meta = node.get("metadata") or {}
    node_name = meta["name"]
    labels = meta.get("labels") or {}
    free, allocatable = gpu_usage(node, pods)
    resource = options.resource or choose_resource(free, allocatable)
    manifest = build_pod(
        node_name, namespace, resource, options, hostname=labels.get("kubernetes.io/hostname"), name=pod_name(node_name, rng)
    )
    tolerated = [t["key"] for t in manifest["spec"]["tolerations"]]
    obstacles = tuple(node_obstacles(node, resource, options.count, free, tolerated))
    return Plan(node_name, namespace, resource, options.count, manifest, dict(labels), free, obstacles)


# -- nvidia-smi output -----------------------------------------------------


@dataclass(frozen=True)
class SmiGpu:
    index: int
    name: str
    memory_mib: int | None = None  # total framebuffer; None when nvidia-smi shows N/A (MIG)
    bus_id: str | None = None


@dataclass(frozen=True)
class SmiMig:
    gpu: int
    profile: str | None = None  # e.g. "3g.40gb" (the -L form names it; the table does not)
    memory_mib: int | None = None


@dataclass(frozen=True)
class SmiReport:
    driver: str | None
    cuda: str | None
    gpus: tuple[SmiGpu, ...]
    migs: tuple[SmiMig, ...] = ()

    @property
    def models(self) -> list[str]:
        return sorted({g.name for g in self.gpus})


_SMI_HEADER = re.compile(r"Driver Version:\s*(\S+)(?:\s+CUDA Version:\s*(\S+))?")
_SMI_GPU_ROW = re.compile(r"^\|\s*(\d+)\s+(.+?)\s+(?:On|Off)\s*\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])")
_SMI_MEMORY = re.compile(r"(\d+)MiB\s*/\s*(\d+)MiB")
_SMI_MIG_ROW = re.compile(r"^\|\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\|\s*(\d+)MiB\s*/\s*(\d+)MiB")
_SMI_LIST_GPU = re.compile(r"^GPU (\d+): (.+?) \(UUID: ")
_SMI_LIST_MIG = re.compile(r"^\s+MIG (\S+)\s+Device\s+\d+:")


def parse_nvidia_smi(text: str) -> SmiReport:
    """Driver, CUDA version, GPUs and MIG devices from nvidia-smi's table or `nvidia-smi -L`."""
    driver = cuda = None
    gpus: list[SmiGpu] = []
    migs: list[SmiMig] = []
    lines = text.splitlines()
    in_mig_section = False
    for i, line in enumerate(lines):
        if driver is None and (m := _SMI_HEADER.search(line)):
            driver, cuda = m.group(1), m.group(2)
            continue
        if "MIG devices:" in line:
            in_mig_section = True
        elif "Processes:" in line:
            in_mig_section = False
        if m := _SMI_GPU_ROW.match(line):
            memory = None
            if i + 1 < len(lines) and (mem := _SMI_MEMORY.search(lines[i + 1])):
                memory = int(mem.group(2))
            gpus.append(SmiGpu(int(m.group(1)), m.group(2).strip(), memory, m.group(3)))
        elif in_mig_section and (m := _SMI_MIG_ROW.match(line)):
            migs.append(SmiMig(int(m.group(1)), None, int(m.group(6))))
        elif m := _SMI_LIST_GPU.match(line):
            gpus.append(SmiGpu(int(m.group(1)), m.group(2).strip()))
        elif (m := _SMI_LIST_MIG.match(line)) and gpus:
            migs.append(SmiMig(gpus[-1].index, m.group(1)))
    return SmiReport(driver, cuda, tuple(gpus), tuple(migs))


def _label_version(labels: Mapping[str, str], full: str, parts: Sequence[str]) -> str | None:
    if labels.get(full):
        return labels[full]
    values = [labels.get(p) for p in parts]
    if values[0] is None:
        return None
    return ".".join(v for v in values if v is not None)


def gfd_driver_version(labels: Mapping[str, str]) -> str | None:
    found = _label_version(
        labels,
        "nvidia.com/cuda.driver-version.full",
        ("nvidia.com/cuda.driver-version.major", "nvidia.com/cuda.driver-version.minor", "nvidia.com/cuda.driver-version.revision"),
    )
    return found or _label_version(labels, "", ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev"))


def gfd_cuda_version(labels: Mapping[str, str]) -> str | None:
    found = _label_version(
        labels, "nvidia.com/cuda.runtime-version.full", ("nvidia.com/cuda.runtime-version.major", "nvidia.com/cuda.runtime-version.minor")
    )
    return found or _label_version(labels, "", ("nvidia.com/cuda.runtime.major", "nvidia.com/cuda.runtime.minor"))


def _model_key(name: str) -> str:
    """A GPU model as GFD spells it: spaces as dashes, without sharing or MIG suffixes."""
    key = re.sub(r"\s+", "-", name.strip())
    key = re.sub(r"-MIG-\d+g\.\d+gb$", "", key)
    key = re.sub(r"-SHARED$", "", key)
    return key.lower()


def _same_model(smi_name: str, gfd_product: str) -> bool:
    smi_key, gfd_key = _model_key(smi_name), _model_key(gfd_product)
    if smi_key.endswith("..."):  # nvidia-smi cuts long names in its narrow table
        return gfd_key.startswith(smi_key[:-3])
    return smi_key == gfd_key


def disagreements(report: SmiReport, labels: Mapping[str, str], resource: str, count: int) -> list[str]:
    """Where nvidia-smi inside the pod contradicts the node's GPU Feature Discovery labels."""
    found: list[str] = []
    product = labels.get("nvidia.com/gpu.product")
    if product:
        for model in report.models:
            if not _same_model(model, product):
                found.append(f"model: nvidia-smi shows {model!r}, label nvidia.com/gpu.product is {product!r}")
    driver = gfd_driver_version(labels)
    if driver and report.driver and report.driver != driver:
        found.append(f"driver: nvidia-smi shows {report.driver}, GFD labels say {driver}")
    cuda = gfd_cuda_version(labels)
    if cuda and report.cuda and report.cuda != cuda:
        found.append(f"CUDA: nvidia-smi shows {report.cuda}, GFD labels say {cuda}")
    memory = labels.get("nvidia.com/gpu.memory")
    if memory and memory.isdigit() and not report.migs:
        for gpu in report.gpus:
            if gpu.memory_mib is not None and gpu.memory_mib != int(memory):
                found.append(f"memory: GPU {gpu.index} has {gpu.memory_mib} MiB, label nvidia.com/gpu.memory is {memory} MiB")
    label_count = labels.get("nvidia.com/gpu.count")
    if label_count and label_count.isdigit() and len(report.gpus) > int(label_count):
        found.append(f"count: nvidia-smi lists {len(report.gpus)} GPUs, label nvidia.com/gpu.count is {label_count}")
    elif resource == GPU and not report.migs and report.gpus and len(report.gpus) != count:
        found.append(f"count: nvidia-smi lists {len(report.gpus)} GPUs, the pod asked for {count} {GPU}")
    return found


# -- events, updates, verdicts ---------------------------------------------


@dataclass(frozen=True)
class PodEvent:
    """A Kubernetes event about the verification pod."""

    type: str  # Normal or Warning
    reason: str
    message: str
    count: int = 1
    source: str = ""

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> "PodEvent":
        source = (obj.get("source") or {}).get("component") or obj.get("reportingController") or ""
        return cls(
            type=str(obj.get("type") or ""),
            reason=str(obj.get("reason") or ""),
            message=str(obj.get("message") or obj.get("note") or ""),
            count=int(obj.get("count") or 1),
            source=str(source),
        )


# Stages of one verification, in order.
CREATING = "creating"
WAITING = "waiting"  # created, not running yet
RUNNING = "running"
JUDGING = "judging"
DELETING = "deleting"
DONE = "done"


@dataclass(frozen=True)
class Verdict:
    node: str
    passed: bool
    code: str
    reason: str  # one line a person can act on
    pod: str | None = None
    namespace: str | None = None
    resource: str | None = None
    count: int = 1
    elapsed: float = 0.0
    report: SmiReport | None = None
    mismatches: tuple[str, ...] = ()
    deleted: bool = False  # the pod is confirmed gone (or was never created)
    leftover: str | None = None  # namespace/name of a pod whose deletion could not be confirmed

    def to_json(self) -> dict[str, Any]:
        report = self.report
        return {
            "node": self.node,
            "result": "PASS" if self.passed else "FAIL",
            "code": self.code,
            "reason": self.reason,
            "pod": self.pod,
            "namespace": self.namespace,
            "resource": self.resource,
            "count": self.count,
            "elapsed_s": round(self.elapsed, 2),
            "gpus": [{"index": g.index, "model": g.name, "memory_mib": g.memory_mib} for g in report.gpus] if report else [],
            "mig_devices": len(report.migs) if report else 0,
            "driver": report.driver if report else None,
            "cuda": report.cuda if report else None,
            "mismatches": list(self.mismatches),
            "deleted": self.deleted,
            "leftover": self.leftover,
        }


@dataclass(frozen=True)
class Update:
    """Progress of one verification, for a live view. Events and log lines are only the new ones."""

    node: str
    stage: str
    pod: str | None
    status: str  # the pod's status as kubectl shows it (Pending, ContainerCreating, Completed...)
    elapsed: float
    events: tuple[PodEvent, ...] = ()
    log_lines: tuple[str, ...] = ()
    verdict: Verdict | None = None  # on the last update only


OnUpdate = Callable[[Update], None]


def _latest(events: Sequence[PodEvent], reasons: Iterable[str]) -> PodEvent | None:
    wanted = set(reasons)
    return next((e for e in reversed(events) if e.reason in wanted), None)


def _container_status(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return next((s for s in statuses if s.get("name") == CONTAINER), statuses[0] if statuses else {})


def pod_display_status(pod: Mapping[str, Any]) -> str:
    """The pod's status as kubectl's STATUS column words it."""
    return display_status(dict(pod))[0]


def _first_meaningful(lines: Sequence[str]) -> str:
    return next((ln.strip() for ln in lines if ln.strip()), "")


def judge(pod: Mapping[str, Any], events: Sequence[PodEvent], log_lines: Sequence[str]) -> tuple[str, str] | None:
    """(code, reason) once the pod's fate is known, None while it is still on its way.

    Call it with the complete log once the container has terminated.
    """
    status = pod.get("status") or {}
    scheduled = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
    if scheduled and scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        failed = _latest(events, ["FailedScheduling"])
        words = scheduled.get("message") or (failed.message if failed else "") or "no node fits"
        return UNSCHEDULABLE, f"unschedulable: {words}"

    state = _container_status(pod).get("state") or {}
    waiting = state.get("waiting") or {}
    terminated = state.get("terminated") or {}
    reason = waiting.get("reason") or ""
    if reason in IMAGE_PULL_REASONS:
        pulled = _latest(events, ["Failed"])
        message = (pulled.message if pulled else "") or waiting.get("message") or reason
        return IMAGE_PULL, f"image pull failed ({reason}): {message}"
    if reason in RUNTIME_REASONS or terminated.get("reason") in RUNTIME_REASONS:
        message = waiting.get("message") or terminated.get("message") or reason or terminated.get("reason")
        return RUNTIME, f"the container runtime could not start the container with the GPU: {message}"
    sandbox = _latest(events, RUNTIME_EVENT_REASONS)
    if sandbox and status.get("phase") == "Pending" and not terminated:
        return RUNTIME, f"the container runtime could not start the pod ({sandbox.reason}): {sandbox.message}"

    if terminated:
        code = terminated.get("exitCode")
        if code == 0:
            report = parse_nvidia_smi("\n".join(log_lines))
            if report.gpus:
                return PASS, f"nvidia-smi listed {len(report.gpus)} GPU(s)"
            return NVIDIA_SMI, "nvidia-smi exited 0 but listed no GPU: the device was not injected into the container"
        detail = _first_meaningful(log_lines) or terminated.get("message") or terminated.get("reason") or ""
        return NVIDIA_SMI, f"nvidia-smi failed (exit {code}): {detail}".rstrip(": ")

    if status.get("phase") == "Failed":
        why = status.get("reason") or ""
        if why == "DeadlineExceeded":
            return TIMEOUT, f"timed out: the pod passed its activeDeadlineSeconds ({status.get('message') or why})"
        return POD_FAILED, f"the pod failed ({why or 'no reason given'}): {status.get('message') or ''}".rstrip(": ")
    return None


# -- API helpers (raw JSON: no generated models) ---------------------------


async def _json(request: Awaitable[Any]) -> dict[str, Any]:
    resp = await request
    try:
        body = await resp.read()
    finally:
        resp.release()
    if resp.status >= 300:
        raise ApiError.from_body(resp.status, body)
    return orjson.loads(body)


async def _lines(request: Awaitable[Any]) -> AsyncIterator[bytes]:
    """The lines of a watch response: one JSON event each."""
    resp = await request
    try:
        if resp.status >= 300:
            raise ApiError.from_body(resp.status, await resp.read())
        pending = b""
        async for chunk in resp.content.iter_any():
            *complete, pending = (pending + chunk).split(b"\n")
            for line in complete:
                yield line
        if pending:
            yield pending
    finally:
        resp.close()


RETRY_PAUSE = 0.2  # seconds between reconnects; callers bound the whole wait with their own timeout


async def _watch(
    list_call: Callable[..., Awaitable[Any]], namespace: str, field_selector: str, since: str
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """(type, object) from a watch that resumes where it ended, reconnects after connection
    errors (an API server restart) and lists again after a 410. Runs until the caller stops it."""
    import aiohttp  # noqa: PLC0415

    while True:
        expired = False
        try:
            stream = _lines(
                list_call(
                    namespace, field_selector=field_selector, watch=True, resource_version=since,
                    allow_watch_bookmarks=True, timeout_seconds=300, _preload_content=False,
                )
            )
            async for line in stream:
                if not line.strip():
                    continue
                event = orjson.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        expired = True
                        break
                    raise ApiError(int(obj.get("code") or 500), str(obj.get("message") or "watch failed"), str(obj.get("reason") or ""))
                since = (obj.get("metadata") or {}).get("resourceVersion") or since
                if kind != "BOOKMARK":
                    yield kind, obj
            if expired:
                listed = await _json(list_call(namespace, field_selector=field_selector, _preload_content=False))
                for obj in listed.get("items") or []:
                    yield "ADDED", obj
                since = listed["metadata"]["resourceVersion"]
        except (OSError, aiohttp.ClientError):
            await asyncio.sleep(RETRY_PAUSE)


def _core(api: ApiClient) -> CoreV1Api:
    # The client is imported when first used, not with this module: the app imports
    # this module before its first frame, and the client takes longer to import than that.
    from kubernetes_asyncio.client import CoreV1Api  # noqa: PLC0415

    return CoreV1Api(api)


async def read_node(api: ApiClient, node: str) -> dict[str, Any]:
    try:
        return await _json(_core(api).read_node(node, _preload_content=False))
    except ApiError as e:
        if e.status == 404:
            raise VerifyError(f"node {node!r} not found") from None
        raise


async def pods_on_node(api: ApiClient, node: str) -> list[dict[str, Any]]:
    listed = await _json(_core(api).list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}", _preload_content=False))
    return listed.get("items") or []


async def gpu_node_names(api: ApiClient) -> list[str]:
    """Every node with NVIDIA hardware labelled or GPU resources advertised, by name."""
    listed = await _json(_core(api).list_node(_preload_content=False))
    nodes = [node_from(obj) for obj in listed.get("items") or []]
    return sorted(n.name for n in nodes if is_gpu_node(n, node_usage(n, [], GpuResources())))


async def plan_verification(api: ApiClient, node: str, options: VerifyOptions, namespace: str, rng: random.Random | None = None) -> Plan:
    """Read the node and what its pods hold, and plan its verification pod (rng: fixed names in tests)."""
    node_obj = await read_node(api, node)
    try:
        pods = await pods_on_node(api, node)
    except ApiError as e:
        if e.status != 403:
            raise
        pods = []  # may not list pods cluster-wide: choose from allocatable, the scheduler still judges fit
    return plan_for(node_obj, pods, namespace, options, rng)


def create_denied_message(e: ApiError, namespace: str) -> str:
    if "cannot create resource" in str(e) or not str(e):
        return f"forbidden: you may not create pods in namespace {namespace} (RBAC: create pods in namespace {namespace})"
    return f"forbidden: {e}"


# -- deletion --------------------------------------------------------------


async def delete_pod(api: ApiClient, namespace: str, name: str, confirm_timeout: float = DELETE_CONFIRM_TIMEOUT) -> bool:
    """Delete the pod and wait until it is gone; True once that is confirmed within confirm_timeout."""
    import aiohttp  # noqa: PLC0415

    core = _core(api)
    try:
        async with asyncio.timeout(confirm_timeout):
            while True:
                try:
                    return await _delete_and_wait(core, namespace, name)
                except (OSError, aiohttp.ClientError):
                    await asyncio.sleep(RETRY_PAUSE)  # the API server may be restarting: try again
    except (TimeoutError, ApiError, ValueError):
        return False


async def _delete_and_wait(core: CoreV1Api, namespace: str, name: str) -> bool:
    try:
        await _json(core.delete_namespaced_pod(name, namespace, grace_period_seconds=1, _preload_content=False))
    except ApiError as e:
        if e.status == 404:
            return True
        raise
    while True:
        try:
            current = await _json(core.read_namespaced_pod(name, namespace, _preload_content=False))
        except ApiError as e:
            if e.status == 404:
                return True
            raise
        since = current["metadata"]["resourceVersion"]
        async for kind, _obj in _watch(core.list_namespaced_pod, namespace, f"metadata.name={name}", since):
            if kind == "DELETED":
                return True


async def _delete_shielded(api: ApiClient, namespace: str, name: str, confirm_timeout: float) -> tuple[bool, bool]:
    """Run delete_pod to its end even if the caller is cancelled meanwhile: (confirmed, was_cancelled)."""
    task = asyncio.ensure_future(delete_pod(api, namespace, name, confirm_timeout))
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    return task.result(), cancelled


# -- one verification ------------------------------------------------------


class _Run:
    """The lifecycle of one verification pod, from create to confirmed deletion."""

    def __init__(self, api: ApiClient, plan: Plan, options: VerifyOptions, on_update: OnUpdate | None) -> None:
        self.api = api
        self.core = _core(api)
        self.plan = plan
        self.options = options
        self.on_update = on_update
        self.started = time.monotonic()
        self.pod: dict[str, Any] = {}
        self.events: list[PodEvent] = []
        self.log_lines: list[str] = []
        self.logs_done = asyncio.Event()
        self.may_exist = False

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def emit(
        self, stage: str, events: Sequence[PodEvent] = (), log_lines: Sequence[str] = (), verdict: Verdict | None = None, status: str | None = None
    ) -> None:
        if self.on_update is not None:
            if status is None:
                status = pod_display_status(self.pod) if self.pod else ""
            self.on_update(Update(self.plan.node, stage, self.plan.name, status, self.elapsed, tuple(events), tuple(log_lines), verdict))

    def verdict(self, code: str, reason: str, **extra: Any) -> Verdict:
        return Verdict(
            node=self.plan.node, passed=code == PASS, code=code, reason=reason, pod=self.plan.name,
            namespace=self.plan.namespace, resource=self.plan.resource, count=self.plan.count, **extra,
        )

    async def run(self) -> Verdict:
        if self.options.read_only:
            raise ReadOnlyError("read-only mode: verification would create a pod")
        verdict: Verdict | None = None
        try:
            verdict = await self._create_and_follow()
        finally:
            # Runs on every path, cancellation included; the deletion itself is shielded.
            verdict = await self._clean_up(verdict)
        return verdict

    async def _create_and_follow(self) -> Verdict:
        import aiohttp  # noqa: PLC0415

        plan = self.plan
        self.emit(CREATING)
        self.may_exist = True  # from here on, even if the call below never returns
        try:
            self.pod = await _json(self.core.create_namespaced_pod(plan.namespace, plan.manifest, _preload_content=False))
        except ApiError as e:
            self.may_exist = False  # refused (a 409 name clash is someone else's pod: leave it alone)
            if e.status == 403:
                return self.verdict(FORBIDDEN, create_denied_message(e, plan.namespace))
            return self.verdict(API_ERROR, f"could not create the pod: {e}")
        except (OSError, TimeoutError, aiohttp.ClientError) as e:
            return self.verdict(API_ERROR, f"could not create the pod: {describe_network_error(e)}")
        self.emit(WAITING)
        try:
            return await self._follow()
        except VerifyError as e:
            return self.verdict(API_ERROR, f"lost track of the pod: {e}")
        except (OSError, aiohttp.ClientError) as e:
            return self.verdict(API_ERROR, f"lost track of the pod: {describe_network_error(e)}")

    async def _clean_up(self, verdict: Verdict | None) -> Verdict:
        """Delete the pod if it may exist, and tell the view how that went (the last Update)."""
        plan = self.plan
        confirmed, cancelled_meanwhile = True, False
        if self.may_exist:
            self.emit(DELETING)
            confirmed, cancelled_meanwhile = await _delete_shielded(self.api, plan.namespace, plan.name, self.options.delete_timeout)
        leftover = None if confirmed else f"{plan.namespace}/{plan.name}"
        # Cancelled runs have no verdict of their own; the view still learns the pod's fate.
        final = verdict or self.verdict(CANCELLED, "cancelled")
        final = replace(final, elapsed=self.elapsed, deleted=confirmed, leftover=leftover)
        if leftover:
            final = replace(final, reason=f"{final.reason} (could not confirm deletion of pod {leftover}: delete it by hand)")
        status = "" if not self.may_exist else ("Deleted" if confirmed else "Terminating")
        self.emit(DONE, verdict=final, status=status)
        if cancelled_meanwhile:
            raise asyncio.CancelledError  # the caller asked for it while we were cleaning up
        return final

    async def _follow(self) -> Verdict:
        """Watch the pod, its events and logs until judged or timed out."""
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        uid = self.pod["metadata"]["uid"]
        since = self.pod["metadata"]["resourceVersion"]
        feeders = [
            asyncio.create_task(self._feed(queue, "pod", self.core.list_namespaced_pod, f"metadata.name={self.plan.name}", since)),
            asyncio.create_task(self._feed(queue, "event", self.core.list_namespaced_event, f"involvedObject.uid={uid}", since)),
        ]
        try:
            async with asyncio.timeout(self.options.timeout):
                return await self._consume(queue, feeders)
        except TimeoutError:
            return self._timed_out()
        finally:
            for task in feeders:
                task.cancel()
            await asyncio.gather(*feeders, return_exceptions=True)

    def _timed_out(self) -> Verdict:
        last = self.events[-1] if self.events else None
        where = pod_display_status(self.pod)
        detail = f"; last event {last.reason}: {last.message}" if last else ""
        return self.verdict(TIMEOUT, f"timed out after {self.options.timeout:g} s while {where}{detail}")

    async def _feed(self, queue: asyncio.Queue[tuple[str, Any]], kind: str, list_call: Any, selector: str, since: str) -> None:
        try:
            async for change, obj in _watch(list_call, self.plan.namespace, selector, since):
                await queue.put((kind, (change, obj)))
        except Exception as e:  # noqa: BLE001  (the consumer decides what a broken feed means)
            await queue.put(("error", e))

    async def _stream_logs(self, queue: asyncio.Queue[tuple[str, Any]]) -> None:
        try:
            async for line in stream_logs(self.api, self.plan.namespace, self.plan.name, CONTAINER, tail=None, max_line=MAX_LOG_LINE):
                await queue.put(("log", line.decode(errors="replace").rstrip("\r")))
        except LogError:
            pass  # the pod's status still tells the outcome; the log is a bonus
        finally:
            self.logs_done.set()
            await queue.put(("logs-done", None))

    async def _consume(self, queue: asyncio.Queue[tuple[str, Any]], feeders: list[asyncio.Task[None]]) -> Verdict:
        log_task: asyncio.Task[None] | None = None
        try:
            while True:
                batch = [await queue.get()]
                while not queue.empty():
                    batch.append(queue.get_nowait())
                new_events: list[PodEvent] = []
                new_lines: list[str] = []
                for kind, item in batch:
                    if kind == "error":
                        raise item
                    if kind == "pod":
                        change, obj = item
                        if change == "DELETED":
                            raise VerifyError("the pod was deleted by someone else before it finished")
                        self.pod = obj
                    elif kind == "event":
                        change, obj = item
                        if change != "DELETED":
                            new_events.append(PodEvent.from_object(obj))
                    elif kind == "log":
                        new_lines.append(item)
                self.events.extend(new_events)
                self.log_lines.extend(new_lines)
                state = _container_status(self.pod).get("state") or {}
                if log_task is None and (state.get("running") or state.get("terminated")):
                    log_task = asyncio.create_task(self._stream_logs(queue))
                terminated = bool(state.get("terminated")) or (self.pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
                stage = RUNNING if state.get("running") else (JUDGING if terminated else WAITING)
                self.emit(stage, new_events, new_lines)
                if terminated and log_task is not None and not self.logs_done.is_set():
                    continue  # judge with the whole log
                if (outcome := judge(self.pod, self.events, self.log_lines)) is not None:
                    return self._verdict_from(*outcome)
        finally:
            if log_task is not None:
                log_task.cancel()
                await asyncio.gather(log_task, return_exceptions=True)

    def _verdict_from(self, code: str, reason: str) -> Verdict:
        if code == UNSCHEDULABLE and self.plan.obstacles:
            words = reason.removeprefix("unschedulable: ")
            return self.verdict(code, f"unschedulable: {'; '.join(self.plan.obstacles)}. The scheduler says: {words}")
        if code != PASS:
            return self.verdict(code, reason)
        report = parse_nvidia_smi("\n".join(self.log_lines))
        mismatches = tuple(disagreements(report, self.plan.node_labels, self.plan.resource, self.plan.count))
        models = ", ".join(report.models)
        summary = f"{len(report.gpus)} x {models}, driver {report.driver or '?'}, CUDA {report.cuda or '?'}"
        if report.migs:
            summary += f", {len(report.migs)} MIG device(s)"
        if mismatches:
            summary += f"; disagrees with GFD labels: {'; '.join(mismatches)}"
        return self.verdict(PASS, summary, report=report, mismatches=mismatches)


async def run_plan(api: ApiClient, plan: Plan, options: VerifyOptions, on_update: OnUpdate | None = None) -> Verdict:
    """Create the plan's pod, follow it to a verdict, delete it. Raises ReadOnlyError in read-only mode.

    Cancelling the task still deletes the pod (the last Update, stage DONE, says whether that was confirmed).
    """
    return await _Run(api, plan, options, on_update).run()


async def verify_node(api: ApiClient, node: str, options: VerifyOptions, namespace: str, on_update: OnUpdate | None = None) -> Verdict:
    if options.read_only:
        raise ReadOnlyError("read-only mode: verification would create a pod")
    plan = await plan_verification(api, node, options, namespace)
    return await run_plan(api, plan, options, on_update)


async def run_plans(
    api: ApiClient, plans: Sequence[Plan], options: VerifyOptions, on_update: OnUpdate | None = None, concurrency: int = 4
) -> list[Verdict]:
    """Verify several nodes, at most `concurrency` at once; verdicts in the plans' order."""
    if options.read_only:
        raise ReadOnlyError("read-only mode: verification would create pods")
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(plan: Plan) -> Verdict:
        async with gate:
            return await run_plan(api, plan, options, on_update)

    tasks = [asyncio.create_task(one(p)) for p in plans]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        # Cancelled or failed: every sibling must finish its own cleanup before we return.
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def updates(api: ApiClient, plan: Plan, options: VerifyOptions) -> AsyncIterator[Update]:
    """The same as run_plan, as an async iterator of Updates; the last one carries the verdict.

    Leave early only inside `contextlib.aclosing(updates(...))` (or call aclose()):
    closing the iterator deletes the pod before aclose() returns. Cancelling the
    consuming task does the same.
    """
    queue: asyncio.Queue[Update] = asyncio.Queue()
    task = asyncio.create_task(run_plan(api, plan, options, queue.put_nowait))
    try:
        while True:
            update = await queue.get()
            yield update
            if update.stage == DONE:
                return
    finally:
        if not task.done():
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)


# -- leftovers -------------------------------------------------------------


@dataclass(frozen=True)
class Leftover:
    namespace: str
    name: str
    node: str
    status: str
    created: str  # RFC 3339


async def find_leftovers(api: ApiClient, namespace: str | None = None) -> list[Leftover]:
    """Verification pods still in the cluster (an earlier run was killed, or a deletion was not confirmed).

    All namespaces when allowed, else the given one.
    """
    core = _core(api)
    try:
        listed = await _json(core.list_pod_for_all_namespaces(label_selector=LEFTOVER_SELECTOR, _preload_content=False))
    except ApiError as e:
        if e.status != 403 or namespace is None:
            raise
        listed = await _json(core.list_namespaced_pod(namespace, label_selector=LEFTOVER_SELECTOR, _preload_content=False))
    found = []
    for pod in listed.get("items") or []:
        meta = pod.get("metadata") or {}
        node = (meta.get("annotations") or {}).get(NODE_ANNOTATION) or (meta.get("labels") or {}).get(NODE_LABEL) or ""
        found.append(Leftover(meta.get("namespace", ""), meta["name"], node, pod_display_status(pod), meta.get("creationTimestamp") or ""))
    return sorted(found, key=lambda lo: (lo.created, lo.namespace, lo.name))


async def delete_leftovers(api: ApiClient, leftovers: Sequence[Leftover], confirm_timeout: float = DELETE_CONFIRM_TIMEOUT) -> list[Leftover]:
    """Delete them all; returns those whose deletion could not be confirmed."""
    results = await asyncio.gather(*(delete_pod(api, lo.namespace, lo.name, confirm_timeout) for lo in leftovers))
    return [lo for lo, gone in zip(leftovers, results) if not gone]
