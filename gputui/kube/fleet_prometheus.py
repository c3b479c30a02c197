"""The fleet's rows from a Prometheus that holds every cluster's kube-state-metrics and DCGM series, each
labelled with its cluster (a Prometheus federating per-cluster ones, Thanos, Mimir, VictoriaMetrics).

    source = PrometheusFleet(Prometheus(url), FleetQueries(cluster_label="cluster"))
    await source.refresh()        # two queries, whatever the number of clusters
    source.rows["prod-a"]         # a ClusterRow (state PROMETHEUS): the same figures as a live watch's row
    source.error                  # why the last refresh failed (the rows kept, their age growing), or None

Every figure is aggregated in Prometheus: an answer holds a few series per cluster, resource, GPU model
and problem code, not per node or pod. The figures are a live watch's (kube/fleet.py `figures`):

- capacity, allocatable (kube_node_status_*) and allocated (kube_pod_container_resource_requests of the
  pods bound to an existing node and not Succeeded or Failed) per GPU resource, and per GPU model
  (kube_node_labels' label_nvidia_com_gpu_product, when kube-state-metrics' allow-list gives it);
- GPU nodes (a GPU resource advertised, or NVIDIA's labels) and those with a problem: not ready, cordoned,
  fewer GPUs allocatable than installed, overcommitted, NVIDIA's labels without a GPU resource, a health
  monitor's condition, a taint, an XID (DCGM_FI_DEV_XID_ERRORS by the exporter's Hostname); the worst's
  code, one node and subject;
- GPU pods not bound to a node (and not finished), and since when the oldest waits (kube_pod_created).

With gputui's recording rules loaded (`gputui prometheus-rules`: best in each cluster's Prometheus, federating
only their output), the rows read `gputui:fleet_capacity` and `gputui:fleet_health`, the same two expressions
recorded every 30 s: a few series per cluster instead of every node's and pod's.

What a live watch sees and these series do not: the device plugin pods and the GPU stack's components (their
verdicts), init containers' and DRA claims' GPUs, the stuck states; a row names them (`lacks`), with the
series a cluster is missing (no DCGM: no XIDs). A row's age is that of its newest kube-state-metrics sample.
No Textual here.
"""
from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from . import gpu, verdicts
from .fleet import PROMETHEUS, ClusterRow
from .prometheus import STAT, Prometheus, PrometheusError, tagged, value_of
from .verdicts import Verdict

REFRESH = 30.0  # seconds between refreshes, and the recording rules' interval
R_CAPACITY, R_HEALTH = "gputui:fleet_capacity", "gputui:fleet_health"
MODEL_LABEL = "label_nvidia_com_gpu_product"
# What a live watch shows that kube-state-metrics' and DCGM's series cannot: named on every row.
NOT_IN_SERIES = ("device plugin pods", "GPU stack components", "DRA and init containers' GPUs", "stuck MIG changes and upgrades")


