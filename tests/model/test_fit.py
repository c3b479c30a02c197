"""What fits where (gputui/kube/fit.py): the figures on the fragmented scenario through the model against the
simulator, checked against the simulated scheduler's own filters; unknown while the pods are not listed; a
pending pod's fit line; pods held by scheduling gates; the report's `fit` key."""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json

import pytest
import pytest_asyncio

from gputui.cli import report
from gputui.kube import fit, gpu
from gputui.kube.model import NODES, PODS
from gputui.kube.records import node_from, pod_from
from gputui.kube.watch import FORBIDDEN
from gputui.sim import builders as b
from gputui.sim.scenarios import fragmented
from gputui.sim.cluster import SimCluster
from gputui.sim.scenarios.cluster_builder import GPU_TOLERATION
from tests.model.objects import node, pod
from tests.model.scenario import model_on, until

on_the_module_loop = pytest.mark.asyncio(loop_scope="module")  # the async tests share the module's simulator

GPU = "nvidia.com/gpu"
MIG_1G, MIG_3G = "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"
# The scenario's design (gputui/sim/scenarios/fragmented.py): usable nodes with 3, 2, 1 and 2 (h100-4, only the usual
# nvidia.com/gpu taint) free; 4 cordoned, 8 NotReady and 2 behind a custom taint stranded.
EXPECTED_JSON = {
    GPU: {"1": 4, "2": 3, "4": 0, "8": 0, "largest": 3, "stranded": 14},
    MIG_1G: {"1": 1, "2": 1, "4": 1, "8": 0, "largest": 4, "stranded": 0},
    MIG_3G: {"1": 1, "2": 1, "4": 0, "8": 0, "largest": 2, "stranded": 0},
}
FIT_LINE = ("needs 4 nvidia.com/gpu on one node; 8 free but at most 3 on any node: h100-1 3, h100-2 2, h100-4 2, +1 more; "
            "14 more free on cordoned, NotReady or tainted nodes")
GATE_REASON = "held by scheduling gate kueue.x-k8s.io/admission (owner kueue.x-k8s.io): not scheduled until it is removed"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sim():
    async with SimCluster(fragmented.build(), speed=50, faults=True) as cluster:
        await until(lambda: _scheduled_reason(cluster, "llm-train-4gpu") == "Unschedulable", what="the scheduler's first pass")
        yield cluster


def _scheduled_reason(cluster: SimCluster, name: str) -> str | None:
    conditions = (cluster.store.get("pods", "ml", name).get("status") or {}).get("conditions") or []
    return next((c.get("reason") for c in conditions if c["type"] == "PodScheduled"), None)


def scheduler_oracle(cluster: SimCluster) -> dict[str, dict[str, int]]:
    """The figures as the simulated scheduler's own filters see them: a probe pod tolerating nvidia.com/gpu, asking
    for N of a resource, passes on how many nodes; the largest N that passes somewhere; and the free on nodes the
    probe fails on for something other than room (unschedulable, a taint, NotReady)."""
    scheduler = cluster.controllers.scheduler
    probe = {"spec": {"tolerations": [GPU_TOLERATION]}}
    out: dict[str, dict[str, int]] = {}
    for obj in cluster.store.objects("nodes"):
        for resource, quantity in obj["status"]["allocatable"].items():
            allocatable = int(b.parse_quantity(quantity))
            if not b.is_gpu_resource(resource) or allocatable == 0:
                continue
            figures = out.setdefault(resource, {"1": 0, "2": 0, "4": 0, "8": 0, "largest": 0, "stranded": 0})
            free = allocatable - int(scheduler.usage.get(obj["metadata"]["name"], {}).get(resource, 0))
            _, room_only = scheduler._filter(probe, {resource: 1}, obj)
            if not room_only:
                figures["stranded"] += free
                continue
            passes = [n for n in range(1, allocatable + 1) if not scheduler._filter(probe, {resource: n}, obj)[0]]
            for size in ("1", "2", "4", "8"):
                figures[size] += int(size) in passes
            figures["largest"] = max(figures["largest"], max(passes, default=0))
    return out


