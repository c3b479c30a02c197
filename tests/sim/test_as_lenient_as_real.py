"""What kube-apiserver 1.34 accepts, the simulator accepts too (a stricter oracle gives false failures):
a watch with sendInitialEvents and no allowWatchBookmarks (ValidateListOptions does not ask for them; the
server then sends no initial-events-end bookmark), boolean parameters as runtime.Convert_Slice_string_To_bool
reads them ("0" and "false" in any case are false, anything else given is true), and a list or watch whose
fieldSelector requires metadata.name=X under an RBAC rule with resourceNames [X] (RequestInfoFactory makes X
the request's name). Checked with raw HTTP, the official Python client and the real kubectl."""
from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest
import yaml
from kubernetes_asyncio import client, config, watch

from gputui.sim.cluster import SimCluster

RBAC = "rbac.authorization.k8s.io/v1"
DORA = "dora-t0ken"


def node(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, namespace: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}, "status": {"phase": "Pending"}}


POLICY = [
    {"apiVersion": RBAC, "kind": "Role", "metadata": {"name": "one-pod", "namespace": "team-a"},
     "rules": [{"apiGroups": [""], "resources": ["pods"], "resourceNames": ["p1"], "verbs": ["get", "list", "watch"]}]},
    {"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": "dora-sees-p1", "namespace": "team-a"},
     "subjects": [{"kind": "User", "name": "dora"}], "roleRef": {"kind": "Role", "name": "one-pod"}},
]


@pytest.fixture
async def sim():
    objects = [node("gpu-1"), node("gpu-2"), pod("p1", "team-a"), pod("p2", "team-a"), *POLICY]
    async with SimCluster(objects, tokens={DORA: "dora"}, run_controllers=False) as cluster:
        yield cluster


def _lines(body: bytes) -> list[dict]:
    return [orjson.loads(line) for line in body.splitlines() if line.strip()]


async def test_send_initial_events_without_bookmarks_is_served_without_the_end_bookmark(sim):
    params = {"watch": "true", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan", "timeoutSeconds": "1"}
    async with sim.http_session() as http:
        async with http.get(f"{sim.url}/api/v1/nodes", params=params) as resp:
            assert resp.status == 200, await resp.text()
            events = _lines(await resp.read())
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "gpu-1"), ("ADDED", "gpu-2")]
        # With bookmarks allowed, the initial state ends with its bookmark, as before.
        async with http.get(f"{sim.url}/api/v1/nodes", params={**params, "allowWatchBookmarks": "true"}) as resp:
            events = _lines(await resp.read())
        assert events[-1]["type"] == "BOOKMARK"
        assert events[-1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
        # sendInitialEvents=false: no state first, a watch from now on.
        async with http.get(f"{sim.url}/api/v1/nodes", params={**params, "sendInitialEvents": "false"}) as resp:
            assert resp.status == 200 and _lines(await resp.read()) == []
    # The official client asks the same and gets the state.
    await config.load_kube_config(config_file=str(sim.kubeconfig_path))
    async with client.ApiClient() as api:
        v1 = client.CoreV1Api(api)
        stream = watch.Watch().stream(v1.list_node, send_initial_events=True, resource_version_match="NotOlderThan", timeout_seconds=1)
        seen = [(e["type"], e["object"].metadata.name) async for e in stream]
    assert seen == [("ADDED", "gpu-1"), ("ADDED", "gpu-2")]


@pytest.mark.parametrize("value", ["t", "T", "TRUE", "True", "1", "yes", ""])
async def test_watch_true_as_kube_apiserver_reads_it(sim, value):
    async with sim.http_session() as http:
        async with http.get(f"{sim.url}/api/v1/nodes?watch={value}&timeoutSeconds=1") as resp:
            assert resp.status == 200
            events = _lines(await resp.read())
    assert [e["type"] for e in events] == ["ADDED", "ADDED"]


@pytest.mark.parametrize("value", ["0", "false", "False", "FALSE"])
async def test_watch_false_is_a_list(sim, value):
    async with sim.http_session() as http:
        async with http.get(f"{sim.url}/api/v1/nodes?watch={value}") as resp:
            body = await resp.json()
    assert body["kind"] == "NodeList" and len(body["items"]) == 2


def _kubeconfig(directory: Path, sim: SimCluster, token: str) -> Path:
    doc = yaml.safe_load(sim.kubeconfig_path.read_text())
    doc["users"][0]["user"] = {"token": token}
    path = directory / "kubeconfig-dora"
    path.write_text(yaml.safe_dump(doc))
    return path


async def test_a_name_field_selector_under_resource_names(sim, make_kubectl, tmp_path):
    dora = make_kubectl(_kubeconfig(tmp_path, sim, DORA))
    listed = await asyncio.to_thread(dora, "get", "pods", "-n", "team-a", "--field-selector", "metadata.name=p1", "-o", "name")
    assert listed.split() == ["pod/p1"]
    # kubectl get NAME --watch watches with that field selector.
    watched = await asyncio.to_thread(dora.run, "get", "pod", "p1", "-n", "team-a", "--watch", "--request-timeout", "2s", "-o", "name")
    assert "pod/p1" in watched.stdout and "forbidden" not in watched.stderr
    whole = await asyncio.to_thread(dora.run, "get", "pods", "-n", "team-a")
    assert whole.returncode == 1 and whole.stderr.strip().endswith(
        'pods is forbidden: User "dora" cannot list resource "pods" in API group "" in the namespace "team-a"')
    other = await asyncio.to_thread(dora.run, "get", "pods", "-n", "team-a", "--field-selector", "metadata.name=p2")
    assert other.returncode == 1 and other.stderr.strip().endswith(
        'pods "p2" is forbidden: User "dora" cannot list resource "pods" in API group "" in the namespace "team-a"')
    # The official client, a watch this time.
    await config.load_kube_config(config_file=str(_kubeconfig(tmp_path, sim, DORA)))
    async with client.ApiClient() as api:
        v1 = client.CoreV1Api(api)
        stream = watch.Watch().stream(v1.list_namespaced_pod, "team-a", field_selector="metadata.name=p1", timeout_seconds=1)
        seen = [(e["type"], e["object"].metadata.name) async for e in stream]
        assert seen == [("ADDED", "p1")]
        with pytest.raises(client.ApiException) as refused:
            await v1.list_namespaced_pod("team-a", field_selector="metadata.name!=p1")
        assert refused.value.status == 403


async def test_and_as_strict_as_real_where_validation_refuses(sim):
    async with sim.http_session() as http:
        async with http.get(f"{sim.url}/api/v1/nodes", params={"resourceVersion": "0", "resourceVersionMatch": "Exact"}) as resp:
            body = await resp.json()
        assert (resp.status, body["message"]) == (422, 'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: '
                                                       'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
        params = {"watch": "1", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan", "continue": "x"}
        async with http.get(f"{sim.url}/api/v1/nodes", params=params) as resp:
            body = await resp.json()
        assert resp.status == 422 and body["details"]["causes"] == [
            {"reason": "FieldValueForbidden", "message": "Forbidden: resourceVersionMatch is forbidden when continue is provided",
             "field": "resourceVersionMatch"}]
