"""Idle allocated GPUs from gputui's own samples of the exporters (kube/idle.py): the figures against
the simulated exporters' utilisation profiles, the history file across restarts, and nothing made up
before the first sample."""
from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import stat
import time
from datetime import datetime

import pytest

from gputui.kube.config import connect
from gputui.kube.dcgm import GpuReading
from gputui.kube.idle import (
    EXPORTERS,
    HistoryError,
    Holder,
    IdleSettings,
    IdleTracker,
    SampleStore,
    device_figures,
    holders,
)
from gputui.kube.model import ClusterModel
from gputui.sim import SimCluster
from gputui.sim.exporters import dcgm
from gputui.sim.scenarios import idle_gpus
from tests.model.scenario import FAST, until
from tests.model.test_report import report_of

READ_EVERY = 0.2  # the background reads' interval in these tests
MIG_PERCENT = 37.5  # research/notebook-bob's MIG slice: GR engine activity 0.375, GPU_UTIL 0 (as on real MIG)


def profiled(stop_in: float) -> tuple[list[dict], float]:
    """The idle-gpus scenario with ml/batch-eval-0 to stop using its GPUs `stop_in` seconds from now
    (the profile counts from the pod's start) and the MIG notebook at MIG_PERCENT; and when it stops."""
    objects = idle_gpus.build()
    pods = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects if o["kind"] == "Pod"}
    batch = pods[("ml", "batch-eval-0")]
    started = datetime.fromisoformat(batch["status"]["startTime"]).timestamp()
    after = math.ceil(time.time() + stop_in - started)
    batch["metadata"]["annotations"][dcgm.UTIL_ANNOTATION] = f"stopped-after-{after}s"
    pods[("research", "notebook-bob")]["metadata"]["annotations"][dcgm.UTIL_ANNOTATION] = str(MIG_PERCENT)
    return objects, started + after


def memory_of(objects: list[dict], node: str, label: str = "nvidia.com/gpu.memory") -> int:
    return int(next(o for o in objects if o["kind"] == "Node" and o["metadata"]["name"] == node)["metadata"]["labels"][label])


@contextlib.asynccontextmanager
async def tracked(objects, settings: IdleSettings, *, reads: bool = True):
    async with SimCluster(objects, run_controllers=False) as sim:
        async with await connect(str(sim.kubeconfig_path)) as conn:
            async with ClusterModel(conn.api, metrics_background_interval=READ_EVERY, **FAST) as model:
                assert await model.wait_synced(10)
                tracker = IdleTracker(conn.api, settings, scope=conn.server)
                await tracker.open()
                unhook = tracker.follow(model.metrics)
                if reads:
                    model.metrics.start_background()
                try:
                    yield sim, model, tracker
                finally:
                    unhook()
                    await tracker.close()


# -- the simulator's profiles -----------------------------------------------------------------

def test_profiles_parse_and_refuse_what_is_not_one():
    assert dcgm.parse_util_annotation("idle") == dcgm.UtilProfile(0.0)
    assert dcgm.parse_util_annotation("busy") == dcgm.UtilProfile(90.0)
    assert dcgm.parse_util_annotation(" 37.5 ") == dcgm.UtilProfile(37.5)
    assert dcgm.parse_util_annotation("stopped-after-1h30m") == dcgm.UtilProfile(90.0, 5400.0)
    assert dcgm.parse_util_annotation("stopped-after-90s").util(89.9) == 90.0
    assert dcgm.parse_util_annotation("stopped-after-90s").util(90.0) == 0.0
    for bad in ("", "lazy", "101", "-1", "stopped-after-", "stopped-after-5d", "nan"):
        with pytest.raises(ValueError, match="sim.gputui.io/gpu-util"):
            dcgm.parse_util_annotation(bad)


