"""The node lifecycle controller, seen by the real kubectl and the official Python client: a node whose kubelet
stops posting status goes Unknown with kube-controller-manager's reason and message, gets the unreachable
taints, its pods Ready=False, and the taint-eviction controller deletes the pods whose toleration runs out
(DefaultTolerationSeconds gives 300 s; one without tolerationSeconds stays), which stay Terminating until the
kubelet is back. Simulated time runs fast: the grace period is one simulated second."""
from __future__ import annotations

import json
import time

import pytest

from gputui.sim import builders
from gputui.ui.demo import BackgroundCluster

SPEED = 20
UNREACHABLE = "node.kubernetes.io/unreachable"


@pytest.fixture(scope="module")
def sim():
    with BackgroundCluster(scenario=[builders.node("gpu-1", 0), builders.node("gpu-2", 1)], speed=SPEED) as cluster:
        cluster.sim.node_monitor_grace_period = 1.0
        cluster.sim.node_monitor_period = 0.5
        yield cluster


def pod(name: str, tolerations: list[dict] | None = None) -> dict:
    spec = {"nodeSelector": {"kubernetes.io/hostname": "gpu-1"}, "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "infinity"]}]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def wait_for(check, what: str, timeout: float = 20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {timeout:.0f} s")


def test_a_node_whose_kubelet_stops_is_unknown_tainted_and_its_pods_evicted(sim, kubectl, core):
    short = [{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 20}]
    forever = [{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}]
    for body in (pod("default-toleration"), pod("short", short), pod("forever", forever)):
        kubectl("create", "--validate=false", "-f", "-", input=json.dumps(body))
    for name in ("default-toleration", "short", "forever"):
        wait_for(lambda name=name: core.read_namespaced_pod(name, "default").status.phase == "Running", f"{name} running")
    defaulted = core.read_namespaced_pod("default-toleration", "default").spec.tolerations
    assert {(t.key, t.effect, t.toleration_seconds) for t in defaulted} == {
        ("node.kubernetes.io/not-ready", "NoExecute", 300), (UNREACHABLE, "NoExecute", 300)}

    kubectl("annotate", "node", "gpu-1", "sim.gputui.io/fault=kubelet-stopped")
    node = wait_for(lambda: next((n for n in [core.read_node("gpu-1")] if n.spec.taints), None), "the node tainted")
    assert {(c.type, c.status, c.reason, c.message) for c in node.status.conditions} == {
        (kind, "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
        for kind in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")}
    assert [(t.key, t.effect, t.time_added is not None) for t in node.spec.taints] == [
        (UNREACHABLE, "NoSchedule", False), (UNREACHABLE, "NoExecute", True)]
    assert kubectl("get", "node", "gpu-1", "--no-headers").split()[1] == "NotReady"

    # Every pod of the node is not ready; the one whose toleration runs out (20 s) is evicted and stays Terminating.
    evicted = wait_for(lambda: next((p for p in [core.read_namespaced_pod("short", "default")] if p.metadata.deletion_timestamp), None),
                       "the short toleration's pod evicted")
    assert ("DisruptionTarget", "True", "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint") in {
        (c.type, c.status, c.reason, c.message) for c in evicted.status.conditions}
    for name in ("default-toleration", "short", "forever"):
        ready = next(c for c in core.read_namespaced_pod(name, "default").status.conditions if c.type == "Ready")
        assert ready.status == "False", name
    time.sleep(10 / SPEED)  # ten times the evicted pod's grace period: no kubelet ends it
    rows = {line.split()[0]: line.split()[2] for line in kubectl("get", "pods", "--no-headers").splitlines()}
    assert rows == {"default-toleration": "Running", "short": "Terminating", "forever": "Running"}
    events = json.loads(kubectl("get", "events", "-o", "json"))["items"]
    said = {(e["involvedObject"]["name"], e["reason"], e["message"]) for e in events}
    assert ("short", "TaintManagerEviction", "Marking for deletion Pod default/short") in said
    assert ("forever", "NodeNotReady", "Node is not ready") in said
    assert ("gpu-1", "NodeNotReady", "Node gpu-1 status is now: NodeNotReady") in said

    # The kubelet is back: Ready, untainted, and the Terminating pod ends.
    kubectl("annotate", "node", "gpu-1", "sim.gputui.io/fault-")
    wait_for(lambda: not core.read_node("gpu-1").spec.taints, "the taints gone")
    assert kubectl("get", "node", "gpu-1", "--no-headers").split()[1] == "Ready"
    wait_for(lambda: "short" not in kubectl("get", "pods", "-o", "name"), "the evicted pod gone")


def test_a_pod_that_tolerates_nothing_leaves_a_lost_node_at_once(sim, core):
    """A scenario's pod without DefaultTolerationSeconds' tolerations (the store takes it as given) is evicted at once."""
    body = builders.pod("bare", "default", [builders.container("c", "busybox")], node_name="gpu-2")
    body["spec"]["tolerations"] = []
    sim.call(sim.sim.store.create, "pods", body)
    sim.call(sim.sim.store.mutate, "nodes", "", "gpu-2",
             lambda n: n["metadata"].setdefault("annotations", {}).update({"sim.gputui.io/fault": "kubelet-stopped"}))
    wait_for(lambda: core.read_namespaced_pod("bare", "default").metadata.deletion_timestamp, "the bare pod evicted")
