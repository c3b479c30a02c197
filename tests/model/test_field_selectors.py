"""Asking only for what the screens need: the pods watch leaves finished pods to the server (the GPU stack's
namespaces read whole, for its validator pods), the events watches take a node's events and why a pod waits,
and a pod's other events are listed when its details open. Request shapes from the simulator's counts; the
simulator's filtered watches checked against kubernetes_asyncio and the real kubectl."""
from __future__ import annotations

import asyncio

from kubernetes_asyncio import watch as k8s_watch
from kubernetes_asyncio.client import CoreV1Api
from kubernetes_asyncio.config import new_client_from_config

from gputui.kube.model import (
    EVENTS,
    NODE_EVENTS,
    NODES,
    PODS,
    SCHEDULING_EVENTS,
    UNFINISHED_PODS,
    ClusterModel,
)
from gputui.sim.scenarios import stacks
from gputui.sim.cluster import SimCluster
from tests import bench_selectors
from tests.model import scenario
from tests.model.objects import event, pod
from tests.model.scenario import expected_pods, reads, small_cluster, stop, until

KINDS = (NODES, PODS, EVENTS, "daemonsets", "clusterpolicies")


async def synced(sim: SimCluster, **options) -> tuple[object, ClusterModel]:
    return await scenario.synced(sim, options.pop("kinds", KINDS), **options)


async def test_the_pods_watch_asks_for_unfinished_pods_in_every_list_mode_and_keeps_what_an_unfiltered_one_does():
    for minor, modes in ((34, ("watchlist",)), (33, ("cache",)), (30, ("paged",))):
        async with SimCluster(small_cluster(), run_controllers=False, server_minor=minor) as sim:
            conn, model = await synced(sim, kinds=(PODS,), page_size=2, list_modes=modes)
            try:
                assert model.pods.records == expected_pods(model, sim.store)  # the finished pod is not kept either way
                shapes = reads(sim, PODS)
                assert shapes and all(query.get("fieldSelector") == UNFINISHED_PODS for _, query in shapes), (minor, shapes)
                if modes == ("paged",):
                    assert sum(1 for _, query in shapes if "continue" in query) >= 3  # every page selects
                sim.store.create("pods", pod("ml", "later", node="gpu-1", gpu={"nvidia.com/gpu": 1}))
                await until(lambda model=model: model.pod("ml", "later") is not None)
                assert reads(sim, PODS)[-1][0] == "watch" and reads(sim, PODS)[-1][1]["fieldSelector"] == UNFINISHED_PODS
            finally:
                await stop(conn, model)


async def test_a_pod_that_finishes_leaves_the_model_through_the_watch():
    async with SimCluster(small_cluster(), run_controllers=False) as sim:
        conn, model = await synced(sim, kinds=(NODES, PODS))
        try:
            assert model.summary("gpu-1").usage["nvidia.com/gpu"].allocated == 7
            sim.store.mutate("pods", "ml", "train-0", lambda p: p["status"].update(phase="Succeeded"))
            await until(lambda: model.pod("ml", "train-0") is None, what="the finished pod gone")
            assert model.summary("gpu-1").usage["nvidia.com/gpu"].allocated == 3  # its 4 GPUs are free
            assert model.reflectors[PODS].lists == 1  # through the watch: no list again
        finally:
            await stop(conn, model)


async def test_the_simulator_sends_deleted_when_a_pod_stops_matching_and_added_when_it_starts(tmp_path):
    """kube-apiserver's filtered watch: an object leaving the selection is DELETED (its last state), one entering ADDED.
    kubernetes_asyncio is the independent client."""
    async with SimCluster(small_cluster(), run_controllers=False) as sim:
        async with await new_client_from_config(str(sim.kubeconfig_path)) as api:
            core = CoreV1Api(api)
            listed = await core.list_namespaced_pod("ml", field_selector=UNFINISHED_PODS)
            assert "finished" not in {p.metadata.name for p in listed.items} and "train-0" in {p.metadata.name for p in listed.items}
            seen: list[tuple[str, str, str]] = []
            stream = k8s_watch.Watch()

            async def follow() -> None:
                async for ev in stream.stream(core.list_namespaced_pod, "ml", field_selector=UNFINISHED_PODS,
                                              resource_version=listed.metadata.resource_version, timeout_seconds=10):
                    seen.append((ev["type"], ev["object"].metadata.name, ev["object"].status.phase))
                    if len(seen) == 2:
                        stream.stop()

            task = asyncio.create_task(follow())
            await asyncio.sleep(0.2)
            sim.store.mutate("pods", "ml", "train-0", lambda p: p["status"].update(phase="Succeeded"))
            sim.store.mutate("pods", "ml", "finished", lambda p: p["status"].update(phase="Running"))
            await asyncio.wait_for(task, 10)
    assert seen == [("DELETED", "train-0", "Running"), ("ADDED", "finished", "Running")]


