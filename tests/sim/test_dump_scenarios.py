"""A dump of any cluster as a scenario: every kind kept and served as given (list, get, watch), custom
resources with their CRDs, refusals naming the file, the item and why, directories such as the GPU
Operator's must-gather writes, and the real kubectl against what is served."""
from __future__ import annotations

import asyncio
import json
import re
import shutil
import signal
from pathlib import Path

import orjson
import pytest
import yaml

from gputui.sim import SimCluster, scenarios
from gputui.sim import builders as b
from gputui.sim.scenarios.dump import Dump
from gputui.ui.demo import BackgroundCluster
from tests.sim.test_cli_sim import first_line, gputui_sim

MUST_GATHER = Path(__file__).resolve().parents[1] / "dumps" / "must-gather"
MANAGED = [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "apps/v1", "time": "2025-05-01T10:00:00Z",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:replicas": {}}}}]


def meta(name: str, namespace: str | None = None, **extra: object) -> dict:
    """metadata as a real server wrote it: uid, a resourceVersion of its own, managedFields."""
    out = {"name": name, "uid": f"uid-{name}", "resourceVersion": "48213977", "creationTimestamp": "2025-05-01T10:00:00Z",
           "managedFields": MANAGED, **extra}
    if namespace:
        out["namespace"] = namespace
    return out


# Kinds the simulator does not model, as `kubectl get ... -A -o yaml` prints them: kept and served as given.
KEPT = [
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("device-plugin-config", "gpu-operator"), "data": {"any": "version: v1\n"}},
    {"apiVersion": "v1", "kind": "Secret", "metadata": meta("pull", "gpu-operator"), "type": "kubernetes.io/dockerconfigjson",
     "data": {".dockerconfigjson": "e30="}},
    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("gpu-operator", "gpu-operator")},
    {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta("checkpoints", "ml"), "spec": {"accessModes": ["ReadWriteOnce"]},
     "status": {"phase": "Pending"}},
    {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta("pv-1"), "spec": {"capacity": {"storage": "1Ti"}}, "status": {"phase": "Released"}},
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("gpu-operator", "gpu-operator", generation=3),
     "spec": {"replicas": 1}, "status": {"replicas": 1, "readyReplicas": 0, "unavailableReplicas": 1, "observedGeneration": 2,
                                        "conditions": [{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"}]}},
    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta("gpu-operator-7bbf8bb6b7", "gpu-operator"), "status": {"replicas": 1}},
    {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta("triton", "ml"), "status": {"replicas": 2, "readyReplicas": 1}},
    {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("nccl-test", "ml"), "status": {"failed": 3,
     "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}},
    {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta("nightly", "ml"), "spec": {"schedule": "0 2 * * *"}},
    {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta("gpu-1", "kube-node-lease"), "spec": {"holderIdentity": "gpu-1"}},
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": meta("gpu-critical"), "value": 1000000},
    {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": meta("fast"), "provisioner": "ebs.csi.aws.com"},
    {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": meta("nvidia"), "handler": "nvidia"},
    {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta("triton", "ml"), "spec": {"minAvailable": 1},
     "status": {"currentHealthy": 1, "desiredHealthy": 1, "disruptionsAllowed": 0, "expectedPods": 2}},
    {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta("deny-all", "ml"), "spec": {"podSelector": {}}},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta("gpu-viewer"),
     "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta("viewers", "ml"),
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpu-viewer"},
     "subjects": [{"kind": "Group", "name": "ml-team", "apiGroup": "rbac.authorization.k8s.io"}]},
]
PATHS = {  # kind -> its collection, as kube-apiserver serves it
    "ConfigMap": "/api/v1/configmaps", "Secret": "/api/v1/secrets", "ServiceAccount": "/api/v1/serviceaccounts",
    "PersistentVolumeClaim": "/api/v1/persistentvolumeclaims", "PersistentVolume": "/api/v1/persistentvolumes",
    "Deployment": "/apis/apps/v1/deployments", "ReplicaSet": "/apis/apps/v1/replicasets", "StatefulSet": "/apis/apps/v1/statefulsets",
    "Job": "/apis/batch/v1/jobs", "CronJob": "/apis/batch/v1/cronjobs", "Lease": "/apis/coordination.k8s.io/v1/leases",
    "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses", "StorageClass": "/apis/storage.k8s.io/v1/storageclasses",
    "RuntimeClass": "/apis/node.k8s.io/v1/runtimeclasses", "PodDisruptionBudget": "/apis/policy/v1/poddisruptionbudgets",
    "NetworkPolicy": "/apis/networking.k8s.io/v1/networkpolicies",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles", "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/rolebindings",
}


def crd(group: str, version: str, plural: str, kind: str, *, namespaced: bool, short: list[str] = (), columns=(), **extra) -> dict:
    obj = b.custom_resource_definition(group, version, plural, kind, namespaced=namespaced, printer_columns=list(columns))
    obj["spec"]["names"]["shortNames"] = list(short)
    obj["spec"].update(extra)
    return obj


WIDGETS_CRD = crd("example.com", "v1", "widgets", "Widget", namespaced=True, short=["wd"],
                  columns=[("Size", "integer", ".spec.size"), ("Ready", "string", '.status.conditions[?(@.type=="Ready")].status'),
                           ("Age", "date", ".metadata.creationTimestamp")])
WIDGET = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": meta("w1", "ml"), "spec": {"size": 3},
          "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Broken"}]}}
