"""`gputui report --from` and `gputui --from`: a dump diagnosed offline through the same model and client.

The equality: a live simulated cluster (the demo, its controllers and DCGM exporters running), its
report, and the report of a dump of it taken with the real kubectl, as one List and in a must-gather
layout, are the same JSON except what names the source (`context`) and what a dump cannot hold: DCGM
readings (each node's `gpus`, the `xid-errors` verdict they give, idle GPU time, the `metrics` part of
`missing`).
The live report is read with its exporters, as a user gets it, and compared on the rest: running it
without exporters would compare a cluster nobody runs.
"""
from __future__ import annotations

import asyncio
import copy
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputui.config import Config
from gputui.kube.quantities import dump_taken
from gputui.sim.scenarios.dump import Dump
from gputui.ui.demo import BackgroundCluster, dump_app
from gputui.ui.verify import READ_ONLY_MESSAGE
from tests.model.test_report import run_report

ROOT = Path(__file__).resolve().parents[2]
MUST_GATHER = ROOT / "tests" / "dumps" / "must-gather"
OPERATOR_NS = "gpu-operator"
# Every kind the report reads, and some it does not.
KINDS = "nodes,pods,events,daemonsets,services,clusterpolicies,resourceslices,resourceclaims,deviceclasses,crd,namespaces,configmaps"


def comparable(data: dict) -> dict:
    """The report without what names its source and without what comes from DCGM exporters."""
    out = copy.deepcopy(data)
    del out["context"]
    out.pop("idle", None)  # idle GPU time: DCGM readings over time
    out["missing"] = [m for m in out["missing"] if m["part"] != "metrics"]
    for node in out["nodes"]:
        node.pop("gpus", None)
        node["problems"] = [p for p in node["problems"] if p["code"] != "xid-errors"]
        node["unknown"] = [u for u in node["unknown"] if u["verdict"] != "XIDs"]
    for bad in out["bad_gpus"]:  # XIDs and the exporters' pod attribution
        bad["signals"] = [s for s in bad["signals"] if s["source"] != "dcgm"]
        for pod in bad["pods"] or ():
            pod["how"] = [how for how in pod["how"] if how != "DCGM attribution"]
        if bad["pods"] is not None:
            bad["pods"] = [pod for pod in bad["pods"] if pod["how"]]
    out["bad_gpus"] = [bad for bad in out["bad_gpus"] if bad["signals"]]
    return out


@pytest.fixture(scope="module")
def live():
    with BackgroundCluster(scenario="demo") as cluster:
        yield cluster


def quiet(cluster: BackgroundCluster, writes: list, seconds: float = 1.5, timeout: float = 30) -> None:
    """Wait until the live cluster's controllers have written nothing for `seconds`."""
    deadline = time.monotonic() + timeout
    seen, since = len(writes), time.monotonic()
    while time.monotonic() - since < seconds:
        assert time.monotonic() < deadline, "the live cluster never settled"
        time.sleep(0.1)
        if len(writes) != seen:
            seen, since = len(writes), time.monotonic()


def dump_with_kubectl(kubectl, out: Path) -> tuple[Path, Path]:
    """The cluster as one `kubectl get ... -A -o yaml` List, and as a must-gather directory: the files NVIDIA's
    must-gather script writes (the operator pod in two of them, text beside), plus what it does not collect."""
    listing = out / "cluster.yaml"
    listing.write_text(kubectl("get", KINDS, "-A", "-o", "yaml"))
    gather = out / "must-gather"
    (gather / "cluster").mkdir(parents=True)
    operator = kubectl("get", "pods", "-lapp=gpu-operator", "-A", "-oname").strip()
    policy = kubectl("get", "clusterpolicies.nvidia.com", "-oname").strip()
    files = {
        "cluster_policy.yaml": ("get", "-oyaml", policy),
        "gpu_operator_pod.yaml": ("get", operator, "-oyaml", "-n", OPERATOR_NS),
        "gpu_operator_pod.status": ("get", operator, "-owide", "-n", OPERATOR_NS),
        "gpu_operand_pods.yaml": ("get", "pods", "-oyaml", "-n", OPERATOR_NS),
        "gpu_operand_pods.status": ("get", "pods", "-owide", "-n", OPERATOR_NS),
        "gpu_operand_ds.yaml": ("get", "ds", "-oyaml", "-n", OPERATOR_NS),
        "gpu_nodes.status": ("get", "nodes", "-l", "nvidia.com/gpu.present=true", "-o", "wide"),
        "gpu_nodes.descr": ("describe", "nodes", "-l", "nvidia.com/gpu.present=true"),
        "cluster/everything.yaml": ("get", KINDS, "-A", "-o", "yaml"),
    }
    for name, args in files.items():
        (gather / name).write_text(kubectl(*args))
    (gather / "must-gather.log").write_text(f"Get {policy}\n# All done!\n")
    return listing, gather