def stack_view(model: ClusterModel) -> dict:
    return {name: {c: (s.state, s.pod) for c, s in components.items()} for name, components in model.component_matrix().items()}


async def test_the_gpu_stacks_namespaces_are_read_whole_and_their_finished_validation_pods_are_seen():
    async with SimCluster(stacks.operator_1x(), run_controllers=False) as sim:
        conn, model = await synced(sim)
        plain_conn, plain = await synced(sim, selectors={})  # every watch unfiltered: the oracle
        try:
            await until(lambda: model.stack_known and stack_view(model) == stack_view(plain), what="the same component matrix")
            finished = {(p["metadata"]["namespace"], p["metadata"]["name"]): p["status"]["phase"] for p in sim.store.objects("pods")
                        if p["status"].get("phase") in ("Succeeded", "Failed")}
            assert set(finished.values()) == {"Succeeded", "Failed"} and set(finished) <= set(model.pods.records)
            assert {c["validator"][0] for c in stack_view(model).values()} == {"succeeded", "failed"}
            assert model.pods.records == plain.pods.records
            whole = {query.get("namespace"): query for verb, query in reads(sim, PODS) if query.get("namespace")}
            assert set(whole) == {"gpu-operator", "gpu-operator-resources"}  # the operator's and its operands'
            assert not any("fieldSelector" in query for query in whole.values())
            # the cluster-wide watch leaves those namespaces' pods to them: no record is held twice
            shares = [w.sink.keys for w in model.watches.of(PODS)]
            assert sum(len(keys) for keys in shares) == len(model.pods.records) == len(set().union(*shares))
        finally:
            await stop(conn, model)
            await stop(plain_conn, plain)


OPERATOR_DS = {"apiVersion": "apps/v1", "kind": "DaemonSet",
               "metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": "gpu-operator",
                            "labels": {"app": "nvidia-device-plugin-daemonset"}},
               "spec": {"selector": {"matchLabels": {"app": "nvidia-device-plugin-daemonset"}},
                        "template": {"metadata": {"labels": {"app": "nvidia-device-plugin-daemonset"}},
                                     "spec": {"containers": [{"name": "plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"}]}}}}


async def test_a_stack_namespace_found_while_running_is_read_whole_from_then_on():
    validator = pod("gpu-operator", "nvidia-cuda-validator-x1", node="gpu-1", gpu={"nvidia.com/gpu": 1}, phase="Succeeded",
                    labels={"app": "nvidia-cuda-validator"})
    async with SimCluster([*small_cluster(), validator], run_controllers=False) as sim:
        conn, model = await synced(sim)
        try:
            assert model.pod("gpu-operator", "nvidia-cuda-validator-x1") is None  # no stack there yet: selected out
            assert model.pod("gpu-operator", "plugin-operator-mig-1") is not None and model.pods_known
            known: list[bool] = []
            model.subscribe(lambda change: known.append(model.pods_known))
            sim.store.create("daemonsets.apps", OPERATOR_DS)
            await until(lambda: model.pod("gpu-operator", "nvidia-cuda-validator-x1") is not None, what="the validator pod")
            # The namespace read whole took over the pods listed there: they stay known (no verdict withdrawn meanwhile)
            assert known and all(known) and model.stack_known
            assert ("watch", "gpu-operator") in {(verb, query.get("namespace")) for verb, query in reads(sim, PODS)}
            sim.store.mutate("pods", "gpu-operator", "nvidia-cuda-validator-x1", lambda p: p["status"].update(phase="Failed"))
            await until(lambda: model.pod("gpu-operator", "nvidia-cuda-validator-x1").phase == "Failed", what="its new phase")
        finally:
            await stop(conn, model)