def sanitized(resource: str) -> str:
    """kube-state-metrics' name for a resource: every character outside [a-zA-Z0-9_] as `_`."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", resource)


def resource_name(name: str, extra: Mapping[str, str] | None = None) -> str:
    """The Kubernetes name of a kube-state-metrics resource name: nvidia_com_gpu -> nvidia.com/gpu,
    nvidia_com_mig_1g_10gb -> nvidia.com/mig-1g.10gb, nvidia_com_mig_1g_5gb_me -> nvidia.com/mig-1g.5gb+me;
    `extra`: the configured resources, by their sanitised names."""
    if extra and name in extra:
        return extra[name]
    if name == sanitized(gpu.GPU):
        return gpu.GPU
    if name == sanitized(gpu.GPU_SHARED):
        return gpu.GPU_SHARED
    prefix = sanitized(gpu.MIG_PREFIX)
    if name.startswith(prefix):
        parts = name[len(prefix):].split("_")
        sizes = [p for p in parts if re.fullmatch(r"\d+(c|g|gb)", p)]
        rest = [p for p in parts if p not in sizes]
        return gpu.MIG_PREFIX + ".".join(sizes) + "".join(f"+{p}" for p in rest)
    return name


@dataclass(frozen=True)
class FleetQueries:
    """How the series are labelled: the cluster label, and the GPU resources beyond NVIDIA's."""

    cluster_label: str = "cluster"
    extra_resources: frozenset[str] = frozenset()
    use_rules: bool = True  # the recording rules, when present

    @property
    def resources(self) -> str:
        names = ["nvidia_com_gpu", "nvidia_com_gpu_shared", "nvidia_com_mig_.+", *sorted(sanitized(r) for r in self.extra_resources)]
        return "|".join(names)

    def capacity(self) -> str:
        """Per cluster and resource, then per cluster, GPU model and resource: capacity, allocatable, allocated."""
        c = self.cluster_label
        stats: dict[str, str] = {}
        for name, expr in self._per_node().items():
            stats[name] = f"sum by ({c}, resource) ({expr})"
            stats[f"model_{name}"] = f"sum by ({c}, {MODEL_LABEL}, resource) ({expr} * on ({c}, node) group_left ({MODEL_LABEL}) {self._models()})"
        return tagged(stats)

    def health(self) -> str:
        """Per cluster: GPU nodes, those with a problem, one node per problem code, pending GPU pods and the
        oldest's creation, the newest sample's time, and which series exist."""
        c = self.cluster_label
        gpu_nodes = self._gpu_nodes()
        problems = self._problems()
        anywhere = " or ".join(f"group by ({c}, node) ({expr})" for expr in problems.values())
        pending = (f'group by ({c}, uid) (kube_pod_container_resource_requests{{resource=~"{self.resources}", node=""}} > 0)'
                   f' unless on ({c}, uid) (kube_pod_status_phase{{phase=~"Succeeded|Failed"}} == 1)')
        stats = {
            "gpu_nodes": f"count by ({c}) ({gpu_nodes})",
            "problem_nodes": f"count by ({c}) (group by ({c}, node) ({anywhere}) and on ({c}, node) {gpu_nodes})",
            **{f"worst_{code}": f"topk by ({c}) (1, {expr} and on ({c}, node) {gpu_nodes})" for code, expr in problems.items()},
            "pending": f"count by ({c}) ({pending})",
            "oldest": f"min by ({c}) (kube_pod_created * on ({c}, uid) group_left () ({pending}))",
            "seen": f"max by ({c}) (timestamp(kube_node_info))",
            "nodes": f"count by ({c}) (kube_node_info)",
            "pods": f"count by ({c}) (kube_pod_info)",
            "dcgm": f"count by ({c}) (DCGM_FI_DEV_XID_ERRORS)",
            "models": f'count by ({c}) (kube_node_labels{{{MODEL_LABEL}!=""}})',
        }
        return tagged(stats)

    def rules(self, interval: str = f"{REFRESH:g}s") -> dict[str, Any]:
        """The recording rules' group: both queries, recorded (`gputui prometheus-rules` prints it)."""
        return {"name": "gputui-fleet", "interval": interval,
                "rules": [{"record": R_CAPACITY, "expr": self.capacity()}, {"record": R_HEALTH, "expr": self.health()}]}

    # -- the parts -------------------------------------------------------------------------
    def _capacity(self, family: str) -> str:
        return f'max by ({self.cluster_label}, node, resource) (kube_node_status_{family}{{resource=~"{self.resources}"}})'

    def _allocated(self) -> str:
        c = self.cluster_label
        held = (f'kube_pod_container_resource_requests{{resource=~"{self.resources}", node!=""}}'
                f' unless on ({c}, uid) (kube_pod_status_phase{{phase=~"Succeeded|Failed"}} == 1)')
        return (f"sum by ({c}, node, resource) (max by ({c}, uid, container, node, resource) ({held}))"
                f" * on ({c}, node) group_left () group by ({c}, node) (kube_node_info)")

    def _per_node(self) -> dict[str, str]:
        return {"capacity": self._capacity("capacity"), "allocatable": self._capacity("allocatable"), "allocated": f"({self._allocated()})"}

    def _models(self) -> str:
        return f'max by ({self.cluster_label}, node, {MODEL_LABEL}) (kube_node_labels{{{MODEL_LABEL}!=""}})'

    def _hardware(self) -> str:
        return (f'group by ({self.cluster_label}, node) (kube_node_labels{{label_nvidia_com_gpu_present="true"}}'
                f' or kube_node_labels{{label_feature_node_kubernetes_io_pci_10de_present="true"}}'
                f' or kube_node_labels{{{MODEL_LABEL}!=""}})')

    def _gpu_nodes(self) -> str:
        c = self.cluster_label
        return f"group by ({c}, node) ({self._capacity('capacity')} > 0 or {self._capacity('allocatable')} > 0 or {self._hardware()})"

    def _problems(self) -> dict[str, str]:
        """Per problem code, its nodes (with the subject: a condition's type, a taint's key)."""
        c = self.cluster_label
        kubelet = "|".join(sorted(gpu.KUBELET_CONDITIONS))
        xid = 'label_replace(label_replace(DCGM_FI_DEV_XID_ERRORS, "node", "$1", "hostname", "(.+)"), "node", "$1", "Hostname", "(.+)")'
        return {
            Verdict.PLUGIN_NOT_REGISTERED.value: f"({self._hardware()} unless on ({c}, node) ({self._capacity('capacity')} > 0))",
            Verdict.UNHEALTHY_GPUS.value: f"({self._capacity('allocatable')} < {self._capacity('capacity')})",
            Verdict.OVERCOMMITTED.value: f"(({self._allocated()}) > {self._capacity('allocatable')})",
            Verdict.NOT_READY.value: f'(group by ({c}, node) (kube_node_info) unless on ({c}, node) (kube_node_status_condition{{condition="Ready", status="true"}} == 1))',
            Verdict.XID_ERRORS.value: f"(max by ({c}, node) ({xid}) != 0)",
            Verdict.HEALTH_CONDITION.value: f'(max by ({c}, node, condition) (kube_node_status_condition{{status="true", condition!~"{kubelet}"}}) == 1)',
            Verdict.TAINTED.value: (f'max by ({c}, node, key) (kube_node_spec_taint{{effect=~"NoSchedule|NoExecute", '
                                    f'key!="{gpu.GPU}", key!~"node[.]kubernetes[.]io/.*"}})'),
            Verdict.CORDONED.value: f"(max by ({c}, node) (kube_node_spec_unschedulable) == 1)",
        }


