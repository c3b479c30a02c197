"""`gputui report`: list the cluster once, print its GPUs, exit.

Exit status: 0 when no node has a problem, 1 when some do, 2 on usage or
connection errors (one line on stderr, no traceback).
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import textwrap
import time
from typing import Any, TextIO

import orjson

from .kube import gpu
from .kube.config import ConnectError, Forbidden, add_connection_args, check, connect
from .kube.model import DAEMONSETS, EVENTS, NODES, PODS, ClusterModel
from .kube.stack import ClusterPolicyStatus, components_json, policy_problems
from .kube.watch import FORBIDDEN

SYNC_TIMEOUT = 60.0
EXTRA_SYNC_TIMEOUT = 10.0
PodTimes = dict[tuple[str, str], float | None]
WIDTH = 100


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="print the cluster's GPU nodes, allocation and problems once, then exit",
        description="List the cluster once and print its GPUs: the GPU stack, per node capacity, allocatable, "
        "allocated and free, the stack's components, DCGM readings, problems, and the pods holding or waiting for GPUs. "
        "Exit 0: no problem; 1: some node (or the GPU Operator) has one; 2: usage or connection error.",
    )
    parser.add_argument("-o", "--output", choices=("table", "json", "tsv"), default="table", help="output format (default: table)")
    add_connection_args(parser)
    parser.add_argument("-n", "--namespace", metavar="NAMESPACE", help="list only the GPU pods of this namespace")
    parser.add_argument(
        "--resource", metavar="NAME", action="append", default=[],
        help="count this extended resource as a GPU too (repeatable), e.g. amd.com/gpu",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    for name in args.resource:
        if "/" not in name:
            print(f"gputui report: --resource {name}: expected a domain-prefixed resource name such as amd.com/gpu", file=sys.stderr)
            return 2
    try:
        data, created = asyncio.run(collect(args.kubeconfig, args.context, args.namespace, frozenset(args.resource)))
    except ConnectError as exc:
        print(f"gputui report: {exc}", file=sys.stderr)
        return 2
    write = {"json": write_json, "tsv": write_tsv, "table": write_table}[args.output]
    write(data, sys.stdout, created)
    return 1 if cluster_problems(data) or any(n["problems"] for n in data["nodes"]) else 0


def cluster_problems(data: dict[str, Any]) -> list[dict[str, str]]:
    """operator-not-ready, from the contract's stack (the JSON has no cluster-level problem list)."""
    policy = data["stack"]["cluster_policy"]
    return [{"code": p.code, "message": p.message} for p in policy_problems(ClusterPolicyStatus(**policy) if policy else None)]


async def collect(
    kubeconfig: str | None, context: str | None, namespace: str | None, extra: frozenset[str] = frozenset()
) -> tuple[dict[str, Any], PodTimes]:
    """Connect, sync once; return the report as the JSON contract's dict, and the pods' creation times."""
    async with await connect(kubeconfig, context) as conn:
        await check(conn)
        model = ClusterModel(conn.api, resources=gpu.GpuResources(extra))
        async with model:
            synced = await model.wait_synced(SYNC_TIMEOUT, kinds=(NODES, PODS))
            for kind in (NODES, PODS):
                state = model.states[kind]
                if state.phase == FORBIDDEN:
                    raise Forbidden(f"forbidden (403): {state.error}")
                if not state.synced:
                    why = state.error or ("timed out" if not synced else "not listed")
                    raise ConnectError(f"cannot list {kind} from {conn.server}: {why}")
            # The rest (events, the GPU stack's kinds) only adds detail: wait for it a little longer at most.
            await model.wait_synced(EXTRA_SYNC_TIMEOUT)
            if model.states[EVENTS].phase == FORBIDDEN:
                print("gputui report: warning: events are forbidden; pending pods' reasons come from their conditions only", file=sys.stderr)
            if model.states[DAEMONSETS].phase == FORBIDDEN:
                print("gputui report: warning: daemonsets are forbidden; the GPU stack and its components are unknown", file=sys.stderr)
            await model.metrics.poll_once()
            data = as_contract(model, conn.context, namespace)
            created = {(g.pod.namespace, g.pod.name): g.pod.created for g in model.gpu_pods(namespace=namespace)}
            return data, created


def as_contract(model: ClusterModel, context: str | None, namespace: str | None) -> dict[str, Any]:
    """The stable JSON contract (documented in the README)."""
    summaries = model.node_summaries()
    return {
        "context": context,
        "stack": model.stack().to_json(),
        "nodes": [node_contract(model, s) for s in summaries],
        "pods": [
            {
                "namespace": g.pod.namespace,
                "name": g.pod.name,
                "node": g.pod.node,
                "phase": g.pod.phase,
                "gpu": dict(g.gpu),
                "reason": g.reason,
            }
            for g in model.gpu_pods(namespace=namespace)
        ],
        "totals": {name: u.as_dict() for name, u in gpu.totals(summaries).items()},
    }


def node_contract(model: ClusterModel, s: gpu.NodeSummary) -> dict[str, Any]:
    node: dict[str, Any] = {
        "name": s.name,
        "ready": s.node.ready is True,
        "schedulable": not s.node.unschedulable,
        "product": s.facts.product,
        "gpu": {name: u.as_dict() for name, u in s.usage.items()},
        "problems": [{"code": p.code, "message": p.message} for p in s.problems],
        "components": components_json(s.components),
    }
    metrics = model.node_metrics(s.name)
    if metrics is not None and metrics.current:
        node["gpus"] = [reading.to_json() for reading in metrics.readings]
    return node


