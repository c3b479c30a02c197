"""Verification in words: stages and failure codes, a verdict as text (its result, then the pod's fate),
event lines, elapsed time and errors; shared by the screens."""
from __future__ import annotations

from typing import Iterable

from rich.text import Text

from gputui.kube import health
from gputui.kube import verify as v
from gputui.kube.config import describe_network_error
from gputui.kube.client import HttpError

from .. import render
from gputui.sanitize import clean

STAGE_WORDS = {
    v.CREATING: "creating the pod",
    v.WAITING: "waiting for the pod to start",
    v.RUNNING: "nvidia-smi running",
    v.JUDGING: "judging the output",
    v.DELETING: "deleting the pod",
    v.DONE: "done",
}
CODE_WORDS = {
    v.UNSCHEDULABLE: "unschedulable",
    v.IMAGE_PULL: "image pull failed",
    v.RUNTIME: "container runtime could not inject the GPU",
    v.NVIDIA_SMI: "nvidia-smi failed",
    v.TIMEOUT: "timed out",
    v.POD_FAILED: "pod failed",
    v.FORBIDDEN: "not allowed",
    v.REFUSED: "refused by the API server",
    v.API_ERROR: "API error",
}


def _error_text(error: BaseException) -> str:
    if isinstance(error, (OSError, HttpError)):
        return describe_network_error(error)
    return str(error) or type(error).__name__


def kubectl_delete(namespace: str, name: str) -> str:
    return f"kubectl delete pod -n {namespace} {name}"


def known_problems(gpus: Iterable[health.BadGpu], now: float, lead: str = "known on this node: ") -> Text | None:
    """`known on this node: GPU 1 XID 79 (GPU has fallen off the bus), 3m ago`: what the Health screen
    holds against the node (kube/health.py's bad GPUs), said beside a verdict that nvidia-smi alone gives."""
    # a node-level signal is said as it is: `known on this node: 1 nvidia.com/gpu device unhealthy (…)`
    parts = [f"{gpu.device + ' ' if gpu.device else ''}{health.signal_words(signal, now)}" for gpu in gpus for signal in gpu.signals]
    if not parts:
        return None
    return Text(lead, style=render.WARN_STYLE, end="") + render.text("; ".join(parts), limit=800)


def verdict_text(verdict: v.Verdict, node_labels: dict[str, str] | None = None, *, pod_created: bool = True,
                 known: Text | None = None) -> Text:
    """PASS with what nvidia-smi saw and how it compares with GFD, or FAIL with the reason; the pod's fate last.
    pod_created: whether the pod ever existed (a refused create leaves nothing to delete).
    known: the node's known XIDs and health conditions (known_problems), on the line under the verdict's."""
    out = Text(end="")
    beside = Text("\n", end="") + known if known is not None else Text(end="")
    if verdict.passed:
        out.append("PASS", style=f"bold {render.OK_STYLE}")
        out.append("  ")
        report = verdict.report
        if report is not None:
            models = ", ".join(report.models) or "?"
            summary = f"{len(report.gpus)} x {models} · driver {report.driver or '?'} · CUDA {report.cuda or '?'}"
            if report.migs:
                summary += f" · {len(report.migs)} MIG device(s)"
            out.append_text(render.text(summary, style="bold", limit=400))
        out.append(f"  ({verdict.count} {clean(verdict.resource or '?', 100)})", style="dim")
        out.append_text(beside)
        if verdict.mismatches:
            out.append("\n")
            out.append("disagrees with the node's GPU Feature Discovery labels:", style=render.WARN_STYLE)
            for mismatch in verdict.mismatches:
                out.append("\n  • ")
                out.append_text(render.text(mismatch, limit=400))
        elif node_labels is not None and "nvidia.com/gpu.product" not in node_labels:
            out.append("\nno GPU Feature Discovery labels on the node to compare with", style="dim")
        else:
            out.append("\nagrees with the node's GPU Feature Discovery labels", style="dim")
    else:
        if verdict.code == v.CANCELLED:
            out.append("CANCELLED", style=render.WARN_STYLE)
        elif verdict.code in v.CHECK_NOT_MADE:
            out.append("NOT CHECKED", style=render.BAD_STYLE)
        else:
            out.append("FAIL", style=render.BAD_STYLE)
        words = CODE_WORDS.get(verdict.code)
        if words:
            out.append(f"  {words}", style="bold")
        out.append_text(beside)
        out.append("\n")
        out.append_text(render.text(verdict.reason, limit=4000))
    out.append("\n")
    out.append_text(pod_fate(verdict, pod_created))
    return out


def pod_fate(verdict: v.Verdict, created: bool = True) -> Text:
    if verdict.leftover:
        namespace, _, name = verdict.leftover.partition("/")
        out = Text("could not confirm deletion of pod ", style=render.BAD_STYLE, end="")
        out.append_text(render.text(verdict.leftover, style=render.BAD_STYLE, limit=200))
        out.append(": delete it by hand: ", style=render.BAD_STYLE)
        out.append_text(render.text(kubectl_delete(namespace, name), limit=300))
        return out
    if not created:
        return Text("no pod was created", style="dim", end="")
    out = Text("✓ pod ", style=render.OK_STYLE, end="")
    out.append_text(render.text(f"{verdict.namespace}/{verdict.pod}", limit=200))
    out.append(" deleted", style=render.OK_STYLE)
    return out


def _event_line(event: v.PodEvent) -> str:
    count = f" (x{event.count})" if event.count > 1 else ""
    return clean(f"{event.type:<7} {event.reason}: {event.message}{count}", 2000)


def _elapsed(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"