async def test_events_watched_are_the_nodes_and_why_pods_wait_and_a_pods_others_are_listed_on_demand():
    pulled, earlier = (event("ml", f"train-0.{n}", kind="Pod", object_name="train-0", reason="Pulled", message=f"pulled for {uid}",
                             type_="Normal") for n, uid in ((1, "uid-ml-train-0"), (2, "an-earlier-pod-of-that-name")))
    pulled["involvedObject"]["uid"], earlier["involvedObject"]["uid"] = "uid-ml-train-0", "an-earlier-pod-of-that-name"
    objects = [*small_cluster(), pulled, earlier,
               pod("ml", "queued", gpu={"nvidia.com/gpu": 2}, unschedulable_message=None),  # no PodScheduled condition yet
               event("ml", "queued.1", kind="Pod", object_name="queued", reason="FailedScheduling", message="0/4 nodes: the event's words")]
    async with SimCluster(objects, run_controllers=False) as sim:
        conn, model = await synced(sim)
        try:
            selectors = sorted(query.get("fieldSelector", "") for verb, query in reads(sim, EVENTS))
            assert selectors == sorted([NODE_EVENTS, SCHEDULING_EVENTS])
            assert [e.reason for e in model.events_for("Node", "", "gpu-2")] == ["NodeReady"]
            assert [e.reason for e in model.events_for("Pod", "ml", "waiting")] == ["FailedScheduling"]
            queued = next(g for g in model.gpu_pods(namespace="ml") if g.pod.name == "queued")
            assert queued.reason and queued.reason.startswith("0/4 nodes: the event's words")  # why it waits, from the watch
            assert model.events_for("Pod", "ml", "train-0") == []  # a Normal pod event: never sent
            listed = await model.events_of("ml", "train-0", "uid-ml-train-0")
            assert [(e.reason, e.message) for e in listed] == [("Pulled", "pulled for uid-ml-train-0")]  # this pod's, by uid
            verb, query = reads(sim, EVENTS)[-1]
            assert (verb, query["namespace"], query["resourceVersion"]) == ("list", "ml", "0")
            assert query["fieldSelector"] == "involvedObject.kind=Pod,involvedObject.namespace=ml,involvedObject.name=train-0,involvedObject.uid=uid-ml-train-0"
        finally:
            await stop(conn, model)


async def test_the_simulator_takes_the_field_selectors_kube_apiserver_does_and_refuses_others_as_it_does(make_kubectl):
    async with SimCluster(small_cluster(), run_controllers=False) as sim:
        kubectl = make_kubectl(sim.kubeconfig_path)

        async def names(*args: str) -> set[str]:
            out = await asyncio.to_thread(kubectl, "get", *args, "-A", "-o", "jsonpath={range .items[*]}{.metadata.name}{'\\n'}{end}")
            return set(out.split())

        assert await names("events", "--field-selector", NODE_EVENTS) == {"gpu-2.1"}
        assert await names("events", "--field-selector", SCHEDULING_EVENTS) == {"waiting.1"}
        unfinished = await names("pods", "--field-selector", UNFINISHED_PODS)
        assert "finished" not in unfinished and {"train-0", "waiting", "frontend"} <= unfinished
        done = await asyncio.to_thread(kubectl.run, "get", "events", "-A", "--field-selector", "involvedObject.color=red")
        assert done.returncode != 0 and "field label not supported: involvedObject.color" in done.stderr


async def test_each_choice_sends_fewer_bytes_and_the_screens_show_the_same():
    """The bench script's three ways (tests/bench_selectors.py) on a small cluster."""
    objects = bench_selectors.cluster(nodes=10, pods=300, finished_share=0.5)
    results = {name: await bench_selectors.one_way(name, objects, lifecycles=20, seconds=0.5) for name in bench_selectors.WAYS}
    assert len({r["view"] for r in results.values()}) == 1  # same pods, node figures, pending reasons
    none, pods_only, both = (results[name] for name in ("none", "pods", "pods+events"))
    assert none["sync"] > pods_only["sync"] > both["sync"]
    assert none["churn"] > pods_only["churn"] > both["churn"]