def test_the_exporter_reports_each_profile_with_the_pod_labels():
    objects, stop_at = profiled(stop_in=100)
    nodes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Node"}
    pods = [o for o in objects if o["kind"] == "Pod"]

    def series(node: str, now: float, metric: str) -> dict[tuple[str, str, str], float]:
        text = dcgm.exposition(nodes[node], [p for p in pods if p["spec"].get("nodeName") == node], now)
        out = {}
        for line in text.splitlines():
            if line.startswith(metric + "{") and ',pod="' in line:  # a GPU no pod holds has no pod label
                labels = dict(part.split("=", 1) for part in line[line.index("{") + 1:line.rindex("}")].split(","))
                out[(labels["namespace"].strip('"'), labels["pod"].strip('"'), labels["gpu"].strip('"'))] = float(line.rsplit(" ", 1)[1])
        return out

    util = series("gpu-1", time.time(), "DCGM_FI_DEV_GPU_UTIL")
    assert util == {**{("ml", "llm-train-0", str(i)): 90.0 for i in range(4)}, ("ml", "notebook-alice", "4"): 0.0}
    fb = series("gpu-1", time.time(), "DCGM_FI_DEV_FB_USED")
    memory = memory_of(objects, "gpu-1")
    assert fb[("ml", "notebook-alice", "4")] == round(memory * 0.2) and fb[("ml", "llm-train-0", "0")] == round(memory * 0.74)
    before, after = series("gpu-2", stop_at - 0.5, "DCGM_FI_DEV_GPU_UTIL"), series("gpu-2", stop_at, "DCGM_FI_DEV_GPU_UTIL")
    assert before[("ml", "batch-eval-0", "0")] == 90.0 and after[("ml", "batch-eval-0", "0")] == 0.0
    assert after[("research", "sweep-0", "2")] == 3.0
    # MIG: GPU_UTIL reads 0, the GR engine's activity is the figure (a ratio).
    assert series("mig-1", time.time(), "DCGM_FI_DEV_GPU_UTIL")[("research", "notebook-bob", "0")] == 0.0
    assert series("mig-1", time.time(), "DCGM_FI_PROF_GR_ENGINE_ACTIVE")[("research", "notebook-bob", "0")] == MIG_PERCENT / 100


# -- the figures from gputui's samples ------------------------------------------------------------

async def test_figures_from_the_exporters_samples_follow_the_profiles():
    objects, stop_at = profiled(stop_in=2.0)
    async with tracked(objects, IdleSettings(window=30, prometheus=None)) as (_, model, tracker):
        await until(lambda: time.time() > stop_at + 2.5, timeout=10, what="the job stopped 2.5 s ago")
        view = await tracker.refresh(holders(model))
        now = view.at
    assert view.source == EXPORTERS and view.window_s == 30
    pods = {(p.namespace, p.name): p for p in view.pods}
    h100, a100 = memory_of(objects, "gpu-1"), memory_of(objects, "gpu-2")
    mig = memory_of(objects, "mig-1", "nvidia.com/mig-1g.10gb.memory")

    trainer = pods[("ml", "llm-train-0")]
    assert (trainer.gpus, trainer.idle_s, trainer.mean_util, trainer.peak_util) == (4, 0.0, 90.0, 90.0)
    assert trainer.fb_used_mib == 4 * round(h100 * 0.74)
    notebook = pods[("ml", "notebook-alice")]
    assert (notebook.mean_util, notebook.peak_util, notebook.fb_used_mib, notebook.idle_at_least) == (0.0, 0.0, round(h100 * 0.2), True)
    assert notebook.idle_s == pytest.approx(notebook.covered_s, abs=0.01) and notebook.covered_s > 3  # idle for all it saw
    sweep = pods[("research", "sweep-0")]
    assert (sweep.mean_util, sweep.idle_at_least) == (3.0, True)  # 3 % is under the 5 % threshold
    bob = pods[("research", "notebook-bob")]
    assert (bob.mean_util, bob.peak_util, bob.idle_s, bob.fb_used_mib) == (MIG_PERCENT, MIG_PERCENT, 0.0, round(mig * (0.2 + 0.6 * 0.375)))

    batch = pods[("ml", "batch-eval-0")]
    assert batch.peak_util == 90.0 and batch.fb_used_mib == 2 * round(a100 * 0.74) and not batch.idle_at_least
    assert now - stop_at - 0.1 <= batch.idle_s <= now - stop_at + READ_EVERY + 0.8  # since its last busy sample
    busy_share = (stop_at - (now - batch.covered_s)) / batch.covered_s
    assert batch.mean_util == pytest.approx(90 * busy_share, abs=7)
    # Worst first: the most idle GPU-seconds first, the pods in use last.
    assert {p.name for p in view.pods[-2:]} == {"llm-train-0", "notebook-bob"}
    idle = [p.gpus * p.idle_s for p in view.pods[:-2]]
    assert all(i > 0 for i in idle) and idle == sorted(idle, reverse=True)


