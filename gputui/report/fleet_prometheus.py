"""`gputui report --all-contexts` with a fleet's Prometheus (`--fleet-prometheus URL`, `[fleet] prometheus`):
every cluster's row from two PromQL queries (kube/fleet_prometheus.py), whatever their number, and the totals.

    fleet = await collect_prometheus_fleet(url, FleetQueries("cluster"), contexts, {"prod-eu": "gke_prod-eu"})
    write_prometheus_fleet(fleet, sys.stdout, "table")
    prometheus_fleet_exit(fleet)     # 2 if Prometheus did not answer, else 1 if a cluster has a problem, else 0

Each cluster says how old its data is, and what a live watch would show that Prometheus' series cannot. No Textual.
"""
from __future__ import annotations

import time
from typing import Any, Mapping, TextIO

from gputui.kube import duration
from gputui.kube.fleet import ClusterRow
from gputui.kube.fleet_prometheus import FleetQueries, PrometheusFleet
from gputui.kube.gpu import Usage
from gputui.kube.prometheus import Prometheus
from gputui.sanitize import printable

from .fleet import add
from .formats import WIDTH, _fit, _tsv_field, short_resource, write_json


def row_json(row: ClusterRow, context: str | None, now: float) -> dict[str, Any]:
    def usages(table: Mapping[str, Usage]) -> dict[str, dict[str, int]]:
        return {name: usage.as_dict() for name, usage in table.items()}

    return {
        "cluster": row.context, "context": context, "age_s": None if row.updated is None else round(now - row.updated),
        "gpu": None if row.totals is None else usages(row.totals), "by_model": usages(row.by_model),
        "gpu_nodes": row.gpu_nodes, "problem_nodes": row.problem_nodes,
        "worst": None if row.worst is None else {"code": row.worst[0], "node": row.worst[1], "subject": row.worst_subject},
        "pending": row.pending, "longest_wait_s": None if row.longest_wait is None else round(row.longest_wait),
        "not_known": list(row.without),
    }


async def collect_prometheus_fleet(url: str, queries: FleetQueries, contexts: list[str],
                                   cluster_contexts: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The fleet as Prometheus has it; `error` (one line) when it did not answer."""
    source = PrometheusFleet(Prometheus(url), queries)
    try:
        rows = await source.refresh()
    finally:
        await source.close()
    now, mapping = time.time(), dict(cluster_contexts or {})
    clusters = [row_json(row, c if (c := mapping.get(name, name)) in contexts else None, now) for name, row in rows.items()]
    by_resource: dict[str, dict[str, int | None]] = {}
    by_model: dict[str, dict[str, int | None]] = {}
    for cluster in clusters:
        for name, usage in (cluster["gpu"] or {}).items():
            add(by_resource.setdefault(name, dict.fromkeys(("capacity", "allocatable", "allocated", "free"), 0)), usage)
        for product, usage in cluster["by_model"].items():
            add(by_model.setdefault(product, dict.fromkeys(("capacity", "allocatable", "allocated", "free"), 0)), usage)
    return {
        "source": "prometheus", "prometheus": url, "cluster_label": queries.cluster_label, "error": source.error,
        "clusters": clusters,
        "totals": {"gpu": by_resource, "by_model": dict(sorted(by_model.items())), "clusters_read": len(clusters),
                   "clusters_with_problems": [c["cluster"] for c in clusters if c["problem_nodes"]]},
    }


def prometheus_fleet_exit(fleet: Mapping[str, Any]) -> int:
    if fleet["error"]:
        return 2
    return 1 if fleet["totals"]["clusters_with_problems"] else 0


def _gpu_words(gpu: Mapping[str, Mapping[str, int]] | None) -> str:
    if gpu is None:
        return "? (no kube_pod_info)"
    return ", ".join(f"{short_resource(name)} {u['allocated']}/{u['allocatable']} ({u['free']} free)" for name, u in gpu.items()) or "-"


def write_prometheus_fleet(fleet: Mapping[str, Any], out: TextIO, output: str) -> None:
    """JSON: as is. TSV: a line per cluster and resource. Table: a line per cluster, then the totals."""
    if output == "json":
        write_json(dict(fleet), out)
        return
    if output == "tsv":
        for c in fleet["clusters"]:
            for name, u in (c["gpu"] or {}).items():
                out.write("\t".join([_tsv_field(c["cluster"]), _tsv_field(name), *(str(u[k]) for k in ("capacity", "allocatable", "allocated", "free")),
                                     str(c["problem_nodes"]), str(c["pending"] if c["pending"] is not None else ""), str(c["age_s"])]) + "\n")
        return
    source = f"from Prometheus {printable(fleet['prometheus'])}"
    if fleet["error"]:
        out.write(_fit(f"fleet: {printable(fleet['error'])}", WIDTH) + "\n")
        return
    out.write(_fit(f"fleet: {len(fleet['clusters'])} clusters {source} (label {fleet['cluster_label']})", WIDTH) + "\n")
    for c in fleet["clusters"]:
        worst = c["worst"]
        problems = f"{c['problem_nodes']}/{c['gpu_nodes']} GPU nodes with problems" + (
            f", worst {worst['code']} on {printable(worst['node'])}" if worst else "")
        wait = f", longest {duration.age(0, c['longest_wait_s'])}" if c["longest_wait_s"] is not None else ""
        pending = "pending ?" if c["pending"] is None else f"{c['pending']} pending{wait}"
        out.write(_fit(f"  {printable(c['cluster'])} ({c['age_s']}s old): {_gpu_words(c['gpu'])}; {problems}; {pending}", WIDTH) + "\n")
    for title, table in (("", fleet["totals"]["gpu"]), ("model ", fleet["totals"]["by_model"])):
        for name, u in table.items():
            out.write(_fit(f"  {title}{printable(name)}: {u['allocated']}/{u['allocatable']} allocated, {u['free']} free (capacity {u['capacity']})", WIDTH) + "\n")
    if fleet["clusters"]:
        out.write(_fit("not known from Prometheus' series: " + ", ".join(fleet["clusters"][0]["not_known"]), WIDTH) + "\n")
