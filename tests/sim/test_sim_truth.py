"""The simulator agrees with itself (DaemonSet status, DCGM attribution, crash-loops), restarts fresh, refuses
resourceVersions from its future as kube-apiserver does, and its faults are usable from outside."""
from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gputui.sim import builders as b
from gputui.sim.exporters import dcgm
from gputui.sim import scenarios
from gputui.sim.cluster import SimCluster
from gputui.sim.behaviour.nvidia_smi import NodeGpus
from tests.sim.sim_api_objects import small_cluster
from tests.sim.test_cli_sim import first_line, gputui_sim
from tests.sim.test_controllers import Cluster, gpu_node

Obj = dict[str, Any]
DS = "daemonsets.apps"


async def _started(objects: list[Obj], speed: float = 200.0) -> Cluster:
    cluster = Cluster(objects, speed)
    cluster.controllers.start()
    return cluster


def _plugin_ds(nodes: list[str]) -> list[Obj]:
    """A device plugin DaemonSet with a running pod on each node, and a status given as the scenario says."""
    out: list[Obj] = []
    example = None
    for index, name in enumerate(nodes):
        pod = b.pod(f"plugin-{name}", "kube-system", [b.container("c", "registry.k8s.io/pause:3.9")], labels={"app": "plugin"})
        pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "plugin",
                                               "uid": "u", "controller": True}]
        b.set_running(pod, gpu_node(name, index), index, 0, 60)
        out.append(pod)
        example = pod
    ds = b.daemonset("plugin", "kube-system", {"app": "plugin"}, example)
    ds["status"] = {"currentNumberScheduled": 7, "desiredNumberScheduled": 7, "numberMisscheduled": 0, "numberReady": 7,
                    "numberAvailable": 7, "updatedNumberScheduled": 7, "observedGeneration": 1}
    return [ds, *out]


async def test_daemonset_status_follows_its_pods_and_nodes() -> None:
    cluster = await _started([gpu_node("gpu-1", 0), gpu_node("gpu-2", 1), *_plugin_ds(["gpu-1", "gpu-2"])])
    try:
        status = lambda: cluster.store.get(DS, "kube-system", "plugin")["status"]  # noqa: E731
        assert status()["desiredNumberScheduled"] == 7  # given, kept while nothing it depends on changes

        def unready(pod: Obj) -> None:
            pod["status"]["conditions"] = [dict(c, status="False") if c["type"] == "Ready" else c
                                           for c in pod["status"]["conditions"]]
        cluster.store.mutate("pods", "kube-system", "plugin-gpu-2", unready)
        await cluster.until(lambda: status()["desiredNumberScheduled"] == 2)
        assert {k: status()[k] for k in ("currentNumberScheduled", "numberReady", "numberAvailable",
                                         "numberUnavailable", "numberMisscheduled", "updatedNumberScheduled")} == {
            "currentNumberScheduled": 2, "numberReady": 1, "numberAvailable": 1, "numberUnavailable": 1,
            "numberMisscheduled": 0, "updatedNumberScheduled": 2}
        # A new node the DaemonSet should run on: desired grows before its pod exists.
        cluster.store.create("nodes", gpu_node("gpu-3", 2))
        await cluster.until(lambda: status()["desiredNumberScheduled"] == 3)
        assert status()["currentNumberScheduled"] == 2
        # A taint the DaemonSet does not tolerate: its pod there is misscheduled.
        cluster.store.mutate("nodes", "", "gpu-1", lambda n: n["spec"].__setitem__(
            "taints", [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]))
        await cluster.until(lambda: status()["numberMisscheduled"] == 1)
        assert (status()["desiredNumberScheduled"], status()["currentNumberScheduled"]) == (2, 1)
    finally:
        await cluster.controllers.stop()


async def test_daemonset_status_agrees_with_kubectl(make_kubectl: Any) -> None:
    async with SimCluster(scenario=[gpu_node("gpu-1", 0), *_plugin_ds(["gpu-1"])], speed=50) as sim:
        sim.store.create("nodes", gpu_node("gpu-2", 1))
        kubectl = make_kubectl(sim.kubeconfig_path)
        for _ in range(50):
            row = (await asyncio.to_thread(kubectl, "get", "ds", "-n", "kube-system", "plugin", "--no-headers")).split()
            if row[1:3] == ["2", "1"]:
                break
            await asyncio.sleep(0.1)
        assert row[1:6] == ["2", "1", "1", "1", "1"]  # DESIRED CURRENT READY UP-TO-DATE AVAILABLE


