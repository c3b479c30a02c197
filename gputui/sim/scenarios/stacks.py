"""GPU stack installs and their failures, as scenarios (built with cluster_builder, which the demo shares).

Every scenario function returns a fresh list of objects for `SimCluster(scenario=...)`
(or `scenarios.load`): a small cluster (a CPU node and GPU nodes with workloads)
with one install style of the NVIDIA stack or one failure of it.

    gpu_operator_healthy()       GPU Operator, ClusterPolicy ready, every operand running, DCGM exporter
                                 Service; one exporter labels its host `hostname` (newer builds)
    operator_driver_crashloop()  ClusterPolicy notReady: the driver crash-loops on gpu-2 (node fault
                                 driver-broken), the node's other operands wait in Init
    static_plugin()              the static-manifest device plugin (kube-system, name=nvidia-device-plugin-ds)
    helm_plugin()                the Helm chart's device plugin and GFD (release nvdp, namespace nvidia-device-plugin)
    gke_plugin()                 GKE's device plugin (kube-system, k8s-app=nvidia-gpu-device-plugin)
    two_plugins()                the static plugin and the Helm plugin on the same nodes
    exporter_missing()           GPU Operator, but the DCGM exporter has no pod on gpu-2 (where it should run)
    xid_injected()               GPU Operator, healthy, XID 79 on GPU 1 of gpu-1 and 31 on GPU 0 of gpu-2
    no_gpu_stack()               GPU nodes (NFD labels, no GPU resources) and no NVIDIA software at all
    unknown_plugin()             device plugins gputui does not know by name: on gpu-1 a GPU plugin naming
                                 nvidia.com/gpu, crash-looping, beside the static plugin; on gpu-2 one naming no
                                 resource; an RDMA plugin on both
    operator_1x()                an operator 1.x install: operands in gpu-operator-resources (the operator and NFD
                                 in gpu-operator), a ClusterPolicy whose status has only `state`, no validator
                                 DaemonSet but validation pods: Succeeded on gpu-1, one Failed on gpu-2
    openshift_operator()         the operator as OpenShift installs it: namespace nvidia-gpu-operator, the driver
                                 DaemonSet named after the RHCOS version; the MIG manager has paused gpu-2's
                                 device plugin, GFD and DCGM exporter (nvidia.com/gpu.deploy.*=paused-for-mig-change)
    operator_preinstalled_driver()  gpu-2's host has its own driver (nvidia.com/gpu.deploy.driver=pre-installed), and
                                 gpu-1 has nvidia.com/gpu.deploy.dcgm-exporter=maintenance, a value the operator
                                 does not know
    host_plugin()                the static plugin on gpu-1; gpu-2 a Bottlerocket node whose device plugin is a host
                                 service: it advertises nvidia.com/gpu, no plugin DaemonSet is meant to run there

    SCENARIOS                    name -> function, for the above

"Exporter forbidden" is a fault rather than objects: start the cluster with faults
enabled and call `sim.faults.fail("pods/proxy", 403)` (and "services/proxy").
The GPU nodes are gpu-1, gpu-2 (and gpu-3 where named); the CPU node is cpu-1.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from .. import builders as b
from .cluster_builder import DAY, FAULT_ANNOTATION, GPU_TAINT, GPU_TOLERATION, OPERATOR_NS, ClusterBuilder
from ..exporters.dcgm import XID_ANNOTATION
from ..apiserver.proxy import HOSTNAME_LABEL_ANNOTATION

Obj = dict[str, Any]


# -- scenarios ----------------------------------------------------------------

H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-80GB"
CUDA_IMAGE = "nvcr.io/nvidia/pytorch:24.03-py3"


def _nfd_only(labels: dict[str, str]) -> dict[str, str]:
    """The labels NFD alone puts on a GPU node (no GFD, no operator)."""
    return {k: v for k, v in labels.items() if k.startswith("feature.node.kubernetes.io/")}


def _small_cluster(gpu_labels: Callable[[str, str], dict[str, str]], without_resources: tuple[str, ...] = ()) -> ClusterBuilder:
    """cpu-1 and two GPU nodes (gpu-1: 8x H100, gpu-2: 8x A100) advertising nvidia.com/gpu: 8 unless named in
    `without_resources`; gpu_labels(node, product) gives each GPU node's labels."""
    c = ClusterBuilder()
    c.add_node("cpu-1", cpu=32, memory_gib=128, labels={"node-role.kubernetes.io/worker": "", "node-pool": "cpu"})
    for node, product in (("gpu-1", H100), ("gpu-2", A100)):
        extra = None if node in without_resources else {"nvidia.com/gpu": (8, 8)}
        c.add_node(node, cpu=128, memory_gib=1024, labels={"node-role.kubernetes.io/worker": "", "node-pool": "gpu",
                                                           **gpu_labels(node, product)}, extra_resources=extra)
    return c