DRIVERS_CRD = crd("nvidia.com", "v1alpha1", "nvidiadrivers", "NVIDIADriver", namespaced=False,
                  columns=[("Status", "string", ".status.state"), ("Age", "date", ".metadata.creationTimestamp")])
DRIVER = {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": meta("demo-precomp"),
          "spec": {"driverType": "gpu", "version": "580.126.20"},
          "status": {"state": "notReady", "conditions": [{"type": "Ready", "status": "False", "reason": "Error"},
                                                         {"type": "Error", "status": "True", "reason": "DriverNotReady",
                                                          "message": "Waiting for driver pod to be ready"}]}}
DUMP = [b.node("gpu-1", 0), *KEPT, WIDGETS_CRD, WIDGET, DRIVERS_CRD, DRIVER]


def as_list_file(path: Path, items: list[dict]) -> Path:
    """Written as `kubectl get ... -A -o yaml` prints it: a v1 List."""
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}))
    return path


@pytest.fixture(scope="module")
def dump_file(tmp_path_factory) -> Path:
    return as_list_file(tmp_path_factory.mktemp("dump") / "cluster.yaml", DUMP)


@pytest.fixture(scope="module")
def served(dump_file):
    with BackgroundCluster(**Dump.read([dump_file]).cluster_options()) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def kubectl(served, make_kubectl):
    return make_kubectl(served.kubeconfig_path)


def rows(output: str) -> list[list[str]]:
    return [re.split(r"\s{2,}", line.strip()) for line in output.strip().splitlines()]


def without_rv(obj: dict) -> dict:
    return {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}}


# -- every kind kept, as given -------------------------------------------------

async def _read_everything(sim: SimCluster) -> dict[str, tuple[dict, dict, dict]]:
    """kind -> (the list's item, a get of it, the first event of a watch), over HTTP."""
    out = {}
    async with sim.http_session(base_url=sim.url) as http:
        for obj in KEPT:
            path = PATHS[obj["kind"]]
            listed = await (await http.get(path)).json()
            ns = obj["metadata"].get("namespace")
            one = path.replace("/v1/", f"/v1/namespaces/{ns}/", 1) if ns else path
            got = await (await http.get(f"{one}/{obj['metadata']['name']}")).json()
            async with http.get(path, params={"watch": "true", "timeoutSeconds": "1"}) as watch:
                first = json.loads(await watch.content.readline())
            assert listed["kind"] == f"{obj['kind']}List" and len(listed["items"]) == 1, listed
            out[obj["kind"]] = (listed["items"][0], got, first)
    return out


async def test_every_kind_in_a_dump_is_served_as_given():
    async with SimCluster(DUMP, run_controllers=False) as sim:
        read = await _read_everything(sim)
    for obj in KEPT:
        item, got, event = read[obj["kind"]]
        assert without_rv(item) == without_rv(obj), obj["kind"]  # status, uid, managedFields as given; nothing healed
        assert item["metadata"]["resourceVersion"] != "48213977"  # the store's own resourceVersion
        assert got == item and event["type"] == "ADDED" and event["object"] == item


async def test_kept_kinds_are_read_only_and_stay_as_given_while_the_cluster_runs():
    async with SimCluster(DUMP, speed=50) as sim:  # controllers on: still nothing acts on these kinds
        keys = {(r.api_version, r.kind): r.key for r in sim.store.resources.values()}

        def kept() -> list[list[dict]]:
            return [sim.store.objects(keys[(o["apiVersion"], o["kind"])]) for o in KEPT]

        before = kept()
        async with sim.http_session(base_url=sim.url) as http:
            created = await http.post("/api/v1/namespaces/ml/endpoints", json={"metadata": {"name": "x"}})
            status = await created.json()
            deleted = await http.delete("/apis/apps/v1/namespaces/gpu-operator/deployments/gpu-operator")
        await asyncio.sleep(0.5)
        after = kept()
    assert created.status == 405 and status["reason"] == "MethodNotAllowed" and deleted.status == 405
    assert after == before


