"""The report's formats: JSON (the contract as is), TSV for scripts, an aligned table for people.

Every text from the cluster goes through `printable` before it reaches the terminal.
"""
from __future__ import annotations

import re
import textwrap
import time
from typing import AbstractSet, Any, TextIO

import orjson

from gputui.kube import duration
from gputui.kube.health import age_words
from gputui.kube.idle import idle_for
from gputui.sanitize import BIDI_CONTROLS, printable

from .contract import PodTimes, cluster_problems

WIDTH = 100
COUNT_TITLES = ("CAPACITY", "ALLOCATABLE", "ALLOCATED", "FREE")  # the contract's capacity, allocatable, allocated, free


# Written as \uXXXX escapes in the JSON (orjson writes them as they are): C1 controls (U+0080-U+009F,
# U+009B a terminal's CSI), DEL, and the bidirectional controls, so that printing the JSON to a terminal is safe.
_TERMINAL_UNSAFE = re.compile(f"[\x7f-\x9f{BIDI_CONTROLS}]")


def _escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def write_json(data: dict[str, Any], out: TextIO, created: PodTimes | None = None) -> None:
    text = orjson.dumps(data, option=orjson.OPT_INDENT_2).decode()
    if not text.isascii():  # outside strings JSON is ASCII: each such character is in a string, where an escape means it
        text = _TERMINAL_UNSAFE.sub(_escaped, text)
    out.write(text + "\n")


def _tsv_field(text: str | None) -> str:
    return printable(text).replace("\t", " ")


def write_tsv(data: dict[str, Any], out: TextIO, created: PodTimes | None = None) -> None:
    """Nodes, then GPU pods; each part has a header, and every line starts with its kind.
    GPU maps are RESOURCE=capacity/allocatable/allocated/free (nodes) or RESOURCE=count (pods)."""
    out.write("kind\tname\tready\tschedulable\tproduct\tgpu\tproblems\n")
    for n in data["nodes"]:
        gpus = ",".join(f"{r}=" + "/".join(_count(u[k]) for k in ("capacity", "allocatable", "allocated", "free")) for r, u in n["gpu"].items())
        problems = ",".join(p["code"] for p in n["problems"])
        fields = ["node", n["name"], str(n["ready"]).lower(), str(n["schedulable"]).lower(), n["product"] or "", gpus, problems]
        out.write("\t".join(_tsv_field(f) for f in fields) + "\n")
    out.write("kind\tnamespace\tname\tnode\tphase\tgpu\treason\n")
    for p in data["pods"]:
        gpus = ",".join([*(f"{r}={n}" for r, n in p["gpu"].items()), *p["asks"]])
        fields = ["pod", p["namespace"], p["name"], p["node"] or "", p["phase"], gpus, p["reason"] or ""]
        out.write("\t".join(_tsv_field(f) for f in fields) + "\n")


def _count(value: int | None) -> str:
    """A figure; `?` when unknown (null: pods read in some namespaces only)."""
    return "?" if value is None else str(value)


def short_resource(name: str) -> str:
    return name[len("nvidia.com/"):] if name.startswith("nvidia.com/") else name


def short_product(product: str | None) -> str:
    return (product or "").removeprefix("NVIDIA-")


def _fit(text: str, width: int) -> str:
    """Cut to width with '…' at the end (never a name: see _columns)."""
    text = printable(text)
    if len(text) <= width:
        return text
    return text[: width - 1] + "…"


def age(created: float | None, now: float) -> str:
    """kubectl's AGE: HumanDuration (`5m30s`, `3d4h`), `<unknown>` without a time; the app's too."""
    return duration.age(created, now)


NAME_FLOOR = 16  # of a name, what counts against the lines' width; the rest widens them


def _columns(
    rows: list[list[str]], widths: list[int], numeric: AbstractSet[int] = frozenset(), names: AbstractSet[int] = frozenset(),
    total: int | None = None, tight: AbstractSet[int] = frozenset(),
) -> list[str]:
    """Align rows; widths are maxima, shrunk to the widest cell; longer cells are cut, but never a name
    (its column widens the line: a name is for pasting into kubectl). total: the lines' width at most,
    names within their widths; beyond it the last column gives way down to its title.
    tight: columns one space after the one before (right-aligned numbers), not two."""
    widest = [max(len(printable(r[i])) for r in rows) for i in range(len(widths))]
    capped = [min(w, widest[i]) for i, w in enumerate(widths)]
    seps = ["" if i == 0 else (" " if i in tight else "  ") for i in range(len(widths))]
    if total is not None and len(widths) - 1 not in names:  # what a name takes beyond NAME_FLOOR widens the line instead
        budget = [min(NAME_FLOOR, c) if i in names else c for i, c in enumerate(capped)]
        over = sum(budget) + sum(map(len, seps)) - total
        if over > 0:
            capped[-1] = max(len(printable(rows[0][-1])), capped[-1] - over)
    actual = [widest[i] if i in names else capped[i] for i in range(len(widths))]
    lines = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            cell = _fit(cell, actual[i])
            cells.append(seps[i] + (cell.rjust(actual[i]) if i in numeric else cell.ljust(actual[i])))
        lines.append("".join(cells).rstrip())
    return lines