def _workloads(c: ClusterBuilder, nodes: tuple[str, ...] = ("gpu-1", "gpu-2")) -> None:
    """A training pod (4 GPUs) on the first node and an inference pod (2 GPUs) on the second, where given."""
    shapes = [("llm-train-0", 4, ["torchrun", "train.py"]), ("vllm-serve-0", 2, ["vllm", "serve"])]
    for node, (name, gpus, command) in zip(nodes, shapes, strict=False):
        pod = b.pod(name, "ml", [b.container("main", CUDA_IMAGE, command=command, limits={"nvidia.com/gpu": gpus},
                                             requests={"cpu": "8", "memory": "64Gi"})],
                    labels={"app": name.rsplit("-", 1)[0]}, tolerations=[GPU_TOLERATION], age_s=6 * 3600, now=c.now)
        c.place(pod, node, 6 * 3600)


def _operator_cluster(not_ready: Sequence[str] = (), gpu_labels: Callable[[str, str], dict[str, str]] | None = None,
                      without_resources: tuple[str, ...] = ()) -> ClusterBuilder:
    """The small cluster with the GPU Operator on both GPU nodes, its ClusterPolicy and DCGM exporter Service."""
    c = _small_cluster(gpu_labels or (lambda node, product: b.gfd_labels(product, 8)), without_resources)
    c.add_operator(["gpu-1", "gpu-2"], ["cpu-1", "gpu-1", "gpu-2"], "cpu-1", ["gpu-1", "gpu-2"])
    c.add_cluster_policy(not_ready=list(not_ready))
    c.add_dcgm_service()
    return c


def gpu_operator_healthy() -> list[Obj]:
    c = _operator_cluster()
    c.pod_of("nvidia-dcgm-exporter", "gpu-2")["metadata"].setdefault("annotations", {})[HOSTNAME_LABEL_ANNOTATION] = "hostname"
    _workloads(c)
    return c.objects(["default", "kube-system", OPERATOR_NS, "ml"])


def operator_driver_crashloop() -> list[Obj]:
    """gpu-2's driver cannot load (node fault driver-broken): its driver pod crash-loops, the node's other
    operands wait in their validation init containers, no GPU resource is registered and GFD never labelled it."""
    def labels(node: str, product: str) -> dict[str, str]:
        full = b.gfd_labels(product, 8)
        if node != "gpu-2":
            return full
        return {**_nfd_only(full), "nvidia.com/gpu.present": "true",
                **{k: v for k, v in full.items() if k.startswith("nvidia.com/gpu.deploy.")}}

    c = _operator_cluster(["state-driver", "state-container-toolkit", "state-operator-validation", "state-device-plugin",
                           "state-dcgm-exporter", "gpu-feature-discovery", "state-mig-manager"],
                          gpu_labels=labels, without_resources=("gpu-2",))
    c.nodes["gpu-2"]["metadata"]["annotations"][FAULT_ANNOTATION] = "driver-broken"
    c.crash_loop(c.pod_of("nvidia-driver-daemonset", "gpu-2"), restarts=9)
    for ds in ("nvidia-container-toolkit-daemonset", "nvidia-device-plugin-daemonset", "gpu-feature-discovery",
               "nvidia-dcgm-exporter", "nvidia-mig-manager", "nvidia-operator-validator"):
        c.stuck_in_init(c.pod_of(ds, "gpu-2"))
    c.pods.remove(next(p for p in c.pods if p["metadata"]["labels"].get("app") == "nvidia-cuda-validator"
                       and p["spec"]["nodeName"] == "gpu-2"))
    _workloads(c, ("gpu-1",))
    return c.objects(["default", "kube-system", OPERATOR_NS, "ml"])


