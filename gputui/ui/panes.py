"""Columns and rows of the Nodes and GPU pods tables, for wide and narrow terminals.

Pure functions: a NodeSummary or GpuPod in, a tuple of Text cells out (the
first cell is the row's name). Every column has a width, computed from the
terminal's (`node_columns`, `pod_columns`), and every cell is cut to it with `…`
(wide characters counted as two cells), so no name pushes the other columns off
screen; a cut cell keeps its whole value for the filter (`table.Cell`). Narrow
layouts (under 100 columns, e.g. 80x24 over ssh) drop the model and memory
columns and the pods' RESTARTS, and shorten the rest; the pods' GPU-H shows from
140 columns.
"""
from __future__ import annotations

import re
from typing import Mapping

from rich.text import Text

from gputui.kube.gpu import GPU, GpuPod, NodeSummary, Usage
from gputui.sanitize import clean

from . import render
from .names import Differ
from .table import Cell, Column, fit

Widths = Mapping[str, int]
ROOM = 3  # the pane's two borders and the table's scrollbar
PADDING = 2  # a cell's padding, one each side
# kubectl's words, as in `gputui report` and node details: the cell reads allocated/allocatable (`3/8`).
ALLOCATED_TITLE, ALLOCATED_TITLE_NARROW = "GPU ALLOCATED", "ALLOCATED"
HOURS_FROM = 140  # the pods' GPU-H column from this width: under it, REASON (a running pod's use, its bad GPU) keeps its room


def _room(width: int, columns: int) -> int:
    return width - ROOM - PADDING * columns


def _share(rest: int, parts: list[tuple[str, float, int, int]]) -> dict[str, int]:
    """Share `rest` cells among flexible columns: (key, share, least, most); the last takes what is left."""
    out: dict[str, int] = {}
    for key, share, least, most in parts[:-1]:
        out[key] = max(least, min(most, int(rest * share)))
    key, _, least, most = parts[-1]
    out[key] = max(least, min(most, rest - sum(out.values())))
    return out


def node_columns(narrow: bool, width: int | None = None) -> list[Column]:
    width = width or (80 if narrow else 120)
    if narrow:
        fixed = {"status": 8, "gpu": 10, "free": 4, "verdict": 17}
        flex = _share(_room(width, 6) - sum(fixed.values()), [("other", 0.4, 9, 30), ("node", 0.6, 10, 63)])
        w = {**fixed, **flex}
        return [
            Column("node", "NODE", w["node"]),
            Column("status", "STATUS", w["status"]),
            Column("gpu", ALLOCATED_TITLE_NARROW, w["gpu"]),
            Column("free", "FREE", w["free"]),
            Column("verdict", "VERDICT", w["verdict"]),
            Column("other", "MIG/SHARED", w["other"]),
        ]
    # Most telling first; every column fits the terminal.
    fixed = {"status": 8, "gpu": 15, "free": 4, "verdict": 26}
    flex = _share(
        _room(width, 7) - sum(fixed.values()),
        [("model", 0.24, 9, 24), ("other", 0.36, 10, 40), ("node", 0.4, 10, 63)],
    )
    w = {**fixed, **flex}
    return [
        Column("node", "NODE", w["node"]),
        Column("status", "STATUS", w["status"]),
        Column("gpu", ALLOCATED_TITLE, w["gpu"]),
        Column("free", "FREE", w["free"]),
        Column("verdict", "VERDICT", w["verdict"]),
        Column("other", "MIG / SHARED", w["other"]),
        Column("model", "GPU MODEL", w["model"]),
    ]


def widths(columns: list[Column]) -> dict[str, int]:
    return {c.key: c.width or 20 for c in columns}


def clip(cell: Text, width: int, full: str | None = None) -> Cell:
    """A composed cell (styled parts) cut to `width` cells with `…`, keeping its whole text for the filter."""
    out = Cell(full=cell.plain if full is None else full)
    out.append_text(cell)
    if out.cell_len > width:
        out.truncate(max(1, width), overflow="ellipsis")
    return out