def stack_line(stack: dict[str, Any]) -> str:
    """'GPU stack: gpu-operator (operator) in gpu-operator; ClusterPolicy cluster-policy: notReady'."""
    if stack["kind"] == "none":
        return "GPU stack: none found (no GPU Operator, no NVIDIA device plugin)"
    text = f"GPU stack: {stack['kind']}"
    if stack["install"] and stack["install"] != "operator":
        text += f" ({stack['install']})"
    if stack["namespace"]:
        text += f" in {printable(stack['namespace'])}"
    policy = stack["cluster_policy"]
    if policy:
        text += f"; {printable(policy.get('kind') or 'ClusterPolicy')} {printable(policy['name'])}: {printable(policy['state'])}"
    elif stack["kind"] == "gpu-operator":
        text += "; ClusterPolicy: unknown"
    return text


def write_table(data: dict[str, Any], out: TextIO, created: PodTimes | None = None, now: float | None = None) -> None:
    """For people: aligned, at most WIDTH columns; pods' AGE from `created`."""
    now = time.time() if now is None else now
    created = created or {}
    nodes = data["nodes"]
    with_gpus = sum(1 for n in nodes if n["gpu"] or n["product"])
    with_problems = sum(1 for n in nodes if n["problems"])
    context = printable(data["context"]) if data["context"] else "in-cluster"
    out.write(_fit(f"context {context}: {len(nodes)} nodes, {with_gpus} with GPUs, {with_problems} with problems", WIDTH) + "\n")
    missing = data.get("missing") or []
    unread = {part["part"] for part in missing}
    if "daemonsets" in unread and data["stack"]["kind"] == "none":
        out.write("GPU stack: unknown (daemonsets could not be read)\n")  # "none found" would be a guess
    else:
        out.write(_fit(stack_line(data["stack"]), WIDTH) + "\n")
    for part in missing:
        text = printable(f"not read: {part['part']}: {part['reason']}")
        out.write(textwrap.fill(text, WIDTH, subsequent_indent="    ") + "\n")
    out.write("\n")

    # One row per GPU resource or problem code, whichever a node has more of;
    # not-ready and cordoned are problem codes, so there is no status column.
    # kubectl's words (kubectl describe node: Capacity, Allocatable, Allocated resources), as in the app.
    rows = [["NODE", "GPU MODEL", "RESOURCE", *COUNT_TITLES, "PROBLEMS"]]
    for n in nodes:
        resources = list(n["gpu"].items())
        codes = [p["code"] for p in n["problems"]] or (["unknown"] if n.get("unknown") else ["ok"])
        for i in range(max(len(resources), len(codes))):
            name, u = resources[i] if i < len(resources) else ("", None)
            counts = [_count(u[k]) for k in ("capacity", "allocatable", "allocated", "free")] if u else ["", "", "", ""]
            rows.append([
                n["name"] if i == 0 else "",
                short_product(n["product"]) if i == 0 else "",
                short_resource(name),
                *counts,
                codes[i] if i < len(codes) else "",
            ])
    for line in _columns(rows, [24, 14, 14, 8, 11, 9, 4, 21], numeric={3, 4, 5, 6}, names={0}, total=WIDTH, tight={4, 5, 6}):
        out.write(line + "\n")

    problems = [("cluster", p) for p in cluster_problems(data)] + [(n["name"], p) for n in nodes for p in n["problems"]]
    if problems:
        out.write("\nProblems:\n")
        for name, p in problems:
            text = printable(f"{name}: {p['code']}: {p['message']}")
            out.write(textwrap.fill(text, WIDTH, initial_indent="  ", subsequent_indent="      ") + "\n")

    out.write("\nGPU pods:\n")
    if not data["pods"]:
        out.write("  none\n")
    else:
        rows = [["NAMESPACE/NAME", "NODE", "PHASE", "GPU", "AGE"]]
        for p in data["pods"]:
            gpus = ",".join([*(f"{short_resource(r)}={n}" for r, n in p["gpu"].items()), *p["asks"]])  # DRA devices by DeviceClass
            rows.append([f"{p['namespace']}/{p['name']}", p["node"] or "<none>", p["phase"], gpus, age(created.get((p["namespace"], p["name"])), now)])
        reasons = {i + 1: p["reason"] for i, p in enumerate(data["pods"]) if p["reason"]}
        for i, line in enumerate(_columns(rows, [42, 20, 9, 16, 9], names={0, 1}, total=WIDTH - 2)):
            out.write("  " + line + "\n")
            if i in reasons:
                out.write(textwrap.fill(printable(reasons[i]), WIDTH, initial_indent="      why: ", subsequent_indent="           ") + "\n")

    out.write("\nTotals:\n")
    if not data["totals"]:
        out.write("  no GPU resources\n")
    else:
        rows = [["RESOURCE", *COUNT_TITLES]]
        for name, u in data["totals"].items():
            rows.append([short_resource(name), *(_count(u[k]) for k in ("capacity", "allocatable", "allocated", "free"))])
        for line in _columns(rows, [30, 8, 11, 9, 6], numeric={1, 2, 3, 4}, tight={2, 3, 4}):
            out.write("  " + line + "\n")
    _write_fits(data.get("fit"), out)
    _write_pools(data.get("dra_pools"), out)
    _write_queues(data.get("queues"), out)
    _write_idle(data.get("idle"), out)
    _write_bad_gpus(data.get("bad_gpus"), out)


