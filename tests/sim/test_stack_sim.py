"""The simulator's GPU stack: CRDs and ClusterPolicy, Services, resource.k8s.io/v1, the pod and service
proxy to DCGM exporters (and its failures), the demo's additions and the stack scenarios."""
from __future__ import annotations

import asyncio
import json
import re
import time

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from prometheus_client.parser import text_string_to_metric_families

from gputui.sim import SimCluster, scenarios
from gputui.sim.scenarios import stacks
from gputui.sim import builders as b
from gputui.sim.exporters.dcgm import gpu_uuid
from gputui.sim.apiserver.store import Store
from gputui.ui.demo import BackgroundCluster

OPERATOR_NS = "gpu-operator"
MODEL_OF = {"Namespace": "V1Namespace", "Node": "V1Node", "Pod": "V1Pod", "Event": "CoreV1Event", "DaemonSet": "V1DaemonSet",
            "Service": "V1Service", "CustomResourceDefinition": "V1CustomResourceDefinition", "DeviceClass": "V1DeviceClass",
            "ResourceSlice": "V1ResourceSlice", "ResourceClaim": "ResourceV1ResourceClaim"}


@pytest.fixture(scope="module")
def demo():
    # Static (no controllers): the proxy answers from the stored state, so every case is deterministic.
    with BackgroundCluster(scenario="demo", faults=True, run_controllers=False) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def kubectl(demo, make_kubectl):
    return make_kubectl(demo.kubeconfig_path)


def rows(output: str) -> list[list[str]]:
    return [re.split(r"\s{2,}", line.strip()) for line in output.strip().splitlines()]


def exporter_pods(kubectl) -> dict[str, str]:
    """node -> the DCGM exporter pod on it."""
    pods = json.loads(kubectl("get", "pods", "-n", OPERATOR_NS, "-l", "app=nvidia-dcgm-exporter", "-o", "json"))["items"]
    return {p["spec"]["nodeName"]: p["metadata"]["name"] for p in pods}