def cut(value: str | None, width: int, style: str = "") -> Cell:
    """Untrusted cluster text, made safe and cut to `width` cells; the whole (safe) value kept for the filter."""
    return fit(clean(value or "", 512), width, style)


def _short_model(product: str | None, mib: int | None) -> str:
    """`NVIDIA-A100-SXM4-80GB` -> `A100 80G`: the GPU's name and its memory."""
    base = clean(product or "?", 64)
    for prefix in ("NVIDIA-", "Tesla-"):
        base = base.removeprefix(prefix)
    name = base.split("-", 1)[0] or base
    memory = f"{mib / 1024:.0f}G" if mib else ""
    if not memory:
        found = re.search(r"(\d+)GB", base)
        memory = f"{found.group(1)}G" if found else ""
    return f"{name} {memory}".strip()


def model_cell(summary: NodeSummary, width: int) -> Cell:
    """GFD's product and memory (`A100-SXM4-80GB`), shortened when it does not fit (`A100 80G`)."""
    whole = render.model_and_memory(summary)
    full = clean(summary.facts.product or "", 64) + (f" {summary.facts.memory_mib} MiB" if summary.facts.memory_mib else "")
    if whole.cell_len <= width or whole.plain == "-":
        return clip(whole, width, full)
    return fit(_short_model(summary.facts.product, summary.facts.memory_mib), width, full=full)


def other_cell(summary: NodeSummary, width: int, unknown: str | None) -> Cell:
    """MIG slices and shared GPUs; when they do not fit, every MIG profile summed: `mig 3/23 +2 more`
    (all MIG slices, allocated/allocatable, and how many profiles beyond the first it stands for)."""
    whole = render.other_resources_cell(summary.usage, unknown)
    if whole.cell_len <= width:
        return clip(whole, width)
    mig = [(name, u) for name, u in summary.usage.items() if name.startswith("nvidia.com/mig-")]
    if len(mig) < 2:
        return clip(whole, width)
    rest = {name: u for name, u in summary.usage.items() if not name.startswith("nvidia.com/mig-")}
    out = render.other_resources_cell(rest, unknown) if len([n for n in rest if n != GPU]) else Text(end="")
    if out:
        out.append(" · ", style=render.DIM_STYLE)
    allocated = sum(u.allocated for _, u in mig)
    allocatable = sum(u.allocatable for _, u in mig)
    out.append("mig ")
    if unknown:
        out.append(unknown, style=render.mark_style(unknown))
    else:
        out.append(str(allocated), style=render.BAD_STYLE if allocated > allocatable else "")
    out.append(f"/{allocatable}")
    out.append(f" +{len(mig) - 1} more", style=render.DIM_STYLE)
    return clip(out, width, whole.plain)


def verdict_full(summary: NodeSummary) -> str:
    """Every verdict in words and codes, for the filter."""
    if not summary.problems:
        return " ".join(f"{u.what} {u.why}" for u in summary.unknown) or "ok"
    return " ".join(f"{render.verdict_word(p)[0]} {p.code} {clean(p.subject or '', 100)}" for p in summary.problems)


def _bar_width(usage: Usage | None, narrow: bool) -> int:
    """Narrow, the GPUs some of which are unhealthy say so (`6/7 of 8`) in place of the bar."""
    if not narrow:
        return 4
    return 0 if usage is not None and usage.capacity != usage.allocatable else 3


def node_row(summary: NodeSummary, narrow: bool, unknown: str | None = None, w: Widths | None = None) -> tuple[Text, ...]:
    """unknown: the pods are not listed, allocated and free are not known (`…` or `?` stands for them)."""
    w = w or widths(node_columns(narrow))
    gpu_usage = summary.usage.get(GPU)
    cells = (
        cut(summary.name, w["node"]),
        clip(render.node_status(summary.node), w["status"]),
        clip(render.usage_cell(gpu_usage, bar_width=_bar_width(gpu_usage, narrow), unknown=unknown), w["gpu"]),
        clip(render.free_cell(gpu_usage, unknown), w["free"]),
        clip(render.verdicts(summary.problems, short=narrow, width=w["verdict"], unknown=summary.unknown), w["verdict"], verdict_full(summary)),
        other_cell(summary, w["other"], unknown),
    )
    return cells if narrow else cells + (model_cell(summary, w["model"]),)