def static_plugin() -> list[Obj]:
    c = _small_cluster(lambda node, product: _nfd_only(b.gfd_labels(product, 8)))
    c.add_static_plugin(["gpu-1", "gpu-2"], {"node-pool": "gpu"})  # a nodeSelector keeps it off cpu-1
    _workloads(c)
    return c.objects(["default", "kube-system", "ml"])


def helm_plugin() -> list[Obj]:
    c = _small_cluster(lambda node, product: b.gfd_labels(product, 8, operator=False))
    c.add_helm_plugin(["gpu-1", "gpu-2"])
    _workloads(c)
    return c.objects(["default", "kube-system", "nvidia-device-plugin", "ml"])


def gke_plugin() -> list[Obj]:
    def labels(node: str, product: str) -> dict[str, str]:
        accelerator = "nvidia-h100-80gb" if product == H100 else "nvidia-a100-80gb"
        return {"cloud.google.com/gke-accelerator": accelerator, "cloud.google.com/gke-gpu": "true",
                "cloud.google.com/gke-gpu-driver-version": "default", "cloud.google.com/gke-nodepool": f"{accelerator}-pool"}

    c = _small_cluster(labels)
    for node in ("gpu-1", "gpu-2"):
        c.nodes[node]["spec"]["taints"] = [GPU_TAINT]
    c.add_gke_plugin(["gpu-1", "gpu-2"])
    _workloads(c)
    return c.objects(["default", "kube-system", "ml"])


def two_plugins() -> list[Obj]:
    """The static manifest applied on top of a Helm install: both plugins run on both GPU nodes."""
    c = _small_cluster(lambda node, product: b.gfd_labels(product, 8, operator=False))
    c.add_helm_plugin(["gpu-1", "gpu-2"])
    c.add_static_plugin(["gpu-1", "gpu-2"], {"node-pool": "gpu"})  # a nodeSelector keeps it off cpu-1
    _workloads(c)
    return c.objects(["default", "kube-system", "nvidia-device-plugin", "ml"])


def exporter_missing() -> list[Obj]:
    """The DCGM exporter should run on gpu-2 (nvidia.com/gpu.deploy.dcgm-exporter=true) but has no pod there:
    the DaemonSet controller cannot create it (quota), as its status and a FailedCreate event say."""
    c = _operator_cluster(["state-dcgm-exporter"])
    c.pods.remove(c.pod_of("nvidia-dcgm-exporter", "gpu-2"))
    _workloads(c)
    objects = c.objects(["default", "kube-system", OPERATOR_NS, "ml"])
    ds = next(d for d in c.daemonsets if d["metadata"]["name"] == "nvidia-dcgm-exporter")
    ds["status"].update({"desiredNumberScheduled": 2, "numberUnavailable": 1})
    objects.append(b.event(ds, "FailedCreate",
                           'Error creating: pods "nvidia-dcgm-exporter-" is forbidden: exceeded quota: gpu-operator-quota, '
                           "requested: pods=1, used: pods=18, limited: pods=18",
                           kind="Warning", component="daemonset-controller", count=42,
                           first=b.ago(3 * 3600, c.now), last=b.ago(60, c.now)))
    return objects


def xid_injected() -> list[Obj]:
    """A healthy operator cluster whose exporters report XID 79 on GPU 1 of gpu-1 and XID 31 on GPU 0 of gpu-2."""
    c = _operator_cluster()
    c.nodes["gpu-1"]["metadata"]["annotations"][XID_ANNOTATION] = "1:79"
    c.nodes["gpu-2"]["metadata"]["annotations"][XID_ANNOTATION] = "0:31"
    _workloads(c)
    return c.objects(["default", "kube-system", OPERATOR_NS, "ml"])


def no_gpu_stack() -> list[Obj]:
    """GPU hardware (NFD labels) but no NVIDIA software: no resources, no plugin; a GPU pod stays Pending."""
    c = _small_cluster(lambda node, product: _nfd_only(b.gfd_labels(product, 8)), ("gpu-1", "gpu-2"))
    c.pods.append(b.pod("llm-train-0", "ml", [b.container("main", CUDA_IMAGE, command=["torchrun", "train.py"],
                                                          limits={"nvidia.com/gpu": 4})],
                        labels={"app": "llm-train"}, age_s=600, now=c.now))
    return c.objects(["default", "kube-system", "ml"])


