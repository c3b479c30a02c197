"""GPU-hours per group over days, from a Prometheus that scrapes kube-state-metrics and the DCGM exporters.

Per group (a namespace, a pod label's value, a node, a GPU model) and GPU resource (`nvidia_com_gpu`, each
MIG profile, shared GPUs), over a window ending now:

- allocated GPU-hours: kube-state-metrics' `kube_pod_container_resource_requests` of running pods
  (`kube_pod_status_phase{phase="Running"}`), summed over time;
- used GPU-hours: DCGM's utilisation (`DCGM_FI_DEV_GPU_UTIL` / 100, `DCGM_FI_PROF_GR_ENGINE_ACTIVE` on MIG) of
  the devices the exporter attributes to those pods (its `pod`/`namespace` labels, or `exported_*`);
  measured GPU-hours: how much of the allocation such readings cover; their ratio is used / measured;
- idle GPU-hours: measured time under the threshold;
- shared GPU-hours: time on a device several pods hold at once, a `*_shared` resource, or a GPU of a
  time-sliced node whose exporter names one pod per GPU (its default; `time_sliced_nodes`): such a device's
  use cannot be split between its pods, so it is in neither used nor measured;
- peak concurrent GPUs: the highest allocation at any step.

Sums over time are subqueries at a step fit to the window (`step_for`: 720 points, a minute's step up to
12 hours, an hour's at 30 days; a tenth of a window under 10 minutes), over the raw series or, when present,
the recording rules `gputui prometheus-rules` prints (`rules_file`): at 1-minute resolution per pod and per
cluster, namespace, node and resource (and the GPUs allocated per node and per model, for the peak), and at 1-hour
resolution per cluster, namespace and model, per node, and per pod
with each GPU pod's labels (read whole for windows of a day and more), and, for each pod label key the file was
printed with (`prometheus-rules --label KEY`), per cluster, that label and resource at both. A `label:KEY` grouping
reads the key's own rules when present (a few series per value, as a namespace's), else the per-pod rules, joined to
the pods' labels when asked: any key. Every group is also split by the
cluster label (`cluster` by default), absent on a Prometheus of one cluster. Each figure is its own query, all
asked at once (Prometheus evaluates each on a core of its own). The raw series' cost grows with the series the
window holds (every GPU's per pod that held it) times the steps (tests/bench_usage_prometheus.py): over a few
hundred GPUs and days, only the rules answer in seconds.

    view = await usage(source, UsageSettings(window=7 * 86400, by="namespace"))

The app's Usage screen reads a UsageFeed, which asks Prometheus for it: the screen only says which
grouping and window it wants (`ask`) and draws `view`/`error`; `on_update` follows each change.

No Textual here.
"""
from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from .config import ConnectError
from .prometheus import STAT, Prometheus, PrometheusError, tagged, value_of
from .tasks import cancel_and_wait

if TYPE_CHECKING:
    from .client import Client

DEFAULT_WINDOW = 7 * 86400.0
DEFAULT_THRESHOLD = 5.0  # percent, as kube/idle.py's
STEPS = 720  # subquery points over the window: an hour's step at 30 days
MIN_STEP = 60.0
FINE_INTERVAL, COARSE_INTERVAL = 60.0, 3600.0  # the recording rules' evaluation intervals (1m, 1h)
COARSE_AFTER = 86400.0  # windows at least this long read the 1-hour rules
GPU_RESOURCES = "nvidia_com_.+"
SHARED_RESOURCES = ".+_shared"
MODEL_LABEL = "label_nvidia_com_gpu_product"  # kube_node_labels' name for GPU Feature Discovery's nvidia.com/gpu.product
DEVICE = ("UUID", "GPU_I_ID")
NAMED_REPLICAS = 'DCGM_FI_DEV_GPU_UTIL{vgpu!=""}'  # a time-sliced GPU's series per pod (--kubernetes-virtual-gpus)
RULES, RAW = "rules", "raw"

# The recording rules' names (rules_file).
R_ALLOCATED = "gputui:gpus_allocated:1m"
R_HOURS = {name: f"gputui:gpu_hours_{name}:1m" for name in ("allocated", "used", "measured", "idle", "shared")}
R_HOURS_1H = {name: f"gputui:gpu_hours_{name}:1h" for name in R_HOURS}
# Per cluster, node or model, and resource: the grouping's GPUs allocated every minute (its peak, without joining every
# namespace's per-node series to the nodes' models at each step), and per node the GPU-hours every hour.
R_GROUP_ALLOCATED = {kind: f"gputui:{kind}_gpus_allocated:1m" for kind in ("node", "model")}
R_NODE_HOURS_1H = {name: f"gputui:node_gpu_hours_{name}:1h" for name in R_HOURS}
# Per pod (cluster, namespace, pod, uid, node, resource), for `label:KEY`: the figures are joined to the pod's labels
# when asked, whatever the key; the 1-hour ones to gputui:pod_labels:1h, each GPU pod's kube_pod_labels of the hour.
R_POD_ALLOCATED = "gputui:pod_gpus_allocated:1m"
R_POD_HOURS = {name: f"gputui:pod_gpu_hours_{name}:1m" for name in R_HOURS}
R_POD_HOURS_1H = {name: f"gputui:pod_gpu_hours_{name}:1h" for name in R_HOURS}
# Each GPU device's use (a fraction) with the pod's keys, of the pods whose use their devices' readings tell (the
# exporters' labels too): what the per-pod used, measured, idle and shared rules read, worked out once.
R_POD_DEVICES = "gputui:pod_device_use:1m"
R_POD_LABELS_1H = "gputui:pod_labels:1h"
# Per cluster, a pod label's value and resource, for each label key the rules were printed with (`prometheus-rules
# --label KEY`): the same names for every key, each series marked with the key's kube-state-metrics name (LABEL_MARK).
R_LABEL_ALLOCATED = "gputui:label_gpus_allocated:1m"
R_LABEL_HOURS = {name: f"gputui:label_gpu_hours_{name}:1m" for name in R_HOURS}
R_LABEL_HOURS_1H = {name: f"gputui:label_gpu_hours_{name}:1h" for name in R_HOURS}
LABEL_MARK = "gputui_label"
UsageError = PrometheusError  # Prometheus cannot give the figures; the message is one line saying why