def pod_columns(narrow: bool, width: int | None = None) -> list[Column]:
    width = width or (80 if narrow else 120)
    if narrow:
        fixed = {"gpus": 9, "status": 9, "age": 4}
        flex = _share(_room(width, 6) - sum(fixed.values()), [("node", 0.2, 8, 63), ("reason", 0.35, 8, 200), ("pod", 0.45, 16, 80)])
        w = {**fixed, **flex}
        return [
            Column("pod", "NAMESPACE/POD", w["pod"]),
            Column("node", "NODE", w["node"]),
            Column("gpus", "GPUS", w["gpus"]),
            Column("status", "STATUS", w["status"]),
            Column("age", "AGE", w["age"]),
            Column("reason", "REASON", w["reason"]),
        ]
    hours = width >= HOURS_FROM
    fixed = {"status": 10, "restarts": 8, "age": 5, **({"hours": 6} if hours else {})}
    flex = _share(
        _room(width, 7 + hours) - sum(fixed.values()),
        [("node", 0.15, 10, 63), ("gpus", 0.2, 10, 40), ("reason", 0.25, 10, 300), ("pod", 0.4, 16, 100)],
    )
    w = {**fixed, **flex}
    return [
        Column("pod", "NAMESPACE/POD", w["pod"]),
        Column("node", "NODE", w["node"]),
        Column("gpus", "GPUS", w["gpus"]),
        Column("status", "STATUS", w["status"]),
        Column("restarts", "RESTARTS", w["restarts"]),
        Column("age", "AGE", w["age"]),
        *([Column("hours", "GPU-H", w["hours"])] if hours else []),
        Column("reason", "REASON", w["reason"]),
    ]


def gpus_cell(entry: GpuPod) -> Text:
    """The pod's GPUs: `2 gpu`; what it holds through DRA claims by DeviceClass, as every output names it: `1 mig.nvidia.com`
    (the devices themselves are in the node's details); then what its claims ask for that no count says yet."""
    cell = render.gpu_counts(entry.gpu)
    for words in entry.asks:
        cell.append(" + " if cell else "")
        cell.append_text(render.text(words, limit=200))
    return cell


def pod_row(entry: GpuPod, age_text: str, narrow: bool, w: Widths | None = None, note: Text | None = None,
            differ: Differ | None = None, keep: int = 0, hours: str = "") -> tuple[Text, ...]:
    """note: what a bound pod's REASON cell says instead (its GPUs' use, ui/idle.py); differ, keep: what its
    name's cut must keep to read unlike another row's, or to show a filter's match (ui/names.py); hours: its
    allocated GPU-hours so far (render.gpu_hours), from HOURS_FROM columns."""
    w = w or widths(pod_columns(narrow))
    pod = entry.pod
    node = cut(pod.node, w["node"]) if pod.node else fit("<none>", w["node"], render.DIM_STYLE)
    if note is not None and not entry.reason:
        reason = clip(note, w["reason"])
    else:
        reason = clip(render.reason(entry, limit=max(60, w["reason"])), w["reason"], clean(entry.reason or "", 2000))
    name = clip(render.pod_name(pod, w["pod"], differ, keep), w["pod"], f"{clean(pod.namespace, 63)}/{clean(pod.name, 253)}")
    status = clip(render.pod_status(pod), w["status"])
    age_cell = fit(age_text, w["age"])
    if narrow:
        return (name, node, clip(gpus_cell(entry), w["gpus"]), status, age_cell, reason)
    return (
        name,
        node,
        clip(gpus_cell(entry), w["gpus"]),
        status,
        fit(str(pod.restarts), w["restarts"], render.BAD_STYLE if pod.restarts else ""),
        age_cell,
        *([fit(hours, w["hours"], render.DIM_STYLE if hours in ("-", "?") else "")] if "hours" in w else []),
        reason,
    )