async def test_discovery_lists_the_kept_kinds_and_the_custom_resources_of_the_dump():
    async with SimCluster(DUMP, run_controllers=False) as sim, sim.http_session(base_url=sim.url) as http:
        core = {r["name"]: r for r in (await (await http.get("/api/v1")).json())["resources"]}
        apps = {r["name"]: r for r in (await (await http.get("/apis/apps/v1")).json())["resources"]}
        groups = {g["name"]: g for g in (await (await http.get("/apis")).json())["groups"]}
        example = {r["name"]: r for r in (await (await http.get("/apis/example.com/v1")).json())["resources"]}
        nvidia = await (await http.get("/apis/nvidia.com")).json()
    assert core["persistentvolumeclaims"] == {"name": "persistentvolumeclaims", "singularName": "persistentvolumeclaim", "namespaced": True,
                                              "kind": "PersistentVolumeClaim", "verbs": ["get", "list", "watch"], "shortNames": ["pvc"]}
    assert core["configmaps"]["verbs"] == sorted(["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"])
    assert apps["deployments"]["categories"] == ["all"] and apps["deployments"]["shortNames"] == ["deploy"]
    assert "pods" in core and set(core["pods"]["verbs"]) >= {"create", "delete", "deletecollection"}
    assert example["widgets"]["shortNames"] == ["wd"] and example["widgets"]["namespaced"] is True
    assert example["widgets"]["verbs"] == sorted(["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"])
    assert "widgets/status" in example
    assert [v["version"] for v in groups["nvidia.com"]["versions"]] == ["v1alpha1"]  # no ClusterPolicy CRD in this dump
    assert nvidia["preferredVersion"]["groupVersion"] == "nvidia.com/v1alpha1"


# -- the real kubectl ------------------------------------------------------------

def test_kubectl_gets_the_kept_kinds(kubectl):
    configmaps = rows(kubectl("get", "configmaps", "-A"))
    assert configmaps[0] == ["NAMESPACE", "NAME", "DATA", "AGE"] and [r[:3] for r in configmaps[1:]] == [["gpu-operator", "device-plugin-config", "1"]]
    deployments = rows(kubectl("get", "deployments", "-n", "gpu-operator"))
    assert deployments == [["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"], ["gpu-operator", "0/1", "0", "0", deployments[1][4]]]
    deployment = json.loads(kubectl("get", "deploy", "gpu-operator", "-n", "gpu-operator", "-o", "json", "--show-managed-fields"))
    assert deployment["status"]["unavailableReplicas"] == 1 and deployment["metadata"]["managedFields"] == MANAGED
    assert kubectl("get", "clusterroles", "-o", "name").split() == ["clusterrole.rbac.authorization.k8s.io/gpu-viewer"]
    assert kubectl("get", "pdb", "-n", "ml", "-o", "jsonpath={.items[0].status.disruptionsAllowed}") == "0"
    kinds = {r[0]: r for r in rows(kubectl("api-resources"))[1:]}
    assert kinds["statefulsets"][1:] == ["sts", "apps/v1", "true", "StatefulSet"]
    assert kinds["widgets"][1:] == ["wd", "example.com/v1", "true", "Widget"]
    refused = kubectl.run("create", "deployment", "x", "-n", "ml", "--image=busybox")
    assert refused.returncode == 1 and "the server does not allow this method on the requested resource" in refused.stderr


def test_kubectl_gets_the_custom_resources_with_their_printer_columns(kubectl):
    widgets = rows(kubectl("get", "wd", "-n", "ml"))
    assert widgets[0] == ["NAME", "SIZE", "READY", "AGE"] and widgets[1][:3] == ["w1", "3", "False"]
    assert re.fullmatch(r"\d+d", widgets[1][3])
    drivers = rows(kubectl("get", "nvidiadrivers"))
    assert drivers[0] == ["NAME", "STATUS", "AGE"] and drivers[1][:2] == ["demo-precomp", "notReady"]
    message = kubectl("get", "nvidiadriver", "demo-precomp", "-o", "jsonpath={.status.conditions[?(@.type=='Error')].message}")
    assert message == "Waiting for driver pod to be ready"