@on_the_module_loop
async def test_figures_on_the_fragmented_scenario(sim):
    async with model_on(sim) as model:
        fits = model.fit()
        assert {name: f.as_json() for name, f in fits.items()} == EXPECTED_JSON == scheduler_oracle(sim)
        gpus = fits[GPU]
        assert gpus.free == 8 and gpus.top == (("h100-1", 3), ("h100-2", 2), ("h100-4", 2)) and gpus.free_nodes == 4
        assert gpus.stranded_nodes == (("h100-6", 8, "NotReady"), ("h100-5", 4, "cordoned"),
                                       ("h100-7", 2, "taint example.com/reserved=team-a:NoSchedule"))
        assert fits[MIG_1G].stranded_nodes == () and fits[MIG_1G].biggest == 7


@on_the_module_loop
async def test_a_pending_pods_reason_ends_with_where_its_gpus_would_fit(sim):
    async with model_on(sim) as model:
        pending = {g.pod.name: g for g in model.gpu_pods() if g.pod.node is None}
        message = next(c["message"] for c in sim.store.get("pods", "ml", "llm-train-4gpu")["status"]["conditions"]
                       if c["type"] == "PodScheduled")
        assert "Insufficient nvidia.com/gpu" in message
        assert pending["llm-train-4gpu"].reason == f"{message} · {FIT_LINE}"


@on_the_module_loop
async def test_a_gated_pod_is_never_scheduled_and_says_which_gate_holds_it(sim):
    stored = sim.store.get("pods", "ml", "queued-job-0")
    assert "nodeName" not in stored["spec"]  # h100-1 has room for its 2 GPUs: the gate alone holds it
    assert _scheduled_reason(sim, "queued-job-0") == "SchedulingGated"
    async with model_on(sim) as model:
        record = model.pod("ml", "queued-job-0")
        assert record.status == "SchedulingGated" and record.gates == ("kueue.x-k8s.io/admission",)
        entry = model.gpu_pod(record)
        assert entry.reason == GATE_REASON  # no fit line: the pod waits for its gate, not for room


@on_the_module_loop
async def test_unknown_while_the_pods_are_being_listed(sim):
    sim.faults.slow("pods", 1.5)
    try:
        async with model_on(sim, sync=False) as model:
            assert await model.wait_synced(10, kinds=[NODES])
            assert not model.states[PODS].synced and model.node_summaries()
            assert model.fit() is None  # never figures from the nodes alone
            assert await model.wait_synced(10, kinds=[PODS])
            assert {name: f.as_json() for name, f in model.fit().items()} == EXPECTED_JSON
    finally:
        sim.faults.clear("pods")


@on_the_module_loop
async def test_unknown_while_the_pods_are_forbidden(sim):
    sim.faults.fail("pods", 403)
    try:
        async with model_on(sim, sync=False) as model:
            await until(lambda: model.states[PODS].phase == FORBIDDEN and model.states[NODES].synced, what="pods forbidden")
            assert model.fit() is None
    finally:
        sim.faults.clear("pods")


def run_report(*argv: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="gputui")
    report.add_parser(parser.add_subparsers())
    args = parser.parse_args(["report", *argv])
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = args.run(args)
    return rc, out.getvalue()


@on_the_module_loop
async def test_the_reports_fit_key_and_fits_section(sim):
    rc, out = await asyncio.to_thread(run_report, "--kubeconfig", str(sim.kubeconfig_path), "-o", "json")
    assert rc == 1  # cordoned, NotReady, tainted nodes
    data = json.loads(out)
    assert data["fit"] == EXPECTED_JSON and list(data["fit"]) == list(data["totals"])
    reasons = {p["name"]: p["reason"] for p in data["pods"]}
    assert reasons["llm-train-4gpu"].endswith(" · " + FIT_LINE) and reasons["queued-job-0"] == GATE_REASON
    rc, table = await asyncio.to_thread(run_report, "--kubeconfig", str(sim.kubeconfig_path))
    fits = table[table.index("\nFits"):].split("\n\n")[0].splitlines()[3:]  # the section, up to the next
    assert [line.split() for line in fits] == [
        ["RESOURCE", "N=1", "2", "4", "8", "LARGEST", "STRANDED"],
        ["gpu", "4", "3", "0", "0", "3", "14"],
        ["mig-1g.10gb", "1", "1", "1", "0", "4", "0"],
        ["mig-3g.40gb", "1", "1", "0", "0", "2", "0"],
    ]
    assert max(len(line) for line in table.splitlines()) <= 100


