"""No watch dies silently, and no ghost: an object whose record cannot be built is skipped, counted and said,
and the watch goes on; a reflector whose task ends anyway is said as retrying and started again; a server
reset to an older state makes every reflector list again."""
from __future__ import annotations

import asyncio
import json
import re

import pytest
import pytest_asyncio

from gputui.kube.config import connect
from gputui.kube.model import NODES, PODS, STATE, ClusterModel
from gputui.kube.tables import UNREADABLE, Change
from gputui.sim.cluster import SimCluster
from tests.model.objects import pod
from tests.model.scenario import FAST, matches_fresh_list, small_cluster, until
from tests.model.test_report import run_report

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sim():
    """No scheduler or kubelets: the malformed objects below are served as given, nothing else reads them."""
    async with SimCluster(small_cluster(), faults=True, run_controllers=False) as cluster:
        yield cluster


@pytest_asyncio.fixture(loop_scope="module")
async def model(sim):
    async with await connect(str(sim.kubeconfig_path)) as conn:
        m = ClusterModel(conn.api, **FAST)
        changes: list[Change] = []
        m.subscribe(changes.append)
        m.changes = changes  # type: ignore[attr-defined]
        async with m:
            assert await m.wait_synced(5)
            yield m


async def test_a_malformed_node_is_skipped_and_said_and_the_watch_goes_on(sim, model):
    sim.store.mutate("nodes", "", "gpu-2", lambda n: n["status"].update(conditions={"type": "Ready"}))  # not a list
    await until(lambda: "gpu-2" in model.nodes.unreadable, what="gpu-2 counted as unreadable")
    assert model.nodes.unreadable["gpu-2"].startswith(("AttributeError", "TypeError"))
    assert Change(UNREADABLE, NODES) in model.changes
    assert model.node("gpu-2") is None  # skipped, not shown with figures it could not read
    assert model.states[NODES].phase == "live"
    # the same watch still delivers: a later cordon of another node shows
    sim.store.mutate("nodes", "", "gpu-1", lambda n: n["spec"].update(unschedulable=True))
    await until(lambda: model.node("gpu-1").unschedulable, what="the cordon after the malformed node")
    # mended, it is read again and no longer counted
    sim.store.mutate("nodes", "", "gpu-2", lambda n: n["status"].update(conditions=[{"type": "Ready", "status": "True"}]))
    await until(lambda: model.node("gpu-2") is not None and not model.nodes.unreadable, what="gpu-2 read again")
    sim.store.mutate("nodes", "", "gpu-1", lambda n: n["spec"].pop("unschedulable"))


async def test_a_pod_with_malformed_containers_does_not_stall_the_pods_watch(sim, model):
    bad = pod("ml", "broken-containers", node="gpu-1", gpu={"nvidia.com/gpu": 1})
    bad["spec"]["containers"] = {"name": "not-a-list"}
    sim.store.create("pods", bad)
    await until(lambda: ("ml", "broken-containers") in model.pods.unreadable, what="the pod counted as unreadable")
    sim.store.create("pods", pod("ml", "after-the-broken-one", node="gpu-1", gpu={"nvidia.com/gpu": 1}))
    await until(lambda: model.pod("ml", "after-the-broken-one") is not None, what="the next pod")
    assert model.states[PODS].phase == "live" and model.states[PODS].attempt == 0
    # its deletion forgets it
    sim.store.delete("pods", "ml", "broken-containers")
    await until(lambda: not model.pods.unreadable, what="the deleted pod forgotten")
    # a relist with it in the list (the watch resumes from a compacted resourceVersion) goes through too
    sim.store.create("pods", bad)
    sim.faults.drop_watches()
    sim.store.create("pods", pod("ml", "while-away", node="gpu-1", gpu={"nvidia.com/gpu": 1}))
    sim.faults.compact()
    await until(lambda: model.reflectors[PODS].lists >= 2 and model.pod("ml", "while-away") is not None, what="a relist")
    assert model.states[PODS].phase == "live"
    sim.store.delete("pods", "ml", "broken-containers")
    sim.store.delete("pods", "ml", "after-the-broken-one")
    sim.store.delete("pods", "ml", "while-away")


async def test_the_report_names_what_it_could_not_read(sim):
    sim.store.mutate("nodes", "", "gpu-2", lambda n: n["status"].update(conditions={"type": "Ready"}))
    try:
        rc, out, err = await asyncio.to_thread(run_report, "-o", "json", "--kubeconfig", str(sim.kubeconfig_path))
    finally:
        sim.store.mutate("nodes", "", "gpu-2", lambda n: n["status"].update(conditions=[{"type": "Ready", "status": "True"}]))
    data = json.loads(out)
    assert [(u["kind"], u["name"]) for u in data["unreadable"]] == [("nodes", "gpu-2")]
    assert "gpu-2" not in [n["name"] for n in data["nodes"]]
    assert "warning: 1 node unreadable: gpu-2: " in err and "(left out of the figures)" in err


async def test_a_killed_reflector_is_said_and_started_again(sim, model):
    said: list[tuple[str, str | None]] = []
    model.subscribe(lambda c: said.append((model.states[NODES].phase, model.states[NODES].error)) if c == Change(STATE, NODES) else None)
    assert model.all_running()
    model.watches.tasks[NODES].cancel()  # as a bug that ends the task would
    await until(lambda: any(phase == "retrying" for phase, _ in said), what="the stopped watch said", timeout=5)
    assert any(phase == "retrying" and "nodes watch stopped" in (error or "") for phase, error in said), said
    await until(lambda: model.states[NODES].phase == "live" and model.all_running(), what="started again", timeout=10)
    sim.store.mutate("nodes", "", "gpu-1", lambda n: n["metadata"].setdefault("labels", {}).update(seen="again"))
    await until(lambda: model.node("gpu-1").labels.get("seen") == "again", what="the restarted watch delivering")
    await asyncio.sleep(0)