async def test_a_dump_reports_what_the_live_cluster_reports(live, make_kubectl, tmp_path):
    kubectl = make_kubectl(live.kubeconfig_path)
    writes: list = []
    live.call(live.sim.store.subscribe, writes.append)
    for _ in range(3):  # the cluster as one state: nothing written between the live report and the dump
        await asyncio.to_thread(quiet, live, writes)
        before = len(writes)
        rc_live, out, err = await asyncio.to_thread(run_report, "-o", "json", "--kubeconfig", str(live.kubeconfig_path))
        listing, gather = await asyncio.to_thread(dump_with_kubectl, kubectl, tmp_path)
        if len(writes) == before:
            break
        for path in tmp_path.iterdir():
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    else:
        pytest.fail("the live cluster kept changing under the report and the dump")
    live_report = json.loads(out)
    assert any("gpus" in n for n in live_report["nodes"]) and live_report["pods"], "the live report read metrics and pods"

    reports = {}
    for name, argv in {"list": ["--from", str(listing)], "must-gather": ["--from", str(gather)],
                       "two paths": ["--from", str(gather / "cluster_policy.yaml"), str(listing)]}.items():
        rc, out, err = await asyncio.to_thread(run_report, "-o", "json", *argv)
        assert rc == rc_live == 1, (name, err)
        reports[name] = json.loads(out)
        assert comparable(reports[name]) == comparable(live_report), name
        assert [m["reason"] for m in reports[name]["missing"] if m["part"] == "metrics"] == ["not in the dump (4 nodes)"], name
        assert "not in the dump (4 nodes); those nodes have no DCGM readings" in err
        # where an exporter runs, the XID verdict is not given: a dump cannot hold it (never `ok` for it)
        xids_unknown = {n["name"] for n in reports[name]["nodes"] if {"verdict": "XIDs", "reason": "not in the dump"} in n["unknown"]}
        assert len(xids_unknown) == 4, reports[name]["nodes"]
    _, table, _ = await asyncio.to_thread(run_report, "--from", str(listing))
    rows = {line.split()[0]: line.split() for line in table.splitlines() if line.split() and line.split()[0] in xids_unknown}
    assert rows and all(row[-1] != "ok" for row in rows.values()), table
    assert any(row[-1] == "unknown" for row in rows.values()), table
    assert reports["list"]["context"] == f"dump:{listing}" and reports["two paths"]["context"] == f"dump:{gather / 'cluster_policy.yaml'},{listing}"
    assert err.startswith(f"gputui report: dump:{gather / 'cluster_policy.yaml'},{listing}: ")


async def test_the_must_gather_directory_gives_its_verdicts():
    rc, out, err = await asyncio.to_thread(run_report, "-o", "json", "--from", str(MUST_GATHER))
    assert rc == 0, err
    data = json.loads(out)
    assert data["context"] == f"dump:{MUST_GATHER}"
    assert data["stack"]["install"] == "operator" and data["stack"]["cluster_policy"]["state"] == "ready"
    gpu_node = next(n for n in data["nodes"] if n["name"] == "gpu-1")
    assert gpu_node["gpu"]["nvidia.com/gpu"] == {"capacity": 8, "allocatable": 8, "allocated": 4, "free": 4}
    assert gpu_node["problems"] == [] and gpu_node["components"]["device-plugin"] == "running" and "gpus" not in gpu_node
    assert [(p["namespace"], p["name"], p["gpu"]) for p in data["pods"]] == [("ml", "train-0", {"nvidia.com/gpu": 4})]
    assert data["missing"] == [{"part": "metrics", "reason": "not in the dump (1 node)"}]
    assert err.splitlines()[0] == (f"gputui report: dump:{MUST_GATHER}: 30 objects from 8 files; 7 files skipped (not Kubernetes "
                                   "objects); 1 object in several files kept once; taken ≈ 2025-06-02 09:29 UTC (its newest object time)")


