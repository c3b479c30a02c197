"""ClusterModel's tables fed directly (no server): bounds, indexes, the change feed, cached summaries."""
from __future__ import annotations

from gputui.kube.client import Client
from gputui.kube.model import EVENTS, NODES, PODS, ClusterModel
from gputui.kube.tables import Change, Share
from tests.model.objects import event, node, plugin_pod, pod


async def fresh_model(**options) -> ClusterModel:
    model = ClusterModel(Client("http://127.0.0.1:9"), **options)  # never called: the tables are fed directly
    for table, objects in ((model.nodes, [node("n1", capacity={"nvidia.com/gpu": 2})]), (model.pods, [plugin_pod("n1")]), (model.events, [])):
        table.begin_list()
        for obj in objects:
            table.list_item(obj)
        table.end_list()
    model.reflectors[PODS].state.synced = True
    return model


async def test_events_are_bounded_per_object_and_in_all():
    model = await fresh_model(events_per_object=3, events_limit=5)
    for i in range(6):
        model.events.apply("ADDED", event("default", f"n1.{i}", kind="Node", object_name="n1", object_namespace="",
                                          reason="R", message=str(i), last=f"2025-01-01T00:00:0{i}Z"))
    assert [e.message for e in model.events_for("Node", "", "n1")] == ["5", "4", "3"]
    for i in range(4):
        model.events.apply("ADDED", event("default", f"n{i}.x", kind="Node", object_name=f"other-{i}", object_namespace="", reason="R", message="m"))
    assert len(model.events.records) == 5
    assert sum(len(v) for v in model.events.by_object.values()) == 5


async def test_pod_events_follow_their_pod_and_changes_name_the_object():
    model = await fresh_model()
    changes: list[Change] = []
    model.subscribe(changes.append)
    model.pods.apply("ADDED", pod("ml", "job", gpu={"nvidia.com/gpu": 1}))
    model.events.apply("ADDED", event("ml", "job.1", kind="Pod", object_name="job", reason="FailedScheduling", message="no room"))
    model.events.apply("ADDED", event("web", "x.1", kind="Pod", object_name="cpu-pod", reason="Pulled", message="kept? no"))
    assert changes == [Change(PODS, ("ml", "job")), Change(EVENTS, ("Pod", "ml", "job"))]
    assert model.gpu_pods()[0].reason == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    model.pods.apply("DELETED", pod("ml", "job", gpu={"nvidia.com/gpu": 1}))
    assert model.events_for("Pod", "ml", "job") == [] and len(model.events.records) == 0


async def test_summaries_are_cached_and_refreshed_by_changes():
    model = await fresh_model()
    first = model.summary("n1")
    assert model.summary("n1") is first and first.usage["nvidia.com/gpu"].allocated == 0
    model.pods.apply("ADDED", pod("ml", "job", node="n1", gpu={"nvidia.com/gpu": 2}))
    assert model.summary("n1").usage["nvidia.com/gpu"].allocated == 2
    model.pods.apply("MODIFIED", pod("ml", "job", node="n1", gpu={"nvidia.com/gpu": 2}, phase="Succeeded"))
    assert model.pod("ml", "job") is None and model.summary("n1").usage["nvidia.com/gpu"].allocated == 0
    model.nodes.apply("MODIFIED", node("n1", capacity={"nvidia.com/gpu": 2}, unschedulable=True))
    assert [p.code for p in model.summary("n1").problems] == ["cordoned"]
    assert [s.name for s in model.node_summaries()] == ["n1"] and model.totals()["nvidia.com/gpu"].capacity == 2
    model.nodes.apply("DELETED", node("n1"))
    assert model.summary("n1") is None and model.node_summaries() == []
    assert NODES in model.states