@dataclass
class _Cluster:
    totals: dict[str, gpu.Usage] = field(default_factory=dict)
    by_model: dict[str, dict[str, gpu.Usage]] = field(default_factory=dict)
    stats: dict[str, float] = field(default_factory=dict)
    worst: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # code -> (node, subject)


def rows_from(capacity: list[dict[str, Any]], health: list[dict[str, Any]], q: FleetQueries, now: float) -> dict[str, ClusterRow]:
    """The two answers as a row per cluster (clusters whose kube-state-metrics series exist), by name."""
    c = q.cluster_label
    extra = {sanitized(r): r for r in q.extra_resources}
    clusters: dict[str, _Cluster] = {}
    for item in capacity:
        labels, value = item.get("metric") or {}, value_of(item)
        stat = labels.get(STAT, "")
        if value is None or not stat:
            continue
        cluster = clusters.setdefault(labels.get(c, ""), _Cluster())
        resource = resource_name(labels.get("resource", ""), extra)
        if stat.startswith("model_"):
            table = cluster.by_model.setdefault(labels.get(MODEL_LABEL, ""), {})
            stat = stat[len("model_"):]
        else:
            table = cluster.totals
        setattr(table.setdefault(resource, gpu.Usage()), stat, int(value))
    for item in health:
        labels, value = item.get("metric") or {}, value_of(item)
        stat = labels.get(STAT, "")
        if value is None or not stat:
            continue
        cluster = clusters.setdefault(labels.get(c, ""), _Cluster())
        if stat.startswith("worst_"):
            cluster.worst[stat[len("worst_"):]] = (labels.get("node", ""), labels.get("condition") or labels.get("key"))
        else:
            cluster.stats[stat] = value
    return {name: _row(name, cluster, now) for name, cluster in sorted(clusters.items()) if "seen" in cluster.stats}