def test_when_a_dump_was_taken_comes_from_its_own_objects():
    """The newest time written in it (a node's heartbeat, an event, a managedFields entry): never a file's time."""
    node = {"kind": "Node", "metadata": {"name": "n", "creationTimestamp": "2025-01-01T00:00:00Z",
                                         "managedFields": [{"manager": "kubelet", "time": "2025-06-02T09:20:00Z"}]},
            "status": {"conditions": [{"type": "Ready", "lastHeartbeatTime": "2025-06-02T09:29:41Z", "lastTransitionTime": "2025-05-01T00:00:00Z"}]}}
    event = {"kind": "Event", "metadata": {"name": "e"}, "lastTimestamp": "2025-06-02T09:25:00Z", "message": "2099-01-01T00:00:00Z"}
    assert dump_taken([node, event]) == "taken ≈ 2025-06-02 09:29 UTC (its newest object time)"
    assert dump_taken([{"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "y"}}]) == "taken: unknown (no time in its objects)"


def _bad_dumps(tmp: Path) -> list[tuple[list[str], str]]:
    (tmp / "policy.yaml").write_text("apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: cluster-policy}\n")
    (tmp / "dir").mkdir()
    (tmp / "dir" / "nodes.yaml").write_text("kind: List\nitems: [\n")
    (tmp / "empty").mkdir()
    (tmp / "empty" / "notes.txt").write_text("not an object\n")
    return [
        (["--from", str(tmp / "absent")], f"gputui report: {tmp / 'absent'}: cannot read: No such file or directory"),
        (["--from", str(tmp / "policy.yaml")], f'gputui report: {tmp / "policy.yaml"}: item 0: nvidia.com/v1 ClusterPolicy '
                                               '"cluster-policy": no CustomResourceDefinition for clusterpolicies.nvidia.com in the dump'),
        (["--from", str(tmp / "dir")], f"gputui report: {tmp / 'dir' / 'nodes.yaml'}: not valid YAML at line 3"),
        # nothing in it is not an empty, healthy cluster
        (["--from", str(tmp / "empty")], f"gputui report: dump:{tmp / 'empty'}: no Kubernetes object in it (0 objects from 0 files; "
                                         "1 file skipped (not Kubernetes objects))"),
        (["--from", str(MUST_GATHER), "--kubeconfig", "kc"],
         "gputui report: --from reads a dump, not a cluster: it does not go with --kubeconfig"),
    ]


async def test_an_unreadable_dump_is_one_line_and_exit_2(tmp_path):
    for argv, line in _bad_dumps(tmp_path):
        rc, out, err = await asyncio.to_thread(run_report, *argv)
        assert (rc, out) == (2, ""), err
        assert err.count("\n") == 1 and err.startswith(line) and "Traceback" not in err, err


def test_the_app_refuses_an_unreadable_dump_before_any_screen(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color", "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "gputui", "--from", str(tmp_path / "absent")], capture_output=True, text=True,
                          timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"gputui: {tmp_path / 'absent'}: cannot read: No such file or directory\n"


async def test_the_app_on_a_dump_shows_its_nodes_and_refuses_to_verify():
    app, served = dump_app(Dump.read([MUST_GATHER]), Config())
    try:
        async with app.run_test(size=(140, 40)) as pilot:
            async def until(condition, what: str) -> None:
                deadline = time.monotonic() + 15
                while not condition():
                    assert time.monotonic() < deadline, f"timed out waiting for {what}"
                    await pilot.pause(0.05)

            await until(lambda: app.model is not None and set(app.nodes_table.shown_keys) == {"gpu-1", "cpu-1"}, "the dump's nodes")
            assert app.conn.context == f"dump:{MUST_GATHER}" and app.server_version == ""  # the header names no release
            await until(lambda: "as dumped, not live" in str(app.query_one("#header").render()), "the header's words")
            header = str(app.query_one("#header").render())
            assert f"dump of {MUST_GATHER}"[:40] in header and "live" not in header.replace("not live", "")
            assert "taken ≈ 2025-06-02 09:29 UTC" in header
            await pilot.press("v")
            await until(lambda: READ_ONLY_MESSAGE in [n.message for n in app._notifications], "the read-only notice")
        assert served.call(lambda: len(served.sim.store.objects("pods"))) == len(
            [o for o in Dump.read([MUST_GATHER]).loaded.objects if o["kind"] == "Pod"])  # no verification pod was created
    finally:
        served.stop()


def test_report_from_a_dump_loads_no_textual():
    probe = (
        "import contextlib, io, sys\nfrom gputui.cli.main import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        f"    status = main(['report', '-o', 'json', '--from', {str(MUST_GATHER)!r}])\n"
        "assert status == 0, status\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich') or m.startswith('gputui.ui')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=90, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_long_dump_path_gives_way_to_the_watch_states():
    """CI's checkout sits deeper than a developer's: at 140 columns its must-gather path pushed `as dumped,
    not live` off the header. The gloss on the time goes first, then the path's start."""
    from gputui.ui.header import About, dump_parts

    path = "/check/work/main/tests/dumps/must-gather"
    about = About(None, "", "", (path,), "taken ≈ 2025-06-02 09:29 UTC (its newest object time)")
    assert [part.plain for part in dump_parts(about, spare=0)] == [f"dump of {path}", about.dump_taken]
    assert [part.plain for part in dump_parts(about, spare=10)] == [f"dump of {path}", "taken ≈ 2025-06-02 09:29 UTC"]
    cut = [part.plain for part in dump_parts(about, spare=len(" (its newest object time)") + 12)]
    assert cut == ["dump of …" + path[13:], "taken ≈ 2025-06-02 09:29 UTC"] and len(cut[0]) == len(f"dump of {path}") - 12
    assert dump_parts(about, spare=500)[0].plain == "dump of …" + path[-15:]  # the last folders, at least 16 cells
