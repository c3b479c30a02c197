"""The fleet with each context's own credentials and rights: an exec plugin per context (each cluster gets
its own token, never another's), and a user who may read pods in some namespaces only, whose row says so
and shows no figure as complete, as the single-cluster screen does."""
from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from gputui.kube import fleet as f
from gputui.kube.config import connect
from gputui.sim.apiserver.auth import MASTERS
from gputui.sim.cluster import ADMIN_TOKEN, SimCluster, kubeconfig_for
from gputui.ui.fleet import UNKNOWN_TROUBLE, detail_line, fleet_columns, row_cells
from tests.model.objects import node, plugin_pod, pod
from tests.model.scenario import until
from tests.model.test_namespaced_rbac import ALICE
from tests.model.test_namespaced_rbac import objects as rbac_objects

pytestmark = pytest.mark.asyncio(loop_scope="module")

# Prints an ExecCredential whose token is its first argument, and notes the call in calls.log beside it.
TOKEN_PLUGIN = """
    import json, os, sys
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.log"), "a") as log:
        log.write(sys.argv[1] + "\\n")
    info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
    print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential", "status": {"token": sys.argv[1]}}))
"""



def gpu_cluster(name: str, gpus: int) -> list[dict]:
    return [node(name, capacity={"nvidia.com/gpu": gpus}, labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
            plugin_pod(name), pod("ml", f"job-on-{name}", node=name, gpu={"nvidia.com/gpu": 1})]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def clusters():
    async with SimCluster(gpu_cluster("a-1", 4), tokens={"token-a": ("a-admin", [MASTERS])}) as a, \
            SimCluster(gpu_cluster("b-1", 8), tokens={"token-b": ("b-admin", [MASTERS])}) as b, \
            SimCluster(rbac_objects(), tokens={ALICE: "alice"}, run_controllers=False) as rbac:
        yield {"a": a, "b": b, "rbac": rbac}


def kubeconfig(tmp_path: Path, entries: dict[str, tuple[str, dict, str]]) -> str:
    """A kubeconfig with one context per entry: name -> (server, user, namespace)."""
    doc = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": [], "current-context": next(iter(entries))}
    for name, (server, user, namespace) in entries.items():
        doc["clusters"].append({"name": name, "cluster": kubeconfig_for(server)["clusters"][0]["cluster"]})
        doc["users"].append({"name": name, "user": user})
        doc["contexts"].append({"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}})
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def exec_user(plugin: Path, token: str) -> dict:
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin), "args": [token], "interactiveMode": "Never"}}


async def test_each_context_runs_its_own_exec_plugin_and_gets_its_own_cluster(clusters, tmp_path):
    plugin = tmp_path / "token-plugin.py"
    plugin.write_text("#!" + sys.executable + "\n" + textwrap.dedent(TOKEN_PLUGIN))
    plugin.chmod(0o755)
    path = kubeconfig(tmp_path, {"a": (clusters["a"].url, exec_user(plugin, "token-a"), "default"),
                                 "b": (clusters["b"].url, exec_user(plugin, "token-b"), "default")})
    fleet = f.Fleet(["a", "b"], lambda context: connect(path, context))
    await fleet.start()
    try:
        await until(lambda: fleet.row("a").known and fleet.row("b").known, what="both clusters' figures")
        assert fleet.row("a").state == fleet.row("b").state == f.LIVE
        # a token given to the other cluster would be refused there (401): each row is its own cluster's
        assert fleet.row("a").totals["nvidia.com/gpu"].as_dict() == {"capacity": 4, "allocatable": 4, "allocated": 1, "free": 3}
        assert fleet.row("b").totals["nvidia.com/gpu"].as_dict() == {"capacity": 8, "allocatable": 8, "allocated": 1, "free": 7}
        assert sorted(set((tmp_path / "calls.log").read_text().split())) == ["token-a", "token-b"]
    finally:
        await fleet.stop()


async def test_a_context_that_may_read_some_namespaces_only_says_so_and_shows_no_figure(clusters, tmp_path):
    rbac = clusters["rbac"]
    path = kubeconfig(tmp_path, {"admin": (rbac.url, {"token": ADMIN_TOKEN}, "default"),
                                 "alice": (rbac.url, {"token": ALICE}, "ml")})
    fleet = f.Fleet(["admin", "alice"], lambda context: connect(path, context), configured_namespaces=("research",))
    await fleet.start()
    try:
        await until(lambda: fleet.row("admin").known, what="the admin's figures")
        alice = await until(lambda: (row := fleet.row("alice")).partial and row, what="alice's row to say what it reads")
        assert alice.state == f.LIVE and alice.totals is None and alice.pending is None
        assert alice.partial.startswith("pods, events in 2 namespaces: ml, research; cluster-wide forbidden"), alice.partial
        assert fleet.row("admin").partial == "" and fleet.row("admin").totals["nvidia.com/gpu"].allocated > 0
        cells = {c.key: cell.plain for c, cell in zip(fleet_columns(120), row_cells(alice, fleet_columns(120), 0.0, time.time()), strict=True)}
        assert cells["gpu"] == cells["free"] == UNKNOWN_TROUBLE  # not `…`: it will not come by waiting
        assert "namespaces: ml, research; cluster-wide forbidden: allocated and free unknown" in detail_line(alice, 0.0).plain
    finally:
        await fleet.stop()