def samples(text: str, metric: str) -> dict[str, float]:
    """gpu index (with MIG instance) -> value of the metric, through the real Prometheus parser."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == metric:
                out[s.labels["gpu"] + "/" + s.labels.get("GPU_I_ID", "")] = s.value
    return out


# -- kubectl --------------------------------------------------------------

def test_kubectl_lists_the_new_kinds_with_their_columns(kubectl):
    assert rows(kubectl("get", "clusterpolicies"))[1][:2] == ["cluster-policy", "notReady"]
    assert rows(kubectl("get", "clusterpolicies"))[0] == ["NAME", "STATUS", "AGE"]
    assert rows(kubectl("get", "crd"))[1][0] == "clusterpolicies.nvidia.com"
    slices = rows(kubectl("get", "resourceslices"))
    assert slices[0] == ["NAME", "NODE", "DRIVER", "POOL", "AGE"]
    assert slices[1][1:4] == ["h100-dra-1", "gpu.nvidia.com", "h100-dra-1"]
    claims = rows(kubectl("get", "resourceclaims", "-A"))
    assert claims[0] == ["NAMESPACE", "NAME", "STATE", "AGE"]
    assert {r[2] for r in claims[1:]} == {"allocated,reserved"} and len(claims) == 3
    assert [r[0] for r in rows(kubectl("get", "deviceclasses"))[1:]] == ["gpu.nvidia.com", "mig.nvidia.com"]
    services = rows(kubectl("get", "svc", "-n", OPERATOR_NS, "-o", "wide"))
    assert services[0] == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR"]
    assert services[1][0:2] == ["nvidia-dcgm-exporter", "ClusterIP"] and services[1][4] == "9400/TCP"
    assert services[1][6] == "app=nvidia-dcgm-exporter"
    resources = {r[0]: r for r in rows(kubectl("api-resources"))[1:]}
    assert resources["clusterpolicies"][1:] == ["nvidia.com/v1", "false", "ClusterPolicy"]
    assert resources["services"][1:] == ["svc", "v1", "true", "Service"]


def test_kubectl_jsonpath_on_the_cluster_policy_and_a_claim(kubectl):
    out = kubectl("get", "clusterpolicy", "cluster-policy", "-o",
                  "jsonpath={.status.namespace} {.status.conditions[?(@.type=='Ready')].message}")
    assert out == "gpu-operator ClusterPolicy is not ready; states not ready: [state-dcgm-exporter]"
    claim = json.loads(kubectl("get", "resourceclaims", "-n", "inference", "-o", "json"))["items"]
    held = {c["status"]["reservedFor"][0]["name"]: [r["device"] for r in c["status"]["allocation"]["devices"]["results"]]
            for c in claim}
    assert held == {"qwen-72b-serving-0": ["gpu-0", "gpu-1"], "whisper-dra-0": ["gpu-7-mig-1g10gb-19-0"]}


def test_resource_slices_select_by_node_field(kubectl):
    assert kubectl("get", "resourceslices", "--field-selector", "spec.nodeName=h100-dra-1", "-o", "name").count("\n") == 1
    assert kubectl("get", "resourceslices", "--field-selector", "spec.nodeName=h100-1", "-o", "name") == ""


# -- the proxy --------------------------------------------------------------

def test_pod_proxy_serves_each_exporters_node_with_the_injected_xid(kubectl):
    pods = exporter_pods(kubectl)
    text = kubectl("get", "--raw", f"/api/v1/namespaces/{OPERATOR_NS}/pods/{pods['h100-1']}:9400/proxy/metrics")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    hosts = {s.labels["Hostname"] for s in families["DCGM_FI_DEV_GPU_UTIL"].samples}
    assert hosts == {"h100-1"}
    assert {s.labels["UUID"] for s in families["DCGM_FI_DEV_GPU_UTIL"].samples} == {gpu_uuid("h100-1", i) for i in range(8)}
    xids = {k: v for k, v in samples(text, "DCGM_FI_DEV_XID_ERRORS").items() if v}
    assert xids == {"2/": 48}
    pods_seen = {s.labels.get("pod") for s in families["DCGM_FI_DEV_GPU_UTIL"].samples}
    assert "llm-pretrain-worker-0" in pods_seen and "" not in pods_seen  # a GPU no pod holds has no pod label at all
    mig = kubectl("get", "--raw", f"/api/v1/namespaces/{OPERATOR_NS}/pods/{pods['h100-mig-1']}:9400/proxy/metrics")
    assert "GPU_I_PROFILE=\"1g.10gb\"" in mig and 'Hostname="h100-mig-1"' in mig


def test_metrics_vary_over_time(kubectl):
    pod = exporter_pods(kubectl)["h100-2"]
    path = f"/api/v1/namespaces/{OPERATOR_NS}/pods/{pod}:9400/proxy/metrics"
    first = samples(kubectl("get", "--raw", path), "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    time.sleep(0.3)
    second = samples(kubectl("get", "--raw", path), "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    busy = [k for k, v in first.items() if v > 0]
    assert busy and any(first[k] != second[k] for k in busy)


@pytest.mark.parametrize(("where", "code", "words"), [
    ("h100-4", "ServiceUnavailable", "connect: connection refused"),  # its exporter crash-loops
    ("h100-3", "ServiceUnavailable", "i/o timeout"),  # the node is NotReady
])
def test_pod_proxy_to_an_unreachable_exporter_is_503(kubectl, where, code, words):
    pod = exporter_pods(kubectl)[where]
    done = kubectl.run("get", "--raw", f"/api/v1/namespaces/{OPERATOR_NS}/pods/{pod}:9400/proxy/metrics")
    assert done.returncode == 1
    assert f"Error from server ({code}): error trying to reach service: dial tcp 10.244." in done.stderr and words in done.stderr


async def test_proxy_answers_like_the_real_api_server(demo):
    pod = next(p["metadata"]["name"] for p in demo.sim.store.objects("pods", OPERATOR_NS)
               if p["spec"]["nodeName"] == "h100-1" and p["metadata"]["labels"].get("app") == "nvidia-dcgm-exporter")
    base = f"{demo.sim.url}/api/v1/namespaces/{OPERATOR_NS}"
    async with demo.sim.http_session() as http:
        async def get(path: str) -> tuple[int, str, str]:
            async with http.get(base + path) as r:
                return r.status, r.headers["Content-Type"], await r.text()

        status, kind, body = await get(f"/pods/{pod}:9400/proxy/metrics")
        assert (status, kind) == (200, "text/plain; version=0.0.4; charset=utf-8") and body.startswith("# HELP DCGM_FI_DEV_SM_CLOCK")
        assert (await get(f"/pods/https:{pod}:9400/proxy/metrics"))[0] == 200
        assert (await get(f"/pods/{pod}:9400/proxy/nothing"))[::2] == (404, "404 page not found\n")
        # No port: the first port a container declares (the exporter's 9400), else 80; no pod IP yet: 400.
        assert (await get(f"/pods/{pod}/proxy/metrics"))[0] == 200
        pods = demo.sim.store.objects("pods")
        for declared, port in ((True, None), (False, 80)):
            other = next(p for p in pods if p["status"].get("podIP") and "dcgm-exporter" not in p["spec"]["containers"][0]["image"]
                         and bool(p["spec"]["containers"][0].get("ports")) == declared)
            port = port or other["spec"]["containers"][0]["ports"][0]["containerPort"]
            async with http.get(f"{demo.sim.url}/api/v1/namespaces/{other['metadata']['namespace']}/pods/{other['metadata']['name']}/proxy/") as r:
                assert r.status == 503 and f":{port}: connect: connection refused" in (await r.json())["message"]
        pending = next(p for p in pods if not p["status"].get("podIP"))
        async with http.get(f"{demo.sim.url}/api/v1/namespaces/{pending['metadata']['namespace']}/pods/{pending['metadata']['name']}/proxy/") as r:
            assert (r.status, (await r.json())["message"]) == (400, "address not allowed")
        status, _, body = await get(f"/pods/a:{pod}:9400/proxy/metrics")
        assert (status, json.loads(body)["message"]) == (400, f'invalid pod request "a:{pod}:9400"')
        status, _, body = await get("/pods/no-such-pod:9400/proxy/metrics")
        assert status == 404 and json.loads(body)["message"] == 'pods "no-such-pod" not found'
        status, _, body = await get("/services/nvidia-dcgm-exporter:1234/proxy/metrics")
        assert status == 503 and json.loads(body)["message"] == 'no service port 1234 found for service "nvidia-dcgm-exporter"'
        status, _, body = await get("/services/nvidia-dcgm-exporter/proxy/metrics")  # the port is named: an empty name matches none
        assert status == 503 and json.loads(body)["message"] == 'no endpoints available for service "nvidia-dcgm-exporter"'
        # Endpoints are the ready exporters (not h100-3's: NotReady; not h100-4's: crash-looping), taken in turn.
        hosts = set()
        for port in ("9400", "gpu-metrics", "9400"):
            status, _, body = await get(f"/services/nvidia-dcgm-exporter:{port}/proxy/metrics")
            assert status == 200
            hosts |= set(re.findall(r'Hostname="([^"]+)"', body))
        assert hosts == {"h100-1", "h100-2", "h100-mig-1"}


def test_exporter_forbidden_fault_hits_only_the_proxy(demo, kubectl):
    pod = exporter_pods(kubectl)["h100-1"]
    demo.call(demo.sim.faults.fail, "pods/proxy", 403)
    demo.call(demo.sim.faults.fail, "services/proxy", 403)
    try:
        done = kubectl.run("get", "--raw", f"/api/v1/namespaces/{OPERATOR_NS}/pods/{pod}:9400/proxy/metrics")
        assert done.returncode == 1
        assert (f'Error from server (Forbidden): pods "{pod}:9400" is forbidden: User "system:serviceaccount:gputui:viewer" '
                f'cannot get resource "pods/proxy" in API group "" in the namespace "{OPERATOR_NS}"') in done.stderr
        done = kubectl.run("get", "--raw", f"/api/v1/namespaces/{OPERATOR_NS}/services/nvidia-dcgm-exporter:9400/proxy/metrics")
        assert "cannot get resource \"services/proxy\"" in done.stderr
        assert pod in kubectl("get", "pods", "-n", OPERATOR_NS)  # the pods themselves stay readable
    finally:
        demo.call(demo.sim.faults.clear, "pods/proxy")
        demo.call(demo.sim.faults.clear, "services/proxy")
    assert kubectl.run("get", "--raw", f"/api/v1/namespaces/{OPERATOR_NS}/pods/{pod}:9400/proxy/metrics").returncode == 0
    with pytest.raises(ValueError, match="no subresource"):
        demo.call(demo.sim.faults.fail, "services/log", 403)


def test_python_client_reads_proxy_custom_objects_and_dra(demo):
    api = k8s_config.new_client_from_config(config_file=str(demo.kubeconfig_path))
    core = k8s.CoreV1Api(api)
    pod = next(p.metadata.name for p in core.list_namespaced_pod(OPERATOR_NS, label_selector="app=nvidia-dcgm-exporter").items
               if p.spec.node_name == "h100-2")
    text = core.connect_get_namespaced_pod_proxy_with_path(f"{pod}:9400", OPERATOR_NS, "metrics")
    assert 'Hostname="h100-2"' in text
    text = core.connect_get_namespaced_service_proxy_with_path("nvidia-dcgm-exporter:gpu-metrics", OPERATOR_NS, "metrics")
    assert "DCGM_FI_DEV_FB_USED" in text
    policies = k8s.CustomObjectsApi(api).list_cluster_custom_object("nvidia.com", "v1", "clusterpolicies")["items"]
    assert [(p["metadata"]["name"], p["status"]["state"]) for p in policies] == [("cluster-policy", "notReady")]
    dra = k8s.ResourceV1Api(api)
    slices = dra.list_resource_slice(field_selector="spec.driver=gpu.nvidia.com").items
    devices = {d.name: d for d in slices[0].spec.devices}
    assert len(devices) == 14 and devices["gpu-0"].attributes["productName"].string == "NVIDIA H100 80GB HBM3"
    assert devices["gpu-0"].capacity["memory"].value == "81559Mi"
    assert devices["gpu-7-mig-1g10gb-19-0"].attributes["profile"].string == "1g.10gb"
    classes = {c.metadata.name: c.spec.extended_resource_name for c in dra.list_device_class().items}
    assert classes == {"gpu.nvidia.com": "nvidia.com/gpu", "mig.nvidia.com": None}
    claims = dra.list_resource_claim_for_all_namespaces().items
    assert sorted(c.status.reserved_for[0].name for c in claims) == ["qwen-72b-serving-0", "whisper-dra-0"]


async def test_newer_exporters_label_the_host_hostname():
    async with SimCluster(scenario=stacks.gpu_operator_healthy(), run_controllers=False) as sim:
        pods = {p["spec"]["nodeName"]: p["metadata"]["name"] for p in sim.store.objects("pods", OPERATOR_NS)
                if p["metadata"]["labels"].get("app") == "nvidia-dcgm-exporter"}
        async with sim.http_session() as http:
            texts = {}
            for node, pod in pods.items():
                async with http.get(f"{sim.url}/api/v1/namespaces/{OPERATOR_NS}/pods/{pod}:9400/proxy/metrics") as r:
                    texts[node] = await r.text()
    assert 'Hostname="gpu-1"' in texts["gpu-1"] and 'hostname="gpu-2"' in texts["gpu-2"] and "Hostname=" not in texts["gpu-2"]
    assert 'modelName="NVIDIA A100-SXM4-80GB"' in texts["gpu-2"] and 'pod="vllm-serve-0"' in texts["gpu-2"]


# -- custom resources need their CRD -----------------------------------------

async def test_cluster_policies_are_served_only_while_their_crd_exists():
    async with SimCluster(scenario=stacks.static_plugin(), run_controllers=False) as sim:
        async with sim.http_session() as http:
            async def status(path: str) -> int:
                async with http.get(sim.url + path) as r:
                    return r.status

            groups = await (await http.get(sim.url + "/apis")).json()
            assert "nvidia.com" not in [g["name"] for g in groups["groups"]]
            assert await status("/apis/nvidia.com/v1/clusterpolicies") == 404
            assert await status("/apis/nvidia.com/v1") == 404
            crd = next(o for o in stacks.gpu_operator_healthy() if o["kind"] == "CustomResourceDefinition")
            sim.store.create("customresourcedefinitions.apiextensions.k8s.io", crd)
            assert await status("/apis/nvidia.com/v1/clusterpolicies") == 200
            body = await (await http.get(sim.url + "/apis/nvidia.com/v1")).json()
            assert [r["name"] for r in body["resources"]] == ["clusterpolicies", "clusterpolicies/status"]


# -- scenarios ------------------------------------------------------------------

def _by(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


@pytest.mark.parametrize("name", list(stacks.SCENARIOS))
def test_every_stack_scenario_loads_populates_and_deserialises(name):
    objects = scenarios.load(name)  # by name, as `gputui sim --scenario NAME` does
    api = k8s.ApiClient()
    for obj in objects:
        if obj["kind"] in MODEL_OF:
            assert api.deserialize(json.dumps(obj), MODEL_OF[obj["kind"]], "application/json").metadata.name
    store = Store()
    scenarios.populate(store, objects)
    assert len(store.objects("nodes")) == 3


# Device plugin DaemonSets by install style, as gpu-stack.md's table names them: (namespace, name, selector).
PLUGIN_STYLES = {
    "operator": (OPERATOR_NS, "nvidia-device-plugin-daemonset", {"app": "nvidia-device-plugin-daemonset"}),
    "static": ("kube-system", "nvidia-device-plugin-daemonset", {"name": "nvidia-device-plugin-ds"}),
    "helm": ("nvidia-device-plugin", "nvdp-nvidia-device-plugin",
             {"app.kubernetes.io/name": "nvidia-device-plugin", "app.kubernetes.io/instance": "nvdp"}),
    "gke": ("kube-system", "nvidia-gpu-device-plugin", {"k8s-app": "nvidia-gpu-device-plugin"}),
}


def _pods_of(objects: list[dict], ds: dict) -> dict[str, dict]:
    """node -> the DaemonSet's pod there."""
    return {p["spec"]["nodeName"]: p for p in _by(objects, "Pod")
            if p["metadata"]["namespace"] == ds["metadata"]["namespace"]
            and any(o["name"] == ds["metadata"]["name"] for o in p["metadata"].get("ownerReferences") or [])}