def _write_bad_gpus(bad_gpus: list[dict[str, Any]] | None, out: TextIO) -> None:
    """Each bad GPU, newest first: its signals with their age, and the pods on it (or that they cannot be told)."""
    if bad_gpus is None:
        return
    out.write("\nBad GPUs:\n")
    if not bad_gpus:
        out.write("  none: no XID, unhealthy device, device taint or health condition\n")
        return
    for bad in bad_gpus:
        where = f"{bad['node']} {bad['device'] or 'a GPU (which one unknown)'}"
        out.write("  " + printable(where) + (f"  {printable(bad['uuid'])}" if bad["uuid"] and bad["uuid"] not in where else "") + "\n")
        for signal in bad["signals"]:
            when = age_words(signal["age_s"], signal["age_at_least_s"], signal["old"])
            line = f"{signal['text']}" + (f", {when}" if when else "") + f" [{signal['source']}]"
            out.write(textwrap.fill(printable(line), WIDTH, initial_indent="      ", subsequent_indent="        ") + "\n")
        if bad["pods"] is None:
            out.write("      pods: cannot tell which (a node-level signal)\n")
        elif not bad["pods"]:
            out.write("      pods: none holds it\n")
        for pod in bad["pods"] or ():
            owner = ", ".join(x for x in (pod["owner"], f"Workload {pod['workload']}" if pod["workload"] else None) if x)
            line = f"pod {pod['namespace']}/{pod['name']}" + (f" ({owner})" if owner else "") + f" by {', '.join(pod['how'])}"
            out.write(textwrap.fill(printable(line), WIDTH, initial_indent="      ", subsequent_indent="        ") + "\n")


IDLE_SOURCES = {"prometheus": "Prometheus", "exporters": "gputui's own samples of the DCGM exporters"}


def _write_idle(idle: dict[str, Any] | None, out: TextIO) -> None:
    """The pods holding GPUs, the idle longest first: idle for, mean and peak use over the window, memory used."""
    if idle is None:
        return
    window, covered = duration.human_duration(idle["window_s"]), duration.human_duration(idle["covered_s"])
    out.write(f"\nIdle GPUs ({IDLE_SOURCES.get(idle['source'], idle['source'])}: {covered} of the last {window} covered):\n")
    if not idle["pods"]:
        out.write("  no pod holds GPUs\n")
        return
    rows = [["NAMESPACE/NAME", "NODE", "GPUS", "IDLE FOR", "MEAN", "PEAK", "MEMORY"]]
    unknown: dict[int, str] = {}  # row -> why it has no figures, on a line of its own below it
    for p in idle["pods"]:
        known = p["idle_s"] is not None
        if not known:
            unknown[len(rows)] = p.get("why") or "no samples"
        rows.append([
            f"{p['namespace']}/{p['name']}", p["node"] or "", str(p["gpus"]),
            idle_for(p["idle_s"], p.get("idle_at_least", False)) if known else "?",
            *(_percent(p[k]) for k in ("mean_util", "peak_util")),
            "" if p["fb_used_mib"] is None else f"{p['fb_used_mib']} MiB",
        ])
    for i, line in enumerate(_columns(rows, [42, 20, 4, 10, 5, 5, 11], numeric={2, 4, 5, 6}, names={0, 1}, total=WIDTH - 2)):
        out.write("  " + line + "\n")
        if i in unknown:
            out.write(textwrap.fill(printable(unknown[i]), WIDTH, initial_indent="      why: ", subsequent_indent="           ") + "\n")


