"""`gputui report`: formats, exit codes, and one clear line for each connection error."""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json

import pytest
import pytest_asyncio
import yaml
from aiohttp import web

from gputui.cli import report
from gputui.sim.cluster import SimCluster, kubeconfig_for
from tests.model.objects import node, plugin_pod, pod
from tests.model.scenario import small_cluster

pytestmark = pytest.mark.asyncio(loop_scope="module")
TOKEN = "s3cret-token-do-not-print"


def run_report(*argv: str) -> tuple[int, str, str]:
    """Run `gputui report ARGV` in this thread (the simulator keeps serving in the test's loop)."""
    parser = argparse.ArgumentParser(prog="gputui")
    report.add_parser(parser.add_subparsers())
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            args = parser.parse_args(["report", *argv])
            rc = args.run(args)
        except SystemExit as exc:  # argparse usage errors
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


async def report_of(*argv: str) -> tuple[int, str, str]:
    return await asyncio.to_thread(run_report, *argv)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sim():
    async with SimCluster(small_cluster(), faults=True) as cluster:
        yield cluster


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def healthy():
    async with SimCluster([node("gpu-1", capacity={"nvidia.com/gpu": 2}), plugin_pod("gpu-1"),
                           pod("ml", "a", node="gpu-1", gpu={"nvidia.com/gpu": 1})]) as cluster:
        yield cluster


def kubeconfig(tmp_path, server: str, **extra) -> str:
    doc = kubeconfig_for(server)
    doc["users"][0]["user"] = {"token": TOKEN}
    doc.update(extra)
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def assert_one_line_error(rc: int, out: str, err: str, *fragments: str) -> None:
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("gputui report: "), err
    assert "Traceback" not in err and TOKEN not in err
    for fragment in fragments:
        assert fragment in err, err


async def test_json_is_the_contract(sim):
    rc, out, err = await report_of("--kubeconfig", str(sim.kubeconfig_path), "-o", "json")
    assert rc == 1, err  # gpu-2 is unhealthy, mig-1's plugin crash-loops
    data = json.loads(out)
    assert set(data) == {"context", "scope", "stack", "nodes", "pods", "totals", "fit", "dra_pools", "queues", "idle", "missing", "unreadable", "bad_gpus",
                         "compute_domains"} and data["context"] == "gputui-sim"
    assert data["compute_domains"] == []  # no ComputeDomain CRD here: none, and nothing missing
    assert data["queues"] is None  # no Kueue in this cluster (tests/model/test_kueue.py has one)
    assert data["missing"] == [] and data["unreadable"] == []  # every part read, every object readable
    whole = {"cluster_wide": True, "namespaces": [], "forbidden": [], "partial": False}
    assert data["scope"] == {"pods": whole, "events": whole, "daemonsets": whole}  # each listed cluster-wide
    # plugin pods without DaemonSets: no stack is recognised, no component is expected, no exporter to read
    assert data["stack"] == {"kind": "none", "install": None, "namespace": None, "cluster_policy": None}
    nodes = {n["name"]: n for n in data["nodes"]}
    assert [n["name"] for n in data["nodes"]] == ["gpu-1", "gpu-2", "mig-1", "cpu-1"]  # GPU nodes first
    for n in data["nodes"]:
        assert set(n) == {"name", "ready", "schedulable", "product", "gpu", "problems", "unknown", "components", "plugins"}
        assert n["plugins"] == []  # device-plugin DaemonSets: none here
        for usage in n["gpu"].values():
            assert set(usage) == {"capacity", "allocatable", "allocated", "free"}
    assert nodes["gpu-1"]["product"] == "NVIDIA-H100-80GB-HBM3" and nodes["cpu-1"]["product"] is None
    assert nodes["cpu-1"]["gpu"] == {} and nodes["cpu-1"]["components"] == {}
    assert set(nodes["gpu-1"]["components"].values()) == {"not-expected"} and len(nodes["gpu-1"]["components"]) == 8
    assert nodes["gpu-2"]["gpu"] == {"nvidia.com/gpu": {"capacity": 4, "allocatable": 3, "allocated": 3, "free": 0}}
    assert [p["code"] for p in nodes["gpu-2"]["problems"]] == ["unhealthy-gpus"]
    assert [p["code"] for p in nodes["mig-1"]["problems"]] == ["plugin-not-running"]
    pods = {(p["namespace"], p["name"]): p for p in data["pods"]}
    for p in data["pods"]:
        assert set(p) == {"namespace", "name", "node", "phase", "gpu", "reason", "claims", "asks"}
    scheduled = next(c for c in sim.store.get("pods", "ml", "waiting")["status"]["conditions"] if c["type"] == "PodScheduled")
    # the scheduler's message, then why 16 GPUs fit no node (gpu-1 has 1 free of 8, gpu-2 none of 3)
    fit_line = "needs 16 nvidia.com/gpu on one node; 1 free in the cluster, at most 8 on any node when empty"
    assert pods[("ml", "waiting")] == {"namespace": "ml", "name": "waiting", "node": None, "phase": "Pending",
                                       "gpu": {"nvidia.com/gpu": 16}, "reason": f"{scheduled['message']} · {fit_line}", "claims": [], "asks": []}
    assert "Insufficient nvidia.com/gpu" in scheduled["message"]
    assert ("ml", "finished") not in pods
    assert data["totals"]["nvidia.com/mig-1g.10gb"] == {"capacity": 7, "allocatable": 7, "allocated": 2, "free": 5}


