"""The simulator speaks TLS and checks credentials as kube-apiserver does: client certificates signed by its CA
(CN the user, O the groups), bearer tokens, 401 for anything else (anonymous only when asked), RBAC from the
scenario with the real 403 words; checked with raw HTTP and the real kubectl."""
from __future__ import annotations

import asyncio
import base64
import datetime
import os
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
import yaml

from gputui.sim import scenarios
from gputui.sim.cluster import SimCluster
from gputui.sim.apiserver.tls import authority

ROOT = Path(__file__).resolve().parents[2]
ALICE, BOB = "alice-t0ken", "bob-t0ken"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def node(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, namespace: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}, "status": {"phase": "Pending"}}


RBAC = "rbac.authorization.k8s.io/v1"
POLICY = [
    {"apiVersion": RBAC, "kind": "Role", "metadata": {"name": "pod-reader", "namespace": "team-a"},
     "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]}]},
    {"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": "alice-reads-pods", "namespace": "team-a"},
     "subjects": [{"kind": "User", "name": "alice"}], "roleRef": {"kind": "Role", "name": "pod-reader"}},
    {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "node-viewer"},
     "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]},
    {"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": "viewers-see-nodes"},
     "subjects": [{"kind": "Group", "name": "gpu-viewers"}], "roleRef": {"kind": "ClusterRole", "name": "node-viewer"}},
]


@pytest.fixture
async def sim():
    objects = [node("gpu-1"), pod("p1", "team-a"), pod("p2", "team-b"), *POLICY]
    async with SimCluster(objects, tokens={ALICE: "alice", BOB: ("bob", ["gpu-viewers"])}, run_controllers=False) as cluster:
        yield cluster


def kubeconfig(directory: Path, sim: SimCluster, user: dict, name: str = "kubeconfig") -> Path:
    doc = yaml.safe_load(sim.kubeconfig_path.read_text())
    doc["users"][0]["user"] = user
    path = directory / name
    path.write_text(yaml.safe_dump(doc))
    return path


async def test_https_with_the_ca_in_the_kubeconfig_and_401_without_credentials(sim, make_kubectl, tmp_path):
    assert sim.url.startswith("https://127.0.0.1:")
    cluster = yaml.safe_load(sim.kubeconfig_path.read_text())["clusters"][0]["cluster"]
    assert base64.b64decode(cluster["certificate-authority-data"]) == authority().pem
    async with aiohttp.ClientSession() as plain:  # the system's trust store does not know the throw-away CA
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await plain.get(f"{sim.url}/version")
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=sim.client_ssl())) as http:
        for path in ("/version", "/api", "/api/v1/pods"):
            async with http.get(sim.url + path) as resp:
                assert resp.status == 401
                assert await resp.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                             "message": "Unauthorized", "reason": "Unauthorized", "code": 401}
        async with http.get(f"{sim.url}/api/v1/pods", headers={"Authorization": "Bearer wrong"}) as resp:
            assert resp.status == 401
    kubectl = make_kubectl(kubeconfig(tmp_path, sim, {"token": "wrong"}))
    done = await asyncio.to_thread(kubectl.run, "get", "pods", "-A")
    assert done.returncode == 1 and "You must be logged in to the server" in done.stderr


async def test_anonymous_requests_get_in_only_with_anonymous_and_then_only_public_paths(make_kubectl, tmp_path):
    async with SimCluster([node("gpu-1")], anonymous=True, run_controllers=False) as sim:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=sim.client_ssl())) as http:
            async with http.get(f"{sim.url}/version") as resp:
                assert resp.status == 200
            async with http.get(f"{sim.url}/api/v1/nodes") as resp:
                assert resp.status == 403
                body = await resp.json()
            assert body["message"] == ('nodes is forbidden: User "system:anonymous" cannot list resource "nodes" '
                                       'in API group "" at the cluster scope')
            async with http.get(f"{sim.url}/api") as resp:  # system:discovery is for the authenticated
                assert resp.status == 403
                assert (await resp.json())["message"] == 'forbidden: User "system:anonymous" cannot get path "/api"'
            async with http.get(f"{sim.url}/api/v1/nodes", headers={"Authorization": "Bearer wrong"}) as resp:
                assert resp.status == 401  # a wrong credential is never anonymous


async def test_rbac_from_the_scenario_with_the_real_403_words(sim, make_kubectl, tmp_path):
    alice = make_kubectl(kubeconfig(tmp_path, sim, {"token": ALICE}))
    assert (await asyncio.to_thread(alice, "get", "pods", "-n", "team-a", "-o", "name")).split() == ["pod/p1"]
    done = await asyncio.to_thread(alice.run, "get", "pods", "-A")
    assert done.returncode == 1
    assert done.stderr.strip().endswith('pods is forbidden: User "alice" cannot list resource "pods" in API group "" at the cluster scope')
    done = await asyncio.to_thread(alice.run, "get", "pod", "p2", "-n", "team-b")
    assert 'pods "p2" is forbidden: User "alice" cannot get resource "pods" in API group "" in the namespace "team-b"' in done.stderr
    done = await asyncio.to_thread(alice.run, "delete", "pod", "p1", "-n", "team-a")
    assert 'User "alice" cannot delete resource "pods" in API group "" in the namespace "team-a"' in done.stderr
    assert sim.store.find("pods", "team-a", "p1") is not None
    # bob's group gpu-viewers may see nodes, cluster-wide, and nothing else
    bob = make_kubectl(kubeconfig(tmp_path, sim, {"token": BOB}, "bob"))
    assert (await asyncio.to_thread(bob, "get", "nodes", "-o", "name")).split() == ["node/gpu-1"]
    done = await asyncio.to_thread(bob.run, "get", "daemonsets", "-A")
    assert 'daemonsets.apps is forbidden: User "bob" cannot list resource "daemonsets" in API group "apps" at the cluster scope' in done.stderr