def _percent(value: float | None) -> str:
    return "" if value is None else f"{value:.0f}%"


def _write_fits(fit: dict[str, dict[str, Any]] | None, out: TextIO) -> None:
    """What fits where: per resource, then per DRA DeviceClass (a name without `/`), nodes that could take a pod of
    1, 2, 4, 8 (devices of one claim) now, the largest free block, stranded; `?` and why where a class is not known."""
    if fit is None:
        out.write("\nFits: unknown (the pods are not known)\n")
        return
    if not fit:
        return  # no GPU resources: Totals says so
    out.write("\nFits (nodes that could take a pod of N now; stranded: free where no GPU pod can go now;\n"
              "      DRA DeviceClasses: N devices in one claim):\n")
    rows = [["RESOURCE", "N=1", "2", "4", "8", "LARGEST", "STRANDED"]]
    unknown = {name: f["unknown"] for name, f in fit.items() if "unknown" in f}
    for name, f in fit.items():
        figures = ["?"] * 6 if name in unknown else [str(f[k]) for k in ("1", "2", "4", "8", "largest", "stranded")]
        rows.append([short_resource(name), *figures])
    for line in _columns(rows, [30, 4, 4, 4, 4, 7, 8], numeric={1, 2, 3, 4, 5, 6}):
        out.write("  " + line + "\n")
    for name, why in unknown.items():
        out.write(textwrap.fill(printable(f"{name}: {why}"), WIDTH, initial_indent="  ?: ", subsequent_indent="     ") + "\n")


def _write_pools(pools: list[dict[str, Any]] | None, out: TextIO) -> None:
    """The DRA pools: per DeviceClass and pool, devices, allocated, tainted (no new claim gets them), free."""
    if not pools:
        return
    out.write("\nDRA pools (devices each DeviceClass selects; tainted: NoSchedule/NoExecute, no new claim gets them):\n")
    rows = [["CLASS", "POOL", "DEVICES", "ALLOCATED", "TAINTED", "FREE"]]
    for p in pools:
        rows.append([p["class"], p["pool"], *(str(p[k]) for k in ("devices", "allocated", "tainted", "free"))])
    for line in _columns(rows, [24, 30, 7, 9, 7, 5], numeric={2, 3, 4, 5}, names={0, 1}, total=WIDTH - 2):
        out.write("  " + line + "\n")


def _write_queues(queues: dict[str, Any] | None, out: TextIO) -> None:
    """Kueue's ClusterQueues, one line per GPU resource, then the pending GPU Workloads with why; nothing without Kueue."""
    if queues is None:
        return
    out.write("\nKueue ClusterQueues (USED: quota reserved by admitted Workloads; FREE: nominal quota left):\n")
    cluster_queues = queues["cluster_queues"]
    if cluster_queues is None:
        out.write("  unknown (clusterqueues could not be read)\n")
    elif not cluster_queues:
        out.write("  none\n")
    else:
        rows = [["CLUSTERQUEUE", "COHORT", "RESOURCE", "QUOTA", "USED", "FREE", "PENDING", "ADMITTED"]]
        for q in cluster_queues:
            resources = list(q["gpu"].items()) or [("", None)]
            for i, (name, g) in enumerate(resources):
                figures = [_count(g[k]) for k in ("quota", "used", "free")] if g else ["-", "-", "-"]
                rows.append([q["name"] if i == 0 else "", (q["cohort"] or "-") if i == 0 else "", short_resource(name) or "no GPU quota",
                             *figures, _count(q["pending"]) if i == 0 else "", _count(q["admitted"]) if i == 0 else ""])
        for line in _columns(rows, [24, 16, 14, 5, 4, 4, 7, 8], numeric={3, 4, 5, 6, 7}, names={0, 1}, total=WIDTH - 2):
            out.write("  " + line + "\n")
    pending = queues["pending_workloads"]
    if pending is None:
        out.write("  pending Workloads unknown (workloads could not be read)\n")
        return
    for w in pending:
        gpus = ",".join(f"{short_resource(r)}={n}" for r, n in w["gpu"].items())
        out.write(printable(f"  pending {w['namespace']}/{w['name']} ({gpus})") + "\n")  # whole: names are for pasting
        out.write(textwrap.fill(printable(w["reason"]), WIDTH, initial_indent="      why: ", subsequent_indent="           ") + "\n")
