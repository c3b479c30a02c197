"""The kueue-quota scenario through the real kubectl and the official client: Kueue's kinds served at
kueue.x-k8s.io/v1beta2 with their CRDs' short names and printer columns, only while their CRDs exist; the
figures it holds agree with each other as Kueue keeps them (a ClusterQueue's reservation is what its admitted
Workloads reserve, its pending count the Workloads not admitted); the gated pod is never scheduled."""
from __future__ import annotations

import json
import re
import time

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from gputui.sim.scenarios import kueue_quota
from gputui.sim import scenarios
from gputui.sim.builders import parse_quantity
from gputui.ui.demo import BackgroundCluster


@pytest.fixture(scope="module")
def sim():
    with BackgroundCluster(scenario=kueue_quota.build(), speed=50) as cluster:
        yield cluster


def table(output: str) -> list[list[str]]:
    return [re.split(r"\s{2,}", line.strip()) for line in output.strip().splitlines()]


def test_kubectl_lists_workloads_and_cluster_queues_with_kueues_columns(kubectl):
    workloads = table(kubectl("get", "workloads", "-A"))
    assert workloads[0] == ["NAMESPACE", "NAME", "QUEUE", "RESERVED IN", "ADMITTED", "FINISHED", "AGE"]
    rows = {row[1].rsplit("-", 1)[0]: row for row in workloads[1:]}
    assert set(rows) == {"job-llm-pretrain", "pod-llm-ft-x7k2", "job-eval-sweep", "job-notebook"}
    assert rows["job-llm-pretrain"][2:5] == ["user-queue", "team-a", "True"]
    assert rows["pod-llm-ft-x7k2"][2:3] == ["user-queue"] and len(rows["pod-llm-ft-x7k2"]) == 4  # not reserved, no condition columns
    assert table(kubectl("get", "clusterqueues")) == [["NAME", "COHORT", "PENDING WORKLOADS"], ["team-a", "research", "2"],
                                                      ["team-b", "research", "0"]]
    assert table(kubectl("get", "cq", "-o", "wide"))[0] == ["NAME", "COHORT", "STRATEGY", "PENDING WORKLOADS", "ADMITTED WORKLOADS"]
    assert table(kubectl("get", "lq", "-n", "team-a")) == [["NAME", "CLUSTERQUEUE", "PENDING WORKLOADS", "ADMITTED WORKLOADS"],
                                                           ["user-queue", "team-a", "2", "1"]]
    resources = table(kubectl("api-resources", "--api-group=kueue.x-k8s.io"))
    assert ["workloads", "kwl,kueueworkload,kueueworkloads", "kueue.x-k8s.io/v1beta2", "true", "Workload"] in resources


def test_the_pending_workloads_say_why_and_the_gated_pod_stays_unbound(kubectl):
    for name in ("pod-llm-ft-x7k2", "job-eval-sweep"):
        full = next(row[0] for row in table(kubectl("get", "kwl", "-n", "team-a"))[1:] if row[0].startswith(name))
        conditions = json.loads(kubectl("get", "kwl", "-n", "team-a", full, "-o", "jsonpath={.status.conditions}"))
        assert [(c["type"], c["status"], c["reason"], c["message"]) for c in conditions] == [
            ("QuotaReserved", "False", "Pending", kueue_quota.PENDING)]
    time.sleep(0.5)  # scheduler passes go by: h100-3 has 8 free GPUs, the gate alone holds the pod
    pod = json.loads(kubectl("get", "pod", "-n", "team-a", "llm-ft-x7k2", "-o", "json"))
    assert "nodeName" not in pod["spec"] and pod["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]
    assert re.split(r"\s{2,}", kubectl("get", "pod", "-n", "team-a", "llm-ft-x7k2", "--no-headers").strip())[2] == "SchedulingGated"
    assert kubectl("get", "pods", "-n", "team-a", "-l", "job-name=eval-sweep", "-o", "name").strip() == ""  # suspended: no pods


def test_the_figures_agree_as_kueue_keeps_them():
    objects = scenarios.load("kueue-quota")
    workloads = [o for o in objects if o["kind"] == "Workload"]

    def admitted(w: dict) -> bool:
        return any(c["type"] == "Admitted" and c["status"] == "True" for c in w["status"].get("conditions", []))

    for cq in (o for o in objects if o["kind"] == "ClusterQueue"):
        name = cq["metadata"]["name"]
        mine = [w for w in workloads if w["status"].get("admission", {}).get("clusterQueue") == name]
        reserved = {r["name"]: parse_quantity(r["total"]) for f in cq["status"]["flavorsReservation"] for r in f["resources"]}
        assignments = [a for w in mine for a in w["status"]["admission"]["podSetAssignments"]]
        summed = {r: sum(parse_quantity(a["resourceUsage"].get(r, "0")) for a in assignments) for r in reserved}
        assert reserved == summed, name
        assert cq["status"]["admittedWorkloads"] == sum(map(admitted, mine))
        queues = {lq["metadata"]["namespace"] for lq in objects if lq["kind"] == "LocalQueue" and lq["spec"]["clusterQueue"] == name}
        assert cq["status"]["pendingWorkloads"] == sum(1 for w in workloads if w["metadata"]["namespace"] in queues and not admitted(w))
    pods = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in objects if p["kind"] == "Pod"}
    for w in workloads:  # every Workload is owned by its job or its pod, and a running job's pods by the job
        owner = w["metadata"]["ownerReferences"][0]
        if owner["kind"] == "Pod":
            assert pods[(w["metadata"]["namespace"], owner["name"])]["metadata"]["uid"] == owner["uid"]
        elif admitted(w):
            held = [p for p in pods.values() if p["metadata"].get("ownerReferences", [{}])[0].get("uid") == owner["uid"]]
            assert len(held) == w["spec"]["podSets"][0]["count"]


def test_the_official_client_reads_them(sim):
    api = k8s.ApiClient(k8s.Configuration())
    objects = scenarios.load("kueue-quota")
    for obj in objects:
        if obj["kind"] in ("Job", "Pod"):
            model = api.deserialize(json.dumps(obj), "V1" + obj["kind"], "application/json")
            assert model.metadata.name == obj["metadata"]["name"]
    custom = k8s.CustomObjectsApi(k8s_config.new_client_from_config(str(sim.kubeconfig_path)))
    listed = custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")
    assert [q["metadata"]["name"] for q in listed["items"]] == ["team-a", "team-b"]


def test_kueues_kinds_are_served_only_while_their_crds_exist(make_kubectl):
    with BackgroundCluster(scenario=scenarios.load("fragmented"), speed=50) as cluster:
        result = make_kubectl(cluster.kubeconfig_path).run("get", "workloads", "-A")
        assert result.returncode != 0 and "the server doesn't have a resource type \"workloads\"" in result.stderr
    with BackgroundCluster(scenario=kueue_quota.build(), speed=50) as cluster:
        kubectl = make_kubectl(cluster.kubeconfig_path)
        kubectl("delete", "crd", "workloads.kueue.x-k8s.io")
        result = kubectl.run("get", "workloads.v1beta2.kueue.x-k8s.io", "-A")
        assert result.returncode != 0 and "the server could not find the requested resource" in result.stderr, result.stdout
        assert table(kubectl("get", "cq"))[1][0] == "team-a"  # the other kinds stay
