"""The Capacity screen (`c`): what fits where, per GPU resource and per DRA DeviceClass (gputui/kube/fit.py).

How many nodes could take a pod of 1, 2, 4 and 8 (devices of one claim, for a
DeviceClass) now, the largest free block, the free on usable nodes, and the
stranded free devices with their nodes and why; then the DRA pools: per
DeviceClass and pool, its devices, allocated, tainted and free. The screen
renders what the model holds; the app calls `show(model, context)` (seam.py) on the
top screen after each coalesced refresh.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Mapping

from rich.text import Text
from textual.binding import Binding

from gputui.kube.dra import ClassDevices
from gputui.kube.fit import SIZES, ResourceFit

from . import render
from .page import ModelPage
from .seam import ViewContext

if TYPE_CHECKING:
    from gputui.kube.model import ClusterModel

STRANDED_SHOWN = 12  # stranded nodes named per resource; the rest are counted
POOLS_SHOWN = 24  # DRA pools named; the rest are counted
_COLUMNS = [("N=1", 5), *((str(size), 5) for size in SIZES[1:]), ("LARGEST", 9), ("FREE", 7), ("STRANDED", 10)]
RESOURCE_WIDTH = 20


def capacity_text(fits: Mapping[str, ResourceFit] | None, mark: str | None, basis: Text | None,
                  classes: ClassDevices | None = None) -> Text:
    """The whole screen as one Text (pure). fits None: not known, each figure stands as `mark`
    (`…` while the pods are listed, `?` when they cannot be read); basis: what the figures rest on
    when that is not a live watch (render.allocation_basis); classes: the DRA pools."""
    out = Text(end="")
    out.append("Nodes that could take a pod of N now", style="bold")
    out.append(" (Ready, not cordoned, no taint a GPU pod would not tolerate, N free)\n", style=render.DIM_STYLE)
    if basis is not None:
        out.append_text(basis)
        out.append("\n")
    out.append("\n")
    out.append(f"{'RESOURCE':<{RESOURCE_WIDTH}}" + "".join(f"{title:>{width}}" for title, width in _COLUMNS) + "\n", style=render.DIM_STYLE)
    if fits is None:
        unknown = mark or render.UNKNOWN_MARK
        out.append(f"{'every resource':<{RESOURCE_WIDTH}}", style=render.DIM_STYLE)
        for _, width in _COLUMNS:
            out.append(f"{unknown:>{width}}", style=render.mark_style(unknown))
        out.append("\n\nnot known until every pod is listed: figures from part of them would be wrong", style=render.WARN_STYLE)
        return out
    if not fits:
        out.append("no GPU resources advertised", style=render.DIM_STYLE)
        return out
    dra_heading = False
    for name, f in fits.items():
        if f.device_class and not dra_heading:
            dra_heading = True
            out.append("DRA DeviceClasses (N devices in one claim; not for pods asking for gpu)\n", style=render.DIM_STYLE)
        out.append_text(render.text(render.short_resource(name)[: RESOURCE_WIDTH - 1].ljust(RESOURCE_WIDTH), style="bold"))
        if f.unknown is not None:
            for _, width in _COLUMNS:
                out.append(f"{'?':>{width}}", style=render.mark_style("?"))
            out.append("  ")
            out.append_text(render.text(f.unknown, style=render.WARN_STYLE, limit=200))
            out.append("\n")
            continue
        for (_, width), n in zip(_COLUMNS, f.nodes_for, strict=False):
            out.append(f"{n:>{width}}", style=render.DIM_STYLE if n == 0 else "")
        out.append(f"{f.largest:>{_COLUMNS[4][1]}}{f.free:>{_COLUMNS[5][1]}}")
        out.append(f"{f.stranded:>{_COLUMNS[6][1]}}", style=render.WARN_STYLE if f.stranded else render.DIM_STYLE)
        out.append("\n")

    out.append("\n")
    out.append("Stranded", style="bold")
    out.append(": free where no GPU pod can go now (the usual nvidia.com/gpu taint strands nothing)\n", style=render.DIM_STYLE)
    stranded = [f for f in fits.values() if f.stranded_nodes]
    if not stranded:
        out.append("  none\n", style=render.DIM_STYLE)
    for f in stranded:
        for i, (node, free, why) in enumerate(f.stranded_nodes[:STRANDED_SHOWN]):
            out.append("  ")
            label = render.short_resource(f.resource) if i == 0 else ""
            out.append_text(render.text(label[: RESOURCE_WIDTH - 1].ljust(RESOURCE_WIDTH - 2), style="bold"))
            out.append_text(render.text(node, limit=63))
            out.append(f" {free} free  ")
            out.append_text(render.text(why, style=render.WARN_STYLE, limit=200))
            out.append("\n")
        more = len(f.stranded_nodes) - STRANDED_SHOWN
        if more > 0:
            out.append(" " * RESOURCE_WIDTH + f"+{more} more nodes\n", style=render.DIM_STYLE)
    if classes is not None and classes.pools:
        out.append_text(pools_text(classes))
    out.rstrip()
    return out


def pools_text(classes: ClassDevices) -> Text:
    """The DRA pools: per DeviceClass and pool, its devices, allocated, tainted (NoSchedule/NoExecute: no new claim
    gets them) and free."""
    out = Text("\n", end="")
    out.append("DRA pools", style="bold")
    out.append(": devices each DeviceClass selects, per pool (tainted: no new claim gets them)\n", style=render.DIM_STYLE)
    out.append(f"  {'CLASS':<{RESOURCE_WIDTH - 2}}{'POOL':<24}{'DEVICES':>8}{'ALLOCATED':>10}{'TAINTED':>8}{'FREE':>6}\n", style=render.DIM_STYLE)
    for pool in classes.pools[:POOLS_SHOWN]:
        out.append("  ")
        out.append_text(render.text(pool.device_class[: RESOURCE_WIDTH - 3].ljust(RESOURCE_WIDTH - 2), style="bold"))
        name = render.text(pool.pool, limit=63)  # whole: a pool is a node's name, for pasting
        out.append_text(name)
        out.append(" " * max(1, 24 - name.cell_len))
        out.append(f"{pool.devices:>8}{pool.allocated:>10}")
        out.append(f"{pool.tainted:>8}", style=render.WARN_STYLE if pool.tainted else render.DIM_STYLE)
        out.append(f"{pool.free:>6}", style=render.DIM_STYLE if pool.free == 0 else "")
        out.append("\n")
    more = len(classes.pools) - POOLS_SHOWN
    if more > 0:
        out.append(f"  +{more} more pools\n", style=render.DIM_STYLE)
    return out


class CapacityScreen(ModelPage):
    """What fits where, redrawn from the model after each coalesced refresh."""

    BINDINGS = [Binding("c", "back", "Back", show=False)]
    PAGE_TITLE = "Capacity"

    def body(self, model: ClusterModel | None, context: ViewContext) -> Text:
        if model is None:
            return Text("connecting…", style=render.DIM_STYLE)
        mark, basis = render.allocation_basis(model.states, time.monotonic())
        return capacity_text(model.fit(), mark, basis, model.dra_view().classes)