async def test_a_server_reset_to_an_older_state_leaves_no_ghosts(sim, model):
    """After a restore or a rebuild the server's resourceVersions are from our past: its answer to our
    watch ("too large resource version") or an older resourceVersion makes us list again."""
    sim.store.create("pods", pod("ml", "ghost-to-be", node="gpu-1", gpu={"nvidia.com/gpu": 1}))
    await until(lambda: model.pod("ml", "ghost-to-be") is not None)
    sim.too_large_wait = 0.2
    try:
        await sim.faults.restart(downtime=0.1, fresh=True)  # the state of the scenario again: no ghost-to-be
        await until(lambda: model.pod("ml", "ghost-to-be") is None, timeout=10, what="the ghost gone")
        await until(lambda: matches_fresh_list(model, sim.store), timeout=10, what="the model equal to a fresh list")
    finally:
        sim.too_large_wait = 3.0


# -- quantities kube-apiserver refuses: named, and in no figure ----------------------------------

def invalid_quantities() -> list[dict]:
    from tests.model.objects import container, node, plugin_pod

    gpu = {"nvidia.com/gpu.present": "true"}
    return [
        node("gpu-1", capacity={"nvidia.com/gpu": 8}, labels=gpu),
        plugin_pod("gpu-1"),
        pod("ml", "good", node="gpu-1", gpu={"nvidia.com/gpu": 2}),
        pod("ml", "minus-three", node="gpu-1", gpu={"nvidia.com/gpu": -3}),
        pod("ml", "half", node="gpu-1", gpu={"nvidia.com/gpu": "0.5"}),
        pod("ml", "milli", node="gpu-1", gpu={"nvidia.com/gpu": "500m"}),
        pod("ml", "waiting-for-minus", gpu={"nvidia.com/gpu": "-16"}),
        pod("ml", "fpga-half", node="gpu-1", containers=[container("a", {"nvidia.com/gpu": 1}), container("b", {"example.com/fpga": "1.5"})]),
        node("minus-eight", capacity={"nvidia.com/gpu": 8}, allocatable={"nvidia.com/gpu": -8}, labels=gpu),
        node("half-gpu", capacity={"nvidia.com/gpu": "0.5"}, labels=gpu),
        plugin_pod("minus-eight"),
    ]


def undecodable_quantities() -> list[tuple[str, dict]]:
    """Quantities kube-apiserver cannot even decode: no scenario may hold them (the loader refuses them as the server
    does), so they are written into the store behind the server's back, as a corrupted etcd or a broken conversion would."""
    from tests.model.objects import node

    words_gpu = node("words-gpu", labels={"nvidia.com/gpu.present": "true"})
    words_gpu["status"].update(capacity={"nvidia.com/gpu": "eight"}, allocatable={"nvidia.com/gpu": "eight"})
    return [("pods", pod("ml", "words", node="gpu-1", gpu={"nvidia.com/gpu": "lots"})), ("nodes", words_gpu)]


async def test_quantities_the_api_server_refuses_make_the_object_unreadable_and_out_of_every_figure():
    async with SimCluster(invalid_quantities(), run_controllers=False) as cluster:
        for key, obj in undecodable_quantities():
            cluster.store.create(key, obj)
        rc, out, err = await asyncio.to_thread(run_report, "-o", "json", "--kubeconfig", str(cluster.kubeconfig_path))
        rc_table, table, _ = await asyncio.to_thread(run_report, "--kubeconfig", str(cluster.kubeconfig_path))
    data = json.loads(out)
    unreadable = {(u["kind"], u["name"]): u["reason"] for u in data["unreadable"]}
    assert set(unreadable) == {("nodes", "minus-eight"), ("nodes", "half-gpu"), ("nodes", "words-gpu"),
                               *(("pods", f"ml/{name}") for name in ("minus-three", "half", "milli", "words", "waiting-for-minus", "fpga-half"))}
    assert "must be greater than or equal to 0" in unreadable[("pods", "ml/minus-three")]
    assert "must be an integer" in unreadable[("pods", "ml/half")] and "must be an integer" in unreadable[("pods", "ml/milli")]
    assert "example.com/fpga" in unreadable[("pods", "ml/fpga-half")]
    assert "must be greater than or equal to 0" in unreadable[("nodes", "minus-eight")]
    assert "quantities must match" in unreadable[("pods", "ml/words")] and "quantities must match" in unreadable[("nodes", "words-gpu")]
    assert [n["name"] for n in data["nodes"]] == ["gpu-1"]
    assert data["nodes"][0]["gpu"] == {"nvidia.com/gpu": {"capacity": 8, "allocatable": 8, "allocated": 2, "free": 6}}
    assert data["totals"] == {"nvidia.com/gpu": {"capacity": 8, "allocatable": 8, "allocated": 2, "free": 6}}
    assert [(p["namespace"], p["name"]) for p in data["pods"]] == [("ml", "good")]
    assert "warning: 9 objects unreadable (3 nodes, 6 pods); first " in err and "(left out of the figures)" in err
    assert re.search(r"(?<![\w.-])-\d", table) is None, table  # no negative figure anywhere
    assert not [name for name in ("minus-eight", "half-gpu", "words-gpu", "minus-three", "ml/half", "ml/words") if name in table], table