def _daemonset(objects: list[dict], namespace: str, name: str) -> dict:
    return next(d for d in _by(objects, "DaemonSet") if (d["metadata"]["namespace"], d["metadata"]["name"]) == (namespace, name))


@pytest.mark.parametrize(("name", "styles"), [
    ("gpu-operator-healthy", ["operator"]),
    ("static-plugin", ["static"]),
    ("helm-plugin", ["helm"]),
    ("gke-plugin", ["gke"]),
    ("two-plugins", ["helm", "static"]),
    ("no-gpu-stack", []),
])
def test_scenarios_run_the_device_plugins_they_claim(name, styles):
    objects = stacks.SCENARIOS[name]()
    found = [style for style, (ns, ds_name, selector) in PLUGIN_STYLES.items()
             if any((d["metadata"]["namespace"], d["metadata"]["name"]) == (ns, ds_name)
                    and d["spec"]["selector"]["matchLabels"] == selector for d in _by(objects, "DaemonSet"))]
    assert sorted(found) == styles
    for style in styles:
        ds = _daemonset(objects, *PLUGIN_STYLES[style][:2])
        pods = _pods_of(objects, ds)
        assert sorted(pods) == ["gpu-1", "gpu-2"] and all(b.pod_is_ready(p) for p in pods.values())
        assert (ds["status"]["desiredNumberScheduled"], ds["status"]["numberReady"]) == (2, 2)
    policies = _by(objects, "ClusterPolicy")
    assert [p["status"]["state"] for p in policies] == (["ready"] if "operator" in styles else [])
    capacity = {n["metadata"]["name"]: n["status"]["capacity"].get("nvidia.com/gpu") for n in _by(objects, "Node")}
    assert capacity == {"cpu-1": None, "gpu-1": None if not styles else "8", "gpu-2": None if not styles else "8"}