async def test_table_fits_100_columns_and_tsv_has_one_line_per_node_and_pod(sim):
    rc, table, _ = await report_of("--kubeconfig", str(sim.kubeconfig_path))
    assert rc == 1
    assert max(len(line) for line in table.splitlines()) <= 100
    assert "plugin-not-running" in table and "ml/waiting" in table and "Insufficient nvidia.com/gpu" in table
    rc, tsv, _ = await report_of("--kubeconfig", str(sim.kubeconfig_path), "-o", "tsv")
    rc_json, out, _ = await report_of("--kubeconfig", str(sim.kubeconfig_path), "-o", "json")
    data = json.loads(out)
    lines = [line.split("\t") for line in tsv.splitlines()]
    assert lines[0][0] == "kind" and lines[len(data["nodes"]) + 1][0] == "kind"
    assert [row[1] for row in lines if row[0] == "node"] == [n["name"] for n in data["nodes"]]
    assert [(row[1], row[2]) for row in lines if row[0] == "pod"] == [(p["namespace"], p["name"]) for p in data["pods"]]
    assert all(len(row) == 7 for row in lines)
    gpu2 = next(row for row in lines if row[:2] == ["node", "gpu-2"])
    assert gpu2[5] == "nvidia.com/gpu=4/3/3/0" and gpu2[6] == "unhealthy-gpus"


async def test_exit_0_on_a_healthy_cluster_and_namespace_filter(healthy):
    rc, out, err = await report_of("--kubeconfig", str(healthy.kubeconfig_path), "-o", "json", "-n", "other")
    assert rc == 0, err
    data = json.loads(out)
    assert data["pods"] == [] and data["totals"]["nvidia.com/gpu"]["allocated"] == 1


async def test_extra_resource_names(tmp_path):
    objects = [node("amd-1", capacity={"amd.com/gpu": 4}), pod("ml", "rocm", node="amd-1", gpu={"amd.com/gpu": 2})]
    async with SimCluster(objects) as cluster:
        rc, out, _ = await report_of("--kubeconfig", str(cluster.kubeconfig_path), "-o", "json", "--resource", "amd.com/gpu")
        data = json.loads(out)
        assert rc == 0 and data["totals"] == {"amd.com/gpu": {"capacity": 4, "allocatable": 4, "allocated": 2, "free": 2}}
        rc, out, _ = await report_of("--kubeconfig", str(cluster.kubeconfig_path), "-o", "json")
        assert json.loads(out)["totals"] == {}


async def test_missing_and_broken_kubeconfig(tmp_path, monkeypatch):
    assert_one_line_error(*await report_of("--kubeconfig", str(tmp_path / "nope")), "no such file")
    broken = tmp_path / "broken"
    broken.write_text("clusters: [unclosed\n")
    assert_one_line_error(*await report_of("--kubeconfig", str(broken)), "not valid YAML")
    broken.write_text("- just\n- a list\n")
    assert_one_line_error(*await report_of("--kubeconfig", str(broken)), "not a kubeconfig")
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'a'}:{tmp_path / 'b'}")
    assert_one_line_error(*await report_of(), "none of these files exists")
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert_one_line_error(*await report_of(), "no kubeconfig found")


async def test_unknown_context(sim, tmp_path):
    path = kubeconfig(tmp_path, sim.url)
    assert_one_line_error(*await report_of("--kubeconfig", path, "--context", "prod"),
                          'context "prod" not found', "available: gputui-sim")


async def test_kubeconfig_env_merges_like_kubectl(sim, tmp_path):
    first = tmp_path / "first"
    first.write_text(yaml.safe_dump({**kubeconfig_for(sim.url), "current-context": "gputui-sim"}))
    second = tmp_path / "second"
    other = kubeconfig_for("http://127.0.0.1:1")
    other["contexts"][0]["name"] = other["clusters"][0]["name"] = other["contexts"][0]["context"]["cluster"] = "elsewhere"
    other["current-context"] = "elsewhere"
    second.write_text(yaml.safe_dump(other))
    # the first file's current-context wins; the second file's contexts are still there
    rc, out, err = await asyncio.to_thread(_with_env, f"{first}:{second}", "-o", "json")
    assert rc == 1 and json.loads(out)["context"] == "gputui-sim", err
    rc, out, err = await asyncio.to_thread(_with_env, f"{first}:{second}", "--context", "elsewhere", "--wait", "0")
    assert_one_line_error(rc, out, err, "cannot reach http://127.0.0.1:1")


