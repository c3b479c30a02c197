"""Namespaced RBAC: a user who may list pods in some namespaces only (not cluster-wide) gets the GPU view of
those namespaces, never "forbidden" for everything, and never a node figure that passes as complete when
pods of other namespaces may hold GPUs. Which namespaces: -n (repeatable), else the kubeconfig context's
namespace, then the config file's `namespaces`. With cluster-wide access, -n narrows the pods shown only.
The simulator plays kube-apiserver's RBAC; the request shapes come from its counts."""
from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import pytest
import yaml

from gputui.kube.config import connect
from gputui.kube.model import EVENTS, PODS, UNFINISHED_PODS, ClusterModel
from gputui.kube.watch import FORBIDDEN, LIVE
from gputui.kube.watches import namespaces_to_try
from gputui.sim.cluster import SimCluster
from gputui.ui.demo import BackgroundCluster
from gputui.ui.launch import make_app
from gputui.ui.screens import TextScreen
from tests.model.objects import event, pod
from tests.model.scenario import FAST, expected_pods, small_cluster, until
from tests.model.test_report import report_of
from tests.ui.ui_helpers import screen_text, wait_for

RBAC = "rbac.authorization.k8s.io/v1"
ALICE, BOB = "alice-t0ken", "bob-t0ken"  # alice: pods and events in ml and research; bob: nodes only
VISIBLE = ("ml", "research")


def reader(namespace: str) -> list[dict]:
    return [
        {"apiVersion": RBAC, "kind": "Role", "metadata": {"name": "gpu-reader", "namespace": namespace},
         "rules": [{"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": "alice", "namespace": namespace},
         "subjects": [{"kind": "User", "name": "alice"}], "roleRef": {"kind": "Role", "name": "gpu-reader"}},
    ]


POLICY = [
    {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "node-viewer"},
     "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]},
    {"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": "everyone-sees-nodes"},
     "subjects": [{"kind": "User", "name": "alice"}, {"kind": "User", "name": "bob"}], "roleRef": {"kind": "ClusterRole", "name": "node-viewer"}},
    *reader("ml"), *reader("research"),
]


def objects() -> list[dict]:
    return [
        *small_cluster(),
        pod("research", "notebook", node="mig-1", gpu={"nvidia.com/mig-1g.10gb": 1}),
        pod("research", "queued", gpu={"nvidia.com/gpu": 1}, unschedulable_message=None),
        event("research", "queued.1", kind="Pod", object_name="queued", reason="FailedScheduling", message="0/4 nodes: research's reason"),
        pod("web", "render", node="gpu-1", gpu={"nvidia.com/gpu": 1}),  # alice cannot see it: gpu-1 is full, not 1 free
        pulled("ml", "train-0"),
        *POLICY,
    ]


def pulled(namespace: str, name: str) -> dict:
    """A Normal event about a pod: not watched, listed when the pod's details open."""
    ev = event(namespace, f"{name}.pulled", kind="Pod", object_name=name, reason="Pulled", message="image pulled", type_="Normal")
    ev["involvedObject"]["uid"] = f"uid-{namespace}-{name}"
    return ev


@pytest.fixture
async def sim():
    async with SimCluster(objects(), tokens={ALICE: "alice", BOB: "bob"}, run_controllers=False) as cluster:
        yield cluster


def kubeconfig(sim: SimCluster | BackgroundCluster, tmp_path: Path, token: str, namespace: str | None = None) -> str:
    doc = yaml.safe_load(sim.kubeconfig_path.read_text())
    doc["users"][0]["user"] = {"token": token}
    if namespace is not None:
        doc["contexts"][0]["context"]["namespace"] = namespace
    else:
        doc["contexts"][0]["context"].pop("namespace", None)  # kubectl's default: "default"
    path = tmp_path / f"kubeconfig-{token}-{namespace}"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def config(tmp_path: Path, namespaces: list[str]) -> str:
    path = tmp_path / "config.toml"
    path.write_text(f"namespaces = {json.dumps(namespaces)}\n")
    return str(path)


def pod_reads(sim: SimCluster) -> list[tuple[str, dict[str, str]]]:
    return [(verb, query) for verb, res, query in sim.api_counts.recent if res == PODS]


def visible_gpu_pods(sim: SimCluster, model: ClusterModel, namespaces: tuple[str, ...]) -> dict:
    return {key: record for key, record in expected_pods(model, sim.store).items() if key[0] in namespaces}


