"""Columns and rows of the Nodes and GPU pods tables, for wide and narrow terminals.

Pure functions: a NodeSummary or GpuPod in, a tuple of Text cells out (the
first cell is the row's name). Narrow layouts (under 100 columns, e.g. 80x24
over ssh) drop the model and memory columns and shorten the rest.
"""
from __future__ import annotations

from rich.text import Text

from gputui.kube.gpu import GPU, GpuPod, NodeSummary

from . import render
from .table import Column


def node_columns(narrow: bool) -> list[Column]:
    if narrow:
        return [
            Column("node", "NODE", 14),
            Column("status", "STATUS", 8),
            Column("gpu", "GPU ALLOC", 10),
            Column("free", "FREE", 4),
            Column("verdict", "VERDICT", 17),
            Column("other", "MIG/SHARED", 11),
        ]
    # Most telling first: what does not fit falls off the right edge.
    return [
        Column("node", "NODE"),
        Column("status", "STATUS"),
        Column("gpu", "GPU ALLOC"),
        Column("free", "FREE"),
        Column("verdict", "VERDICT", 26),
        Column("other", "MIG / SHARED ALLOC"),
        Column("model", "GPU MODEL"),
    ]


def node_row(summary: NodeSummary, narrow: bool, unknown: str | None = None) -> tuple[Text, ...]:
    """unknown: the pods are not listed, allocated and free are not known (`…` or `?` stands for them)."""
    gpu_usage = summary.usage.get(GPU)
    cells = (
        render.text(summary.name, limit=40 if narrow else 63),
        render.node_status(summary.node),
        render.usage_cell(gpu_usage, bar_width=3 if narrow else 4, capacity=not narrow, unknown=unknown),
        render.free_cell(gpu_usage, unknown),
        render.verdicts(summary.problems, short=narrow, width=17 if narrow else 26),
        render.other_resources_cell(summary.usage, unknown),
    )
    return cells if narrow else cells + (render.model_and_memory(summary),)


def pod_columns(narrow: bool) -> list[Column]:
    if narrow:
        return [
            Column("pod", "NAMESPACE/POD", 22),
            Column("node", "NODE", 10),
            Column("gpus", "GPUS", 11),
            Column("status", "STATUS", 9),
            Column("age", "AGE", 4),
            Column("reason", "REASON"),
        ]
    return [
        Column("pod", "NAMESPACE/POD", 40),
        Column("node", "NODE"),
        Column("gpus", "GPUS"),
        Column("status", "STATUS"),
        Column("restarts", "RESTARTS"),
        Column("age", "AGE"),
        Column("reason", "REASON"),
    ]


def gpus_cell(entry: GpuPod, narrow: bool) -> Text:
    """The pod's GPUs: `2 gpu`; with what it holds through DRA claims, `2 gpu · dra gpu-0,gpu-1` (narrow: `2 gpu +dra`)."""
    cell = render.gpu_counts(entry.gpu)
    if entry.claims:
        devices = [d for hold in entry.claims for d in hold.devices]
        if narrow:
            cell.append((" +dra" if entry.gpu else f"{len(devices)} dra"), style=render.DIM_STYLE)
        else:
            cell.append((" · " if entry.gpu else "") + "dra ", style=render.DIM_STYLE)
            cell.append_text(render.text(",".join(devices), limit=60))
    return cell


def pod_row(entry: GpuPod, age_text: str, narrow: bool) -> tuple[Text, ...]:
    pod = entry.pod
    node = render.text(pod.node, limit=63) if pod.node else Text("<none>", style=render.DIM_STYLE, end="")
    reason = render.reason(entry, limit=30 if narrow else 60)
    if narrow:
        return (render.pod_name(pod, 22), node, gpus_cell(entry, True), render.pod_status(pod), Text(age_text, end=""), reason)
    return (
        render.pod_name(pod, 40),
        node,
        gpus_cell(entry, False),
        render.pod_status(pod),
        Text(str(pod.restarts), style=render.BAD_STYLE if pod.restarts else "", end=""),
        Text(age_text, end=""),
        reason,
    )