def step_for(window: float, min_step: float = MIN_STEP) -> float:
    """The subqueries' step: STEPS points over the window, a whole number of seconds, at least min_step
    (or a tenth of a short window)."""
    return float(max(min(min_step, window / 10), math.ceil(window / STEPS) if window > STEPS else 0))


def ksm_label(key: str) -> str:
    """kube-state-metrics' Prometheus name for a Kubernetes label key: `label_`, the key with every character
    outside [a-zA-Z0-9_] as `_`, then snake-cased (`teamName` -> `label_team_name`)."""
    return "label_" + re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", re.sub(r"[^a-zA-Z0-9_]", "_", key)).lower()


def parse_by(text: str) -> tuple[str, str]:
    """`namespace`, `node`, `model` or `label:KEY` -> (kind, Prometheus label); ValueError if none of those."""
    if text in ("namespace", "node"):
        return text, text
    if text == "model":
        return text, MODEL_LABEL
    if text.startswith("label:") and text[6:]:
        return "label", ksm_label(text[6:])
    raise ValueError(f"--by {text!r}: expected namespace, node, model or label:KEY")


def parse_since(text: str) -> float:
    """`7d`, `12h`, `30m`, `90s`, `1d12h` -> seconds; ValueError if not one."""
    match = re.fullmatch(r"(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text.strip())
    if not text.strip() or not match or not any(match.groups()):
        raise ValueError(f"--since {text!r}: expected a duration such as 7d, 12h, 1d12h or 90m")
    w, d, h, m, s = (int(g or 0) for g in match.groups())
    seconds = (((w * 7 + d) * 24 + h) * 60 + m) * 60 + s
    if seconds <= 0:
        raise ValueError(f"--since {text!r}: must be longer than 0")
    return float(seconds)


@dataclass(frozen=True)
class UsageSettings:
    window: float = DEFAULT_WINDOW
    by: str = "namespace"
    threshold: float = DEFAULT_THRESHOLD  # percent
    cluster_label: str = "cluster"
    min_step: float = MIN_STEP
    use_rules: bool = True  # the recording rules, when present
    label_rules: bool = True  # for `label:KEY`, the key's own rules (prometheus-rules --label KEY) before the per-pod ones
    fine_interval: float = FINE_INTERVAL  # what the rules were printed with
    coarse_after: float = COARSE_AFTER

    @property
    def step(self) -> float:
        return step_for(self.window, self.min_step)


# -- PromQL --------------------------------------------------------------------------------

def _dur(seconds: float) -> str:
    """A PromQL duration: whole seconds, else milliseconds (the tests' sub-second steps)."""
    return f"{int(seconds)}s" if float(seconds).is_integer() else f"{int(round(seconds * 1000))}ms"


def allocated_pods(c: str, resources: str = GPU_RESOURCES, excluded: str | None = None) -> str:
    """Per running pod and GPU resource, the GPUs it requests: labels c, namespace, pod, uid, node, resource."""
    matcher = f'resource=~"{resources}"' + (f', resource!~"{excluded}"' if excluded else "")
    return (f"sum by ({c}, namespace, pod, uid, node, resource) (kube_pod_container_resource_requests{{{matcher}}})"
            f' * on ({c}, uid) group_left () (max by ({c}, uid) (kube_pod_status_phase{{phase="Running"}}) == 1)')


def grouped(expr: str, c: str, kind: str, label: str, join_on: str = "uid") -> str:
    """`expr` (per pod) with the group's label: a pod label from kube_pod_labels, a node's GPU model from
    kube_node_labels; a pod neither knows stays, without it."""
    if kind == "label":
        return (f"(({expr}) * on ({c}, {join_on}) group_left ({label}) max by ({c}, {join_on}, {label}) (kube_pod_labels)"
                f" or on ({c}, {join_on}) ({expr}))")
    if kind == "model":
        return (f"(({expr}) * on ({c}, node) group_left ({label}) max by ({c}, node, {label}) (kube_node_labels)"
                f" or on ({c}, {join_on}) ({expr}))")
    return expr


FULL_GPUS, MIG_DEVICES = 'DCGM_FI_DEV_GPU_UTIL{GPU_I_ID=""', 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{GPU_I_ID!=""'  # selectors, unclosed


def devices() -> str:
    """Every GPU device's use now, a fraction, with the workload's namespace and pod (the exporter's labels,
    or those a scrape renamed exported_*) and the resource of a MIG device. Only the renamed series go
    through label_replace: at every subquery step it builds each series' labels anew."""
    def both(matcher: str) -> str:
        return f"({FULL_GPUS}, {matcher}}} / 100 or {MIG_DEVICES}, {matcher}}})"

    own, exported = both('exported_pod=""'), both('exported_pod!=""')
    renamed = (f'label_replace(label_replace({exported}, "namespace", "$1", "exported_namespace", "(.+)"),'
               f' "pod", "$1", "exported_pod", "(.+)")')
    return f"({own} or {renamed})"


def attributed(c: str, by: tuple[str, ...], pods: str) -> str:
    """Each device series of the pods of `pods` (allocated_pods, grouped), with the pod's group labels and
    resource; a pod holding several GPU resources (or groups) at once is left out: its devices cannot be told apart."""
    keys = ", ".join(dict.fromkeys((c, "namespace", "pod", *by, "resource")))
    held = f"group by ({keys}) ({pods})"
    single = f"({held} unless on ({c}, namespace, pod) (count by ({c}, namespace, pod) ({held}) > 1))"
    extra = ", ".join(dict.fromkeys(label for label in (*by, "resource") if label not in (c, "namespace", "pod")))
    return f"({devices()} * on ({c}, namespace, pod) group_left ({extra}) {single})"


def _shared_devices(c: str, expr: str) -> str:
    dev = ", ".join((c, *DEVICE))
    return f"(count by ({dev}) ({expr}) > 1)"


def _on_node(expr: str) -> str:
    """`expr` (DCGM series) with the exporter's node name as `node` (its Hostname label; hostname in newer releases)."""
    return f'label_replace(label_replace({expr}, "node", "$1", "Hostname", "(.+)"), "node", "$1", "hostname", "(.+)")'


def time_sliced_nodes(c: str) -> str:
    """Nodes whose GPUs are time-sliced while the exporter names one pod per GPU (dcgm-exporter's default): the node
    advertises more nvidia.com/gpu than its exporter reports devices, and no series names a replica (`vgpu`, from
    --kubernetes-virtual-gpus). Of the pods sharing such a GPU the exporter names one, the last the kubelet lists, so
    no pod there can be credited with a GPU's use: the others on it are not named. Labels c, node, and resource
    (nvidia_com_gpu)."""
    # Counted per exporter host first: the node's name is taken from a few series, not from every device's.
    hosts = f"{c}, Hostname, hostname"
    per_device = " or ".join(f"count by ({hosts}, {', '.join(DEVICE)}) ({selector}}})" for selector in (FULL_GPUS, MIG_DEVICES))
    reported = f"sum by ({c}, node) ({_on_node(f'count by ({hosts}) ({per_device})')})"
    advertised = f'max by ({c}, node) (kube_node_status_capacity{{resource="nvidia_com_gpu"}})'
    replicas_named = f"count by ({c}, node) ({_on_node(f'count by ({hosts}) ({NAMED_REPLICAS})')})"
    sliced = f"(({advertised} > {reported}) unless on ({c}, node) {replicas_named})"
    return f'label_replace({sliced}, "resource", "nvidia_com_gpu", "node", ".*")'


def unsplit_pods(c: str) -> str:
    """Per running pod, the GPUs whose use cannot be split between the pods holding them: a `*_shared` resource, or
    a GPU of a time-sliced node whose exporter names one pod per GPU (allocated_pods' labels)."""
    on_sliced = f"({allocated_pods(c)} and on ({c}, node, resource) {time_sliced_nodes(c)})"
    return f"({allocated_pods(c, resources=SHARED_RESOURCES)} or {on_sliced})"


def measurable_pods(c: str) -> str:
    """Per running pod, the GPUs whose use its devices' readings tell (allocated_pods' labels)."""
    return f"({allocated_pods(c, excluded=SHARED_RESOURCES)} unless on ({c}, node, resource) {time_sliced_nodes(c)})"


def _plus(a: str, b: str, keys: str) -> str:
    """a + b over two vectors of labels `keys`, a series in only one of them kept as it is; each evaluated once
    (told apart by a label of their own while summed)."""
    return f'sum by ({keys}) (label_replace({a}, "gputui_part", "a", "", "") or label_replace({b}, "gputui_part", "b", "", ""))'


def figures_raw(s: UsageSettings) -> dict[str, str]:
    """Every figure's query per (cluster, group, resource), by the figure's name (asked at once, each tagged
    with the label gputui_stat: Prometheus evaluates them on as many cores)."""
    c = s.cluster_label
    kind, label = parse_by(s.by)
    pods = grouped(allocated_pods(c), c, kind, label)
    measured_pods = grouped(measurable_pods(c), c, kind, label)
    on_devices = attributed(c, (label,), measured_pods)
    single = f"({on_devices} unless on ({c}, {', '.join(DEVICE)}) {_shared_devices(c, on_devices)})"
    shared_on_device = f"({on_devices} and on ({c}, {', '.join(DEVICE)}) {_shared_devices(c, on_devices)})"
    unsplit = grouped(unsplit_pods(c), c, kind, label)
    keys = f"{c}, {label}, resource"
    w, step = _dur(s.window), _dur(s.step)
    hours = f"{s.step:g} / 3600"
    stats = {
        "allocated": f"sum_over_time((sum by ({keys}) ({pods}))[{w}:{step}]) * {hours}",
        "peak": f"max_over_time((sum by ({keys}) ({pods}))[{w}:{step}])",
        "used": f"sum_over_time((sum by ({keys}) ({single}))[{w}:{step}]) * {hours}",
        "measured": f"sum_over_time((count by ({keys}) ({single}))[{w}:{step}]) * {hours}",
        "idle": f"sum_over_time((count by ({keys}) ({single} < {s.threshold / 100:g}))[{w}:{step}]) * {hours}",
        "shared": f"sum_over_time({_plus(f'count by ({keys}) ({shared_on_device})', f'sum by ({keys}) ({unsplit})', keys)}[{w}:{step}]) * {hours}",
    }
    return stats


def labelled(name: str, label: str) -> str:
    """A label rule's series of one label key (kube-state-metrics' name)."""
    return f'{name}{{{LABEL_MARK}="{label}"}}'


def rule_groups(c: str = "cluster", fine: float = FINE_INTERVAL, coarse: float = COARSE_INTERVAL,
                threshold: float = DEFAULT_THRESHOLD, labels: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The recording rules: at `fine` per pod (cluster, namespace, pod, uid, node and resource; and each of its GPU
    devices' use), and their sums
    per cluster, namespace, node and resource, and the GPUs allocated per cluster, node (or model) and resource; at
    `coarse` per cluster, namespace, model and resource, per cluster, node and resource, and per pod
    with each GPU pod's labels of the interval (gputui:pod_labels, for `label:KEY`). For each pod label key of
    `labels`, the pods' sums per cluster, that label and resource at both intervals (each series marked
    LABEL_MARK: the key's kube-state-metrics name). Each hours sample is the GPU-hours of the interval before it."""
    pod_keys = f"{c}, namespace, pod, uid, node, resource"
    keys = f"{c}, namespace, node, resource"
    on_devices = R_POD_DEVICES  # recorded once, read by the four rules after it
    shared = _shared_devices(c, on_devices)
    shared_on_device = f"count by ({pod_keys}) ({on_devices} and on ({c}, {', '.join(DEVICE)}) {shared})"
    single = f"({on_devices} unless on ({c}, {', '.join(DEVICE)}) {shared})"
    hours = f"{fine:g} / 3600"
    pod_rules: list[dict[str, Any]] = [
        {"record": R_POD_ALLOCATED, "expr": allocated_pods(c)},
        {"record": R_POD_HOURS["allocated"], "expr": f"{R_POD_ALLOCATED} * {hours}"},
        {"record": R_POD_DEVICES, "expr": attributed(c, ("uid", "node"), measurable_pods(c))},
        {"record": R_POD_HOURS["used"], "expr": f"sum by ({pod_keys}) ({single}) * {hours}"},
        {"record": R_POD_HOURS["measured"], "expr": f"count by ({pod_keys}) ({single}) * {hours}"},
        {"record": R_POD_HOURS["idle"], "expr": f"count by ({pod_keys}) ({single} < {threshold / 100:g}) * {hours}"},
        {"record": R_POD_HOURS["shared"],
         "expr": f"{_plus(shared_on_device, f'sum by ({pod_keys}) ({unsplit_pods(c)})', pod_keys)} * {hours}"},
    ]
    # The node's figures are the sums of its pods' (rules read those of the group before them, at the same time).
    fine_rules = [*pod_rules,
                  {"record": R_ALLOCATED, "expr": f"sum by ({keys}) ({R_POD_ALLOCATED})"},
                  *({"record": R_HOURS[name], "expr": f"sum by ({keys}) ({R_POD_HOURS[name]})"} for name in R_HOURS),
                  *({"record": R_GROUP_ALLOCATED[kind],
                     "expr": f"sum by ({c}, {label}, resource) ({grouped(R_ALLOCATED, c, kind, label, 'node, namespace, resource')})"}
                    for kind, label in (parse_by(kind) for kind in R_GROUP_ALLOCATED))]
    # Per label key, the pods' sums joined to their labels then (a pod without the label: group ""), as a label:KEY
    # grouping's queries join the per-pod rules at each step.
    label_names = tuple(dict.fromkeys(ksm_label(key) for key in labels))
    for label in label_names:
        mark, labels_now = {LABEL_MARK: label}, pod_labels_now(c, label, fine)
        label_keys = f"{c}, {label}, resource"
        fine_rules += [{"record": R_LABEL_ALLOCATED, "labels": mark,
                        "expr": f"sum by ({label_keys}) ({joined_to(R_POD_ALLOCATED, c, label, labels_now)})"},
                       *({"record": R_LABEL_HOURS[name], "labels": mark,
                          "expr": f"sum by ({label_keys}) ({joined_to(R_POD_HOURS[name], c, label, labels_now)})"} for name in R_HOURS)]
    model_keys = f"{c}, namespace, {MODEL_LABEL}, resource"
    window = _dur(coarse)
    coarse_rules: list[dict[str, Any]] = [
        {"record": R_HOURS_1H[name],
         "expr": f"sum by ({model_keys}) ({grouped(f'sum_over_time({R_HOURS[name]}[{window}])', c, 'model', MODEL_LABEL, 'node, namespace, resource')})"}
        for name in R_HOURS
    ]
    coarse_rules += [{"record": R_NODE_HOURS_1H[name], "expr": f"sum by ({c}, node, resource) (sum_over_time({R_HOURS[name]}[{window}]))"}
                     for name in R_HOURS]
    coarse_rules += [{"record": R_POD_HOURS_1H[name], "expr": f"sum by ({c}, namespace, pod, uid, resource) (sum_over_time({R_POD_HOURS[name]}[{window}]))"}
                     for name in R_HOURS]
    # Every label of each pod that held a GPU in the interval, the value the time it was recorded: the latest of a
    # pod whose labels changed wins (pod_labels_at).
    coarse_rules.append({"record": R_POD_LABELS_1H,
                         "expr": f"time() + 0 * group without (instance, job) (last_over_time(kube_pod_labels[{window}])"
                                 f" and on ({c}, uid) last_over_time({R_POD_ALLOCATED}[{window}]))"})
    coarse_rules += [{"record": R_LABEL_HOURS_1H[name], "labels": {LABEL_MARK: label},
                      "expr": f"sum by ({c}, {label}, resource) (sum_over_time({labelled(R_LABEL_HOURS[name], label)}[{window}]))"}
                     for label in label_names for name in R_HOURS]
    from .fleet_prometheus import FleetQueries  # noqa: PLC0415  (the fleet's rows: the same file to load)

    return [{"name": "gputui-gpu-usage-1m", "interval": _dur(fine), "rules": fine_rules},
            {"name": "gputui-gpu-usage-1h", "interval": _dur(coarse), "rules": coarse_rules},
            FleetQueries(c).rules()]


def rules_file(c: str = "cluster", fine: float = FINE_INTERVAL, coarse: float = COARSE_INTERVAL,
               threshold: float = DEFAULT_THRESHOLD, labels: tuple[str, ...] = ()) -> str:
    """The rules file `gputui prometheus-rules` prints (YAML; JSON is YAML too, and needs no library here)."""
    groups = rule_groups(c, fine, coarse, threshold, labels)
    by_labels = f", per pod label {', '.join(labels)}" if labels else ""
    lines = [f"# gputui {int(fine)} s and {int(coarse)} s GPU usage recording rules{by_labels} and the fleet's rows every 30 s; "
             f"cluster label {c!r}, idle under {threshold:g} %.",
             "groups:"]
    for group in groups:
        lines += [f"  - name: {group['name']}", f"    interval: {group['interval']}", "    rules:"]
        for rule in group["rules"]:
            lines += [f"      - record: {rule['record']}", f"        expr: {orjson.dumps(rule['expr']).decode()}"]
            if rule.get("labels"):
                lines.append(f"        labels: {orjson.dumps(rule['labels']).decode()}")
    return "\n".join(lines) + "\n"


def joined_to(expr: str, c: str, label: str, labels: str) -> str:
    """`expr` (per pod) with its `label` from `labels` (per cluster and uid); a pod without any stays, without it."""
    return f"(({expr}) * on ({c}, uid) group_left ({label}) {labels} or on ({c}, uid) ({expr}))"


def pod_labels_now(c: str, label: str, fine: float) -> str:
    """Per pod (cluster, uid), its `label` at an instant from kube_pod_labels of the look-back and one rule interval
    before it (one value per pod): a pod's last per-pod rule sample stays until the next evaluation, past the scrape
    that ended its kube_pod_labels (and a rule reading it in a later pass, as promtool's backfill, is that much later)."""
    return (f"group by ({c}, uid, {label}) (topk by ({c}, uid) (1, max by ({c}, uid, {label})"
            f" (last_over_time(kube_pod_labels[{_dur(fine + 300)}]))))")


# How far before a per-pod rule sample the hourly gputui:pod_labels sample naming its pod may be: a pod's last per-pod
# rule sample comes after its last kube_pod_labels scrape (the rule reads its requests through Prometheus' look-back,
# or until their stale marker), and when an hourly evaluation falls between the two, that one names the pod while the
# next has its last GPUs but no labels (its kube_pod_labels are out of its hour). Looked up from the step (or the
# window's start) only, such a pod's GPUs would count under "", unlabelled.
LABELS_SLACK = COARSE_INTERVAL


def pod_labels_at(c: str, label: str, window: float) -> str:
    """Per GPU pod of the window (cluster, uid), its `label`'s value (absent: the pod lacks it), from the hourly
    gputui:pod_labels of the window and the hour before it (LABELS_SLACK) and, for pods newer than its last sample,
    kube_pod_labels of the last hour: the latest value of a pod whose labels changed. For an instant query (`@ end()`:
    at the window's end)."""
    recorded = f"max by ({c}, uid, {label}) (max_over_time({R_POD_LABELS_1H}[{_dur(window + LABELS_SLACK)}] @ end()))"
    newest = f"max by ({c}, uid, {label}) (last_over_time(kube_pod_labels[{_dur(COARSE_INTERVAL)}] @ end()))"
    return f"group by ({c}, uid, {label}) (topk by ({c}, uid) (1, {recorded} or on ({c}, uid) {newest}))"


def pod_labels_then(c: str, label: str) -> str:
    """pod_labels_at for one step of a subquery: each pod's label from the gputui:pod_labels samples of the hour
    after the step (an evaluation that covers it) and of the hour before it (LABELS_SLACK), the latest, else, for
    the pods of the last hour, kube_pod_labels then. Not worked out once for all steps (`@ end()`): Prometheus would
    copy every pod of the window to each step, 720 times."""
    hour = _dur(COARSE_INTERVAL)
    then = f"max by ({c}, uid, {label}) (last_over_time({R_POD_LABELS_1H}[{_dur(COARSE_INTERVAL + LABELS_SLACK)}] offset -{hour}))"
    newest = (f"max by ({c}, uid, {label}) (last_over_time(kube_pod_labels[{hour}] @ end())"
              f" and on ({c}, uid) last_over_time({R_POD_ALLOCATED}[{hour}] @ end()))")
    return f"group by ({c}, uid, {label}) (topk by ({c}, uid) (1, {then} or on ({c}, uid) {newest}))"


def figures_rules(s: UsageSettings, coarse: bool, label_rules: bool = False, group_rule: bool = False) -> dict[str, str]:
    """The same figures from the recording rules (1-hour ones when `coarse`; by node, the per-node ones). The peak by
    node or model reads the grouping's own GPUs allocated when `group_rule` (a rules file older than it: the per-node
    ones, joined to the nodes' models at each step). A `label:` grouping reads the label's
    own rules when `label_rules` (`prometheus-rules --label KEY`: a few series per value, as a namespace's), else the
    per-pod rules, joined to kube_pod_labels at each step (1-minute rules) or, from the 1-hour rules, to each pod's
    labels once (pod_labels_at): any label key."""
    c = s.cluster_label
    kind, label = parse_by(s.by)
    keys = f"{c}, {label}, resource"
    w, step = _dur(s.window), _dur(s.step)
    per_pod = kind == "label" and not label_rules
    own = kind == "label" and label_rules
    labels = pod_labels_at(c, label, s.window) if per_pod and coarse else ""
    labels_now = pod_labels_now(c, label, s.fine_interval)

    def joined(expr: str, labels: str = labels) -> str:
        return joined_to(expr, c, label, labels)

    def summed(name: str) -> str:
        if coarse and per_pod:
            return f"sum by ({keys}) ({joined(f'sum_over_time({R_POD_HOURS_1H[name]}[{w}])')})"
        if coarse:  # per cluster, namespace and model (or the label) already, a sample an hour
            hourly = labelled(R_LABEL_HOURS_1H[name], label) if own else R_NODE_HOURS_1H[name] if kind == "node" else R_HOURS_1H[name]
            return f"sum by ({keys}) (sum_over_time({hourly}[{w}]))"
        # The 1-minute samples at the window's step: 720 points per group, not a sample a minute.
        if own:
            inner = labelled(R_LABEL_HOURS[name], label)
        elif per_pod:
            inner = joined(R_POD_HOURS[name], labels_now)
        else:
            inner = grouped(R_HOURS[name], c, kind, label, "node, namespace, resource")
        return f"sum_over_time((sum by ({keys}) ({inner}))[{w}:{step}]) * {s.step:g} / {s.fine_interval:g}"

    stats = {name: summed(name) for name in R_HOURS}
    if own:
        peak_inner = labelled(R_LABEL_ALLOCATED, label)
    elif per_pod:
        peak_inner = joined(R_POD_ALLOCATED, pod_labels_then(c, label) if coarse else labels_now)
    elif group_rule:
        peak_inner = R_GROUP_ALLOCATED[kind]
    else:
        peak_inner = grouped(R_ALLOCATED, c, kind, label, "node, namespace, resource")
    stats["peak"] = f"max_over_time((sum by ({keys}) ({peak_inner}))[{w}:{step}])"
    return stats


def coverage(s: UsageSettings) -> str:
    """Which series there are now, per cluster (kube-state-metrics', the exporters', the recording rules'), and,
    for a grouping by label or model, whether kube-state-metrics exports that label: what the figures can rest
    on. Instant counts only: when each series begins within the window is `covered_from`'s, asked beside the figures."""
    c = s.cluster_label
    kind, label = parse_by(s.by)
    look_back = _dur(2 * COARSE_INTERVAL)  # an hourly sample is up to an hour old: past Prometheus' 5-minute look-back most of the time
    stats = {
        "requests": f"count by ({c}) (kube_pod_container_resource_requests)",
        "phases": f"count by ({c}) (kube_pod_status_phase)",
        "dcgm": f"count by ({c}) (DCGM_FI_DEV_GPU_UTIL)",
        "rules_1m": f"count by ({c}) ({R_HOURS['allocated']})",
        "rules_1h": f"count by ({c}) (last_over_time({R_HOURS_1H['allocated']}[{look_back}]))",
    }
    if kind in R_GROUP_ALLOCATED:  # the grouping's own GPUs allocated and, per node, hourly hours (a rules file older than them has none)
        stats["group_rules_1m"] = f"count by ({c}) ({R_GROUP_ALLOCATED[kind]})"
    if kind == "node":
        stats["node_rules_1h"] = (f"count by ({c}) (last_over_time({R_NODE_HOURS_1H['allocated']}[{look_back}])"
                                  f" and on ({c}) {R_GROUP_ALLOCATED[kind]})")
    if kind == "label":  # the label's own rules (prometheus-rules --label KEY), and the per-pod rules (a rules file older than them has none)
        stats["label_rules_1m"] = f"count by ({c}) ({labelled(R_LABEL_HOURS['allocated'], label)})"
        stats["label_rules_1h"] = f"count by ({c}) (last_over_time({labelled(R_LABEL_HOURS_1H['allocated'], label)}[{look_back}]))"
        stats["pod_rules_1m"] = f"count by ({c}) ({R_POD_HOURS['allocated']})"
        stats["pod_rules_1h"] = (f"count by ({c}) (last_over_time({R_POD_HOURS_1H['allocated']}[{look_back}])"
                                 f" and on ({c}) last_over_time({R_POD_LABELS_1H}[{look_back}]))")
    if label not in ("namespace", "node"):
        source = "kube_node_labels" if label == MODEL_LABEL else "kube_pod_labels"
        stats["group_label"] = f'count by ({c}) ({source}{{{label}!=""}})'
    return tagged(stats)


def covered_from(s: UsageSettings, series: str) -> str:
    """Per cluster, when `series` (kube-state-metrics' phases, or the rules read) begins within the window, at the
    figures' step."""
    c = s.cluster_label
    return f"min_over_time(timestamp(count by ({c}) ({series}))[{_dur(s.window)}:{_dur(s.step)}])"


def hours_text(hours: float) -> str:
    """GPU-hours as a table shows them: whole from 100, one decimal from 1, else two significant digits."""
    if hours >= 100:
        return f"{hours:.0f}"
    if hours >= 1:
        return f"{hours:.1f}"
    return f"{hours:.2g}"


# -- the answer ----------------------------------------------------------------------------

@dataclass(frozen=True)
class UsageRow:
    cluster: str
    group: str  # "" when the pod's group is not known (a label it lacks, a node without its model)
    resource: str  # kube-state-metrics' name: nvidia_com_gpu, nvidia_com_mig_1g_10gb, nvidia_com_gpu_shared
    allocated_h: float
    used_h: float | None  # None: nothing of it measured
    measured_h: float
    idle_h: float | None
    shared_h: float
    peak: float

    @property
    def ratio(self) -> float | None:
        return self.used_h / self.measured_h if self.used_h is not None and self.measured_h > 0 else None

    @property
    def notes(self) -> tuple[str, ...]:
        out = []
        if self.shared_h > 0:
            out.append(f"{hours_text(self.shared_h)} GPU-h on shared GPUs: their use cannot be split between pods")
        unmeasured = self.allocated_h - self.measured_h - self.shared_h
        if unmeasured > max(0.02 * self.allocated_h, 1e-5):  # a scrape's misalignment aside (1e-5 GPU-h: 36 ms of a GPU)
            out.append(f"{hours_text(unmeasured)} GPU-h without DCGM readings")
        return tuple(out)

    def to_json(self) -> dict[str, Any]:
        def r(value: float | None) -> float | None:
            return None if value is None else round(value, 3)

        return {"cluster": self.cluster or None, "group": self.group or None, "resource": self.resource,
                "allocated_gpu_hours": r(self.allocated_h), "used_gpu_hours": r(self.used_h),
                "measured_gpu_hours": r(self.measured_h), "ratio": None if self.ratio is None else round(self.ratio, 3),
                "idle_gpu_hours": r(self.idle_h), "shared_gpu_hours": r(self.shared_h), "peak_gpus": r(self.peak),
                "notes": list(self.notes)}


@dataclass(frozen=True)
class UsageView:
    source: str  # where Prometheus was asked
    by: str
    window_s: float
    step_s: float
    method: str  # RULES or RAW
    method_words: str  # e.g. "recording rules gputui:*:1h" or "raw series, subqueries every 1200 s"
    covered_s: dict[str, float]  # per cluster ("" when no cluster label): how much of the window the series cover
    missing: tuple[str, ...]  # series absent, each in words
    rows: tuple[UsageRow, ...]
    at: float

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "by": self.by, "window_s": int(self.window_s), "step_s": int(self.step_s),
                "method": self.method, "rests_on": self.method_words,
                "covered_s": {k or "": int(round(v)) for k, v in sorted(self.covered_s.items())},
                "missing": list(self.missing), "groups": [row.to_json() for row in self.rows]}


async def usage(prometheus: Prometheus, settings: UsageSettings, now: float | None = None) -> UsageView:
    """Every group's figures over the window ending now; UsageError when Prometheus cannot give them."""
    now = time.time() if now is None else now
    c = settings.cluster_label
    kind, label = parse_by(settings.by)
    cover = await prometheus.query(coverage(settings), now)
    found: dict[str, dict[str, float]] = {}
    for item in cover:
        labels = item.get("metric") or {}
        value = value_of(item)
        if value is not None:
            found.setdefault(labels.get(STAT, ""), {})[labels.get(c, "")] = value

    method, words = RAW, f"raw series, subqueries every {settings.step:g} s"
    expr, first = figures_raw(settings), "kube_pod_status_phase"
    long = settings.window >= settings.coarse_after
    # The rules to read, the first present: a label's own rules before the per-pod rules, each hourly for a long window
    # (by node, the per-node hourly rules). The words start "recording rules gputui:*:1h" whichever (what the rules
    # are, then how they are summed). By node or model, the peak from the grouping's own GPUs allocated when present,
    # and the coverage too: newer than the other rules, they may cover less of the window, and the peak only that.
    group_rule = bool(found.get("group_rules_1m"))
    if kind != "label":
        allocated = R_GROUP_ALLOCATED[kind] if group_rule else R_ALLOCATED
        choices = [("node_rules_1h" if kind == "node" else "rules_1h", True, False, "gputui:*:1h", allocated)] * long + [
            ("rules_1m", False, False, "gputui:*:1m", allocated)]
    else:
        own = [("label_rules_1h", True, True, f"gputui:*:1h, per {label}", labelled(R_LABEL_ALLOCATED, label))] * long + [
            ("label_rules_1m", False, True, f"gputui:*:1m, per {label}", labelled(R_LABEL_ALLOCATED, label))]
        per_pod = [("pod_rules_1h", True, False, f"gputui:*:1h, per pod joined to {label}", R_POD_ALLOCATED)] * long + [
            ("pod_rules_1m", False, False, f"gputui:*:1m, per pod joined to {label}", R_POD_ALLOCATED)]
        choices = (own if settings.label_rules else []) + per_pod
    read_label_rules = False
    for present, coarse, label_rules, names, first_rule in choices if settings.use_rules else []:
        if found.get(present):
            method, words, read_label_rules = RULES, f"recording rules {names}", label_rules
            expr, first = figures_rules(settings, coarse, label_rules, group_rule), first_rule
            break

    # Each figure its own query, and when the series they read begin, all asked at once.
    queries = {**{name: tagged({name: one}) for name, one in expr.items()}, "from": covered_from(settings, first)}
    try:
        answers = dict(zip(queries, await asyncio.gather(*(prometheus.query(q, now) for q in queries.values())), strict=True))
    except PrometheusError as exc:
        raise PrometheusError(f"{exc}{_cheaper(settings.by, method, read_label_rules) if _too_costly(str(exc)) else ''}") from None
    froms = {(item.get("metric") or {}).get(c, ""): value for item in answers.pop("from") if (value := value_of(item)) is not None}
    items = [item for answer in answers.values() for item in answer]
    table: dict[tuple[str, str, str], dict[str, float]] = {}
    for item in items:
        labels = item.get("metric") or {}
        value = value_of(item)
        if value is None:
            continue
        key = (labels.get(c, ""), labels.get(label, ""), labels.get("resource", ""))
        table.setdefault(key, {}).setdefault(labels.get(STAT, ""), value)
    rows = []
    for (cluster, group, resource), stats in sorted(table.items()):
        if not stats.get("allocated") and not stats.get("peak"):
            continue
        measured = stats.get("measured", 0.0)
        rows.append(UsageRow(cluster, group, resource, stats.get("allocated", 0.0),
                             stats.get("used") if measured > 0 else None, measured,
                             stats.get("idle", 0.0) if measured > 0 else None, stats.get("shared", 0.0), stats.get("peak", 0.0)))

    start = now - settings.window
    # Each subquery point stands for the step before it, as in the sums.
    covered = {cluster: min(settings.window, max(0.0, now - max(first_at, start) + settings.step)) for cluster, first_at in froms.items()}
    missing = []
    for stat, words_missing in (("requests", "kube_pod_container_resource_requests (kube-state-metrics)"),
                                ("phases", "kube_pod_status_phase (kube-state-metrics)"),
                                ("dcgm", "DCGM_FI_DEV_GPU_UTIL (the DCGM exporters): no used or idle figures")):
        if not found.get(stat):
            missing.append(words_missing)
    if kind in ("label", "model") and not found.get("group_label"):
        series, allow = ("kube_node_labels", "nodes=[nvidia.com/gpu.product]") if kind == "model" else \
            ("kube_pod_labels", f"pods=[{settings.by[6:]}]")
        missing.append(f"{series} has no {label}: kube-state-metrics' --metric-labels-allowlist must name it ({allow})")
    return UsageView(prometheus.where, settings.by, settings.window, settings.step, method, words, covered,
                     tuple(missing), tuple(rows), now)


def _too_costly(error: str) -> bool:
    """Prometheus gave up on a query for its cost: its timeout, ours, or its samples limit."""
    return any(words in error for words in ("timed out", "did not answer within", "too many samples"))


def _cheaper(by: str, method: str, read_label_rules: bool) -> str:
    """For a query too costly: the rules that would answer it, where it did not read them."""
    if by.startswith("label:") and not read_label_rules:
        return f"; `gputui prometheus-rules --label {by[6:]}` records this grouping's figures (README: GPU-hours over days)"
    if method == RAW:
        return "; `gputui prometheus-rules` records these figures (README: GPU-hours over days)"
    return ""


class UsageFeed:
    """The figures one view wants, asked of Prometheus here (`where`: a URL or NAMESPACE/SERVICE[:PORT] through
    the cluster's `api`; None: no Prometheus, nothing asked). `ask(settings)` asks again from now, dropping an
    answer under way; `view` is None while asking, `error` one line when Prometheus could not answer;
    `on_update()` is called after each change. While wanted (asked and not released), a new connection
    (`attach`) asks again."""

    def __init__(self, where: str | None, api: Client | None = None, on_update: Callable[[], None] = lambda: None,
                 settings: UsageSettings = UsageSettings()) -> None:
        self.where, self.api, self.on_update, self.settings = where, api, on_update, settings
        self.view: UsageView | None = None
        self.error: str | None = None
        self.wanted = False
        self._source: Prometheus | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def asking(self) -> bool:
        return self._task is not None and not self._task.done()

    def ask(self, settings: UsageSettings | None = None) -> None:
        """The figures for `settings` (None: the last asked), from now."""
        self.settings = settings or self.settings
        self.wanted = True
        self.view = self.error = None
        if self._task is not None:
            self._task.cancel()
        if self.where is not None:
            self._task = asyncio.create_task(self._answer(self.settings), name="gputui-usage")
        self.on_update()

    def release(self) -> None:
        """Nobody looks any more: an answer under way is dropped."""
        self.wanted = False
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def attach(self, api: Client | None) -> None:
        """A new connection's client (after stop()); asked again if wanted."""
        self.api = api
        if self.wanted:
            self.ask()

    async def _answer(self, settings: UsageSettings) -> None:
        try:
            if self._source is None:
                self._source = Prometheus(self.where or "", self.api)
            view = await usage(self._source, settings)
        except (UsageError, ConnectError) as exc:
            self.error = str(exc)
        else:
            self.view = view
        self.on_update()

    async def stop(self) -> None:
        """Drop what is under way and what is held, and close the connection to Prometheus; settings and
        wanted stay (attach asks again)."""
        task, self._task = self._task, None
        await cancel_and_wait([task])
        source, self._source = self._source, None
        if source is not None:
            await source.close()
        self.view = self.error = None