# -- clusters gputui does not know by name -------------------------------------

DEVICE_PLUGIN_DIR = {"device-plugin": "/var/lib/kubelet/device-plugins"}


def _device_plugin(c: ClusterBuilder, name: str, ns: str, nodes: list[str], image: str, node_selector: dict[str, str],
                   args: list[str] | None = None, crash_looping: tuple[str, ...] = ()) -> None:
    """A device plugin DaemonSet of someone else's (labelled app=NAME) on the nodes, mounting the kubelet's device-plugin directory."""
    labels = {"app": name}
    example = None
    for node in nodes:
        ctr = b.container(name, image, args=args, mounts=[("device-plugin", "/var/lib/kubelet/device-plugins")])
        example = c.ds_pod(name, ns, node, [ctr], labels, host_volumes=dict(DEVICE_PLUGIN_DIR), tolerations=[GPU_TOLERATION],
                           age_s=12 * DAY, priority="system-node-critical")
        if node in crash_looping:
            c.crash_loop(example, restarts=14)
    c.daemonset(name, ns, labels, example, node_selector)


def unknown_plugin() -> list[Obj]:
    """gpu-1 runs the static NVIDIA plugin and acme's GPU plugin (both advertise nvidia.com/gpu: several-plugins), acme's
    crash-looping; gpu-2 has only a vendor plugin whose args name no resource (the node's nvidia.com/gpu says which);
    an RDMA plugin runs on both (another resource: no part in GPU verdicts)."""
    c = _small_cluster(lambda node, product: _nfd_only(b.gfd_labels(product, 8)))
    for node in ("gpu-1", "gpu-2"):
        status = c.nodes[node]["status"]
        status["capacity"]["rdma/hca_shared_devices_a"] = status["allocatable"]["rdma/hca_shared_devices_a"] = "63"
    c.nodes["gpu-1"]["metadata"]["labels"]["gpu-plugin"] = "acme"
    c.nodes["gpu-2"]["metadata"]["labels"]["gpu-plugin"] = "vendor"
    c.add_static_plugin(["gpu-1"], {"gpu-plugin": "acme"})
    _device_plugin(c, "acme-gpu-device-plugin", "acme-gpu", ["gpu-1"], "registry.acme.example/gpu-device-plugin:2.4.1",
                   {"gpu-plugin": "acme"}, ["--resource-name=nvidia.com/gpu", "--health-check-interval=30s"], crash_looping=("gpu-1",))
    _device_plugin(c, "vendor-gpu-plugin", "vendor-gpu", ["gpu-2"], "registry.vendor.example/k8s-gpu-plugin:0.9", {"gpu-plugin": "vendor"})
    _device_plugin(c, "rdma-shared-dp-ds", "network-operator", ["gpu-1", "gpu-2"], "ghcr.io/mellanox/k8s-rdma-shared-dev-plugin:v1.5.1",
                   {"node-pool": "gpu"}, ["--resource-prefix=rdma", "--resource-name", "hca_shared_devices_a"])
    _workloads(c)
    return c.objects(["default", "kube-system", "ml"])


OPERATOR_1X_NS = "gpu-operator-resources"


def _validation_pod(c: ClusterBuilder, app: str, ns: str, node: str, policy: Obj, exit_code: int) -> None:
    """A validation pod of the operator's on the node, ended: Succeeded (exit 0) or Failed; owned by the ClusterPolicy."""
    name = f"{app}-{b.suffix(app, node)}"
    pod = b.pod(name, ns, [b.container(app, "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v1.11.1", command=["sh", "-c"],
                                       args=["vectorAdd"], limits={"nvidia.com/gpu": 1})],
                labels={"app": app}, owner=("nvidia.com/v1", "ClusterPolicy", policy["metadata"]["name"]),
                restart_policy="OnFailure", tolerations=[GPU_TOLERATION], age_s=3 * DAY, now=c.now)
    pod["metadata"]["ownerReferences"][0]["uid"] = policy["metadata"]["uid"]
    c.finish(pod, node, 3 * DAY, 9, exit_code, "Completed" if exit_code == 0 else "Error")


