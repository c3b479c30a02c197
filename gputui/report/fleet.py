"""`gputui report --all-contexts | --contexts a,b,c`: every cluster read at once, one report each, and the fleet's totals.

    names = choose_contexts(all_names, ["prod-*", "staging"])      # gputui.kube.fleet: globs, kubeconfig order
    fleet = await collect_fleet(kubeconfig, names, timeout=30.0)    # {"clusters": [...], "totals": {...}}
    fleet_exit(fleet)                                               # 2 if one could not be read, else 1 if one has a problem, else 0

Each cluster has its own connection, credentials (an exec plugin per context) and timeout: one that is
unreachable, slow or forbidden gives its own `error` and never holds the others back. The totals add up
only the clusters that were read, and say which were not.
"""
from __future__ import annotations

import asyncio
import io
import sys
from typing import Any, Callable, Mapping, Sequence, TextIO

from gputui.kube.config import ConnectError
from gputui.kube.gpu import model_key
from gputui.sanitize import printable

from .contract import PodTimes, collect, has_problems
from .formats import WIDTH, _fit, _tsv_field as _tsv, write_json, write_table, write_tsv

CLUSTER_TIMEOUT = 30.0
COUNTS = ("capacity", "allocatable", "allocated", "free")


async def collect_fleet(
    kubeconfig: str | None, contexts: list[str], *, timeout: float = CLUSTER_TIMEOUT,
    warn: Callable[[str], None] | None = None, **options: Any,
) -> tuple[dict[str, Any], dict[str, PodTimes]]:
    """Every context's report, read concurrently; `options` go to `collect` (namespaces, extra, metrics, ...)."""
    say = warn or (lambda line: print(f"gputui report: warning: {line}", file=sys.stderr))

    async def one(context: str) -> tuple[dict[str, Any], PodTimes]:
        def context_warning(line: str) -> None:
            say(f"{context}: {line}")
        try:
            async with asyncio.timeout(timeout):
                data, created = await collect(kubeconfig, context, warn=context_warning, **options)
        except TimeoutError:
            return {"context": context, "error": f"not read within {timeout:g} s"}, {}
        except ConnectError as exc:
            return {"context": context, "error": str(exc)}, {}
        return {"context": context, "error": None, **{k: v for k, v in data.items() if k != "context"}}, created

    results = await asyncio.gather(*(one(context) for context in contexts))
    clusters = [data for data, _ in results]
    return {"clusters": clusters, "totals": fleet_totals(clusters)}, {c: created for c, (_, created) in zip(contexts, results, strict=True)}


def fleet_totals(clusters: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """GPUs added up by resource and by GPU model (whole GPUs; MIG slices per profile: gpu.model_key) over the
    clusters that were read; those that were not are named (their GPUs are not in the figures)."""
    by_resource: dict[str, dict[str, int | None]] = {}
    by_model: dict[str, dict[str, int | None]] = {}
    read = [c for c in clusters if c.get("error") is None]
    for cluster in read:
        for name, usage in cluster["totals"].items():
            add(by_resource.setdefault(name, dict.fromkeys(COUNTS, 0)), usage)
        for node in cluster["nodes"]:
            if node.get("product"):
                for resource, usage in node["gpu"].items():
                    add(by_model.setdefault(model_key(node["product"], resource), dict.fromkeys(COUNTS, 0)), usage)
    return {
        "gpu": by_resource,
        "by_model": dict(sorted(by_model.items())),
        "clusters_read": len(read),
        "clusters_not_read": [c["context"] for c in clusters if c.get("error") is not None],
        "clusters_with_problems": [c["context"] for c in read if has_problems(c)],
    }


def add(total: dict[str, int | None], usage: Mapping[str, int | None]) -> None:
    """Unknown (null: a cluster whose pods are read in some namespaces only) makes the total unknown."""
    for key in COUNTS:
        value, sum_so_far = usage.get(key, 0), total[key]
        total[key] = None if value is None or sum_so_far is None else sum_so_far + value


def fleet_exit(fleet: Mapping[str, Any]) -> int:
    totals = fleet["totals"]
    if totals["clusters_not_read"]:
        return 2
    return 1 if totals["clusters_with_problems"] else 0


def totals_lines(fleet: Mapping[str, Any]) -> list[str]:
    """The fleet's totals for people: a line per resource, then per GPU model."""
    totals = fleet["totals"]
    count = len(fleet["clusters"])
    lines = [f"fleet: {totals['clusters_read']} of {count} clusters read"
             + (f"; not read: {printable(', '.join(totals['clusters_not_read']))}" if totals["clusters_not_read"] else "")
             + (f"; with problems: {printable(', '.join(totals['clusters_with_problems']))}" if totals["clusters_with_problems"] else "")]
    for title, table in (("", totals["gpu"]), ("model ", totals["by_model"])):
        for name, u in table.items():
            shown = {key: "?" if value is None else value for key, value in u.items()}  # ?: some cluster's pods not all visible
            lines.append(f"  {title}{printable(name)}: {shown['allocated']}/{shown['allocatable']} allocated, {shown['free']} free "
                         f"(capacity {shown['capacity']})")
    return lines


def write_fleet(fleet: Mapping[str, Any], out: TextIO, created: Mapping[str, PodTimes], output: str) -> None:
    """JSON: the fleet as is. Table: a section per cluster, then the totals. TSV: each cluster's
    lines, each led by its context (an `error` line for one that was not read)."""
    if output == "json":
        write_json(dict(fleet), out)
        return
    for cluster in fleet["clusters"]:
        context = cluster["context"]
        if output == "tsv":
            if cluster["error"] is not None:
                out.write(f"{_tsv(context)}\terror\t{_tsv(cluster['error'])}\n")
                continue
            lines = io.StringIO()
            write_tsv(cluster, lines, created.get(context))
            out.writelines(f"{_tsv(context)}\t{line}\n" for line in lines.getvalue().splitlines())
            continue
        if cluster["error"] is not None:
            out.write(_fit(f"context {context}: not read: {cluster['error']}", WIDTH) + "\n\n")
            continue
        write_table(cluster, out, created.get(context))
        out.write("\n")
    if output == "table":
        for line in totals_lines(fleet):
            out.write(_fit(line, WIDTH) + "\n")
