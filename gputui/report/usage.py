"""`gputui report --usage`: GPU-hours per group from Prometheus (kube/usage.py), as JSON or a table.

Every text from Prometheus (a namespace, a label's value, a node) goes through `printable` before it
reaches the terminal.
"""
from __future__ import annotations

from typing import TextIO

from gputui.kube.config import Impersonation, connect
from gputui.kube.duration import human_duration
from gputui.kube.usage import Prometheus, UsageSettings, UsageView, hours_text, usage
from gputui.sanitize import printable

NO_PROMETHEUS = ("--usage needs a Prometheus that scrapes kube-state-metrics and the DCGM exporters: "
                 "--prometheus URL (or NAMESPACE/SERVICE:PORT), or [idle] prometheus in the config file")


async def collect_usage(where: str, settings: UsageSettings, *, kubeconfig: str | None = None, context: str | None = None,
                        exec_timeout: float = 60.0, impersonate: Impersonation | None = None) -> UsageView:
    """The figures from Prometheus at a URL, or at a service reached through the cluster's API server
    (ConnectError when the cluster cannot be reached, UsageError when Prometheus cannot answer)."""
    if where.startswith(("http://", "https://")):
        source = Prometheus(where)
        try:
            return await usage(source, settings)
        finally:
            await source.close()
    async with await connect(kubeconfig, context, exec_timeout=exec_timeout, impersonate=impersonate) as conn:
        return await usage(Prometheus(where, conn.api), settings)


def write_usage_json(view: UsageView, out: TextIO) -> None:
    from .formats import write_json  # noqa: PLC0415

    write_json({"usage": view.to_json()}, out)


def _cell(value: float | None) -> str:
    return "?" if value is None else hours_text(value)


def write_usage_table(view: UsageView, out: TextIO) -> None:
    kind = view.by.split(":", 1)[0] if not view.by.startswith("label:") else view.by[6:]
    covered = ", ".join(f"{printable(c) + ': ' if c else ''}{human_duration(s)}" for c, s in sorted(view.covered_s.items())) or "nothing"
    out.write(f"GPU-hours over {human_duration(view.window_s)} (covered: {covered}), by {printable(kind)}, "
              f"from Prometheus {printable(view.source)}: {view.method_words}\n")
    clusters = any(row.cluster for row in view.rows)
    head = (["CLUSTER"] if clusters else []) + [printable(kind).upper(), "RESOURCE", "ALLOCATED", "USED", "RATIO", "IDLE", "SHARED", "PEAK"]
    lines = [head]
    notes = []
    for row in view.rows:
        ratio = "?" if row.ratio is None else f"{row.ratio * 100:.0f}%"
        group = printable(row.group) or "?"
        cells = ([printable(row.cluster) or "?"] if clusters else []) + [
            group, printable(row.resource), _cell(row.allocated_h), _cell(row.used_h), ratio,
            _cell(row.idle_h), _cell(row.shared_h), f"{row.peak:g}"]
        lines.append(cells)
        notes += [f"{group} {printable(row.resource)}: {note}" for note in row.notes]
    if len(lines) == 1:
        out.write("no GPU was allocated in the window\n")
    else:
        widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
        numeric = set(range(len(head) - 6, len(head)))
        for line in lines:
            out.write("  ".join(c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths, strict=True))).rstrip() + "\n")
    for note in notes:
        out.write(f"note: {note}\n")
    for missing in view.missing:
        out.write(f"missing: {missing}\n")


def write_usage(view: UsageView, out: TextIO, output: str) -> None:
    (write_usage_json if output == "json" else write_usage_table)(view, out)
