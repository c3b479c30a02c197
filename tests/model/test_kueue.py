"""Kueue through the model against the simulator (gputui/kube/kueue.py, the kueue-quota scenario): a gated GPU pod's
reason starts with why Kueue holds its Workload back, keeping what its gate says; each ClusterQueue's GPU quota, used,
free, pending and admitted as its status has them; a Workload admitted: the reason goes; without Kueue nothing of it
and no error; forbidden: said as for other optional kinds, and no Kueue words on the pod; the report's `queues`."""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json

import pytest
import pytest_asyncio

from gputui.cli import report
from gputui.kube import kueue
from gputui.kube.model import CLUSTERQUEUES, LOCALQUEUES, WORKLOADS
from gputui.kube.watch import ABSENT, FORBIDDEN
from gputui.sim.scenarios import fragmented, kueue_quota
from gputui.sim.builders import kueue as k
from gputui.sim.cluster import SimCluster
from tests.model.scenario import model_on, until

on_the_module_loop = pytest.mark.asyncio(loop_scope="module")

GPU = "nvidia.com/gpu"
GATE = "held by scheduling gate kueue.x-k8s.io/admission (owner kueue.x-k8s.io): not scheduled until it is removed"
OBJECTS = kueue_quota.build()
WORKLOAD = {o["metadata"]["name"].rsplit("-", 1)[0]: o["metadata"]["name"] for o in OBJECTS if o["kind"] == "Workload"}
FINETUNE = WORKLOAD["pod-llm-ft-x7k2"]
HELD = f"queued in Kueue ClusterQueue team-a: {kueue_quota.PENDING} (Workload team-a/{FINETUNE})"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sim():
    async with SimCluster(OBJECTS, speed=50, faults=True) as cluster:
        yield cluster


def stored(cluster: SimCluster, kind: str, namespace: str, name: str) -> dict:
    return cluster.store.get(f"{kind}.kueue.x-k8s.io", namespace, name)


@on_the_module_loop
async def test_a_gated_pods_reason_says_why_kueue_holds_it_then_the_gate(sim):
    async with model_on(sim) as model:
        assert model.kueue_state() is None
        pods = {g.pod.name: g for g in model.gpu_pods()}
        assert pods["llm-ft-x7k2"].reason == f"{HELD} · {GATE}"
        assert [name for name, g in pods.items() if g.reason] == ["llm-ft-x7k2"]  # the admitted jobs' running pods: nothing
        view = model.kueue()
        running = model.pod("team-a", next(n for n in pods if n.startswith("llm-pretrain-")))
        assert view.workload_of(running).name == WORKLOAD["job-llm-pretrain"]  # through the pods' Job
        assert view.workload_of(pods["llm-ft-x7k2"].pod).name == FINETUNE  # owned by the pod itself


@on_the_module_loop
async def test_each_cluster_queues_figures_are_its_status(sim):
    async with model_on(sim) as model:
        queues = {q.name: q for q in model.kueue().cluster_queues}
        for name, q in queues.items():  # the oracle: the stored object read plainly
            raw = stored(sim, "clusterqueues", "", name)
            nominal = sum(int(r["nominalQuota"]) for g in raw["spec"]["resourceGroups"] for f in g["flavors"] for r in f["resources"]
                          if r["name"] == GPU)
            reserved = sum(int(r["total"]) for f in raw["status"]["flavorsReservation"] for r in f["resources"] if r["name"] == GPU)
            assert (q.quota, q.used, q.free(GPU)) == ({GPU: nominal}, {GPU: reserved}, nominal - reserved)
            assert (q.cohort, q.pending, q.admitted) == (raw["spec"]["cohortName"], raw["status"]["pendingWorkloads"],
                                                         raw["status"]["admittedWorkloads"])
        assert (queues["team-a"].free(GPU), queues["team-b"].free(GPU)) == (0, 6)
        assert queues["team-a"].borrowing_limit == {GPU: 0} and queues["team-b"].borrowing_limit == {GPU: None}
        assert set(queues["team-a"].quota) == {GPU}  # cpu and memory quotas are not GPU figures
        pending = model.kueue().pending("team-a")
        assert [w.name for w in pending] == [FINETUNE, WORKLOAD["job-eval-sweep"]]  # oldest first; the suspended job has no pods
        assert [w.gpu for w in pending] == [{GPU: 4}, {GPU: 4}] and model.kueue().pending("team-b") == []


@on_the_module_loop
async def test_the_reason_follows_the_workload_and_goes_once_admitted():
    async with SimCluster(kueue_quota.build(), speed=50) as sim, model_on(sim) as model:
        def reason() -> str | None:
            return model.gpu_pod(model.pod("team-a", "llm-ft-x7k2")).reason

        def reserve(w: dict) -> None:  # quota reserved, an admission check still pending
            w["status"] = {"conditions": [
                k.condition("QuotaReserved", True, "QuotaReserved", "Quota reserved in ClusterQueue team-a", "2025-06-01T12:00:00Z"),
                k.condition("Admitted", False, "UnsatisfiedAdmissionChecks", "The workload has not all admission checks",
                            "2025-06-01T12:00:00Z")],
                "admission": {"clusterQueue": "team-a", "podSetAssignments": []}}

        sim.store.mutate("workloads.kueue.x-k8s.io", "team-a", FINETUNE, reserve)
        await until(lambda: reason().startswith("quota reserved, not admitted in Kueue ClusterQueue team-a: "
                                                "The workload has not all admission checks"), what="the new condition")
        assert reason().endswith(" · " + GATE)

        def admit(w: dict) -> None:
            w["status"]["conditions"][1] = k.condition("Admitted", True, "Admitted", "The workload is admitted", "2025-06-01T12:00:01Z")

        sim.store.mutate("workloads.kueue.x-k8s.io", "team-a", FINETUNE, admit)
        await until(lambda: reason() == GATE, what="admitted: the gate alone, until Kueue removes it")
        assert [w.name for w in model.kueue().pending("team-a")] == [WORKLOAD["job-eval-sweep"]]


