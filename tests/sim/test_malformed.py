"""Malformed input never stops the simulator: a scenario file kube-apiserver could not decode is one line naming
the file, the item and the field (as decoding words it), the same objects sent over HTTP get kube-apiserver's
400 BadRequest, and an object written straight into the store (where no decoding stands guard) is skipped by
each simulated component, which says so in its log and goes on with the others."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputui.sim import scenarios
from gputui.ui.demo import BackgroundCluster

REPO = Path(__file__).resolve().parents[2]
GO_TYPE_ERROR = 'json: cannot unmarshal {json} into Go struct field {field} of type {go}'
QUANTITY_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def node(name: str = "n1", **status: object) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"capacity": {"cpu": "8", "pods": "110"}, "allocatable": {"cpu": "8", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}], **status}}


def pod(name: str = "p1", spec: dict | None = None, **status: object) -> dict:
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": spec or {"containers": [{"name": "c", "image": "busybox"}]}}
    if status:
        body["status"] = status
    return body


# The six found: (the object, what kube-apiserver's decoding says of it)
MALFORMED = {
    "capacity-list": (node(capacity=[1, 2]), 'Node in version "v1" cannot be handled as a Node: ' + GO_TYPE_ERROR.format(
        json="array", field="NodeStatus.status.capacity", go="v1.ResourceList")),
    "allocatable-lots": (node(allocatable={"cpu": "lots"}), 'Node in version "v1" cannot be handled as a Node: ' + QUANTITY_ERROR),
    "conditions-string": (node(conditions="Ready"), 'Node in version "v1" cannot be handled as a Node: ' + GO_TYPE_ERROR.format(
        json="string", field="NodeStatus.status.conditions", go="[]v1.NodeCondition")),
    "containers-7": (pod(spec={"containers": 7}), 'Pod in version "v1" cannot be handled as a Pod: ' + GO_TYPE_ERROR.format(
        json="number", field="PodSpec.spec.containers", go="[]v1.Container")),
    "container-statuses-mapping": (pod(phase="Running", containerStatuses={"name": "c"}),
                                   'Pod in version "v1" cannot be handled as a Pod: ' + GO_TYPE_ERROR.format(
                                       json="object", field="PodStatus.status.containerStatuses", go="[]v1.ContainerStatus")),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_scenario_file_is_one_line_naming_file_item_and_field(tmp_path, case):
    obj, decoding_says = MALFORMED[case]
    path = tmp_path / "cluster.yaml"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node("fine"), obj]}))
    with pytest.raises(scenarios.ScenarioError) as caught:
        scenarios.read([path])
    assert str(caught.value) == f"{path}: item 1: {obj['kind']} {obj['metadata']['name']}: {decoding_says}"


def test_a_symlink_loop_is_one_line(tmp_path):
    (tmp_path / "a.yaml").symlink_to(tmp_path / "b.yaml")
    (tmp_path / "b.yaml").symlink_to(tmp_path / "a.yaml")
    for given in (tmp_path / "a.yaml", tmp_path):
        with pytest.raises(scenarios.ScenarioError) as caught:
            scenarios.read([given])
        assert str(caught.value) == f"{tmp_path / 'a.yaml'}: cannot read: a loop of symbolic links"


def test_gputui_sim_refuses_a_malformed_scenario_in_one_line(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(json.dumps(MALFORMED["containers-7"][0]))
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([sys.executable, "-m", "gputui", "sim", "--scenario", str(path)], capture_output=True, text=True,
                          env=env, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"gputui sim: {path}: item 0: Pod p1: {MALFORMED['containers-7'][1]}\n"


@pytest.fixture(scope="module")
def sim():
    with BackgroundCluster(scenario=[node("gpu-1")], speed=50) as cluster:
        yield cluster


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_the_same_objects_over_http_are_400_bad_request(kubectl, case):
    # The official client checks types itself before sending (pydantic): kubectl sends what it is given.
    obj, decoding_says = MALFORMED[case]
    obj = {**obj, "metadata": {**obj["metadata"], "name": f"x-{case}"}}
    done = kubectl.run("create", "--validate=false", "-f", "-", input=json.dumps(obj))
    assert (done.returncode, done.stderr.strip()) == (1, f'Error from server (BadRequest): error when creating "STDIN": {decoding_says}')
    path = "/api/v1/nodes" if obj["kind"] == "Node" else "/api/v1/namespaces/default/pods"
    done = kubectl.run("create", "--raw", path, "-f", "-", input=json.dumps(obj))
    assert (done.returncode, done.stderr.strip()) == (1, f"Error from server (BadRequest): {decoding_says}")


def test_an_update_that_does_not_decode_is_400_too(kubectl, tmp_path):
    raw = json.loads(kubectl("get", "--raw", "/api/v1/nodes/gpu-1"))
    raw["status"]["conditions"] = "Ready"
    (tmp_path / "node.json").write_text(json.dumps(raw))
    done = kubectl.run("replace", "--raw", "/api/v1/nodes/gpu-1/status", "-f", str(tmp_path / "node.json"))
    assert (done.returncode, done.stderr.strip()) == (1, 'Error from server (BadRequest): Node in version "v1" cannot be handled as '
                                                         "a Node: " + GO_TYPE_ERROR.format(json="string", field="NodeStatus.status.conditions",
                                                                                            go="[]v1.NodeCondition"))
    assert isinstance(json.loads(kubectl("get", "--raw", "/api/v1/nodes/gpu-1"))["status"]["conditions"], list)


def test_each_component_skips_a_malformed_object_says_so_and_goes_on(sim, core, caplog):
    store = sim.sim.store
    caplog.set_level(logging.WARNING, logger="gputui.sim")
    # Straight into the store: decoding never saw these.
    sim.call(store.create, "nodes", MALFORMED["capacity-list"][0])
    sim.call(store.create, "pods", pod("seven", {"containers": 7}))
    sim.call(store.create, "pods", pod("lots", {"containers": [{"name": "c", "image": "busybox",
                                                                 "resources": {"requests": {"cpu": "lots"}}}]}))
    sim.call(store.create, "pods", {**pod("bound-bad", {"nodeName": "gpu-1", "containers": [{"name": "c", "image": "busybox"}]}),
                                    "status": {"phase": "Running", "containerStatuses": {"name": "c"}}})
    core.create_namespaced_pod("default", pod("fine"))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        fine = core.read_namespaced_pod("fine", "default")
        if fine.status.phase == "Running":
            break
        time.sleep(0.1)
    assert (fine.spec.node_name, fine.status.phase) == ("gpu-1", "Running")  # the scheduler and the kubelet went on
    skipped = sim.sim.controllers.skipped
    assert any(line.startswith("kubelet: skipped node n1: malformed") for line in skipped), skipped
    assert any(line.startswith("kube-scheduler: skipped pod default/seven: malformed") for line in skipped), skipped
    assert any(line.startswith("kube-scheduler: skipped pod default/lots: malformed") for line in skipped), skipped
    assert any(line.startswith("kubelet gpu-1: skipped pod default/bound-bad: malformed") for line in skipped), skipped
    assert {r.getMessage() for r in caplog.records if r.name == "gputui.sim"} >= set(skipped)