def _row(name: str, cluster: _Cluster, now: float) -> ClusterRow:
    stats = cluster.stats
    worst = min(cluster.worst.items(), key=lambda item: verdicts.rank(item[0]), default=None)
    pods_known = stats.get("pods", 0) > 0
    pending = int(stats.get("pending", 0)) if pods_known else None
    lacks = list(NOT_IN_SERIES)
    if not stats.get("dcgm"):
        lacks.append("XIDs (no DCGM_FI_DEV_XID_ERRORS)")
    if not stats.get("models"):
        lacks.append(f"GPU models (no kube_node_labels {MODEL_LABEL})")
    if not pods_known:
        lacks.append("pods (no kube_pod_info)")

    def ordered(table: dict[str, gpu.Usage]) -> dict[str, gpu.Usage]:
        return {r: table[r] for r in gpu.sorted_resources(table) if table[r].capacity or table[r].allocatable or table[r].allocated}

    by_model: dict[str, gpu.Usage] = {}
    for product, table in sorted(cluster.by_model.items()):
        for resource, usage in ordered(table).items():
            by_model.setdefault(gpu.model_key(product, resource), gpu.Usage()).add(usage)
    return ClusterRow(
        name, PROMETHEUS,
        totals=ordered(cluster.totals) if pods_known else None,
        by_model=by_model if pods_known else {},
        gpu_nodes=int(stats.get("gpu_nodes", 0)),
        problem_nodes=int(stats.get("problem_nodes", 0)),
        worst=(worst[0], worst[1][0]) if worst else None,
        worst_subject=worst[1][1] if worst else None,
        unknown_nodes=0,
        pending=pending,
        longest_wait=max(0.0, now - stats["oldest"]) if pending and "oldest" in stats else None,
        updated=stats["seen"],
        without=tuple(lacks),
    )


class PrometheusFleet:
    """Every cluster's row from Prometheus, refreshed every `interval` seconds (`run`)."""

    def __init__(self, source: Prometheus, queries: FleetQueries = FleetQueries(), *, interval: float = REFRESH,
                 clock: Callable[[], float] = time.time) -> None:
        self.source, self.queries, self.interval, self.clock = source, queries, interval, clock
        self.rows: dict[str, ClusterRow] = {}
        self.error: str | None = None
        self.asked: float | None = None  # clock() of the last answer
        self.retry_at: float | None = None  # time.monotonic() of the next refresh after an error
        self.changed = asyncio.Event()
        self.method = ""  # "recording rules" or "raw series", once asked

    @property
    def where(self) -> str:
        return self.source.where

    async def refresh(self) -> dict[str, ClusterRow]:
        """Ask again; on an error the rows are kept (their age grows) and `error` says why."""
        now = self.clock()
        try:
            recorded = await self.source.query(f'{{__name__=~"{R_CAPACITY}|{R_HEALTH}"}}', now) if self.queries.use_rules else []
            if recorded:
                self.method = "recording rules"
                capacity = [item for item in recorded if (item.get("metric") or {}).get("__name__") == R_CAPACITY]
                health = [item for item in recorded if (item.get("metric") or {}).get("__name__") == R_HEALTH]
            else:
                self.method = "raw series"
                capacity, health = await asyncio.gather(self.source.query(self.queries.capacity(), now),
                                                        self.source.query(self.queries.health(), now))
        except PrometheusError as exc:
            self.error = str(exc)
            self.retry_at = time.monotonic() + self.interval
        else:
            fresh = rows_from(capacity, health, self.queries, now)
            self.rows = {**{name: row for name, row in self.rows.items() if name not in fresh}, **fresh}  # a cluster gone stays, ageing
            self.error, self.asked, self.retry_at = None, now, None
        self.changed.set()
        return self.rows

    async def run(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(self.interval)

    async def close(self) -> None:
        await self.source.close()
