"""The per-event path under churn: updates that change nothing kept are not passed on, and a
workload pod's change that no node summary reads keeps the summaries (fed directly, no server)."""
from __future__ import annotations

from gputui.kube.client import Client
from gputui.kube.model import PODS, ClusterModel
from gputui.kube.tables import Change
from gputui.kube.watch import FORBIDDEN, LIVE
from tests.model.objects import node, plugin_pod, pod


async def churn_model() -> tuple[ClusterModel, list[Change]]:
    model = ClusterModel(Client("http://127.0.0.1:9"))
    for table, objects in (
        (model.nodes, [node("n1", capacity={"nvidia.com/gpu": 4})]),
        (model.pods, [plugin_pod("n1"), pod("ml", "job", node="n1", gpu={"nvidia.com/gpu": 2})]),
    ):
        table.begin_list()
        for obj in objects:
            table.list_item(obj)
        table.end_list()
    model.reflectors[PODS].state.synced = True
    changes: list[Change] = []
    model.subscribe(changes.append)
    return model, changes


def annotated(obj: dict, tick: int) -> dict:
    obj["metadata"]["annotations"] = {"example.com/tick": str(tick)}
    obj["metadata"]["resourceVersion"] = str(1000 + tick)
    return obj


async def test_an_update_that_changes_nothing_kept_is_not_passed_on():
    model, changes = await churn_model()
    record, summary, generation = model.pod("ml", "job"), model.summary("n1"), model.summary_generation
    for tick in range(3):
        model.pods.apply("MODIFIED", annotated(pod("ml", "job", node="n1", gpu={"nvidia.com/gpu": 2}), tick))
        model.nodes.apply("MODIFIED", annotated(node("n1", capacity={"nvidia.com/gpu": 4}), tick))  # a heartbeat
    assert changes == []
    assert model.pod("ml", "job") is record and model.summary("n1") is summary
    assert model.summary_generation == generation


async def test_a_workload_pods_restarts_change_its_row_not_the_node_summary():
    model, changes = await churn_model()
    summary, generation = model.summary("n1"), model.summary_generation
    model.pods.apply("MODIFIED", pod("ml", "job", node="n1", gpu={"nvidia.com/gpu": 2}, restarts=3))
    assert changes == [Change(PODS, ("ml", "job"))] and model.pod("ml", "job").restarts == 3
    assert model.summary("n1") is summary and model.summary_generation == generation


async def test_what_a_summary_reads_still_refreshes_it():
    model, _ = await churn_model()
    first, generation = model.summary("n1"), model.summary_generation
    model.pods.apply("MODIFIED", pod("ml", "job", node="n1", gpu={"nvidia.com/gpu": 3}))  # its request
    assert model.summary("n1").usage["nvidia.com/gpu"].allocated == 3 and model.summary_generation > generation
    second, generation = model.summary("n1"), model.summary_generation
    model.pods.apply("MODIFIED", plugin_pod("n1", restarts=7, waiting_reason="CrashLoopBackOff"))  # the plugin: every field counts
    third = model.summary("n1")
    assert third is not second and third.plugin.restarts == 7 and model.summary_generation > generation
    assert "plugin-not-running" in [p.code for p in third.problems] and first is not third
    generation = model.summary_generation
    model.nodes.apply("MODIFIED", node("n1", capacity={"nvidia.com/gpu": 4}, unschedulable=True))
    assert "cordoned" in [p.code for p in model.summary("n1").problems] and model.summary_generation > generation


async def test_a_watch_starting_again_keeps_the_summaries():
    model, _ = await churn_model()
    pods = model.reflectors[PODS]
    pods._set(LIVE)  # listed: the pods are known from here on
    summary = model.summary("n1")
    pods._set(LIVE)  # its watch ends and starts again, as every few minutes
    assert model.summary("n1") is summary
    pods._set(FORBIDDEN, "forbidden")  # now the plugin verdict cannot be given
    assert model.summary("n1") is not summary and not model.pods_known