# -- output ----------------------------------------------------------------------
def write_json(data: dict[str, Any], out: TextIO, created: PodTimes | None = None) -> None:
    out.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")


def printable(text: str | None) -> str:
    """Cluster text made safe for a terminal: control characters (ANSI escapes included) become '?'."""
    if not text:
        return ""
    return "".join(ch if ch.isprintable() else "?" for ch in text)


def _tsv_field(text: str | None) -> str:
    return printable(text).replace("\t", " ")


def write_tsv(data: dict[str, Any], out: TextIO, created: PodTimes | None = None) -> None:
    """Nodes, then GPU pods; each part has a header, and every line starts with its kind.
    GPU maps are RESOURCE=capacity/allocatable/allocated/free (nodes) or RESOURCE=count (pods)."""
    out.write("kind\tname\tready\tschedulable\tproduct\tgpu\tproblems\n")
    for n in data["nodes"]:
        gpus = ",".join(f"{r}={u['capacity']}/{u['allocatable']}/{u['allocated']}/{u['free']}" for r, u in n["gpu"].items())
        problems = ",".join(p["code"] for p in n["problems"])
        fields = ["node", n["name"], str(n["ready"]).lower(), str(n["schedulable"]).lower(), n["product"] or "", gpus, problems]
        out.write("\t".join(_tsv_field(f) for f in fields) + "\n")
    out.write("kind\tnamespace\tname\tnode\tphase\tgpu\treason\n")
    for p in data["pods"]:
        gpus = ",".join(f"{r}={n}" for r, n in p["gpu"].items())
        fields = ["pod", p["namespace"], p["name"], p["node"] or "", p["phase"], gpus, p["reason"] or ""]
        out.write("\t".join(_tsv_field(f) for f in fields) + "\n")


def short_resource(name: str) -> str:
    return name[len("nvidia.com/"):] if name.startswith("nvidia.com/") else name


def short_product(product: str | None) -> str:
    return (product or "").removeprefix("NVIDIA-")


def _fit(text: str, width: int, middle: bool = False) -> str:
    """Cut to width with '…': at the end, or in the middle for names (their ends tell them apart)."""
    text = printable(text)
    if len(text) <= width:
        return text
    if middle and width >= 9:
        head = (width - 1) // 2
        return text[:head] + "…" + text[len(text) - (width - 1 - head):]
    return text[: width - 1] + "…"


def age(created: float | None, now: float) -> str:
    if created is None:
        return "?"
    seconds = max(0, int(now - created))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * (2 if unit != "m" else 1):
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _columns(rows: list[list[str]], widths: list[int], numeric: set[int] = frozenset(), names: set[int] = frozenset()) -> list[str]:
    """Align rows; widths are maxima, shrunk to the widest cell; longer cells are cut."""
    actual = [min(w, max(len(printable(r[i])) for r in rows)) for i, w in enumerate(widths)]
    lines = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            cell = _fit(cell, actual[i], middle=i in names)
            cells.append(cell.rjust(actual[i]) if i in numeric else cell.ljust(actual[i]))
        lines.append("  ".join(cells).rstrip())
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
        text += f"; ClusterPolicy {printable(policy['name'])}: {printable(policy['state'])}"
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
    out.write(_fit(stack_line(data["stack"]), WIDTH) + "\n\n")

    # One row per GPU resource or problem code, whichever a node has more of;
    # not-ready and cordoned are problem codes, so there is no status column.
    rows = [["NODE", "GPU MODEL", "RESOURCE", "CAP", "ALLOC", "USED", "FREE", "PROBLEMS"]]
    for n in nodes:
        resources = list(n["gpu"].items())
        codes = [p["code"] for p in n["problems"]] or ["ok"]
        for i in range(max(len(resources), len(codes))):
            name, u = resources[i] if i < len(resources) else ("", None)
            counts = [str(u[k]) for k in ("capacity", "allocatable", "allocated", "free")] if u else ["", "", "", ""]
            rows.append([
                n["name"] if i == 0 else "",
                short_product(n["product"]) if i == 0 else "",
                short_resource(name),
                *counts,
                codes[i] if i < len(codes) else "",
            ])
    for line in _columns(rows, [20, 16, 12, 4, 5, 4, 4, 21], numeric={3, 4, 5, 6}, names={0}):
        out.write(_fit(line, WIDTH) + "\n")

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
            gpus = ",".join(f"{short_resource(r)}={n}" for r, n in p["gpu"].items())
            rows.append([f"{p['namespace']}/{p['name']}", p["node"] or "<none>", p["phase"], gpus, age(created.get((p["namespace"], p["name"])), now)])
        reasons = {i + 1: p["reason"] for i, p in enumerate(data["pods"]) if p["reason"]}
        for i, line in enumerate(_columns(rows, [42, 20, 9, 14, 5], names={0, 1})):
            out.write(_fit("  " + line, WIDTH) + "\n")
            if i in reasons:
                out.write(textwrap.fill(printable(reasons[i]), WIDTH, initial_indent="      why: ", subsequent_indent="           ") + "\n")

    out.write("\nTotals:\n")
    if not data["totals"]:
        out.write("  no GPU resources\n")
    else:
        rows = [["RESOURCE", "CAP", "ALLOC", "USED", "FREE"]]
        for name, u in data["totals"].items():
            rows.append([short_resource(name), *(str(u[k]) for k in ("capacity", "allocatable", "allocated", "free"))])
        for line in _columns(rows, [30, 6, 6, 6, 6], numeric={1, 2, 3, 4}):
            out.write("  " + line + "\n")