async def test_a_client_certificate_is_its_cn_and_groups_and_an_expired_one_is_401(sim, make_kubectl, tmp_path):
    cert, key = authority().issue_client("carol", ["gpu-viewers"])
    carol = make_kubectl(kubeconfig(tmp_path, sim, {"client-certificate-data": b64(cert), "client-key-data": b64(key)}))
    assert (await asyncio.to_thread(carol, "get", "nodes", "-o", "name")).split() == ["node/gpu-1"]
    done = await asyncio.to_thread(carol.run, "get", "pods", "-n", "team-a")
    assert 'User "carol" cannot list resource "pods" in API group "" in the namespace "team-a"' in done.stderr
    now = datetime.datetime.now(datetime.timezone.utc)
    cert, key = authority().issue_client("gputui-sim-admin", ["system:masters"], not_before=now - datetime.timedelta(days=3),
                                         not_after=now - datetime.timedelta(days=1))
    expired = make_kubectl(kubeconfig(tmp_path, sim, {"client-certificate-data": b64(cert), "client-key-data": b64(key)}, "old"))
    done = await asyncio.to_thread(expired.run, "get", "nodes")
    assert done.returncode == 1 and "You must be logged in to the server" in done.stderr


def gputui_sim(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "gputui", "sim", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def test_the_command_writes_one_context_per_credential_kind_and_serves_http_when_asked(tmp_path, make_kubectl):
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('dave-t0ken,dave,1001,"gpu-viewers,other"\n')
    out = tmp_path / "kubeconfig"
    proc = gputui_sim("--scenario", "demo", "--kubeconfig-out", str(out), "--all-credentials", "--token-auth-file", str(tokens))
    try:
        assert proc.stdout.readline().startswith("serving https://127.0.0.1:")
        proc.stdout.readline()
        doc = yaml.safe_load(out.read_text())
        assert [c["name"] for c in doc["contexts"]] == ["gputui-sim", "gputui-sim-cert", "gputui-sim-exec"]
        assert (out.stat().st_mode & 0o777) == 0o600
        kubectl = make_kubectl(out)
        for context in ("gputui-sim", "gputui-sim-cert", "gputui-sim-exec"):
            assert "node/h100-1" in kubectl("--context", context, "get", "nodes", "-o", "name").split()
        doc["users"][0]["user"] = {"token": "dave-t0ken"}
        dave = tmp_path / "dave"
        dave.write_text(yaml.safe_dump(doc))
        # dave is known (403, not 401); the demo gives no RBAC to anyone outside system:masters
        assert 'User "dave" cannot list resource "nodes"' in make_kubectl(dave).run("get", "nodes").stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=15)
    proc = gputui_sim("--scenario", "demo", "--kubeconfig-out", str(out), "--http")
    try:
        assert proc.stdout.readline().startswith("serving http://127.0.0.1:")
        assert "certificate-authority" not in out.read_text()
        assert "node/h100-1" in make_kubectl(out)("get", "nodes", "-o", "name").split()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=15)
    assert proc.returncode == 0


@pytest.mark.parametrize(("content", "words"), [
    (b"kind: List\nitems:\n- kind: Node\n  metadata: {name: caf\xe9}\n", "not UTF-8 text (byte 0xe9 at line 4)"),
    (b"kind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x}}\n"
     b"- {apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x}}\n", "item 1: duplicate name: Pod x/a is also item 0"),
    (b"kind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: n, labels: [a, b]}}\n",
     "item 0: Node n: metadata.labels must be a mapping of strings, not a list"),
    (b"kind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: n, labels: {gpu: 8}}}\n",
     "item 0: Node n: metadata.labels[gpu] must be a string, not a number"),
    (b"kind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: [1]}\n", "item 0: Pod p: spec must be a mapping, not a list"),
    (b"kind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: 7}}\n", "item 0: Node without metadata.name"),
])
def test_bad_scenario_files_are_one_line_naming_the_file_the_item_and_the_reason(tmp_path, content, words):
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    with pytest.raises(scenarios.ScenarioError) as caught:
        scenarios.load(path)
    assert str(caught.value) == f"{path}: {words}"
    if "duplicate" in words:  # the command too: one line, exit 2
        done = subprocess.run([sys.executable, "-m", "gputui", "sim", "--scenario", str(path)], capture_output=True, text=True,
                              timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 2 and done.stderr == f"gputui sim: {path}: {words}\n"
