"""Scheduling gates, through the real kubectl, as kube-apiserver and kube-scheduler treat them: the API server gives a
gated pod PodScheduled=False/SchedulingGated (kubectl: STATUS SchedulingGated), refuses a gate added later and a
nodeName beside gates; the scheduler leaves the pod alone until its last gate is removed, then binds it."""
from __future__ import annotations

import json
import re
import time

import pytest

from gputui.sim.scenarios import fragmented
from gputui.ui.demo import BackgroundCluster

GATED = """
apiVersion: v1
kind: Pod
metadata: {name: NAME, namespace: ml, labels: {kueue.x-k8s.io/queue-name: team-a}}
spec:
  schedulingGates: [{name: kueue.x-k8s.io/admission}, {name: example.com/budget}]
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  containers:
  - name: main
    image: nvcr.io/nvidia/pytorch:24.03-py3
    resources: {limits: {nvidia.com/gpu: "2"}}
"""


@pytest.fixture(scope="module")
def sim():
    with BackgroundCluster(scenario=fragmented.build(), speed=50) as cluster:
        yield cluster


def pod(kubectl, name: str) -> dict:
    return json.loads(kubectl("get", "pod", "-n", "ml", name, "-o", "json"))


def wait_for(condition, what: str, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return value


def test_the_api_server_marks_a_gated_pod_and_kubectl_shows_it(kubectl):
    kubectl("create", "--validate=false", "-f", "-", input=GATED.replace("NAME", "gated-a"))
    created = pod(kubectl, "gated-a")
    assert created["status"]["conditions"] == [{
        "type": "PodScheduled", "status": "False", "lastProbeTime": None, "lastTransitionTime": None,
        "reason": "SchedulingGated", "message": "Scheduling is blocked due to non-empty scheduling gates"}]
    line = kubectl("get", "pod", "-n", "ml", "gated-a", "--no-headers")
    assert re.split(r"\s{2,}", line.strip())[1:4] == ["0/1", "SchedulingGated", "0"]
    time.sleep(0.5)  # scheduler passes go by (h100-1 has room for 2): the gates alone keep it unbound
    assert "nodeName" not in pod(kubectl, "gated-a")["spec"]


def test_gates_can_be_removed_but_not_added(kubectl):
    kubectl("create", "--validate=false", "-f", "-", input=GATED.replace("NAME", "gated-b"))
    added = kubectl.run("patch", "pod", "-n", "ml", "gated-b", "--type=json",
                        "-p", '[{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": "example.com/more"}}]')
    assert added.returncode != 0
    assert "spec.schedulingGates[2].name: Forbidden: only deletion is allowed, but found new scheduling gate 'example.com/more'" in added.stderr
    kubectl("patch", "pod", "-n", "ml", "gated-b", "--type=json", "-p", '[{"op": "remove", "path": "/spec/schedulingGates/0"}]')
    assert [g["name"] for g in pod(kubectl, "gated-b")["spec"]["schedulingGates"]] == ["example.com/budget"]
    time.sleep(0.5)
    assert "nodeName" not in pod(kubectl, "gated-b")["spec"]  # one gate left: still held
    kubectl("patch", "pod", "-n", "ml", "gated-b", "--type=json", "-p", '[{"op": "remove", "path": "/spec/schedulingGates"}]')
    bound = wait_for(lambda: pod(kubectl, "gated-b")["spec"].get("nodeName"), "the ungated pod to be bound")
    assert bound == "h100-1"  # the most free of the nodes a GPU pod can go to
    scheduled = next(c for c in pod(kubectl, "gated-b")["status"]["conditions"] if c["type"] == "PodScheduled")
    assert scheduled["status"] == "True"


def test_a_node_name_beside_gates_is_refused(kubectl):
    spec = GATED.replace("NAME", "gated-c").replace("  schedulingGates:", "  nodeName: h100-1\n  schedulingGates:")
    done = kubectl.run("create", "--validate=false", "-f", "-", input=spec)
    assert done.returncode != 0
    assert "spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared" in done.stderr
