"""GPU-hours per group (kube/usage.py) from Debian's real Prometheus scraping a simulated cluster's
kube-state-metrics (sim/exporters/ksm.py) and DCGM exporters every half second, with gputui's recording rules loaded:
the figures against sums computed from the pods' known lifetimes and the exporters' profiles, from the raw
series and from the rules alike.

The cluster (the idle-gpus scenario, static): while Prometheus watches, ml/notebook-alice is deleted,
research/new-job (2 busy GPUs) starts, ml/batch-eval-0 ends (Succeeded); the GPU Operator's validator pods
request GPUs but ended long ago, so they count for nothing; shared/pair-a and pair-b share one time-sliced GPU."""
from __future__ import annotations

import asyncio
import contextlib
import copy
import io
import json
import re
import subprocess
import time

import pytest
import pytest_asyncio

from gputui.kube.prometheus import PrometheusError
from gputui.kube.usage import R_POD_HOURS_1H, RAW, RULES, Prometheus, UsageError, UsageFeed, UsageSettings, figures_raw, figures_rules, rules_file, usage
from gputui.sim import SimCluster
from gputui.sim.exporters import dcgm
from gputui.sim.scenarios import idle_gpus
from gputui.sim import builders as b
from gputui.sim.exporters.ksm import KubeStateMetrics
from gputui.sim.apiserver.proxy import BACKEND_ANNOTATION
from tests import prometheus as prom
from tests.model.test_report import report_of

pytestmark = pytest.mark.asyncio(loop_scope="module")
TICK = 0.5  # scrape and rule evaluation interval, and the subqueries' step
FINE, COARSE = TICK, 2.0  # the rules' "1m" and "1h" intervals here
BUSY, MIG = 0.9, 0.375


class Timeline:
    """What the test did and when: each GPU pod's (namespace, app label, resource, count, use, start, end)."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.pods: dict[str, list] = {}
        self.ended_at = 0.0

    def seconds(self, window_end: float, window: float, pick, by_app: bool = False) -> dict[tuple[str, str], float]:
        """GPU-seconds per (group, resource) over the window, for pods that `pick` returns a weight for; the group
        the namespace, or the pod's app label."""
        out: dict[tuple[str, str], float] = {}
        start = window_end - window
        for name, (namespace, app, resource, count, use, began, ended) in self.pods.items():
            alive = max(0.0, min(ended or window_end, window_end) - max(began, start))
            weight = pick(name, namespace, app, use)
            if weight and alive:
                key = (app if by_app else namespace, resource)
                out[key] = out.get(key, 0.0) + weight * count * alive
        return out


def time_sliced(objects: list[dict]) -> list[dict]:
    """The scenario and ts-1: one A100 time-sliced four ways (GPU Feature Discovery's labels, nvidia.com/gpu: 4,
    its exporter), held by shared/pair-a and shared/pair-b at once: one device, two pods, use not split."""
    by_name = {o["metadata"]["name"]: o for o in objects if o["kind"] in ("Node", "Pod")}
    node = copy.deepcopy(by_name["gpu-2"])
    node["metadata"]["name"] = node["metadata"]["labels"]["kubernetes.io/hostname"] = "ts-1"
    node["metadata"].pop("uid", None)
    node["metadata"]["labels"].update({"nvidia.com/gpu.count": "1", "nvidia.com/gpu.replicas": "4",
                                       "nvidia.com/gpu.sharing-strategy": "time-slicing",
                                       "nvidia.com/gpu.product": f"{idle_gpus.A100}-SHARED"})
    for resources in (node["status"]["capacity"], node["status"]["allocatable"]):
        resources["nvidia.com/gpu"] = "4"
    exporter = copy.deepcopy(next(o for name, o in by_name.items() if name.startswith("nvidia-dcgm-exporter-")
                                  and o["spec"]["nodeName"] == "gpu-2"))
    exporter["metadata"]["name"] = "nvidia-dcgm-exporter-ts001"
    exporter["metadata"].pop("uid", None)
    exporter["spec"]["nodeName"] = "ts-1"
    # Both pods named on the GPU, each with its whole use, as dcgm-exporter does with --kubernetes-virtual-gpus
    # (without it, one of them only).
    exporter["spec"]["containers"][0].setdefault("env", []).append({"name": "KUBERNETES_VIRTUAL_GPUS", "value": "true"})
    pairs = []
    for name in ("pair-a", "pair-b"):
        pod = copy.deepcopy(by_name["sweep-0"])
        pod["metadata"] = {"name": name, "namespace": "shared", "labels": {"app": "pair"},
                           "annotations": {dcgm.UTIL_ANNOTATION: "busy"}, "creationTimestamp": pod["metadata"]["creationTimestamp"]}
        pod["spec"]["nodeName"] = "ts-1"
        pairs.append(pod)
    return [*objects, b.namespace("shared"), node, exporter, *pairs]