@on_the_module_loop
async def test_without_kueue_nothing_of_it_and_no_error():
    async with SimCluster(fragmented.build(), speed=50) as cluster:
        async with model_on(cluster) as model:
            assert {kind: model.states[kind].phase for kind in (WORKLOADS, LOCALQUEUES, CLUSTERQUEUES)} == dict.fromkeys(
                (WORKLOADS, LOCALQUEUES, CLUSTERQUEUES), ABSENT)
            assert model.kueue_state() == kueue.NOT_INSTALLED
            gated = model.gpu_pod(model.pod("ml", "queued-job-0"))  # labelled for a queue, gated: no Workload to read
            assert gated.reason == GATE
            assert model.kueue().cluster_queues == [] and model.unreadable() == []
        rc, out, err = await asyncio.to_thread(run_report, "--kubeconfig", str(cluster.kubeconfig_path), "-o", "json")
        data = json.loads(out)
        assert data["queues"] is None and all(part["part"] not in (WORKLOADS, LOCALQUEUES, CLUSTERQUEUES) for part in data["missing"])
        assert "warning" not in err
        rc, table, _ = await asyncio.to_thread(run_report, "--kubeconfig", str(cluster.kubeconfig_path))
        assert "Kueue" not in table


@on_the_module_loop
async def test_forbidden_workloads_are_said_and_the_pod_keeps_its_gates_words(sim):
    sim.faults.fail("workloads.kueue.x-k8s.io", 403)
    try:
        async with model_on(sim, sync=False) as model:
            await until(lambda: model.states[WORKLOADS].phase == FORBIDDEN and model.states[CLUSTERQUEUES].synced
                        and model.pods_known, what="workloads forbidden")
            assert model.kueue_state().startswith("workloads forbidden")
            assert model.gpu_pod(model.pod("team-a", "llm-ft-x7k2")).reason == GATE  # no Workload read: no claim about it
            assert [q.name for q in model.kueue().cluster_queues] == ["team-a", "team-b"]  # the readable kinds still show
        rc, out, err = await asyncio.to_thread(run_report, "--kubeconfig", str(sim.kubeconfig_path), "-o", "json")
        data = json.loads(out)
        assert [part["part"] for part in data["missing"]] == [WORKLOADS] and data["missing"][0]["reason"].startswith("forbidden (403)")
        assert "gputui report: warning: workloads are forbidden (403)" in err and "why Kueue holds pending pods back is unknown" in err
        assert data["queues"]["pending_workloads"] is None and len(data["queues"]["cluster_queues"]) == 2
    finally:
        sim.faults.clear("workloads.kueue.x-k8s.io")


def run_report(*argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="gputui")
    report.add_parser(parser.add_subparsers())
    args = parser.parse_args(["report", *argv])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = args.run(args)
    return rc, out.getvalue(), err.getvalue()


@on_the_module_loop
async def test_the_reports_queues_key_and_table(sim):
    rc, out, err = await asyncio.to_thread(run_report, "--kubeconfig", str(sim.kubeconfig_path), "-o", "json")
    assert rc == 0, err
    data = json.loads(out)
    reasons = {p["name"]: p["reason"] for p in data["pods"]}
    assert reasons["llm-ft-x7k2"].startswith("queued in Kueue ClusterQueue team-a: ") and reasons["llm-ft-x7k2"].endswith(GATE)
    queues = data["queues"]
    assert queues["cluster_queues"] == [
        {"name": "team-a", "cohort": "research", "gpu": {GPU: {"quota": 8, "borrowing_limit": 0, "used": 8, "free": 0}},
         "pending": 2, "reserving": 1, "admitted": 1},
        {"name": "team-b", "cohort": "research", "gpu": {GPU: {"quota": 8, "borrowing_limit": None, "used": 2, "free": 6}},
         "pending": 0, "reserving": 1, "admitted": 1},
    ]
    assert queues["local_queues"] == [{"namespace": ns, "name": "user-queue", "cluster_queue": ns, "pending": pending, "admitted": 1}
                                      for ns, pending in (("team-a", 2), ("team-b", 0))]
    assert [(w["name"], w["cluster_queue"], w["gpu"]) for w in queues["pending_workloads"]] == [
        (FINETUNE, "team-a", {GPU: 4}), (WORKLOAD["job-eval-sweep"], "team-a", {GPU: 4})]
    assert [w["reason"] for w in queues["pending_workloads"]] == [kueue_quota.PENDING] * 2  # Kueue's words
    rc, table, _ = await asyncio.to_thread(run_report, "--kubeconfig", str(sim.kubeconfig_path))
    lines = table[table.index("\nKueue ClusterQueues"):].splitlines()[2:]
    assert [line.split() for line in lines[:3]] == [
        ["CLUSTERQUEUE", "COHORT", "RESOURCE", "QUOTA", "USED", "FREE", "PENDING", "ADMITTED"],
        ["team-a", "research", "gpu", "8", "8", "0", "2", "1"],
        ["team-b", "research", "gpu", "8", "2", "6", "0", "1"],
    ]
    assert lines[3] == f"  pending team-a/{FINETUNE} (gpu=4)" and lines[4].startswith("      why: couldn't assign flavors to pod set main:")
    assert max(len(line) for line in table.splitlines()) <= 100