def with_time_sliced(objects: list[dict]) -> list[dict]:
    """The scenario and two A100s time-sliced four ways (GPU Feature Discovery's labels, nvidia.com/gpu: 4, an
    exporter with its defaults): ts-1 held by shared/pair-a and shared/pair-b, ts-2 by shared/solo alone."""
    by_name = {o["metadata"]["name"]: o for o in objects if o["kind"] in ("Node", "Pod")}
    exporter = next(o for name, o in by_name.items() if name.startswith("nvidia-dcgm-exporter-") and o["spec"]["nodeName"] == "gpu-2")
    out = [*objects, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shared"}}]
    for node_name, pods in (("ts-1", ("pair-a", "pair-b")), ("ts-2", ("solo",))):
        node = json.loads(json.dumps(by_name["gpu-2"]))
        node["metadata"]["name"] = node["metadata"]["labels"]["kubernetes.io/hostname"] = node_name
        node["metadata"].pop("uid", None)
        node["metadata"]["labels"].update({"nvidia.com/gpu.count": "1", "nvidia.com/gpu.replicas": "4",
                                           "nvidia.com/gpu.sharing-strategy": "time-slicing"})
        for resources in (node["status"]["capacity"], node["status"]["allocatable"]):
            resources["nvidia.com/gpu"] = "4"
        copy = json.loads(json.dumps(exporter))
        copy["metadata"] = {**copy["metadata"], "name": f"nvidia-dcgm-exporter-{node_name}"}
        copy["metadata"].pop("uid", None)
        copy["spec"]["nodeName"] = node_name
        out += [node, copy]
        for name in pods:
            pod = json.loads(json.dumps(by_name["sweep-0"]))
            pod["metadata"] = {"name": name, "namespace": "shared", "annotations": {dcgm.UTIL_ANNOTATION: "busy"},
                               "creationTimestamp": pod["metadata"]["creationTimestamp"]}
            pod["spec"]["nodeName"] = node_name
            out.append(pod)
    return out


async def test_pods_sharing_a_time_sliced_gpu_have_no_figures_of_their_own():
    """dcgm-exporter names one of the pods on a time-sliced GPU, with the whole GPU's use: gputui gives neither pod
    that figure as its own; a pod alone on its time-sliced node has its GPU's figures."""
    objects = with_time_sliced(idle_gpus.build())
    async with tracked(objects, IdleSettings(window=30, prometheus=None)) as (_, model, tracker):
        def named() -> list[tuple[str, ...]]:
            measured = [model.node_metrics(node) for node in ("ts-1", "ts-2")]
            return [r.pods for m in measured if m is not None for r in m.readings]

        await until(lambda: len(named()) == 2, what="the time-sliced GPUs read")
        await until(lambda: tracker.store.figures(Holder("shared", "solo", "ts-2", 1), time.time()).known, what="solo's samples")
        view = await tracker.refresh(holders(model))
    assert named() == [("shared/pair-b",), ("shared/solo",)]  # the exporter's one pod per GPU
    pair = [view.pod("shared", name) for name in ("pair-a", "pair-b")]
    assert all(p is not None and p.shared and not p.known and p.mean_util is None for p in pair)
    solo = view.pod("shared", "solo")
    assert solo is not None and not solo.shared and solo.known and solo.mean_util == 90.0
    assert {p["name"]: p["mean_util"] for p in view.to_json()["pods"] if p["namespace"] == "shared"} == {
        "pair-a": None, "pair-b": None, "solo": 90.0}


async def test_nothing_is_made_up_before_the_first_sample():
    objects, _ = profiled(stop_in=100)
    async with tracked(objects, IdleSettings(window=30, prometheus=None), reads=False) as (_, model, tracker):
        view = await tracker.refresh(holders(model))
    assert len(view.pods) == 5 and view.covered_s == 0
    assert all(p.idle_s is None and p.mean_util is None and p.peak_util is None and p.fb_used_mib is None for p in view.pods)
    reported = view.to_json()["pods"]
    assert all(p["idle_s"] is None and p["mean_util"] is None for p in reported)
    assert {p["name"]: p["gpus"] for p in reported} == {"llm-train-0": 4, "notebook-alice": 1, "batch-eval-0": 2, "sweep-0": 1, "notebook-bob": 1}


async def test_a_prometheus_that_does_not_answer_leaves_the_exporters_samples_and_says_why():
    objects, _ = profiled(stop_in=100)
    async with tracked(objects, IdleSettings(window=30, prometheus="http://127.0.0.1:1")) as (_, model, tracker):
        await until(lambda: len(tracker.store) >= 9, what="a sample of every GPU")
        view = await tracker.refresh(holders(model))
        asked = tracker.prometheus.requests
        again = await tracker.refresh(holders(model))
    assert view.source == EXPORTERS and view.note == "Prometheus http://127.0.0.1:1: connection refused; using gputui's own exporter samples"
    assert view.pod("ml", "llm-train-0").mean_util == 90.0
    assert (again.source, tracker.prometheus.requests) == (EXPORTERS, asked)  # not asked again at once


# -- how one GPU's samples become figures ------------------------------------------------------------

def test_the_mean_weighs_time_not_samples_and_a_gap_is_not_covered():
    # Busy for 60 s read every 60 s, then idle for 60 s read every second: half the time busy.
    samples = [(0.0, 90.0, 1.0), (60.0, 90.0, 1.0), *((60.0 + i, 0.0, 1.0) for i in range(1, 61))]
    figures = device_figures(samples, threshold=5.0)
    assert figures.mean == pytest.approx((90 * 60 + 45) / 120)  # the busy-to-idle second counts half and half
    assert (figures.idle_from, figures.exact, figures.covered) == (60.0, True, 120.0)
    gap = device_figures([(0.0, 90.0, None), (10.0, 0.0, None), (1000.0, 0.0, None), (1010.0, 0.0, None)], threshold=5.0)
    assert gap.covered == 20.0 and gap.idle_from == 1000.0 and not gap.exact  # idle since the gap at least
    assert device_figures([(5.0, 7.0, None)], threshold=5.0).idle_from is None  # at or above it: in use


def reading(uuid: str, util: float, *pods: str) -> GpuReading:
    return GpuReading(uuid, 0, "L4", "n1", None, None, util, 100.0, 1000.0, 30.0, 50.0, None, pods, None)


# -- the history file ------------------------------------------------------------------------------

async def test_the_history_file_survives_a_restart_is_private_and_pruned(tmp_path):
    path = tmp_path / "state" / "idle.sqlite"
    now = time.time()
    holder = Holder("ml", "nb", "n1", 1)
    store = SampleStore(600, 5.0, history=str(path), scope="cluster-a")
    await store.open()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    store.add([reading("GPU-1", 80.0, "ml/nb")], now - 900)  # before the window: pruned on flush
    store.add([reading("GPU-1", 80.0, "ml/nb")], now - 300)
    store.add([reading("GPU-1", 0.0, "ml/nb")], now - 200)
    store.add([reading("GPU-1", 0.0, "ml/nb")], now - 100)
    before = store.figures(holder, now)
    await store.close()

    other = SampleStore(600, 5.0, history=str(path), scope="cluster-b")  # another cluster's samples are its own
    await other.open()
    assert other.figures(holder, now).idle_s is None
    await other.close()
    again = SampleStore(600, 5.0, history=str(path), scope="cluster-a")
    await again.open()
    after = again.figures(holder, now)
    await again.close()
    assert after == before and after.idle_s == pytest.approx(300) and not after.idle_at_least and after.covered_s == pytest.approx(300)
    import sqlite3

    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT count(*) FROM samples WHERE scope = 'cluster-a'").fetchone()[0] == 3


async def test_a_file_that_is_not_a_history_is_one_line(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("not a database\n" * 100)
    store = SampleStore(600, 5.0, history=str(path))
    with pytest.raises(HistoryError) as caught:
        await store.open()
    assert str(caught.value).startswith(f"history {path}: not a gputui history file (")
    with pytest.raises(HistoryError, match=f"history {tmp_path}: cannot open it: "):
        await SampleStore(600, 5.0, history=str(tmp_path)).open()


def sqlite_file(path, *statements: str) -> None:
    import sqlite3

    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
        for statement in statements:
            db.execute(statement)


def checksum(path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


# What gputui wrote before its history files carried PRAGMA application_id (kube/idle.py, schema 1).
OLD_SCHEMA = ("CREATE TABLE IF NOT EXISTS samples (scope TEXT NOT NULL, t REAL NOT NULL, namespace TEXT NOT NULL, "
              "pod TEXT NOT NULL, device TEXT NOT NULL, util REAL NOT NULL, fb_used REAL)",
              "CREATE INDEX IF NOT EXISTS samples_by_time ON samples (scope, t)", "PRAGMA user_version = 1")

FOREIGN = {
    "other-tables": ("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)", "INSERT INTO notes (body) VALUES ('mine')"),
    "other-samples": ("CREATE TABLE samples (id INTEGER PRIMARY KEY, reading REAL)", "INSERT INTO samples (reading) VALUES (1.5)"),
    "empty-database": ("PRAGMA application_id = 42",),  # a valid SQLite file with no table: not gputui's either
    "old-schema-and-more": (*OLD_SCHEMA, "CREATE TABLE notes (body TEXT)"),
}


@pytest.mark.parametrize("statements", FOREIGN.values(), ids=FOREIGN.keys())
async def test_a_database_that_is_not_gputuis_is_refused_and_left_as_it_was(tmp_path, statements):
    path = tmp_path / "theirs.db"
    sqlite_file(path, *statements)
    before, files = checksum(path), sorted(p.name for p in tmp_path.iterdir())
    store = SampleStore(600, 5.0, history=str(path))
    with pytest.raises(HistoryError) as caught:
        await store.open()
    assert str(caught.value).startswith(f"history {path}: not a gputui history file (")
    assert checksum(path) == before and sorted(p.name for p in tmp_path.iterdir()) == files


async def test_the_report_refuses_a_foreign_history_in_one_line_and_leaves_it_alone(tmp_path):
    from tests.model.scenario import small_cluster
    from tests.model.test_report import TOKEN

    path = tmp_path / "theirs.db"
    sqlite_file(path, *FOREIGN["other-tables"])
    before = checksum(path)
    config = tmp_path / "config.toml"
    config.write_text("[idle]\nprometheus = ''\n")
    async with SimCluster(small_cluster(), run_controllers=False) as sim:
        rc, out, err = await report_of("--kubeconfig", str(sim.kubeconfig_path), "--config", str(config), "--history", str(path))
    assert (rc, out) == (2, "")
    assert err == f"gputui report: history {path}: not a gputui history file (it holds tables of its own: notes)\n"
    assert "Traceback" not in err and TOKEN not in err
    assert checksum(path) == before


async def test_a_history_written_before_the_marker_is_still_read_and_an_empty_file_is_taken(tmp_path):
    import sqlite3

    old = tmp_path / "old.sqlite"
    now = time.time()
    sqlite_file(old, *OLD_SCHEMA, f"INSERT INTO samples VALUES ('', {now - 100}, 'ml', 'nb', 'GPU-1', 0.0, NULL)",
                f"INSERT INTO samples VALUES ('', {now - 50}, 'ml', 'nb', 'GPU-1', 0.0, NULL)")
    store = SampleStore(600, 5.0, history=str(old))
    await store.open()
    assert store.figures(Holder("ml", "nb", "n1", 1), now).idle_s == pytest.approx(100, abs=1)
    await store.close()
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    for path in (old, empty, tmp_path / "new" / "idle.sqlite"):
        store = SampleStore(600, 5.0, history=str(path))
        await store.open()
        await store.close()
        with contextlib.closing(sqlite3.connect(path)) as db:  # each is gputui's now, marked
            assert db.execute("PRAGMA application_id").fetchone()[0] == 0x67707574  # "gput"
            assert db.execute("PRAGMA user_version").fetchone()[0] == 1
        again = SampleStore(600, 5.0, history=str(path))
        await again.open()
        await again.close()


# -- the report ------------------------------------------------------------------------------------

async def test_the_report_gives_the_same_figures_and_keeps_a_window_across_runs(tmp_path):
    objects, _ = profiled(stop_in=100)
    config = tmp_path / "config.toml"
    config.write_text("[idle]\nwindow = 24\nprometheus = ''\n")
    history = tmp_path / "idle.sqlite"
    async with SimCluster(objects, run_controllers=False) as sim:
        argv = ("--kubeconfig", str(sim.kubeconfig_path), "-o", "json", "--config", str(config), "--history", str(history))
        rc, out, err = await report_of(*argv)
        assert rc == 0, err
        first = json.loads(out)["idle"]
        await asyncio.sleep(1.0)
        rc, out, err = await report_of(*argv)
        second = json.loads(out)["idle"]
        rc, table, _ = await report_of("--kubeconfig", str(sim.kubeconfig_path), "--config", str(config), "--history", str(history))
    assert err == ""  # no Prometheus asked for: nothing to warn of
    assert (first["source"], first["window_s"], first["covered_s"]) == (EXPORTERS, 24, 0)
    assert second["covered_s"] >= 1  # the first run's reads, from the file
    pods = {p["name"]: p for p in second["pods"]}
    assert set(second) == {"source", "window_s", "covered_s", "pods"}
    assert set(pods["notebook-alice"]) == {"namespace", "name", "node", "gpus", "idle_s", "mean_util", "peak_util", "fb_used_mib",
                                           "idle_at_least", "why"}
    h100 = memory_of(objects, "gpu-1")
    assert pods["notebook-alice"] == {"namespace": "ml", "name": "notebook-alice", "node": "gpu-1", "gpus": 1, "idle_s": second["covered_s"],
                                      "mean_util": 0.0, "peak_util": 0.0, "fb_used_mib": round(h100 * 0.2), "idle_at_least": True, "why": None}
    assert (pods["llm-train-0"]["idle_s"], pods["llm-train-0"]["mean_util"]) == (0, 90.0)
    assert pods["notebook-bob"]["mean_util"] == MIG_PERCENT
    assert "Idle GPUs (gputui's own samples of the DCGM exporters: " in table and "ml/notebook-alice" in table
    alice = next(line for line in idle_section(table) if "ml/notebook-alice" in line)
    assert " ≥" in alice  # idle for all that is covered, maybe longer: the app's words, not `0s` or a bare figure


def idle_section(table: str) -> list[str]:
    lines = table.splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith("Idle GPUs (")):]


async def test_a_pod_whose_node_has_no_exporter_says_so():
    objects = [o for o in idle_gpus.build() if o["metadata"]["name"] != "nvidia-dcgm-exporter-j66wp"]  # mig-1's
    async with SimCluster(objects, run_controllers=False) as sim:
        rc, out, err = await report_of("--kubeconfig", str(sim.kubeconfig_path), "-o", "json")
        _, table, _ = await report_of("--kubeconfig", str(sim.kubeconfig_path))
    bob = next(p for p in json.loads(out)["idle"]["pods"] if p["name"] == "notebook-bob")
    assert bob["idle_s"] is None and bob["why"] == "exporter not running"
    section = idle_section(table)
    at = next(i for i, line in enumerate(section) if "research/notebook-bob" in line)
    assert section[at].split()[3] == "?" and section[at + 1] == "      why: exporter not running"