def operator_1x() -> list[Obj]:
    """The operator 1.x way: operands in gpu-operator-resources, the operator and NFD in gpu-operator; validation by plain
    pods (no validator DaemonSet): both passed on gpu-1, the device-plugin validation failed on gpu-2; ClusterPolicy
    status {"state": "ready"} only (1.x wrote no namespace and no conditions)."""
    c = _small_cluster(lambda node, product: b.gfd_labels(product, 8))
    c.add_operator(["gpu-1", "gpu-2"], ["cpu-1", "gpu-1", "gpu-2"], "cpu-1", [], ns=OPERATOR_1X_NS)
    c.pods[:] = [p for p in c.pods if (p["metadata"].get("labels") or {}).get("app") != "nvidia-operator-validator"]
    c.daemonsets[:] = [d for d in c.daemonsets if d["metadata"]["name"] != "nvidia-operator-validator"]
    for obj in [*c.pods, *c.daemonsets]:  # the operator and NFD run in the release's namespace
        labels = obj["metadata"].get("labels") or {}
        if labels.get("app") == "gpu-operator" or labels.get("app.kubernetes.io/name") == "node-feature-discovery":
            obj["metadata"]["namespace"] = OPERATOR_NS
    for node in ("gpu-1", "gpu-2"):
        del c.nodes[node]["metadata"]["labels"]["nvidia.com/gpu.deploy.operator-validator"]
    policy = c.add_cluster_policy(OPERATOR_1X_NS)
    policy["status"] = {"state": "ready"}
    for node, plugin_exit in (("gpu-1", 0), ("gpu-2", 1)):
        _validation_pod(c, "nvidia-cuda-validator", OPERATOR_1X_NS, node, policy, 0)
        _validation_pod(c, "nvidia-device-plugin-validator", OPERATOR_1X_NS, node, policy, plugin_exit)
    c.add_dcgm_service(OPERATOR_1X_NS)
    _workloads(c)
    return c.objects(["default", "kube-system", OPERATOR_NS, OPERATOR_1X_NS, "ml"])


OPENSHIFT_NS = "nvidia-gpu-operator"
RHCOS = "414.92.202406251923-0"
OSTREE_LABEL = "feature.node.kubernetes.io/system-os_release.OSTREE_VERSION"
# The MIG manager's GPU clients: deploy label -> DaemonSet.
MIG_PAUSED = {"device-plugin": "nvidia-device-plugin-daemonset", "gpu-feature-discovery": "gpu-feature-discovery",
              "dcgm-exporter": "nvidia-dcgm-exporter"}


def _rename_daemonset(c: ClusterBuilder, old: str, new: str) -> Obj:
    """Name a DaemonSet and its pods anew, with `app=<new name>` (as the operator names its OpenShift driver DaemonSet)."""
    ds = next(d for d in c.daemonsets if d["metadata"]["name"] == old)
    for labels in (ds["metadata"]["labels"], ds["spec"]["selector"]["matchLabels"], ds["spec"]["template"]["metadata"]["labels"]):
        labels["app"] = new
    ds["metadata"]["name"] = new
    for pod in c.pods:
        meta = pod["metadata"]
        for ref in meta.get("ownerReferences") or []:
            if ref.get("kind") == "DaemonSet" and ref.get("name") == old:
                ref["name"] = new
                meta["name"] = new + meta["name"][len(old):]
                meta["generateName"] = f"{new}-"
                meta["labels"]["app"] = new
    return ds