def test_a_namespace_handed_over_mid_list_stays_in_the_table_through_the_next_relist():
    """The soak's lost device-plugin pods: kube-system was read whole while the cluster-wide pods list
    was in progress, the pods it had listed so far stayed that list's, and its next relist (which leaves
    kube-system to the new reader) dropped them from the table though the new reader held them."""
    from gputui.kube.tables import Share, Table

    table: Table = Table(PODS, lambda obj: obj, lambda change: None)
    cluster_wide = Share(table, accepts=lambda obj: obj["metadata"]["namespace"] not in owned)
    owned: set[str] = set()
    plugin, job = plugin_pod("n1"), pod("ml", "job", node="n1", gpu={"nvidia.com/gpu": 1})

    cluster_wide.begin_list()
    cluster_wide.list_item(plugin)  # listed, the list not yet ended
    owned.add("kube-system")
    whole = Share(table)
    cluster_wide.hand_over(whole, "kube-system")
    whole.begin_list()
    whole.list_item(plugin)
    whole.end_list()
    cluster_wide.list_item(job)
    cluster_wide.end_list()

    cluster_wide.begin_list()  # a relist (410, a restart): kube-system is no longer this list's
    cluster_wide.list_item(plugin)
    cluster_wide.list_item(job)
    cluster_wide.end_list()
    assert set(table.records) == {("kube-system", plugin["metadata"]["name"]), ("ml", "job")}
    assert whole.keys == {("kube-system", plugin["metadata"]["name"])} and cluster_wide.keys == {("ml", "job")}


async def test_summaries_in_turns_are_the_summaries_and_give_the_loop_its_turns():
    """The fleet takes ten clusters' figures at once in the UI's loop: the summaries come a batch per turn.

    What is promised is the order of effects, not a count of turns or a time: on a cluster big enough
    that no machine summarises it within one TURN_AFTER, other work runs while the summaries are
    taken, and the summaries are those of the plain call."""
    import asyncio

    model = await fresh_model()
    for i in range(4000):
        model.nodes.apply("ADDED", node(f"n{i:04d}", capacity={"nvidia.com/gpu": 8}))
    in_progress = False
    ran_during: list[bool] = []

    async def other_work() -> None:
        while True:
            ran_during.append(in_progress)
            await asyncio.sleep(0)

    beside = asyncio.create_task(other_work())
    await asyncio.sleep(0)
    in_progress = True
    in_turns = await model.node_summaries_in_turns()
    in_progress = False
    beside.cancel()
    assert in_turns == model.node_summaries() and len(in_turns) == 4001
    assert any(ran_during), "the summaries held the loop from start to end"


async def test_a_namespaces_pod_events_wait_until_every_namespace_is_listed():
    """Pods read namespace by namespace (namespaced RBAC): one namespace's list ending must not drop the events of
    pods in a namespace still to be listed; once every namespace is listed, the events of pods not kept go."""
    model = ClusterModel(Client("http://127.0.0.1:9"))  # never called: the tables are fed directly
    model.events.begin_list()
    model.events.list_item(event("research", "queued.1", kind="Pod", object_name="queued", reason="FailedScheduling", message="no room"))
    model.events.list_item(event("research", "web.1", kind="Pod", object_name="web", reason="BackOff", message="not a GPU pod"))
    model.events.end_list()
    ml, research = Share(model.pods), Share(model.pods)  # one watch per namespace, as watches.py makes them
    ml.begin_list()
    ml.list_item(pod("ml", "train", node="n1", gpu={"nvidia.com/gpu": 1}))
    ml.end_list()
    assert [e.reason for e in model.events_for("Pod", "research", "queued")] == ["FailedScheduling"]
    research.begin_list()
    research.list_item(pod("research", "queued", gpu={"nvidia.com/gpu": 1}))
    research.list_item(pod("research", "web"))
    model.reflectors[PODS].state.synced = True  # as a reflector counts itself listed: before its sink hears the end
    research.end_list()
    assert [e.reason for e in model.events_for("Pod", "research", "queued")] == ["FailedScheduling"]
    assert model.events_for("Pod", "research", "web") == [] and len(model.events.records) == 1
