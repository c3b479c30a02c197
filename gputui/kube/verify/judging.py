"""Pod events, the stages of a verification, verdicts and updates, and judging the pod's fate."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..records import display_status
from .options import CONTAINER
from .smi import SmiReport, parse_nvidia_smi

IMAGE_PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "RegistryUnavailable"})
RUNTIME_REASONS = frozenset({"RunContainerError", "CreateContainerError", "StartError", "ContainerCannotRun", "CreateContainerConfigError"})
RUNTIME_EVENT_REASONS = frozenset({"FailedCreatePodSandBox", "FailedCreatePodContainer"})

# Verdict codes. The first is the only pass; the last three mean the check could not be made.
PASS = "pass"  # noqa: S105  (a verdict code, not a password)
UNSCHEDULABLE = "unschedulable"
IMAGE_PULL = "image-pull"
RUNTIME = "runtime"
NVIDIA_SMI = "nvidia-smi"
TIMEOUT = "timeout"
POD_FAILED = "pod-failed"
CANCELLED = "cancelled"
FORBIDDEN = "forbidden"  # RBAC: the user may not create the pod, or read its log
REFUSED = "refused"  # an admission plugin: a ResourceQuota, PodSecurity, the namespace missing or being deleted
API_ERROR = "api-error"
CHECK_NOT_MADE = frozenset({FORBIDDEN, REFUSED, API_ERROR})


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
        """A core v1 Event (`count`, or `series` for one written through events.k8s.io/v1 as kube-scheduler writes;
        `source`, else `reportingComponent`), or the events.k8s.io/v1 view (`note`, `reportingController`)."""
        source = (obj.get("source") or {}).get("component") or obj.get("reportingComponent") or obj.get("reportingController") or ""
        series = obj.get("series") or {}
        return cls(
            type=str(obj.get("type") or ""),
            reason=str(obj.get("reason") or ""),
            message=str(obj.get("message") or obj.get("note") or ""),
            count=int(obj.get("count") or obj.get("deprecatedCount") or series.get("count") or 1),
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