# -- refusals --------------------------------------------------------------------

POLICY = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"}, "status": {"state": "ready"}}


@pytest.mark.parametrize(("items", "words"), [
    ([b.node("gpu-1", 0), POLICY],
     'item 1: nvidia.com/v1 ClusterPolicy "cluster-policy": no CustomResourceDefinition for clusterpolicies.nvidia.com in the dump'),
    ([WIDGET], 'item 0: example.com/v1 Widget "w1": no CustomResourceDefinition for kind Widget in group example.com in the dump'),
    ([{"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion", "metadata": {"name": "version"}}],
     'item 0: config.openshift.io/v1 ClusterVersion "version": no CustomResourceDefinition for kind ClusterVersion in group '
     "config.openshift.io in the dump"),
    ([WIDGETS_CRD, {**WIDGET, "apiVersion": "example.com/v2"}],
     'item 1: example.com/v2 Widget "w1": CustomResourceDefinition widgets.example.com (FILE item 0): version v2 is not served (served: v1)'),
    ([{"apiVersion": "apps/v1", "kind": "Gadget", "metadata": {"name": "g"}}], "item 0: unknown kind apps/v1 Gadget"),
    ([{"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h", "namespace": "ml"}}],
     "item 0: unknown kind autoscaling/v1 HorizontalPodAutoscaler (served at autoscaling/v2)"),
    ([{**WIDGETS_CRD, "metadata": {**WIDGETS_CRD["metadata"], "name": "widgets"}}],
     'item 0: CustomResourceDefinition widgets: metadata.name must be spec.names.plural+"."+spec.group (widgets.example.com)'),
])
def test_what_cannot_be_served_is_refused_naming_the_file_the_item_and_why(tmp_path, items, words):
    path = as_list_file(tmp_path / "dump.yaml", items)
    with pytest.raises(scenarios.ScenarioError) as caught:
        scenarios.load(path)
    assert str(caught.value) == f"{path}: {words.replace('FILE', str(path))}"


def test_a_custom_resource_and_its_crd_may_be_in_different_files(tmp_path):
    as_list_file(tmp_path / "crds.yaml", [WIDGETS_CRD])
    as_list_file(tmp_path / "widgets.yaml", [WIDGET])
    loaded = scenarios.read([tmp_path / "widgets.yaml", tmp_path / "crds.yaml"])
    assert [o["kind"] for o in loaded.objects] == ["Widget", "CustomResourceDefinition"] and loaded.files == 2


def test_unquoted_timestamps_stay_strings(tmp_path):
    path = tmp_path / "node.yaml"
    path.write_text("apiVersion: v1\nkind: Node\nmetadata:\n  name: n\n  creationTimestamp: 2025-05-01T10:00:00Z\n")
    assert scenarios.load(path)[0]["metadata"]["creationTimestamp"] == "2025-05-01T10:00:00Z"


# -- directories -------------------------------------------------------------------

def test_the_must_gather_directory_loads_skipping_what_is_not_kubernetes_objects():
    loaded = scenarios.read([MUST_GATHER])
    skipped = sorted(Path(path).name for path, _ in loaded.skipped)
    assert skipped == ["gpu_nodes.labels", "gpu_nodes.status", "gpu_operand_ds.status", "gpu_operand_pods.status",
                       "gpu_operator_pod.status", "must-gather.log", "version"]
    assert loaded.files == 8 and loaded.merged == 1  # the operator pod: gpu_operator_pod.yaml and gpu_operand_pods.yaml
    operator = [o for o in loaded.objects if o["kind"] == "Pod" and o["metadata"]["labels"].get("app") == "gpu-operator"]
    assert len(operator) == 1
    kinds = {o["kind"] for o in loaded.objects}
    assert {"Node", "Pod", "DaemonSet", "ClusterPolicy", "CustomResourceDefinition", "NVIDIADriver", "ConfigMap", "Service"} <= kinds
    assert loaded.summary() == (f"{len(loaded.objects)} objects from 8 files; 7 files skipped (not Kubernetes objects); "
                                "1 object in several files kept once")