def openshift_operator() -> list[Obj]:
    """The operator on OpenShift (namespace nvidia-gpu-operator, the driver DaemonSet nvidia-driver-daemonset-<RHCOS>
    selecting nodes by their OSTREE version, without app.kubernetes.io/component); gpu-2 is changing its MIG layout: the
    MIG manager set its GPU clients' deploy labels to paused-for-mig-change and their pods are gone."""
    def labels(node: str, product: str) -> dict[str, str]:
        extra = {"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": "pending"} if node == "gpu-2" else {}
        return {**b.gfd_labels(product, 8), OSTREE_LABEL: RHCOS, "feature.node.kubernetes.io/system-os_release.ID": "rhcos", **extra}

    c = _small_cluster(labels)
    c.add_operator(["gpu-1", "gpu-2"], ["cpu-1", "gpu-1", "gpu-2"], "cpu-1", ["gpu-1"], ns=OPENSHIFT_NS)
    driver = _rename_daemonset(c, "nvidia-driver-daemonset", f"nvidia-driver-daemonset-{RHCOS}")
    del driver["metadata"]["labels"]["app.kubernetes.io/component"]
    del driver["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
    driver["spec"]["template"]["spec"]["nodeSelector"][OSTREE_LABEL] = RHCOS
    for pod in c.pods:
        if pod["metadata"]["labels"].get("app") == driver["metadata"]["name"]:
            del pod["metadata"]["labels"]["app.kubernetes.io/component"]
    for operand, daemonset in MIG_PAUSED.items():
        c.nodes["gpu-2"]["metadata"]["labels"][f"nvidia.com/gpu.deploy.{operand}"] = "paused-for-mig-change"
        c.pods.remove(c.pod_of(daemonset, "gpu-2"))
    c.add_cluster_policy(OPENSHIFT_NS)
    c.add_dcgm_service(OPENSHIFT_NS)
    _workloads(c, ("gpu-1",))
    return c.objects(["default", "kube-system", OPENSHIFT_NS, "ml"])


def operator_preinstalled_driver() -> list[Obj]:
    """gpu-2's host has its own NVIDIA driver: the operator labelled it nvidia.com/gpu.deploy.driver=pre-installed and runs
    no driver pod there. gpu-1 carries nvidia.com/gpu.deploy.dcgm-exporter=maintenance (set by hand): no exporter there."""
    c = _operator_cluster()
    c.nodes["gpu-2"]["metadata"]["labels"]["nvidia.com/gpu.deploy.driver"] = "pre-installed"
    c.pods.remove(c.pod_of("nvidia-driver-daemonset", "gpu-2"))
    c.nodes["gpu-1"]["metadata"]["labels"]["nvidia.com/gpu.deploy.dcgm-exporter"] = "maintenance"
    c.pods.remove(c.pod_of("nvidia-dcgm-exporter", "gpu-1"))
    _workloads(c)
    return c.objects(["default", "kube-system", OPERATOR_NS, "ml"])


BOTTLEROCKET = "Bottlerocket OS 1.26.2 (aws-k8s-1.31-nvidia)"


def host_plugin() -> list[Obj]:
    """gpu-1 runs the static device plugin (nodeSelector node-pool=gpu); gpu-2 is a Bottlerocket node of another pool
    (node-pool=gpu-bottlerocket), whose NVIDIA device plugin runs as a host service, not in Kubernetes: the kubelet
    reports its 8 GPUs allocatable and no plugin DaemonSet would place a pod on it."""
    c = _small_cluster(lambda node, product: _nfd_only(b.gfd_labels(product, 8)))
    rocket = c.nodes["gpu-2"]
    rocket["metadata"]["labels"].update({"node-pool": "gpu-bottlerocket", "node.kubernetes.io/instance-type": "p4de.24xlarge"})
    rocket["status"]["nodeInfo"].update({"osImage": BOTTLEROCKET, "kernelVersion": "6.1.112",
                                         "containerRuntimeVersion": "containerd://1.7.22+bottlerocket"})
    c.add_static_plugin(["gpu-1"], {"node-pool": "gpu"})
    _workloads(c)
    return c.objects(["default", "kube-system", "ml"])


SCENARIOS: dict[str, Callable[[], list[Obj]]] = {
    "gpu-operator-healthy": gpu_operator_healthy,
    "operator-driver-crashloop": operator_driver_crashloop,
    "static-plugin": static_plugin,
    "helm-plugin": helm_plugin,
    "gke-plugin": gke_plugin,
    "two-plugins": two_plugins,
    "exporter-missing": exporter_missing,
    "xid-injected": xid_injected,
    "no-gpu-stack": no_gpu_stack,
    "unknown-plugin": unknown_plugin,
    "operator-1x": operator_1x,
    "openshift-operator": openshift_operator,
    "operator-preinstalled-driver": operator_preinstalled_driver,
    "host-plugin": host_plugin,
}