def test_failure_scenarios_show_their_failure():
    objects = stacks.operator_driver_crashloop()
    policy = _by(objects, "ClusterPolicy")[0]["status"]
    assert policy["state"] == "notReady" and "state-driver" in policy["conditions"][0]["message"]
    driver = _pods_of(objects, _daemonset(objects, OPERATOR_NS, "nvidia-driver-daemonset"))
    assert driver["gpu-2"]["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert b.pod_is_ready(driver["gpu-1"])
    toolkit = _pods_of(objects, _daemonset(objects, OPERATOR_NS, "nvidia-container-toolkit-daemonset"))["gpu-2"]
    assert toolkit["status"]["phase"] == "Pending" and "running" in toolkit["status"]["initContainerStatuses"][0]["state"]
    gpu2 = next(n for n in objects if n["kind"] == "Node" and n["metadata"]["name"] == "gpu-2")
    assert "nvidia.com/gpu" not in gpu2["status"]["capacity"] and "nvidia.com/gpu.product" not in gpu2["metadata"]["labels"]
    assert gpu2["metadata"]["labels"]["nvidia.com/gpu.deploy.driver"] == "true"

    objects = stacks.exporter_missing()
    exporter = _daemonset(objects, OPERATOR_NS, "nvidia-dcgm-exporter")
    assert sorted(_pods_of(objects, exporter)) == ["gpu-1"]
    nodes = {n["metadata"]["name"]: n for n in _by(objects, "Node")}
    assert nodes["gpu-2"]["metadata"]["labels"]["nvidia.com/gpu.deploy.dcgm-exporter"] == "true"
    assert (exporter["status"]["desiredNumberScheduled"], exporter["status"]["numberUnavailable"]) == (2, 1)
    assert any(e["reason"] == "FailedCreate" for e in _by(objects, "Event"))

    nodes = {n["metadata"]["name"]: n for n in _by(stacks.xid_injected(), "Node")}
    assert nodes["gpu-1"]["metadata"]["annotations"]["sim.gputui.io/xid"] == "1:79"


async def test_broken_operands_stay_broken_under_the_kubelets():
    """The simulated kubelets keep the driver crash-looping on gpu-2 and its other operands waiting in Init."""
    async with SimCluster(scenario=stacks.operator_driver_crashloop(), speed=50) as sim:
        store, logs = sim.store, sim.logs

        def pod(ds: str) -> dict:
            return next(p for p in store.objects("pods", OPERATOR_NS)
                        if p["spec"].get("nodeName") == "gpu-2" and p["metadata"]["name"].startswith(ds + "-"))

        driver = pod("nvidia-driver-daemonset")["metadata"]["name"]

        async def driver_log() -> bytes:
            while True:
                lines = logs.read(OPERATOR_NS, driver, "nvidia-driver-ctr", previous=False) or []
                if any(b"Unable to load the kernel module" in line for line in lines):
                    return b"".join(lines)
                await asyncio.sleep(0.05)

        await asyncio.wait_for(driver_log(), 5)
        await asyncio.sleep(0.5)  # 25 simulated seconds: the validation init container has had time to finish, and must not
        toolkit = pod("nvidia-container-toolkit-daemonset")
        assert toolkit["status"]["phase"] == "Pending"
        assert "running" in toolkit["status"]["initContainerStatuses"][0]["state"]
        waiting = logs.read(OPERATOR_NS, toolkit["metadata"]["name"], "driver-validation", previous=False) or []
        assert b"waiting for the driver validations to be ready..." in b"".join(waiting)
        state = pod("nvidia-driver-daemonset")["status"]["containerStatuses"][0]
        assert state["restartCount"] >= 9 and not state["ready"]
        assert b.node_is_ready(store.get("nodes", "", "gpu-1"))


async def test_demo_stops_at_once_right_after_starting():
    """Crash-looping pods replay their last run at start; stopping then must not wait out their back-off."""
    sim = SimCluster(scenario="demo")
    await sim.start()
    await asyncio.sleep(0)
    await asyncio.wait_for(sim.stop(), 5)