async def test_a_crash_looping_pod_given_with_a_bare_status_keeps_crashing() -> None:
    pod = b.pod("trainer", "default", [b.container("main", "nvcr.io/nvidia/pytorch:24.03-py3")], node_name="gpu-1")
    pod["status"] = {"phase": "Running", "containerStatuses": [
        {"name": "main", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}
    cluster = await _started([gpu_node("gpu-1", 0), pod])
    try:
        def cs() -> Obj:
            return cluster.pod("trainer")["status"]["containerStatuses"][0]
        # It runs briefly each time (as a real crash-looping container does), then crashes again.
        await cluster.until(lambda: cs().get("restartCount", 0) >= 2, timeout=10)
        await cluster.until(lambda: (cs()["state"].get("waiting") or {}).get("reason") == "CrashLoopBackOff")
        assert cs()["lastState"]["terminated"]["exitCode"] == 1
        previous = cluster.logs.read("default", "trainer", "main", previous=True)
        assert previous and b"".join(previous).strip()
    finally:
        await cluster.controllers.stop()


async def test_an_adopted_crash_loop_has_a_previous_log_at_once() -> None:
    pod = b.pod("trainer", "default", [b.container("main", "nvcr.io/nvidia/pytorch:24.03-py3")], node_name="gpu-1")
    pod["status"] = {"phase": "Running", "containerStatuses": [
        {"name": "main", "restartCount": 5, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
         "lastState": {"terminated": {"exitCode": 137, "reason": "Error", "message": "CUDA out of memory"}}}]}
    cluster = await _started([gpu_node("gpu-1", 0), pod], speed=1.0)  # back-off of minutes: nothing restarts meanwhile
    try:
        await cluster.until(lambda: cluster.logs.read("default", "trainer", "main", previous=True), timeout=3)
        assert b"CUDA out of memory" in b"".join(cluster.logs.read("default", "trainer", "main", previous=True) or [])
    finally:
        await cluster.controllers.stop()


def test_the_exporter_lists_every_mig_instance_with_the_device_plugins_uuids() -> None:
    objects = scenarios.load("demo")
    node = next(o for o in objects if o["kind"] == "Node" and o["metadata"]["name"] == "h100-mig-1")
    text = dcgm.exposition(node, [], 100.0)
    series = [line for line in text.splitlines() if line.startswith("DCGM_FI_DEV_GPU_TEMP{")]
    instances = {(re.search(r'gpu="(\d+)"', s)[1], re.search(r'GPU_I_ID="(\d+)"', s)[1]) for s in series}
    gpus = NodeGpus(node)
    advertised = {(str(m.gpu), str(m.gi)) for found in gpus.migs.values() for m in found}
    assert len(advertised) == 32 and instances == advertised
    assert {re.search(r'UUID="([^"]+)"', s)[1] for s in series} == {g.uuid for g in gpus.gpus}


def test_a_pod_with_two_gpus_appears_on_two_gpus_and_two_mig_instances() -> None:
    objects = scenarios.load("demo")
    node = next(o for o in objects if o["kind"] == "Node" and o["metadata"]["name"] == "h100-mig-1")
    pod = b.pod("two", "default", [b.container("main", "cuda", limits={"nvidia.com/mig-3g.40gb": 2})], node_name="h100-mig-1")
    b.set_running(pod, node, 0, 0, 60)
    series = [s for s in dcgm.exposition(node, [pod], 100.0).splitlines() if s.startswith("DCGM_FI_DEV_GPU_TEMP{")]
    assert len([s for s in series if 'pod="two"' in s]) == 2
    plain = gpu_node("gpu-1", 0, gpus=8)
    pod = b.pod("pair", "default", [b.container("main", "cuda", limits={"nvidia.com/gpu": 2})], node_name="gpu-1")
    b.set_running(pod, plain, 0, 0, 60)
    held = {re.search(r'gpu="(\d+)"', s)[1] for s in dcgm.exposition(plain, [pod], 1.0).splitlines() if 'pod="pair"' in s}
    assert len(held) == 2


def test_an_unknown_scenario_name_lists_the_builtins() -> None:
    with pytest.raises(scenarios.ScenarioError) as err:
        scenarios.load("gpu-operator-healty")
    assert "built-in" in str(err.value) and "gpu-operator-healthy" in str(err.value) and "demo" in str(err.value)


async def test_fresh_restart_and_resource_versions_from_the_future() -> None:
    async with SimCluster(scenario=small_cluster(), faults=True, run_controllers=False) as sim:
        sim.too_large_wait = 0.2
        port = sim.port
        for _ in range(50):
            sim.store.mutate("nodes", "", "gpu-1", lambda n: n["metadata"].setdefault("labels", {}).__setitem__("x", "y"))
        sim.store.delete("nodes", "", "gpu-2")
        before = sim.store.resource_version
        await sim.faults.restart(downtime=0.05, fresh=True)
        assert sim.port == port and sim.store.resource_version < before - 40
        assert sim.store.find("nodes", "", "gpu-2") is not None  # the scenario's state again
        async with sim.http_session(base_url=sim.url) as http:
            # A plain watch from the future starts there, silent (the watch cache's getAllEventsSinceLocked);
            # one with sendInitialEvents waits for it, then fails (waitUntilFreshAndBlock).
            async with http.get("/api/v1/nodes", params={"watch": "1", "resourceVersion": str(before), "timeoutSeconds": "1"}) as watch:
                assert watch.status == 200 and await watch.read() == b""
            watch_list = {"watch": "1", "resourceVersion": str(before), "sendInitialEvents": "true",
                          "resourceVersionMatch": "NotOlderThan", "allowWatchBookmarks": "true"}
            async with http.get("/api/v1/nodes", params=watch_list) as watch:
                assert watch.status == 200
                event = json.loads((await watch.read()).splitlines()[0])
            assert event["type"] == "ERROR"
            status = event["object"]
            assert (status["code"], status["reason"]) == (504, "Timeout")
            assert status["message"].startswith(f"Timeout: Too large resource version: {before}, current: ")
            assert status["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
            for match in (None, "NotOlderThan", "Exact"):
                params = {"resourceVersion": str(before), **({"resourceVersionMatch": match} if match else {})}
                async with http.get("/api/v1/nodes", params=params) as listed:
                    body = await listed.json()
                assert listed.status == 504 and body["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
            async with http.get("/api/v1/nodes", params={"resourceVersion": str(sim.store.resource_version)}) as listed:
                assert listed.status == 200


async def test_a_restarted_servers_watch_cache_starts_at_its_restart() -> None:
    """kube-apiserver started again lists into its watch caches at etcd's current revision: a watch from an older
    resourceVersion gets 410 (its client lists again), though etcd still has that history for a list at it."""
    async with SimCluster(scenario=small_cluster(), faults=True, run_controllers=False) as sim:
        before = sim.store.resource_version
        sim.store.mutate("nodes", "", "gpu-1", lambda n: n["metadata"].setdefault("labels", {}).__setitem__("x", "y"))
        async with sim.http_session(base_url=sim.url) as http:
            async with http.get("/api/v1/nodes", params={"watch": "1", "resourceVersion": str(before), "timeoutSeconds": "1"}) as watch:
                replayed = [json.loads(line) for line in (await watch.read()).splitlines()]
            assert [e["type"] for e in replayed] == ["MODIFIED"]  # served from the cache's history before the restart
        await sim.faults.restart(downtime=0.05)
        at_restart = sim.store.resource_version
        async with sim.http_session(base_url=sim.url) as http:
            async with http.get("/api/v1/nodes", params={"watch": "1", "resourceVersion": str(before), "timeoutSeconds": "1"}) as watch:
                assert watch.status == 200
                events = [json.loads(line) for line in (await watch.read()).splitlines()]
            assert [e["type"] for e in events] == ["ERROR"]
            status = events[0]["object"]
            assert (status["code"], status["reason"]) == (410, "Expired")
            assert status["message"] == f"too old resource version: {before} ({at_restart})"
            async with http.get("/api/v1/nodes", params={"watch": "1", "resourceVersion": str(at_restart), "timeoutSeconds": "1"}) as watch:
                assert watch.status == 200 and await watch.read() == b""  # from the restart's own revision: nothing missed
            params = {"resourceVersion": str(before), "resourceVersionMatch": "Exact"}
            async with http.get("/api/v1/nodes", params=params) as listed:
                assert listed.status == 200 and (await listed.json())["metadata"]["resourceVersion"] == str(before)


def _fault(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gputui", "sim", "fault", *args], capture_output=True, text=True, timeout=60)


def test_faults_are_driven_from_outside(tmp_path: Path, make_kubectl: Any) -> None:
    scenario = tmp_path / "cluster.json"
    scenario.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": small_cluster()}))
    kubeconfig = tmp_path / "kubeconfig"
    proc = gputui_sim("--scenario", str(scenario), "--faults", "--kubeconfig-out", str(kubeconfig))
    try:
        assert first_line(proc).startswith("serving https://127.0.0.1:")
        assert proc.stdout is not None
        proc.stdout.readline()  # the kubeconfig line (printed with the serving line)
        faults_line = proc.stdout.readline().strip()
        assert faults_line.startswith("faults http://127.0.0.1:")
        kubectl = make_kubectl(kubeconfig)
        done = _fault("--kubeconfig", str(kubeconfig), "fail", "pods", "403")
        assert done.returncode == 0, done.stderr
        refused = kubectl.run("get", "pods", "-A")
        assert refused.returncode != 0 and "forbidden" in refused.stderr.lower()
        assert "pods: answers 403" in _fault("--kubeconfig", str(kubeconfig), "status").stdout
        assert _fault("--url", faults_line.split()[1], "clear").returncode == 0
        assert kubectl.run("get", "pods", "-A").returncode == 0
        assert _fault("--kubeconfig", str(kubeconfig), "corrupt").returncode == 0
        broken = kubectl.run("get", "nodes")
        assert broken.returncode != 0
        assert kubectl.run("get", "nodes").returncode == 0  # only the next response
        done = _fault("--kubeconfig", str(kubeconfig), "restart", "--fresh", "--downtime", "0.1")
        assert done.returncode == 0 and "fresh" in done.stdout
        assert "gpu-1" in kubectl("get", "nodes", "-o", "name")
        bad = _fault("--kubeconfig", str(kubeconfig), "fail", "widgets", "403")
        assert bad.returncode == 2 and "unknown resource 'widgets'" in bad.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=15)
    assert proc.returncode == 0 and "Traceback" not in stderr
    assert not (tmp_path / "kubeconfig.faults").exists()
    missing = _fault("--kubeconfig", str(kubeconfig), "compact")
    assert missing.returncode == 2 and "no control address recorded" in missing.stderr