@contextlib.asynccontextmanager
async def app_for(objs: list[dict], tokens: dict[str, str], token: str | None, tmp_path: Path, **options: Any) -> AsyncIterator[tuple]:
    """The app on a background cluster, as `token`'s user (None: the admin); yields (app, pilot, text), where
    `await text(condition)` waits until the screen's text meets it and returns that text."""
    cluster = BackgroundCluster(scenario=objs, tokens=tokens, run_controllers=False)
    await asyncio.to_thread(cluster.start)
    try:
        app = make_app(kubeconfig(cluster, tmp_path, token) if token else str(cluster.kubeconfig_path), **options)
        async with app.run_test(size=(200, 40)) as pilot:
            async def text(condition: Callable[[str], bool]) -> str:
                return await wait_for(pilot, lambda: shown if condition(shown := screen_text(app)) else None, timeout=20, what="the screen")

            yield app, pilot, text
    finally:
        await asyncio.to_thread(cluster.stop)


def test_which_namespaces_are_tried():
    assert namespaces_to_try((), "default", ()) == ("default",)
    assert namespaces_to_try((), "ml", ("research", "ml")) == ("ml", "research")  # the context's, then the config's, once each
    assert namespaces_to_try(("research",), "ml", ("ops",)) == ("research",)  # -n replaces both, as kubectl -n does
    assert namespaces_to_try((), None, ("ops",)) == ("ops",)  # in-cluster without a namespace file


async def test_a_user_who_may_read_two_namespaces_gets_their_gpu_pods_through_namespaced_watches(sim, tmp_path):
    async with await connect(kubeconfig(sim, tmp_path, ALICE)) as conn:
        tried = namespaces_to_try((), conn.namespace, VISIBLE)
        assert tried == ("default", "ml", "research")
        model = ClusterModel(conn.api, kinds=("nodes", PODS, EVENTS), namespaces=tried, **FAST)
        async with model:
            assert await model.wait_synced(10), model.states
            assert model.reflectors[PODS].state.phase == FORBIDDEN  # cluster-wide: 403
            assert model.states[PODS].phase == LIVE and model.states[PODS].synced  # the namespaces read instead
            assert model.pods.records == visible_gpu_pods(sim, model, VISIBLE)
            scope = model.scope(PODS)
            assert scope.partial and scope.readable == VISIBLE and scope.forbidden == ("default",)
            assert scope.words() == "pods in 2 namespaces: ml, research; cluster-wide forbidden; forbidden in default"
            assert not model.pods_known  # so no verdict that needs every pod (a missing plugin), no trusted free count
            # one watch per namespace tried, the unfinished pods' selector on each; never a read of another namespace
            assert [w.namespace for w in model.watches.of(PODS) if w.namespace] == list(tried)
            namespaced = {query["namespace"]: query for verb, query in pod_reads(sim) if "namespace" in query}
            assert set(namespaced) == set(VISIBLE)  # default's answer was a 403, before any read the counts see
            assert all(q["fieldSelector"] == UNFINISHED_PODS for q in namespaced.values())
            assert [e.reason for e in model.events_for("Pod", "research", "queued")] == ["FailedScheduling"]
            # live, namespace by namespace
            sim.store.create("pods", pod("research", "new", node="gpu-2", gpu={"nvidia.com/gpu": 1}))
            sim.store.create("pods", pod("web", "hidden", node="gpu-2", gpu={"nvidia.com/gpu": 1}))
            sim.store.delete("pods", "ml", "train-0")
            await until(lambda: model.pod("research", "new") is not None and model.pod("ml", "train-0") is None)
            assert model.pods.records == visible_gpu_pods(sim, model, VISIBLE)
            assert all(query.get("namespace") != "web" for _, query in pod_reads(sim))


async def test_the_report_says_which_namespaces_and_never_a_free_count_it_cannot_know(sim, tmp_path):
    rc, out, err = await report_of("--kubeconfig", kubeconfig(sim, tmp_path, ALICE), "--config", config(tmp_path, list(VISIBLE)), "-o", "json")
    assert rc in (0, 1), err
    data = json.loads(out)
    assert data["scope"]["pods"] == {"cluster_wide": False, "namespaces": ["ml", "research"], "forbidden": ["default"], "partial": True}
    assert data["scope"]["events"]["partial"] is True
    assert {(p["namespace"], p["name"]) for p in data["pods"]} == {
        ("ml", n) for n in ("init-only", "slice", "train-0", "two-containers", "waiting", "with-init")} | {("research", "notebook"), ("research", "queued")}
    gpu1 = next(n for n in data["nodes"] if n["name"] == "gpu-1")["gpu"]["nvidia.com/gpu"]
    assert gpu1 == {"capacity": 8, "allocatable": 8, "allocated": None, "free": None}  # not 7 and 1 free: web/render holds the last
    assert all(u["allocated"] is None and u["free"] is None for u in data["totals"].values())
    assert data["missing"][0]["part"] == "pods" and "read in ml, research only (forbidden in default too)" in data["missing"][0]["reason"]
    assert "gputui report: warning: pods are forbidden (403) cluster-wide: " in err
    assert "nodes' allocated and free are unknown: pods of other namespaces may hold GPUs" in err
    rc, table, _ = await report_of("--kubeconfig", kubeconfig(sim, tmp_path, ALICE), "--config", config(tmp_path, list(VISIBLE)))
    gpu1_row = next(line for line in table.splitlines() if line.startswith("gpu-1"))
    assert gpu1_row.split()[-4:-1] == ["8", "?", "?"] and "not read: pods: forbidden (403) cluster-wide" in table