def _with_env(kubeconfig_env: str, *argv: str) -> tuple[int, str, str]:
    import os
    saved = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = kubeconfig_env
    try:
        return run_report(*argv)
    finally:
        if saved is None:
            del os.environ["KUBECONFIG"]
        else:
            os.environ["KUBECONFIG"] = saved


async def test_unreachable_server(tmp_path):
    assert_one_line_error(*await report_of("--kubeconfig", kubeconfig(tmp_path, "http://127.0.0.1:9"), "--wait", "0"),
                          "cannot reach http://127.0.0.1:9", "connection refused")


async def test_a_refusing_server_is_tried_again_for_wait_seconds_each_try_said(tmp_path):
    rc, out, err = await report_of("--kubeconfig", kubeconfig(tmp_path, "http://127.0.0.1:9"), "--wait", "2")
    lines = err.splitlines()
    assert rc == 2 and out == "" and len(lines) >= 2, err
    assert all(line.startswith("gputui report: cannot reach http://127.0.0.1:9: connection refused; trying again in ")
               for line in lines[:-1]), err
    assert lines[-1] == "gputui report: cannot reach http://127.0.0.1:9: connection refused", err


async def test_a_restarting_server_is_waited_for_and_the_report_is_made(sim):
    restart = asyncio.ensure_future(sim.faults.restart(downtime=2.0))
    await asyncio.sleep(0.2)  # refusing connections now
    rc, out, err = await report_of("--kubeconfig", str(sim.kubeconfig_path), "-o", "json", "--wait", "30")
    await restart
    assert rc == 1, err  # the small cluster's problems: read, not a connection error
    assert [n["name"] for n in json.loads(out)["nodes"]] == ["gpu-1", "gpu-2", "mig-1", "cpu-1"]
    assert "connection refused; trying again in " in err, err


@pytest_asyncio.fixture(loop_scope="module")
async def rejecting_server():
    async def unauthorized(request: web.Request) -> web.Response:
        body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401}
        return web.json_response(body, status=401)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", unauthorized)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_401(rejecting_server, tmp_path):
    assert_one_line_error(*await report_of("--kubeconfig", kubeconfig(tmp_path, rejecting_server)),
                          "unauthorized (401)", 'context "gputui-sim"')


async def test_403_on_nodes_stops_403_on_events_only_warns(sim, tmp_path):
    sim.faults.fail("nodes", 403)
    try:
        assert_one_line_error(*await report_of("--kubeconfig", str(sim.kubeconfig_path)),
                              "forbidden (403)", 'cannot list resource "nodes"')
    finally:
        sim.faults.clear()
    sim.faults.fail("events", 403)
    try:
        rc, out, err = await report_of("--kubeconfig", str(sim.kubeconfig_path), "-o", "json")
        assert rc == 1 and json.loads(out)["nodes"] and "events are forbidden (403)" in err
        assert [part["part"] for part in json.loads(out)["missing"]] == ["events"]
    finally:
        sim.faults.clear()


async def test_usage_error_exits_2():
    rc, _, err = await report_of("-o", "yaml")
    assert rc == 2 and "invalid choice" in err
    rc, _, err = await report_of("--resource", "gpu")
    assert rc == 2 and "domain-prefixed" in err


SNEAKY = "H100\u202e\u200fevil\u0085\u009b31m\u061c\u2066x\u2069 café 中文"  # bidi and C1 controls, and ordinary non-ASCII


async def test_json_escapes_bidi_and_c1_controls_and_round_trips():
    from gputui.report.formats import write_json

    data = {"name": SNEAKY, "list": [SNEAKY, {"k\u200e": "v\u0080"}], "plain": "été 日本"}
    out = io.StringIO()
    write_json(data, out)
    text = out.getvalue()
    assert not any(0x80 <= ord(c) <= 0x9f or c in "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069" for c in text)
    assert "\\u202e" in text and "\\u0085" in text and "café 中文" in text and "été 日本" in text
    assert json.loads(text) == data


async def test_the_json_report_is_safe_to_print_to_a_terminal():
    gpu_node = node("gpu-1", capacity={"nvidia.com/gpu": 2}, labels={"nvidia.com/gpu.product": SNEAKY})
    async with SimCluster([gpu_node, plugin_pod("gpu-1")], run_controllers=False) as cluster:
        rc, out, err = await report_of("--kubeconfig", str(cluster.kubeconfig_path), "-o", "json")
    assert rc in (0, 1), err
    assert "\u202e" not in out and "\u0085" not in out and "\\u202e" in out and "café 中文" in out
    assert json.loads(out)["nodes"][0]["product"] == SNEAKY