class Setup:
    def __init__(self, sim, server, timeline) -> None:
        self.sim, self.server, self.timeline = sim, server, timeline


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def setup(tmp_path_factory):
    if prom.BINARY is None:
        pytest.skip(prom.MISSING)
    tmp = tmp_path_factory.mktemp("usage")
    objects = time_sliced(idle_gpus.build())
    port = prom.free_port()
    # The Prometheus also in the cluster, where gputui looks for it by default, behind the API server's service proxy.
    objects.append(b.service("prometheus-k8s", "monitoring", {"app.kubernetes.io/name": "prometheus"}, [("web", 9090, 9090)],
                             annotations={BACKEND_ANNOTATION: f"127.0.0.1:{port}"}))
    objects.insert(0, b.namespace("monitoring"))
    async with SimCluster(objects, run_controllers=False) as sim, \
            KubeStateMetrics(sim, {"pods": ["app"], "nodes": ["nvidia.com/gpu.product"]}) as ksm:
        config = prom.exporter_jobs(sim, tmp) + prom.ksm_job("kube-state-metrics", ksm.url)
        rules = rules_file(fine=FINE, coarse=COARSE, labels=("app",))  # and the app label's own rules
        async with prom.running(tmp / "prometheus", config, interval=f"{int(TICK * 1000)}ms", rules=rules, port=port) as server:
            await server.until(lambda: len(server.ask("count_over_time(kube_pod_info[2s])")) > 0
                               and len(server.ask("count_over_time(DCGM_FI_DEV_GPU_UTIL[2s]) >= 2")) >= 10
                               and len(server.ask("gputui:gpus_allocated:1m")) > 0, "two scrapes of everything")
            timeline = Timeline(time.time())
            for p in sim.store.objects("pods"):
                meta = p["metadata"]
                profile = dcgm.parse_util_annotation(meta.get("annotations", {}).get(dcgm.UTIL_ANNOTATION, "0"))
                for c in p["spec"]["containers"]:
                    for resource, count in c["resources"].get("requests", {}).items():
                        if resource.startswith("nvidia.com/") and p["status"]["phase"] == "Running":
                            started = dcgm._started(p)  # the profile counts from the pod's start
                            use = profile.util(timeline.t0 - started) / 100
                            timeline.pods[meta["name"]] = [meta["namespace"], meta["labels"].get("app", ""),
                                                           resource.replace(".", "_").replace("/", "_").replace("-", "_"),
                                                           int(count), use, timeline.t0 - 60, 0.0]
            await asyncio.sleep(1.0)
            sim.store.delete("pods", "ml", "notebook-alice")
            timeline.pods["notebook-alice"][6] = time.time()
            await asyncio.sleep(0.75)
            new = copy.deepcopy(sim.store.get("pods", "research", "sweep-0"))
            new["metadata"] = {"name": "new-job", "namespace": "research", "labels": {"app": "new"},
                               "annotations": {dcgm.UTIL_ANNOTATION: "busy"}}
            new["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "2"}}
            sim.store.create("pods", new)
            timeline.pods["new-job"] = ["research", "new", "nvidia_com_gpu", 2, BUSY, time.time(), 0.0]
            await asyncio.sleep(0.75)

            def succeeded(pod):
                pod["status"]["phase"] = "Succeeded"

            sim.store.mutate("pods", "ml", "batch-eval-0", succeeded)
            timeline.pods["batch-eval-0"][6] = time.time()
            await asyncio.sleep(1.5)
            yield Setup(sim, server, timeline)


def settings(window: float, **options) -> UsageSettings:
    return UsageSettings(window=window, min_step=TICK, fine_interval=FINE, **options)


def last_change(setup: Setup) -> float:
    """When the timeline's last pod started or ended."""
    return max(max(began, ended) for *_, began, ended in setup.timeline.pods.values())


async def since_t0(setup: Setup) -> tuple[int, float]:
    """A window from about the timeline's start (to half a second) to now, and that now: queries compared with each
    other ask at the same moment, so one slowed by a loaded machine does not slide its window past a pod's end.
    Not before the hourly rules have two evaluations past the timeline's last change (an idle machine gets here
    sooner than that): a pod's first hourly sample comes only at the evaluation after its start."""
    await asyncio.sleep(max(0.0, last_change(setup) + 2 * COARSE + FINE - time.time()))
    at = time.time()
    return round(at - setup.timeline.t0), at


async def figures(setup: Setup, s: UsageSettings, now: float | None = None, hidden: tuple[str, ...] = ()):
    """The figures, and the queries asked; the rules of `hidden` (the presence query's names) as a rules file older
    than them: absent."""
    source = prom.WithoutRules(setup.server.url, hidden)
    try:
        return await usage(source, s, now=time.time() if now is None else now), source.requests
    finally:
        await source.close()


def expected(setup: Setup, at: float, window: float, by_app: bool = False):
    t = setup.timeline
    allocated = t.seconds(at, window, lambda *_: 1.0, by_app)
    used = t.seconds(at, window, lambda name, ns, app, use: use, by_app)
    idle = t.seconds(at, window, lambda name, ns, app, use: 1.0 if use * 100 < 5 else 0.0, by_app)
    return allocated, used, idle


def check(view, setup: Setup, tolerance: float) -> None:
    """Each group's figures (GPU-seconds) against the timeline's; each pod's start and end may be off by
    `tolerance` seconds (a scrape, a step). Grouped by namespace or by the pods' `app` label."""
    window = view.window_s
    by_app = view.by == "label:app"
    allocated, used, idle = expected(setup, view.at, window, by_app)
    rows = {(r.group, r.resource): r for r in view.rows}
    assert set(rows) == set(allocated), (rows.keys(), allocated.keys())
    counts = {key: sum(p[3] for p in setup.timeline.pods.values() if (p[1] if by_app else p[0], p[2]) == key) for key in allocated}
    for key, row in rows.items():
        slack = tolerance * counts[key] * 3
        assert row.allocated_h * 3600 == pytest.approx(allocated[key], abs=slack), key
        if key[0] == ("pair" if by_app else "shared"):  # two pods on one device: its use is theirs together, not either's
            assert (row.used_h, row.measured_h, row.idle_h, row.ratio) == (None, 0, None, None)
            assert row.shared_h == pytest.approx(row.allocated_h, abs=slack / 3600)
            assert row.notes[0].endswith("GPU-h on shared GPUs: their use cannot be split between pods")
            continue
        assert row.measured_h == pytest.approx(row.allocated_h, abs=slack / 3600), key  # every GPU pod's devices report
        assert row.used_h * 3600 == pytest.approx(used.get(key, 0.0), abs=slack), key
        assert row.idle_h * 3600 == pytest.approx(idle.get(key, 0.0), abs=slack), key
        assert row.shared_h == 0 and not [n for n in row.notes if "shared" in n]


async def test_figures_from_the_raw_series_follow_the_pods_lifetimes(setup):
    window, at = await since_t0(setup)
    view, requests = await figures(setup, settings(window, use_rules=False), now=at)
    # which series there are, then each of the six figures (allocated, peak, used, measured, idle, shared) and
    # when the series begin, asked at once
    assert (view.method, view.missing, requests) == (RAW, (), 8)
    check(view, setup, TICK * 2)
    rows = {(r.group, r.resource): r for r in view.rows}
    assert rows[("ml", "nvidia_com_gpu")].peak == 7  # llm-train-0, notebook-alice and batch-eval-0 at once
    assert rows[("research", "nvidia_com_gpu")].peak == 3  # sweep-0 and new-job
    assert rows[("research", "nvidia_com_mig_1g_10gb")].peak == 1
    assert rows[("ml", "nvidia_com_gpu")].ratio == pytest.approx(rows[("ml", "nvidia_com_gpu")].used_h / rows[("ml", "nvidia_com_gpu")].measured_h)
    assert view.covered_s == {"": pytest.approx(window, abs=TICK)}
    assert {p["metric"]["pod"] for p in setup.server.ask('kube_pod_container_resource_requests{resource="nvidia_com_gpu"}')} >= {
        "llm-train-0", "sweep-0", "new-job"}  # the validators' requests are there: only the Running phase counts


async def test_the_recording_rules_give_the_same(setup):
    window, at = await since_t0(setup)
    view, _ = await figures(setup, settings(window), now=at)
    assert (view.method, view.method_words) == (RULES, "recording rules gputui:*:1m")
    check(view, setup, TICK * 2)
    coarse, _ = await figures(setup, settings(window, coarse_after=window), now=at)
    assert coarse.method_words == "recording rules gputui:*:1h"
    fine_rows = {(r.group, r.resource): r.allocated_h for r in view.rows}
    for row in coarse.rows:  # each 1-hour sample covers the interval before it: the window, shifted by up to one
        assert row.allocated_h == pytest.approx(fine_rows[(row.group, row.resource)], abs=COARSE * 8 / 3600)


PER_POD_1M, PER_POD_1H = (f"recording rules gputui:*:{i}, per pod joined to label_app" for i in ("1m", "1h"))


async def test_a_label_grouping_reads_the_per_pod_rules_and_gives_the_raw_series_figures(setup):
    """`--by label:app` with the rules loaded, the label's own rules aside: the per-pod 1-minute rules joined to
    kube_pod_labels at each step, or the 1-hour ones joined once to each pod's gputui:pod_labels; the timeline's
    figures, and the raw series' own."""
    window, at = await since_t0(setup)
    raw, _ = await figures(setup, settings(window, by="label:app", use_rules=False), now=at)
    fine, requests = await figures(setup, settings(window, by="label:app", label_rules=False), now=at)
    assert (raw.method, fine.method, fine.method_words, fine.missing, requests) == (RAW, RULES, PER_POD_1M, (), 8)
    for view in (raw, fine):
        check(view, setup, TICK * 2)
    raw_rows = {(r.group, r.resource): r for r in raw.rows}
    assert {(r.group, r.resource) for r in fine.rows} == set(raw_rows)
    for row in fine.rows:  # the same figures from either, to a scrape of each pod's start and end
        twin = raw_rows[(row.group, row.resource)]
        slack = 3 * TICK * 2 * row.peak / 3600
        for name in ("allocated_h", "used_h", "measured_h", "idle_h", "shared_h"):
            assert getattr(row, name) == pytest.approx(getattr(twin, name), abs=slack), (row.group, name)
        assert row.peak == twin.peak
    assert fine.covered_s == {"": pytest.approx(window, abs=TICK * 2)}  # from the per-pod rules' first sample

    coarse, _ = await figures(setup, settings(window, by="label:app", coarse_after=window, label_rules=False), now=at)
    assert coarse.method_words == PER_POD_1H
    fine_rows = {(r.group, r.resource): r for r in fine.rows}
    assert {(r.group, r.resource) for r in coarse.rows} == set(fine_rows)
    for row in coarse.rows:  # each 1-hour sample covers the interval before it: the window, shifted by up to one
        twin = fine_rows[(row.group, row.resource)]
        assert row.allocated_h == pytest.approx(twin.allocated_h, abs=COARSE * 8 / 3600)
        assert row.shared_h == pytest.approx(twin.shared_h, abs=COARSE * 8 / 3600)
        assert (row.used_h is None) == (twin.used_h is None)
        assert row.peak == twin.peak  # at the window's step, from the 1-minute rules
    # The join to the pods' labels neither drops nor doubles a pod: the groups add up to every pod's 1-hour samples.
    # (Not to the namespaces' 1-hour rule: on a loaded machine that one's evaluation may read a 1-minute sample more
    # or less than the pods' did, Prometheus evaluating the two groups at once.)
    every_pod = setup.server.ask(f"sum(sum_over_time({R_POD_HOURS_1H['allocated']}[{window}s]))", at=at)
    assert sum(r.allocated_h for r in coarse.rows) == pytest.approx(float(every_pod[0]["value"][1]), abs=1e-9)


def same_figures(view, twin, slack_s: float = 3 * TICK * 2, peak: bool = True) -> None:
    """Each group's figures of `view` those of `twin`, to `slack_s` seconds of each of its peak's GPUs (a scrape of
    each pod's start and end)."""
    twin_rows = {(r.group, r.resource): r for r in twin.rows}
    assert {(r.group, r.resource) for r in view.rows} == set(twin_rows)
    for row in view.rows:
        other = twin_rows[(row.group, row.resource)]
        slack = slack_s * max(row.peak, 1) / 3600
        for name in ("allocated_h", "used_h", "measured_h", "idle_h", "shared_h"):
            a, b = getattr(row, name), getattr(other, name)
            assert (a is None) == (b is None), (row.group, name)
            assert a is None or a == pytest.approx(b, abs=slack), (row.group, name, a, b)
        if peak:
            assert row.peak == other.peak, row.group


async def test_a_label_grouping_reads_the_labels_own_rules_and_gives_the_same_figures(setup):
    """`--by label:app` with `prometheus-rules --label app` loaded reads gputui:label_*{gputui_label="label_app"}: a few
    series per app, no pod's; the timeline's figures, and those of the raw series and of the per-pod rules; at 1 hour,
    those of the per-pod 1-hour rules."""
    window, at = await since_t0(setup)
    own, requests = await figures(setup, settings(window, by="label:app"), now=at)
    assert (own.method, own.method_words, own.missing, requests) == (RULES, "recording rules gputui:*:1m, per label_app", (), 8)
    check(own, setup, TICK * 2)
    raw, _ = await figures(setup, settings(window, by="label:app", use_rules=False), now=at)
    per_pod, _ = await figures(setup, settings(window, by="label:app", label_rules=False), now=at)
    assert per_pod.method_words == PER_POD_1M
    same_figures(own, raw)
    same_figures(own, per_pod)
    assert own.covered_s == {"": pytest.approx(window, abs=TICK * 2)}  # from the label rules' first sample

    coarse, _ = await figures(setup, settings(window, by="label:app", coarse_after=window), now=at)
    assert coarse.method_words == "recording rules gputui:*:1h, per label_app"
    per_pod_coarse, _ = await figures(setup, settings(window, by="label:app", coarse_after=window, label_rules=False), now=at)
    assert per_pod_coarse.method_words == PER_POD_1H
    # The same hours as the per-pod 1-hour rules, each sample the interval before it: to the evaluations' rounding
    same_figures(coarse, per_pod_coarse, slack_s=COARSE * 2)
    same_figures(coarse, own, slack_s=COARSE * 8, peak=True)  # the window shifted by up to an interval; peak at the window's step
    by_namespace, _ = await figures(setup, settings(window, coarse_after=window), now=at)  # the same pods' hours, summed otherwise
    assert sum(r.allocated_h for r in coarse.rows) == pytest.approx(sum(r.allocated_h for r in by_namespace.rows), abs=COARSE * 2 / 3600)


NEWER = ("group_rules_1m", "node_rules_1h")  # the per-node and per-model rules, newer than the others


async def test_by_node_and_model_their_own_rules_give_the_same_figures(setup):
    """By model, the peak from gputui:model_gpus_allocated:1m instead of the per-node rules joined to the nodes'
    models at each step; by node, the peak from gputui:node_gpus_allocated:1m and, over a long window, the hours from
    gputui:node_gpu_hours_*:1h: the figures of a rules file without them, at the same moment."""
    window, at = await since_t0(setup)
    for by in ("model", "node"):
        fine, _ = await figures(setup, settings(window, by=by), now=at)
        older, _ = await figures(setup, settings(window, by=by), now=at, hidden=NEWER)
        assert fine.method_words == older.method_words == "recording rules gputui:*:1m"
        same_figures(fine, older, slack_s=0)  # the same hours; the peak at the window's steps
        coarse, _ = await figures(setup, settings(window, by=by, coarse_after=window), now=at)
        older_coarse, _ = await figures(setup, settings(window, by=by, coarse_after=window), now=at, hidden=NEWER)
        assert coarse.method_words == "recording rules gputui:*:1h"
        assert older_coarse.method_words == ("recording rules gputui:*:1m" if by == "node" else "recording rules gputui:*:1h")
        # by node, the hourly hours against the 1-minute ones at the window's step: the window shifted by up to an interval
        same_figures(coarse, older_coarse, slack_s=COARSE * 8 if by == "node" else 0)
        assert coarse.covered_s == fine.covered_s == {"": pytest.approx(window, abs=TICK * 2)}
    # The same 1-minute samples summed per node as per namespace (to one of them: the two groups evaluated at once)
    by_namespace, _ = await figures(setup, settings(window, coarse_after=window), now=at)
    one_sample = FINE * sum(r.peak for r in coarse.rows) / 3600
    assert sum(r.allocated_h for r in coarse.rows) == pytest.approx(sum(r.allocated_h for r in by_namespace.rows), abs=one_sample)


@pytest.mark.parametrize("days", [1 / 24, 0.5, 1, 7, 30, 90])
async def test_the_subqueries_step_is_fit_to_the_window(days):
    """However long the window, at most 720 steps, each at least a minute: the work is bounded by the steps."""
    window = days * 86400
    s = UsageSettings(window=window, by="label:team")
    assert window / s.step <= 720 and s.step >= 60 and s.step.is_integer()
    subqueries = re.findall(r"\[(\d+)s:(\d+)s\]", " ".join(figures_raw(s).values()) + figures_rules(s, coarse=False)["peak"])
    assert subqueries and set(subqueries) == {(str(int(window)), str(int(s.step)))}
    own = re.findall(r"\[(\d+)s:(\d+)s\]", " ".join(figures_rules(s, coarse=False, label_rules=True).values()))
    assert own and set(own) == {(str(int(window)), str(int(s.step)))}


class Canned:
    """A Prometheus that has the series `present` (the presence query's names) and answers every other query with
    nothing; it keeps what it was asked."""

    where = "canned"

    def __init__(self, present: set[str]) -> None:
        self.present, self.asked = present, []

    async def query(self, expr: str, at: float, timeout: float = 60.0) -> list[dict]:
        self.asked.append(expr)
        if '"gputui_stat", "requests"' not in expr:
            return []
        return [{"metric": {"gputui_stat": name}, "value": [at, "1"]} for name in self.present]


BASE = {"requests", "phases", "dcgm", "rules_1m", "rules_1h", "group_label"}
POD_1M, POD_1H = "gputui:pod_gpu_hours_allocated:1m", "gputui:pod_gpu_hours_allocated:1h"
LABEL_1M, LABEL_1H = 'gputui:label_gpu_hours_allocated:1m{gputui_label="label_team"}', 'gputui:label_gpu_hours_allocated:1h{gputui_label="label_team"}'
LABEL_PEAK = 'gputui:label_gpus_allocated:1m{gputui_label="label_team"}'


@pytest.mark.parametrize(("present", "method", "reads", "unread"), [
    (BASE, RAW, (), ()),  # a rules file older than the per-pod rules
    (BASE | {"pod_rules_1m"}, "recording rules gputui:*:1m, per pod joined to label_team", (POD_1M, "gputui:pod_gpus_allocated:1m"), ("gputui:label_",)),
    (BASE | {"pod_rules_1m", "pod_rules_1h"}, "recording rules gputui:*:1h, per pod joined to label_team",
     (POD_1H, "gputui:pod_labels:1h", "gputui:pod_gpus_allocated:1m"), ("gputui:label_",)),
    (BASE | {"pod_rules_1m", "pod_rules_1h", "label_rules_1m"}, "recording rules gputui:*:1m, per label_team",
     (LABEL_1M, LABEL_PEAK), ("gputui:pod_", "kube_pod_labels")),  # the label's hourly rules not yet evaluated
    (BASE | {"pod_rules_1m", "pod_rules_1h", "label_rules_1m", "label_rules_1h"}, "recording rules gputui:*:1h, per label_team",
     (LABEL_1H, LABEL_PEAK), ("gputui:pod_", "kube_pod_labels", LABEL_1M)),
    (BASE | {"label_rules_1m", "label_rules_1h"}, "recording rules gputui:*:1h, per label_team",
     (LABEL_1H, LABEL_PEAK), ("gputui:pod_", "kube_pod_labels")),
], ids=["old rules: raw series", "1-minute per-pod rules", "1-hour per-pod rules", "1-minute label rules", "1-hour label rules",
        "label rules alone"])
async def test_a_label_grouping_reads_the_rules_only_where_they_are(present, method, reads, unread):
    source = Canned(present)
    view = await usage(source, settings(30 * 86400, by="label:team", coarse_after=86400), now=2e9)
    assert (view.method_words if view.method == RULES else view.method) == method
    figures_asked = source.asked[1:]
    assert len(figures_asked) == 7
    if view.method == RAW:
        assert not [q for q in figures_asked if "gputui:" in q]
    else:
        assert all(any(name in q for q in figures_asked) for name in reads), reads
        assert not [q for q in figures_asked if "DCGM_FI_DEV_GPU_UTIL" in q or "kube_pod_container_resource_requests" in q]
        assert not [name for name in unread if any(name in q for q in figures_asked)]


class TooCostly(Canned):
    """A Prometheus that finds the rules `present` and gives up on every figure, as Prometheus past its timeout."""

    async def query(self, expr: str, at: float, timeout: float = 60.0) -> list[dict]:
        answer = await super().query(expr, at, timeout)
        if '"gputui_stat", "requests"' not in expr:
            raise PrometheusError("Prometheus canned: query timed out in expression evaluation (503)")
        return answer


@pytest.mark.parametrize(("by", "present", "hint"), [
    ("label:team", BASE | {"pod_rules_1m", "pod_rules_1h"}, "; `gputui prometheus-rules --label team` records this grouping's figures"),
    ("label:team", BASE, "; `gputui prometheus-rules --label team` records this grouping's figures"),
    ("namespace", {"requests", "phases", "dcgm"}, "; `gputui prometheus-rules` records these figures"),
    ("label:team", BASE | {"label_rules_1m", "label_rules_1h"}, ""),
    ("namespace", BASE, ""),
], ids=["label, per-pod rules", "label, raw series", "namespace, raw series", "label, its own rules", "namespace, rules"])
async def test_a_query_too_costly_says_which_rules_would_answer_it(by, present, hint):
    with pytest.raises(PrometheusError) as error:
        await usage(TooCostly(present), settings(30 * 86400, by=by, coarse_after=86400), now=2e9)
    said = str(error.value)
    assert said.startswith("Prometheus canned: query timed out in expression evaluation (503)")
    assert said.removeprefix("Prometheus canned: query timed out in expression evaluation (503)").startswith(hint)
    assert hint or said.endswith("(503)")


MODEL_PEAK, NODE_PEAK = "gputui:model_gpus_allocated:1m", "gputui:node_gpus_allocated:1m"
HOURS_1M, HOURS_1H, NODE_1H, ALLOCATED_1M = ("gputui:gpu_hours_allocated:1m", "gputui:gpu_hours_allocated:1h",
                                             "gputui:node_gpu_hours_allocated:1h", "gputui:gpus_allocated:1m")


@pytest.mark.parametrize(("by", "present", "method", "reads", "unread"), [
    ("model", BASE, "recording rules gputui:*:1h", (HOURS_1H, ALLOCATED_1M, "kube_node_labels"), (MODEL_PEAK,)),  # an older rules file
    ("model", BASE | {"group_rules_1m"}, "recording rules gputui:*:1h", (HOURS_1H, MODEL_PEAK), (ALLOCATED_1M, "kube_node_labels")),
    ("node", BASE, "recording rules gputui:*:1m", (HOURS_1M, ALLOCATED_1M), (NODE_PEAK, NODE_1H)),
    ("node", BASE | {"group_rules_1m"}, "recording rules gputui:*:1m", (HOURS_1M, NODE_PEAK), (ALLOCATED_1M, NODE_1H)),  # hourly not yet
    ("node", BASE | {"group_rules_1m", "node_rules_1h"}, "recording rules gputui:*:1h", (NODE_1H, NODE_PEAK), (HOURS_1M, ALLOCATED_1M)),
], ids=["model, older rules", "model, its own peak", "node, older rules", "node, 1-minute", "node, 1-hour"])
async def test_by_node_and_model_read_their_own_rules_only_where_they_are(by, present, method, reads, unread):
    """A month by node or model: the grouping's own rules where present (the peak and when the rules begin from its
    GPUs allocated), else the older ones (the peak by model from the per-node rules joined to the nodes' labels)."""
    source = Canned(present)
    view = await usage(source, settings(30 * 86400, by=by, coarse_after=86400), now=2e9)
    assert (view.method, view.method_words) == (RULES, method)
    figures_asked = source.asked[1:]
    assert len(figures_asked) == 7
    assert all(any(name in q for q in figures_asked) for name in reads), reads
    assert not [name for name in unread if any(name in q for q in figures_asked)]
    own = NODE_PEAK if by == "node" else MODEL_PEAK
    assert (own if "group_rules_1m" in present else ALLOCATED_1M) in source.asked[-1]  # when the rules begin


async def test_by_label_node_and_model(setup):
    window, at = await since_t0(setup)
    by_app, _ = await figures(setup, settings(window, by="label:app", use_rules=False), now=at)
    assert by_app.missing == ()
    assert {r.group for r in by_app.rows} == {"llm-train", "notebook", "batch-eval", "sweep", "new", "pair"}
    by_model, _ = await figures(setup, settings(window, by="model", use_rules=False), now=at)
    assert {(r.group, r.resource) for r in by_model.rows} == {
        (idle_gpus.H100, "nvidia_com_gpu"), (idle_gpus.A100, "nvidia_com_gpu"), (idle_gpus.H100, "nvidia_com_mig_1g_10gb"),
        (f"{idle_gpus.A100}-SHARED", "nvidia_com_gpu")}
    by_node, _ = await figures(setup, settings(window, by="node"), now=at)
    assert {r.group for r in by_node.rows} == {"gpu-1", "gpu-2", "mig-1", "ts-1"}
    totals = [sum(r.allocated_h for r in v.rows) for v in (by_app, by_model, by_node)]
    assert max(totals) - min(totals) < 3 * TICK * 10 / 3600


async def test_what_the_figures_rest_on(setup):
    view, _ = await figures(setup, settings(3600, use_rules=False))
    # Prometheus has seconds of data, not the hour asked for (none yet where the hour's coarse step has no point in them)
    assert set(view.covered_s) <= {""} and view.covered_s.get("", 0) < 600
    missing, _ = await figures(setup, settings(30, by="label:team", use_rules=False))
    assert missing.missing == ("kube_pod_labels has no label_team: kube-state-metrics' --metric-labels-allowlist must name it (pods=[team])",)
    assert {r.group for r in missing.rows} == {""}  # the label unknown, every GPU in one group, not in none
    with pytest.raises(UsageError, match=r"^Prometheus http://127\.0\.0\.1:1: .*refused"):
        await usage(Prometheus("http://127.0.0.1:1"), settings(30))


async def test_the_feed_asks_for_the_screen_and_keeps_only_the_last_answer(setup):
    """The Usage screen's figures come from a UsageFeed: asked twice at once, the first answer is dropped; each
    change is said (on_update); after a new connection it asks again while wanted; a refusal is one line."""
    updates = asyncio.Event()
    feed = UsageFeed(setup.server.url, on_update=updates.set)
    window, _ = await since_t0(setup)
    feed.ask(settings(window, by="node", use_rules=False))
    assert (feed.view, feed.error, feed.asking) == (None, None, True) and updates.is_set()  # "asking Prometheus…"
    feed.ask(settings(window, use_rules=False))
    for _ in range(40):
        updates.clear()
        await asyncio.wait_for(updates.wait(), 30)
        if not feed.asking:
            break
    assert feed.error is None and feed.view is not None and feed.view.by == "namespace"  # the node grouping's answer dropped
    direct, _ = await figures(setup, settings(window, use_rules=False), now=feed.view.at)
    assert {(r.group, r.resource) for r in feed.view.rows} == {(r.group, r.resource) for r in direct.rows}
    await feed.stop()
    assert feed.view is None
    feed.attach(None)  # a new connection, the screen still open: asked again
    assert feed.asking
    feed.release()  # the screen closed: nothing more
    assert not feed.asking and not feed.wanted
    await feed.stop()
    refused = UsageFeed("http://127.0.0.1:1", on_update=updates.set)
    updates.clear()
    refused.ask(settings(30))
    while refused.asking:
        await asyncio.wait_for(updates.wait(), 30)
        updates.clear()
    assert refused.view is None and refused.error is not None and refused.error.startswith("Prometheus http://127.0.0.1:1: ")
    await refused.stop()
    nowhere = UsageFeed(None, on_update=updates.set)
    nowhere.ask()
    assert not nowhere.asking and nowhere.error is None  # no Prometheus: nothing asked (the screen says what it needs)


@pytest.mark.skipif(prom.PROMTOOL is None, reason="promtool is not installed (Debian's prometheus package)")
async def test_promtool_accepts_the_rules(tmp_path):
    (tmp_path / "rules.yml").write_text(rules_file(labels=("app", "team")))
    done = await asyncio.to_thread(subprocess.run, [prom.PROMTOOL, "check", "rules", str(tmp_path / "rules.yml")],
                                   capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    # at 1 minute six per pod and its devices' use, six per node and namespace, and the GPUs allocated per node and per model; at 1 hour five per
    # namespace and model, five per node, five per pod and the pods' labels; the fleet's
    # two; per label key six at 1 minute and five at 1 hour, told apart by their gputui_label (no duplicate rule)
    assert "SUCCESS: 55 rules found" in done.stdout and "duplicate" not in done.stdout


async def test_the_report_through_a_url_and_the_api_servers_service_proxy(setup):
    # The last few seconds, once the timeline's changes are behind them: the report's step is a tenth of so short a
    # window, and its peak is each group's running pods' GPUs (a window back to the timeline's start would see the
    # pods that ended a second in only where one of its coarser steps fell on them).
    recent = 3
    await asyncio.sleep(max(0.0, last_change(setup) + recent + 4 * TICK - time.time()))
    running: dict[tuple[str, str], int] = {}
    for namespace, _app, resource, count, _use, _began, ended in setup.timeline.pods.values():
        if not ended:
            running[(namespace, resource)] = running.get((namespace, resource), 0) + count
    rc, out, err = await report_of("--usage", "--since", f"{recent}s", "-o", "json", "--prometheus", setup.server.url)
    assert (rc, err) == (0, ""), err
    direct = json.loads(out)["usage"]
    assert (direct["by"], direct["window_s"], direct["method"], direct["missing"]) == ("namespace", recent, RULES, [])
    assert {(g["group"], g["resource"]): g["peak_gpus"] for g in direct["groups"]} == running
    assert running[("ml", "nvidia_com_gpu")] == 4 and {g["cluster"] for g in direct["groups"]} == {None}
    window = round(time.time() - setup.timeline.t0)
    # The same Prometheus as the service monitoring/prometheus-k8s:9090 (the default), through the API server.
    rc, out, err = await report_of("--usage", "--since", f"{window}s", "--by", "model", "--kubeconfig", str(setup.sim.kubeconfig_path))
    assert (rc, err) == (0, ""), err
    lines = out.splitlines()
    head = re.match(rf"GPU-hours over {window}s \(covered: (\d+)s\), by model, from Prometheus monitoring/prometheus-k8s:9090: recording rules", lines[0])
    assert head is not None and int(head[1]) >= window - 1, lines[0]  # the rules' newest point may be an evaluation behind
    assert lines[1].split() == ["MODEL", "RESOURCE", "ALLOCATED", "USED", "RATIO", "IDLE", "SHARED", "PEAK"]
    assert sorted(line.split()[0] for line in lines[2:6]) == sorted([idle_gpus.A100, f"{idle_gpus.A100}-SHARED", idle_gpus.H100, idle_gpus.H100])
    assert lines[-1].startswith(f"note: {idle_gpus.A100}-SHARED nvidia_com_gpu: ") and lines[-1].endswith("cannot be split between pods")


async def test_prometheus_rules_prints_the_file_the_tests_load():
    from gputui.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["prometheus-rules", "--threshold", "5"])
    assert rc == 0 and out.getvalue() == rules_file()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["prometheus-rules", "--threshold", "5", "--label", "app", "--label", "app.kubernetes.io/name"])
    assert rc == 0 and out.getvalue() == rules_file(labels=("app", "app.kubernetes.io/name"))
    assert 'labels: {"gputui_label":"label_app_kubernetes_io_name"}' in out.getvalue()
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert main(["prometheus-rules", "--label", "not a key"]) == 2
    assert "--label 'not a key': not a Kubernetes label key" in err.getvalue()