async def test_minus_n_replaces_the_context_and_config_namespaces(sim, tmp_path):
    rc, out, err = await report_of("--kubeconfig", kubeconfig(sim, tmp_path, ALICE, "ml"), "--config", config(tmp_path, ["ml"]),
                                   "-n", "research", "-o", "json")
    assert rc in (0, 1), err
    data = json.loads(out)
    assert data["scope"]["pods"]["namespaces"] == ["research"] and data["scope"]["pods"]["forbidden"] == []
    assert {p["namespace"] for p in data["pods"]} == {"research"}
    assert {q.get("namespace") for _, q in pod_reads(sim) if "namespace" in q} == {"research"}


async def test_the_contexts_namespace_is_tried_without_flags_or_config(sim, tmp_path):
    rc, out, err = await report_of("--kubeconfig", kubeconfig(sim, tmp_path, ALICE, "research"), "-o", "json",
                                   "--config", config(tmp_path, []))
    assert rc in (0, 1), err
    data = json.loads(out)
    assert data["scope"]["pods"] == {"cluster_wide": False, "namespaces": ["research"], "forbidden": [], "partial": True}
    assert {p["name"] for p in data["pods"]} == {"notebook", "queued"}
    queued = next(p for p in data["pods"] if p["name"] == "queued")
    assert queued["reason"].startswith("0/4 nodes: research's reason")  # its FailedScheduling event, read in the namespace


async def test_forbidden_everywhere_tried_is_one_line_and_exit_2(sim, tmp_path):
    rc, out, err = await report_of("--kubeconfig", kubeconfig(sim, tmp_path, BOB), "--config", config(tmp_path, ["ml"]))
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("gputui report: forbidden (403): pods is forbidden: User \"bob\" cannot list")
    assert err.rstrip().endswith("; in namespaces default, ml too")


async def test_minus_n_with_cluster_wide_access_narrows_the_pods_and_keeps_the_node_figures_whole(sim, tmp_path):
    rc, out, err = await report_of("--kubeconfig", str(sim.kubeconfig_path), "-n", "research", "-n", "web", "-o", "json")
    assert rc in (0, 1), err
    data = json.loads(out)
    assert data["scope"]["pods"] == {"cluster_wide": True, "namespaces": [], "forbidden": [], "partial": False}
    assert {(p["namespace"], p["name"]) for p in data["pods"]} == {("research", "notebook"), ("research", "queued"), ("web", "render")}
    gpu1 = next(n for n in data["nodes"] if n["name"] == "gpu-1")["gpu"]["nvidia.com/gpu"]
    assert (gpu1["allocated"], gpu1["free"]) == (8, 0)  # every pod counted: the cluster-wide list is allowed
    assert all("namespace" not in q for _, q in pod_reads(sim))  # one cluster-wide watch, as before


async def test_the_app_header_names_the_namespaces_and_shows_no_free_count(tmp_path):
    async with app_for(objects(), {ALICE: "alice"}, ALICE, tmp_path, fallback_namespaces=VISIBLE) as (app, pilot, text):
        header = await text(lambda t: "allocation unknown: pods in 2 namespaces: ml, research; cluster-wide forbidden; forbidden in default" in t
                            and "watches events in 2 namespaces: ml, research; cluster-wide forbidden; forbidden in default" in t)
        assert "gpu ?/11 (? free)" in header
        assert "7/8" not in header and " 1 free" not in header  # gpu-1 as if web/render did not exist
        app.jump_to_node("gpu-1")
        await pilot.press("a")  # every node's GPU pods
        await text(lambda t: "research/notebook" in t and "ml/train-0" in t)
        app.pods_table.focus()
        app.pods_table.move_cursor(row=app.pods_table.shown_keys.index("ml/train-0"))
        await pilot.press("enter")  # its details: its events listed now, in its namespace
        await wait_for(pilot, lambda: isinstance(app.screen, TextScreen) and "Pulled" in app.screen.text, what="the pod's events")
        assert "listing its events" not in app.screen.text


async def test_with_minus_n_the_app_narrows_the_pods_and_says_so(tmp_path):
    async with app_for(objects(), {}, None, tmp_path, namespaces=("research",)) as (app, pilot, text):
        header = await text(lambda t: "namespace research" in t and "gpu 11/11 (0 free)" in t)  # web/render's GPU counted
        assert "allocation unknown" not in header  # cluster-wide access: the figures are whole
        await pilot.press("a")
        shown = await text(lambda t: "research/notebook" in t)
        assert "ml/train-0" not in shown and "GPU pods · all nodes · ns research" in shown