def test_a_directory_reads_yaml_yml_and_json_below_it_and_counts_the_rest(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    as_list_file(tmp_path / "a" / "nodes.yml", [b.node("gpu-1", 0)])
    (tmp_path / "a" / "b" / "cm.json").write_bytes(orjson.dumps(KEPT[0]))
    (tmp_path / "values.yaml").write_text("replicas: 3\nimage: {tag: v1}\n")  # YAML, but no Kubernetes object
    (tmp_path / "empty.yaml").write_text("apiVersion: v1\nkind: List\nitems: []\n")
    (tmp_path / "pod.log").write_text("I0501 10:00:00 started\n")
    (tmp_path / "nvidia-bug-report_gpu-1.log.gz").write_bytes(b"\x1f\x8b\x08\x00")
    loaded = scenarios.read([tmp_path])
    assert sorted(o["kind"] for o in loaded.objects) == ["ConfigMap", "Node"]
    assert {Path(p).name: why for p, why in loaded.skipped} == {
        "values.yaml": "no Kubernetes object in it", "pod.log": "not YAML or JSON", "nvidia-bug-report_gpu-1.log.gz": "not YAML or JSON"}
    assert loaded.files == 3  # nodes.yml, cm.json, empty.yaml
    again = scenarios.read([tmp_path / "a" / "nodes.yml", tmp_path])  # a file and its directory: read once
    assert sorted(o["kind"] for o in again.objects) == ["ConfigMap", "Node"] and again.files == 3 and again.merged == 0


def test_an_invalid_yaml_file_in_a_directory_is_an_error_not_skipped(tmp_path):
    shutil.copytree(MUST_GATHER, tmp_path / "mg")
    broken = tmp_path / "mg" / "cluster" / "nodes.yaml"
    broken.write_text(broken.read_text()[:500] + "\n- {kind: [")  # skipped, its nodes would go missing without a word
    with pytest.raises(scenarios.ScenarioError) as caught:
        scenarios.read([tmp_path / "mg"])
    assert str(caught.value).startswith(f"{broken}: not valid YAML at line ")


def test_one_object_in_two_files_is_kept_in_its_later_state_and_two_objects_of_one_name_are_refused(tmp_path):
    pod = b.pod("p", "ml", [b.container("c", "cuda")])
    pod["metadata"].update(uid="u-1", resourceVersion="100")
    later = json.loads(json.dumps(pod))
    later["metadata"]["resourceVersion"], later["status"]["phase"] = "250", "Running"
    as_list_file(tmp_path / "a.yaml", [later])
    as_list_file(tmp_path / "b.yaml", [pod])
    loaded = scenarios.read([tmp_path / "a.yaml", tmp_path / "b.yaml"])
    assert [o["status"]["phase"] for o in loaded.objects] == ["Running"] and loaded.merged == 1
    other = json.loads(json.dumps(pod))
    other["metadata"]["uid"] = "u-2"
    as_list_file(tmp_path / "b.yaml", [other])
    with pytest.raises(scenarios.ScenarioError) as caught:
        scenarios.read([tmp_path / "a.yaml", tmp_path / "b.yaml"])
    assert str(caught.value) == (f"{tmp_path / 'b.yaml'}: item 0: duplicate name: Pod ml/p is also {tmp_path / 'a.yaml'} item 0, "
                                 "a different object (uid u-1, not u-2)")


async def test_a_served_dump_changes_nothing_no_exporter_answers_and_no_version_is_made_up():
    dump = Dump.read([MUST_GATHER])
    async with dump.served() as sim:
        rv = sim.store.resource_version
        exporter = next(p for p in sim.store.objects("pods") if p["metadata"]["labels"].get("app") == "nvidia-dcgm-exporter")
        async with sim.http_session(base_url=sim.url) as http:
            scrape = await http.get(f"/api/v1/namespaces/gpu-operator/pods/{exporter['metadata']['name']}:9400/proxy/metrics")
            body = await scrape.json()
            version = await (await http.get("/version")).json()
        await asyncio.sleep(1.0)
        assert sim.store.resource_version == rv  # no scheduler, kubelet or controller wrote anything
        assert yaml.safe_load(sim.kubeconfig_path.read_text())["current-context"] == f"dump:{MUST_GATHER}"
    assert scrape.status == 503 and "connection refused" in body["message"]
    assert version["gitVersion"] == "" and version["major"] == ""  # which release served the dump is not in it


def test_gputui_sim_serves_a_directory(make_kubectl, tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    proc = gputui_sim("--scenario", str(MUST_GATHER), "--kubeconfig-out", str(kubeconfig))
    try:
        assert first_line(proc).startswith("serving https://127.0.0.1:")
        kubectl = make_kubectl(kubeconfig)
        assert kubectl("get", "configmaps", "-n", "gpu-operator", "-o", "name").split() == ["configmap/time-slicing-config"]
        assert rows(kubectl("get", "nvidiadrivers"))[1][:2] == ["default", "ready"]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=15)
    assert proc.returncode == 0 and "Traceback" not in stderr