@on_the_module_loop
async def test_the_fit_follows_the_cluster():
    """Gate removed: the pod is scheduled and the fit shrinks; a pod ends: the 4-GPU pod fits and is bound."""
    async with SimCluster(fragmented.build(), speed=50) as cluster:
        async with model_on(cluster) as model:
            def ungate(p: dict) -> None:
                p["spec"].pop("schedulingGates")
            cluster.store.mutate("pods", "ml", "queued-job-0", ungate)  # as Kueue's admission does, by an update
            await until(lambda: (p := model.pod("ml", "queued-job-0")) is not None and p.node == "h100-1", what="the ungated pod bound")
            await until(lambda: model.fit()[GPU].nodes_for == (4, 2, 0, 0), what="h100-1 down to 1 free")
            waiting = next(g for g in model.gpu_pods() if g.pod.name == "llm-train-4gpu")
            assert waiting.reason.endswith("needs 4 nvidia.com/gpu on one node; 6 free but at most 2 on any node: "
                                           "h100-2 2, h100-4 2, h100-1 1, +1 more; 14 more free on cordoned, NotReady or tainted nodes")
            cluster.store.delete("pods", "ml", "train-h100-2-0")  # 4 GPUs free on h100-2: 6 there
            await until(lambda: (p := model.pod("ml", "llm-train-4gpu")) is not None and p.node == "h100-2", what="the 4-GPU pod bound")
            await until(lambda: model.fit()[GPU].as_json() == {"1": 4, "2": 2, "4": 0, "8": 0, "largest": 2, "stranded": 14},
                        what="h100-2 down to 2 free again")


def _fits(*objects: dict) -> dict[str, fit.ResourceFit]:
    pods = [pod_from(o) for o in objects if o["kind"] == "Pod"]
    return fit.cluster_fit(
        gpu.summarize_node(node_from(o), [p for p in pods if p.node == o["metadata"]["name"]], gpu.GpuResources())
        for o in objects if o["kind"] == "Node"
    )


def test_the_fit_lines_wording():
    fits = _fits(
        node("a", capacity={GPU: 8}), node("b", capacity={GPU: 4}), node("c", capacity={GPU: 8}, unschedulable=True),
        pod("ml", "x", node="a", gpu={GPU: 6}), pod("ml", "y", node="b", gpu={GPU: 3}),
    )
    assert fit.pending_line({GPU: 2}, fits) is None  # a has 2 free
    assert fit.pending_line({GPU: 3}, fits) == \
        "needs 3 nvidia.com/gpu on one node; 3 free but at most 2 on any node: a 2, b 1; 8 more free on cordoned, NotReady or tainted nodes"
    assert fit.pending_line({GPU: 5}, fits) == \
        "needs 5 nvidia.com/gpu on one node; only 3 free in the cluster, at most 2 on any node: a 2, b 1; " \
        "8 more free on cordoned, NotReady or tainted nodes"
    assert fit.pending_line({GPU: 16}, fits).startswith("needs 16 nvidia.com/gpu on one node; 3 free in the cluster, at most 8 on any node when empty")
    assert fit.pending_line({MIG_1G: 1}, fits) == f"needs 1 {MIG_1G} on one node; no Ready, schedulable node offers {MIG_1G}"
    full = _fits(node("a", capacity={GPU: 2}), pod("ml", "x", node="a", gpu={GPU: 2}))
    assert fit.pending_line({GPU: 1}, full) == "needs 1 nvidia.com/gpu on one node; none free in the cluster"
    both = fit.pending_line({GPU: 3, MIG_1G: 1}, fits)
    assert both.count("needs ") == 2 and "; needs 1 nvidia.com/mig-1g.10gb" in both


def test_a_taint_named_after_the_resource_strands_nothing_and_others_do():
    tainted = [{"key": GPU, "value": "present", "effect": "NoSchedule"}, {"key": "x", "value": "", "effect": "PreferNoSchedule"}]
    fits = _fits(node("usual", capacity={GPU: 4}, taints=tainted),
                 node("pressure", capacity={GPU: 4}, taints=[{"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"}]),
                 node("gone", capacity={GPU: 4}, ready="Unknown"))
    assert fits[GPU].as_json() == {"1": 1, "2": 1, "4": 1, "8": 0, "largest": 4, "stranded": 8}
    assert [(n, why) for n, _, why in fits[GPU].stranded_nodes] == [("gone", "NotReady"), ("pressure", "taint node.kubernetes.io/memory-pressure:NoSchedule")]
