"""GPU stack installs and their failures, as scenarios; and the cluster builder they share with the demo.

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

    SCENARIOS                    name -> function, for the above

"Exporter forbidden" is a fault rather than objects: start the cluster with faults
enabled and call `sim.faults.fail("pods/proxy", 403)` (and "services/proxy").
The GPU nodes are gpu-1, gpu-2 (and gpu-3 where named); the CPU node is cpu-1.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Callable

from . import builders as b
from .dcgm import XID_ANNOTATION
from .proxy import HOSTNAME_LABEL_ANNOTATION
from .scenarios import namespace

Obj = dict[str, Any]

DAY = 86400
OPERATOR_NS = "gpu-operator"
OPERATOR_VERSION = "v24.3.0"
PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.15.0-ubi8"
STATIC_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.15.0"
DCGM_EXPORTER_IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5-3.4.1-ubuntu22.04"
DCGM_EXPORTER_PORT = 9400
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
FAULT_ANNOTATION = "sim.gputui.io/fault"

# DaemonSet pods tolerate these (added by the DaemonSet controller).
DS_TOLERATIONS = [
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]

# The operator's reconcile states, by the component they deploy.
OPERATOR_STATES = {
    "driver": "state-driver", "container-toolkit": "state-container-toolkit", "validator": "state-operator-validation",
    "device-plugin": "state-device-plugin", "dcgm-exporter": "state-dcgm-exporter", "gfd": "gpu-feature-discovery",
    "mig-manager": "state-mig-manager",
}

# DRA: the NVIDIA driver's name, and the parts of a DRA node's GPUs.
DRA_DRIVER = "gpu.nvidia.com"
DRA_NAMESPACE = "nvidia-dra-driver-gpu"
DRA_IMAGE = "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.0"
MIG_PROFILE_IDS = {"1g.10gb": 19, "1g.20gb": 15, "2g.20gb": 14, "3g.40gb": 9, "4g.40gb": 5, "7g.80gb": 0}


class ClusterBuilder:
    """Collects a cluster's objects; pods are given the status of ones that have been running on their node."""

    def __init__(self, now: datetime | None = None) -> None:
        self.now = now or b.utcnow()
        self.nodes: dict[str, Obj] = {}
        self.node_index: dict[str, int] = {}
        self.slots: dict[str, int] = {}
        self.pods: list[Obj] = []
        self.daemonsets: list[Obj] = []
        self.events: list[Obj] = []
        self.others: list[Obj] = []  # every other kind (CRDs, ClusterPolicies, Services, DRA objects)

    def objects(self, namespaces: list[str]) -> list[Obj]:
        """Every object, DaemonSet status computed from the pods; namespaces as given plus any the others use."""
        for ds in self.daemonsets:
            ds["status"] = b.daemonset_status(ds, self.pods)
        used = [o["metadata"].get("namespace") for o in [*self.pods, *self.daemonsets, *self.others]]
        names = list(dict.fromkeys([*namespaces, *(n for n in used if n)]))
        return [*map(namespace, names), *self.nodes.values(), *self.daemonsets, *self.pods, *self.events, *self.others]

    # -- nodes -----------------------------------------------------------
    # -- nodes -----------------------------------------------------------
    def add_node(self, name: str, **kw: Any) -> Obj:
        index = len(self.nodes)
        obj = b.node(name, index, now=self.now, **kw)
        self.nodes[name] = obj
        self.node_index[name] = index
        return obj

    # -- pods ------------------------------------------------------------
    def place(self, pod: Obj, node: str, age_s: float) -> Obj:
        slot = self.slots.get(node, 0)
        self.slots[node] = slot + 1
        b.set_running(pod, self.nodes[node], self.node_index[node], slot, age_s - 5, self.now)
        self.pods.append(pod)
        return pod

    def finish(self, pod: Obj, node: str, age_s: float, run_s: float, exit_code: int, reason: str) -> Obj:
        """A pod that ran on the node and ended (Succeeded or Failed)."""
        self.place(pod, node, age_s)
        status = pod["status"]
        started, finished = b.ago(age_s - 5, self.now), b.ago(age_s - 5 - run_s, self.now)
        phase = "Succeeded" if exit_code == 0 else "Failed"
        status["phase"] = phase
        for cond in status["conditions"]:
            if cond["type"] in ("Ready", "ContainersReady", "PodReadyToStartContainers"):
                cond["status"] = "False"
                cond["lastTransitionTime"] = finished
                if cond["type"] != "PodReadyToStartContainers":
                    cond["reason"] = "PodCompleted" if phase == "Succeeded" else "PodFailed"
        for cs in status["containerStatuses"]:
            cs["ready"] = False
            cs["started"] = False
            cs["state"] = b.terminated_state(exit_code, reason, started, finished, cs["containerID"])
        return pod

    def ds_pod(self, ds_name: str, ns: str, node: str, containers: list[Obj], labels: dict[str, str], *,
               init: list[Obj] | None = None, host_network: bool = False, host_volumes: dict[str, str] | None = None,
               tolerations: list[Obj] | None = None, age_s: float = 14 * DAY, priority: str | None = None,
               service_account: str = "default") -> Obj:
        name = f"{ds_name}-{b.suffix(ns, ds_name, node)}"
        pod = b.pod(name, ns, containers, labels={**labels, "controller-revision-hash": b.suffix(ds_name, length=10),
                                                   "pod-template-generation": "1"},
                    init_containers=init, owner=("apps/v1", "DaemonSet", ds_name), host_volumes=host_volumes,
                    tolerations=list(tolerations or []) + DS_TOLERATIONS, age_s=age_s, now=self.now,
                    priority_class=priority, service_account=service_account,
                    affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}})
        pod["metadata"]["generateName"] = f"{ds_name}-"
        if host_network:
            pod["spec"]["hostNetwork"] = True
            pod["spec"]["dnsPolicy"] = "ClusterFirstWithHostNet"
        return self.place(pod, node, age_s)

    def daemonset(self, name: str, ns: str, selector: dict[str, str], example: Obj, node_selector: dict[str, str] | None,
                  labels: dict[str, str] | None = None) -> None:
        self.daemonsets.append(b.daemonset(name, ns, selector, example, labels=labels, node_selector=node_selector, now=self.now))


    # -- the NVIDIA stack --------------------------------------------------
    def add_operator(self, gpu_nodes: list[str], nfd_nodes: list[str], control_node: str, validated_nodes: list[str],
                     ns: str = OPERATOR_NS) -> None:
        """The GPU Operator: its operand DaemonSets with a pod on each GPU node, NFD workers on `nfd_nodes`, the
        operator and NFD master on `control_node`, and the Completed CUDA validator pods on `validated_nodes`."""
        managed = {"app.kubernetes.io/managed-by": "gpu-operator", "helm.sh/chart": f"gpu-operator-{OPERATOR_VERSION}"}
        validation = {"run-nvidia-validations": "/run/nvidia/validations"}

        def validation_init(name: str) -> Obj:
            return b.container(name, f"nvcr.io/nvidia/cloud-native/gpu-operator-validator:{OPERATOR_VERSION}",
                               command=["sh", "-c"], args=[f"until [ -f /run/nvidia/validations/{name.split('-')[0]}-ready ]; do echo waiting; sleep 5; done"],
                               mounts=[("run-nvidia-validations", "/run/nvidia/validations")])

        operands = [
            ("nvidia-driver-daemonset", {"app": "nvidia-driver-daemonset", "app.kubernetes.io/component": "nvidia-driver"},
             "driver", lambda: [b.container("nvidia-driver-ctr", "nvcr.io/nvidia/driver:550.54.15-ubuntu22.04",
                                             command=["nvidia-driver"], args=["init"], mounts=[("run-nvidia", "/run/nvidia")])],
             lambda: [b.container("k8s-driver-manager", "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.6.8",
                                  command=["driver-manager"], args=["uninstall_driver"])], True),
            ("nvidia-container-toolkit-daemonset", {"app": "nvidia-container-toolkit-daemonset"}, "container-toolkit",
             lambda: [b.container("nvidia-container-toolkit-ctr", "nvcr.io/nvidia/k8s/container-toolkit:v1.15.0-ubuntu20.04",
                                  command=["/bin/bash", "-c"], args=["nvidia-toolkit /usr/local/nvidia"])],
             lambda: [validation_init("driver-validation")], True),
            ("nvidia-device-plugin-daemonset", {"app": "nvidia-device-plugin-daemonset"}, "device-plugin",
             lambda: [b.container("nvidia-device-plugin", PLUGIN_IMAGE, command=["nvidia-device-plugin"],
                                  env={"PASS_DEVICE_SPECS": "true", "FAIL_ON_INIT_ERROR": "true", "DEVICE_LIST_STRATEGY": "envvar",
                                       "DEVICE_ID_STRATEGY": "uuid", "NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "all"},
                                  mounts=[("device-plugin", "/var/lib/kubelet/device-plugins")]),
                      b.container("config-manager", PLUGIN_IMAGE, command=["config-manager"])],
             lambda: [validation_init("toolkit-validation"), b.container("config-manager-init", PLUGIN_IMAGE, command=["config-manager"])],
             False),
            ("gpu-feature-discovery", {"app": "gpu-feature-discovery", "app.kubernetes.io/part-of": "nvidia-gpu"},
             "gpu-feature-discovery",
             lambda: [b.container("gpu-feature-discovery", PLUGIN_IMAGE, command=["gpu-feature-discovery"],
                                  env={"GFD_SLEEP_INTERVAL": "60s", "GFD_FAIL_ON_INIT_ERROR": "true"})],
             lambda: [validation_init("toolkit-validation")], False),
            ("nvidia-dcgm-exporter", {"app": "nvidia-dcgm-exporter"}, "dcgm-exporter",
             lambda: [b.container("nvidia-dcgm-exporter", DCGM_EXPORTER_IMAGE,
                                  env={"DCGM_EXPORTER_LISTEN": ":9400", "DCGM_EXPORTER_KUBERNETES": "true",
                                       "DCGM_EXPORTER_COLLECTORS": "/etc/dcgm-exporter/dcp-metrics-included.csv"},
                                  ports=[DCGM_EXPORTER_PORT])],
             lambda: [validation_init("toolkit-validation")], False),
            ("nvidia-mig-manager", {"app": "nvidia-mig-manager"}, "mig-manager",
             lambda: [b.container("nvidia-mig-manager", "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.7.0-ubuntu20.04",
                                  command=["nvidia-mig-manager"], env={"CONFIG_FILE": "/mig-parted-config/config.yaml"})],
             lambda: [validation_init("toolkit-validation")], True),
            ("nvidia-operator-validator", {"app": "nvidia-operator-validator", "app.kubernetes.io/part-of": "gpu-operator"},
             "operator-validator",
             lambda: [b.container("nvidia-operator-validator", f"nvcr.io/nvidia/cloud-native/gpu-operator-validator:{OPERATOR_VERSION}",
                                  command=["sh", "-c"], args=["echo all validations are successful; sleep infinity"])],
             lambda: [validation_init(n) for n in ("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation")],
             False),
        ]
        for ds_name, labels, component, containers, inits, host_network in operands:
            example = None
            for node in gpu_nodes:
                example = self.ds_pod(ds_name, ns, node, containers(), {**labels, **managed}, init=inits(),
                                      host_network=host_network, host_volumes=validation, tolerations=[GPU_TOLERATION],
                                      priority="system-node-critical", service_account=ds_name.replace("-daemonset", ""))
            self.daemonset(ds_name, ns, {"app": labels["app"]}, example,
                           {f"nvidia.com/gpu.deploy.{component}": "true"}, labels={**labels, **managed})

        nfd_labels = {"app.kubernetes.io/name": "node-feature-discovery", "app.kubernetes.io/instance": "gpu-operator", "role": "worker"}
        example = None
        for node in nfd_nodes:
            example = self.ds_pod("gpu-operator-node-feature-discovery-worker", ns, node,
                                  [b.container("worker", "registry.k8s.io/nfd/node-feature-discovery:v0.15.4",
                                               command=["nfd-worker"], args=["-server=gpu-operator-node-feature-discovery-master:8080"])],
                                  nfd_labels, tolerations=[GPU_TOLERATION], service_account="node-feature-discovery")
        self.daemonset("gpu-operator-node-feature-discovery-worker", ns, nfd_labels, example, None)

        for name, container_name, labels, image in [
            (f"gpu-operator-7bbf8bb6b7-{b.suffix('op')}", "gpu-operator",
             {"app": "gpu-operator", "app.kubernetes.io/component": "gpu-operator"}, f"nvcr.io/nvidia/gpu-operator:{OPERATOR_VERSION}"),
            (f"gpu-operator-node-feature-discovery-master-6d9f8d497c-{b.suffix('nfdm')}", "master",
             {"app.kubernetes.io/name": "node-feature-discovery", "role": "master"}, "registry.k8s.io/nfd/node-feature-discovery:v0.15.4"),
            (f"gpu-operator-node-feature-discovery-gc-79d6d968bb-{b.suffix('nfdgc')}", "gc",
             {"app.kubernetes.io/name": "node-feature-discovery", "role": "gc"}, "registry.k8s.io/nfd/node-feature-discovery:v0.15.4"),
        ]:
            rs = name.rsplit("-", 1)[0]
            pod = b.pod(name, ns, [b.container(container_name, image, command=[f"nfd-{container_name}" if container_name != "gpu-operator" else "gpu-operator"],
                                               requests={"cpu": "200m", "memory": "100Mi"}, limits={"cpu": "500m", "memory": "350Mi"})],
                        labels={**labels, "pod-template-hash": rs.rsplit("-", 1)[1]}, owner=("apps/v1", "ReplicaSet", rs),
                        age_s=14 * DAY, now=self.now)
            self.place(pod, control_node, 14 * DAY)

        # The operator's validator runs a CUDA sample on each node once; those pods stay Completed.
        for node in validated_nodes:
            # As the validator does: the first MIG resource the node offers, else nvidia.com/gpu.
            offered = [r for r, v in self.nodes[node]["status"]["allocatable"].items() if r.startswith("nvidia.com/mig-") and v != "0"]
            resource = offered[0] if offered else "nvidia.com/gpu"
            pod = b.pod(f"nvidia-cuda-validator-{b.suffix('cuda-validator', node)}", ns,
                        [b.container("nvidia-cuda-validator", f"nvcr.io/nvidia/cloud-native/gpu-operator-validator:{OPERATOR_VERSION}",
                                     command=["sh", "-c"], args=["vectorAdd"], limits={resource: 1})],
                        labels={"app": "nvidia-cuda-validator", **managed}, restart_policy="OnFailure",
                        tolerations=[GPU_TOLERATION], age_s=14 * DAY - 120, now=self.now)
            self.finish(pod, node, 14 * DAY - 120, 8, 0, "Completed")

    def add_static_plugin(self, nodes: list[str], node_selector: dict[str, str] | None = None,
                          crash_looping: tuple[str, ...] = ()) -> None:
        """The device plugin's static manifest (kube-system, name=nvidia-device-plugin-ds)."""
        ns = "kube-system"
        labels = {"name": "nvidia-device-plugin-ds"}
        example = None
        for node in nodes:
            ctr = b.container("nvidia-device-plugin-ctr", STATIC_PLUGIN_IMAGE,
                              env={"FAIL_ON_INIT_ERROR": "true"}, mounts=[("device-plugin", "/var/lib/kubelet/device-plugins")])
            ctr["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
            example = self.ds_pod("nvidia-device-plugin-daemonset", ns, node, [ctr], labels,
                                  host_volumes={"device-plugin": "/var/lib/kubelet/device-plugins"},
                                  tolerations=[GPU_TOLERATION, {"key": "CriticalAddonsOnly", "operator": "Exists"}],
                                  age_s=30 * DAY, priority="system-node-critical")
            if node in crash_looping:
                self.crash_loop(example, restarts=14)
        self.daemonset("nvidia-device-plugin-daemonset", ns, labels, example, node_selector)

    def crash_loop(self, pod: Obj, restarts: int) -> None:
        """Make a running pod's first container crash-loop (the kubelet writes its log lines, see controllers.py)."""
        status = pod["status"]
        status["conditions"] = [
            dict(c, status="False", reason="ContainersNotReady",
                 message=f"containers with unready status: [{pod['spec']['containers'][0]['name']}]")
            if c["type"] in ("Ready", "ContainersReady") else c
            for c in status["conditions"]
        ]
        cs = status["containerStatuses"][0]
        meta = pod["metadata"]
        cs.update({
            "ready": False, "started": False, "restartCount": restarts,
            "containerID": b.container_id(meta["namespace"], meta["name"], cs["name"], restarts),
            "state": {"waiting": {"reason": "CrashLoopBackOff",
                                  "message": f"back-off 5m0s restarting failed container={cs['name']} pod={meta['name']}_{meta['namespace']}({meta['uid']})"}},
            "lastState": b.terminated_state(1, "Error", b.ago(140, self.now), b.ago(139, self.now),
                                            b.container_id(meta["namespace"], meta["name"], cs["name"], restarts), None),
        })
        self.events.append(b.event(pod, "BackOff", f"Back-off restarting failed container {cs['name']} in pod {meta['name']}_{meta['namespace']}({meta['uid']})",
                                   kind="Warning", host=pod["spec"]["nodeName"], field_path=f"spec.containers{{{cs['name']}}}",
                                   count=restarts * 12, first=b.ago(3 * 3600, self.now), last=b.ago(30, self.now)))


    def pod_of(self, daemonset: str, node: str) -> Obj:
        """The DaemonSet's pod on the node."""
        return next(
            p for p in self.pods
            if p["spec"].get("nodeName") == node
            and any(o.get("kind") == "DaemonSet" and o.get("name") == daemonset for o in p["metadata"].get("ownerReferences") or [])
        )

    def stuck_in_init(self, pod: Obj) -> None:
        """Make a running pod wait in its first init container (kubectl: Init:0/N), e.g. for a driver that never comes."""
        status = pod["status"]
        inits = [c["name"] for c in pod["spec"].get("initContainers") or []]
        apps = [c["name"] for c in pod["spec"]["containers"]]
        since = status["startTime"]
        status["phase"] = "Pending"
        status["conditions"] = [
            b.pod_condition("PodReadyToStartContainers", "True", since),
            b.pod_condition("Initialized", "False", since, "ContainersNotInitialized", f"containers with incomplete status: [{' '.join(inits)}]"),
            b.pod_condition("Ready", "False", since, "ContainersNotReady", f"containers with unready status: [{' '.join(apps)}]"),
            b.pod_condition("ContainersReady", "False", since, "ContainersNotReady", f"containers with unready status: [{' '.join(apps)}]"),
            b.pod_condition("PodScheduled", "True", since),
        ]
        for i, cs in enumerate(status["initContainerStatuses"]):
            cs.update({"ready": False, "started": i == 0, "restartCount": 0, "lastState": {}})
            if i == 0:
                cs["state"] = {"running": {"startedAt": since}}
            else:
                cs["state"] = {"waiting": {"reason": "PodInitializing"}}
                cs.pop("containerID", None)
        for cs in status["containerStatuses"]:
            cs.update({"ready": False, "started": False, "restartCount": 0, "lastState": {},
                       "state": {"waiting": {"reason": "PodInitializing"}}})
            cs.pop("containerID", None)

    def add_cluster_policy(self, namespace: str = OPERATOR_NS, *, not_ready: list[str] = (), disabled: tuple[str, ...] = (),
                           name: str = "cluster-policy") -> Obj:
        """The ClusterPolicy CRD and a ClusterPolicy: ready, or notReady naming the operand states not ready
        (OPERATOR_STATES values); `disabled` components have `enabled: false` in the spec."""
        self.others.append(b.custom_resource_definition(
            "nvidia.com", "v1", "clusterpolicies", "ClusterPolicy", namespaced=False,
            printer_columns=[("Status", "string", ".status.state"), ("Age", "string", ".metadata.creationTimestamp")],
            labels={"app.kubernetes.io/component": "gpu-operator", "helm.sh/chart": f"gpu-operator-{OPERATOR_VERSION}"},
            age_s=30 * DAY, now=self.now))
        switches = {"driver": "driver", "container-toolkit": "toolkit", "device-plugin": "devicePlugin", "gfd": "gfd",
                    "dcgm-exporter": "dcgmExporter", "mig-manager": "migManager", "validator": "validator"}
        spec: Obj = {
            "operator": {"defaultRuntime": "containerd", "runtimeClass": "nvidia", "initContainer": {}},
            "daemonsets": {"priorityClassName": "system-node-critical", "tolerations": [GPU_TOLERATION],
                           "updateStrategy": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "1"}},
            "driver": {"enabled": True, "repository": "nvcr.io/nvidia", "image": "driver", "version": "550.54.15",
                       "manager": {"image": "k8s-driver-manager", "version": "v0.6.8"}},
            "toolkit": {"enabled": True, "image": "container-toolkit", "version": "v1.15.0-ubuntu20.04"},
            "devicePlugin": {"enabled": True, "image": "k8s-device-plugin", "version": "v0.15.0-ubi8"},
            "dcgm": {"enabled": False},
            "dcgmExporter": {"enabled": True, "image": "dcgm-exporter", "version": "3.3.5-3.4.1-ubuntu22.04",
                             "serviceMonitor": {"enabled": False}},
            "gfd": {"enabled": True, "image": "k8s-device-plugin", "version": "v0.15.0-ubi8"},
            "migManager": {"enabled": True, "image": "k8s-mig-manager", "version": "v0.7.0-ubuntu20.04"},
            "mig": {"strategy": "single"},
            "nodeStatusExporter": {"enabled": False},
            "validator": {"image": "gpu-operator-validator", "version": OPERATOR_VERSION,
                          "plugin": {"env": [{"name": "WITH_WORKLOAD", "value": "false"}]}},
        }
        for component in disabled:
            spec[switches[component]]["enabled"] = False
        since = b.ago(2 * 3600 if not_ready else 14 * DAY, self.now)
        if not_ready:
            message = f"ClusterPolicy is not ready; states not ready: [{' '.join(not_ready)}]"
            conditions = [
                {"type": "Ready", "status": "False", "reason": "OperandNotReady", "message": message, "lastTransitionTime": since},
                {"type": "Error", "status": "True", "reason": "OperandNotReady", "message": message, "lastTransitionTime": since},
            ]
        else:
            conditions = [
                {"type": "Ready", "status": "True", "reason": "Reconciled",
                 "message": "ClusterPolicy is ready as all resources have been successfully reconciled", "lastTransitionTime": since},
                {"type": "Error", "status": "False", "reason": "Ready", "message": "", "lastTransitionTime": since},
            ]
        policy = {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": name, "uid": b.stable_uid("ClusterPolicy", name), "creationTimestamp": b.ago(30 * DAY, self.now),
                         "generation": 1, "labels": {"app.kubernetes.io/component": "gpu-operator", "app.kubernetes.io/managed-by": "Helm"}},
            "spec": spec,
            "status": {"state": "notReady" if not_ready else "ready", "namespace": namespace, "conditions": conditions},
        }
        self.others.append(policy)
        return policy

    def add_dcgm_service(self, namespace: str = OPERATOR_NS) -> Obj:
        """The operator's Service in front of its DCGM exporters."""
        svc = b.service("nvidia-dcgm-exporter", namespace, {"app": "nvidia-dcgm-exporter"},
                        [("gpu-metrics", DCGM_EXPORTER_PORT, DCGM_EXPORTER_PORT)],
                        labels={"app": "nvidia-dcgm-exporter"}, annotations={"prometheus.io/scrape": "true"},
                        age_s=14 * DAY, now=self.now)
        self.others.append(svc)
        return svc

    def add_helm_plugin(self, nodes: list[str], release: str = "nvdp", ns: str = "nvidia-device-plugin") -> None:
        """The device plugin's Helm chart: the plugin and its GFD DaemonSets on GPU nodes (node affinity, as the chart does)."""
        chart = {"app.kubernetes.io/name": "nvidia-device-plugin", "app.kubernetes.io/instance": release}
        meta_labels = {**chart, "app.kubernetes.io/version": "0.15.0", "app.kubernetes.io/managed-by": "Helm",
                       "helm.sh/chart": "nvidia-device-plugin-0.15.0"}
        affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "feature.node.kubernetes.io/pci-10de.present", "operator": "In", "values": ["true"]}]},
            {"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]},
        ]}}}
        for ds_name, container in [
            (f"{release}-nvidia-device-plugin",
             b.container("nvidia-device-plugin-ctr", STATIC_PLUGIN_IMAGE, command=["nvidia-device-plugin"],
                         env={"MPS_ROOT": "/run/nvidia/mps", "NVIDIA_MIG_MONITOR_DEVICES": "all"},
                         mounts=[("device-plugin", "/var/lib/kubelet/device-plugins")])),
            (f"{release}-nvidia-device-plugin-gpu-feature-discovery",
             b.container("gpu-feature-discovery-ctr", STATIC_PLUGIN_IMAGE, command=["gpu-feature-discovery"],
                         env={"GFD_SLEEP_INTERVAL": "60s", "GFD_FAIL_ON_INIT_ERROR": "true"})),
        ]:
            example = None
            for node in nodes:
                example = self.ds_pod(ds_name, ns, node, [dict(container)], dict(chart),
                                      tolerations=[GPU_TOLERATION, {"key": "CriticalAddonsOnly", "operator": "Exists"}],
                                      age_s=20 * DAY, priority="system-node-critical")
            self.daemonset(ds_name, ns, chart, example, None, labels=meta_labels)
            self.daemonsets[-1]["spec"]["template"]["spec"]["affinity"] = affinity

    def add_gke_plugin(self, nodes: list[str]) -> None:
        """GKE's device plugin DaemonSet (kube-system, k8s-app=nvidia-gpu-device-plugin) on accelerator nodes."""
        labels = {"k8s-app": "nvidia-gpu-device-plugin"}
        example = None
        for node in nodes:
            ctr = b.container("nvidia-gpu-device-plugin", "gke.gcr.io/nvidia-gpu-device-plugin:v1.0.25-gke.56",
                              command=["/usr/bin/nvidia-gpu-device-plugin", "-logtostderr", "--enable-container-gpu-metrics",
                                       "--enable-health-monitoring"],
                              requests={"cpu": "50m", "memory": "50Mi"}, limits={"memory": "50Mi"},
                              mounts=[("device-plugin", "/device-plugin"), ("nvidia", "/usr/local/nvidia")])
            example = self.ds_pod("nvidia-gpu-device-plugin", "kube-system", node, [ctr], labels,
                                  host_volumes={"device-plugin": "/var/lib/kubelet/device-plugins", "nvidia": "/home/kubernetes/bin/nvidia"},
                                  tolerations=[{"operator": "Exists"}], age_s=20 * DAY, priority="system-node-critical")
        self.daemonset("nvidia-gpu-device-plugin", "kube-system", labels, example, None,
                       labels={**labels, "addonmanager.kubernetes.io/mode": "Reconcile"})
        self.daemonsets[-1]["spec"]["template"]["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "cloud.google.com/gke-accelerator", "operator": "Exists"}]}]}}}

    # -- dynamic resource allocation -------------------------------------
    def add_dra_driver(self, nodes: list[str]) -> None:
        """The NVIDIA DRA driver: its kubelet plugin on the nodes (label nvidia.com/dra-kubelet-plugin=true),
        and the DeviceClasses its chart installs (gpu.nvidia.com maps to the extended resource nvidia.com/gpu)."""
        labels = {"app.kubernetes.io/name": "nvidia-dra-driver-gpu", "app.kubernetes.io/instance": "nvidia-dra-driver-gpu",
                  "nvidia-dra-driver-gpu-component": "kubelet-plugin"}
        example = None
        for node in nodes:
            example = self.ds_pod("nvidia-dra-driver-gpu-kubelet-plugin", DRA_NAMESPACE, node,
                                  [b.container("gpus", DRA_IMAGE, command=["gpu-kubelet-plugin"], env={"LOG_VERBOSITY": "2"},
                                               mounts=[("plugins-registry", "/var/lib/kubelet/plugins_registry"),
                                                       ("plugins", "/var/lib/kubelet/plugins")])],
                                  labels, host_volumes={"plugins-registry": "/var/lib/kubelet/plugins_registry",
                                                        "plugins": "/var/lib/kubelet/plugins"},
                                  tolerations=[GPU_TOLERATION], age_s=10 * DAY, priority="system-node-critical",
                                  service_account="nvidia-dra-driver-gpu-service-account-kubeletplugin")
        self.daemonset("nvidia-dra-driver-gpu-kubelet-plugin", DRA_NAMESPACE, labels, example,
                       {"nvidia.com/dra-kubelet-plugin": "true"})
        for name, device_type, extended in [("gpu.nvidia.com", "gpu", "nvidia.com/gpu"), ("mig.nvidia.com", "mig", None)]:
            spec: Obj = {"selectors": [{"cel": {"expression":
                         f"device.driver == '{DRA_DRIVER}' && device.attributes['{DRA_DRIVER}'].type == '{device_type}'"}}]}
            if extended:
                spec["extendedResourceName"] = extended
            self.others.append({
                "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": name, "uid": b.stable_uid("DeviceClass", name), "creationTimestamp": b.ago(10 * DAY, self.now),
                             "generation": 1, "labels": {"app.kubernetes.io/managed-by": "Helm"}},
                "spec": spec,
            })

    def add_resource_slice(self, node: str, product: str, memory_mib: int, gpus: int,
                           mig: dict[int, dict[str, int]] | None = None, driver_version: str = "580.95.5") -> Obj:
        """The DRA driver's ResourceSlice for a node: `gpus` full GPUs, except those in `mig`
        (GPU index -> {profile: instances}), published as their MIG devices instead."""
        devices: list[Obj] = []
        common = {"productName": {"string": product}, "brand": {"string": "Nvidia"}, "architecture": {"string": "Hopper"},
                  "driverVersion": {"version": driver_version}, "cudaDriverVersion": {"version": "13.0.0"},
                  "cudaComputeCapability": {"version": "9.0.0"}}
        for index in range(gpus):
            uuid = b.gpu_uuid(node, index)
            if mig and index in mig:
                start = 0
                for profile, count in mig[index].items():
                    for _ in range(count):
                        devices.append({
                            "name": f"gpu-{index}-mig-{profile.replace('.', '')}-{MIG_PROFILE_IDS[profile]}-{start}",
                            "attributes": {"type": {"string": "mig"}, "uuid": {"string": b.mig_uuid(node, index, start)},
                                           "parentUUID": {"string": uuid}, "parentIndex": {"int": index},
                                           "profile": {"string": profile}, **common},
                            "capacity": {"memory": {"value": f"{b.MIG_PROFILES[profile]['memory']}Mi" if profile in b.MIG_PROFILES
                                                    else f"{int(profile.split('.')[1].removesuffix('gb')) * 1024}Mi"}},
                        })
                        start += int(profile.split("g", 1)[0])
                continue
            devices.append({
                "name": f"gpu-{index}",
                "attributes": {"type": {"string": "gpu"}, "uuid": {"string": uuid}, "index": {"int": index}, "minor": {"int": index},
                               "pcieBusID": {"string": f"0000:{0x18 + 0x10 * index:02x}:00.0"}, **common},
                "capacity": {"memory": {"value": f"{memory_mib}Mi"}},
            })
        name = f"{node}-{DRA_DRIVER}-{b.suffix('slice', node)}"
        node_obj = self.nodes[node]
        slice_obj = {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name, "generateName": f"{node}-{DRA_DRIVER}-", "uid": b.stable_uid("ResourceSlice", name),
                         "creationTimestamp": b.ago(10 * DAY, self.now), "generation": 1,
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_obj["metadata"]["uid"],
                                              "controller": True}]},
            "spec": {"driver": DRA_DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices},
        }
        self.others.append(slice_obj)
        return slice_obj

    def add_claimed_pod(self, pod: Obj, node: str, request: str, device_class: str, devices: list[str],
                        selector: str | None = None, age_s: float = 3600) -> Obj:
        """Run the pod on the node holding `devices` through a ResourceClaim made from a claim template,
        as the resource claim controller and scheduler leave it: allocated and reserved for the pod."""
        meta = pod["metadata"]
        template = f"{meta['name'].rsplit('-', 1)[0]}-{request}"
        claim_name = f"{meta['name']}-{request}-{b.suffix('claim', meta['namespace'], meta['name'])}"
        pod["spec"]["resourceClaims"] = [{"name": request, "resourceClaimTemplateName": template}]
        for container in pod["spec"]["containers"]:
            container["resources"]["claims"] = [{"name": request}]
        self.place(pod, node, age_s)
        pod["status"]["resourceClaimStatuses"] = [{"name": request, "resourceClaimName": claim_name}]
        exactly: Obj = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": len(devices)}
        if selector:
            exactly["selectors"] = [{"cel": {"expression": selector}}]
        self.others.append({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": claim_name, "generateName": f"{meta['name']}-{request}-", "namespace": meta["namespace"],
                         "uid": b.stable_uid("ResourceClaim", meta["namespace"], claim_name),
                         "creationTimestamp": meta["creationTimestamp"],
                         "annotations": {"resource.kubernetes.io/pod-claim-name": request},
                         "finalizers": ["resource.kubernetes.io/delete-protection"],
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"],
                                              "controller": True, "blockOwnerDeletion": True}]},
            "spec": {"devices": {"requests": [{"name": request, "exactly": exactly}]}},
            "status": {
                "allocation": {
                    "devices": {"results": [{"request": request, "driver": DRA_DRIVER, "pool": node, "device": d} for d in devices]},
                    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]},
                },
                "reservedFor": [{"resource": "pods", "name": meta["name"], "uid": meta["uid"]}],
            },
        })
        return pod


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
    for node, (name, gpus, command) in zip(nodes, shapes):
        pod = b.pod(name, "ml", [b.container("main", CUDA_IMAGE, command=command, limits={"nvidia.com/gpu": gpus},
                                             requests={"cpu": "8", "memory": "64Gi"})],
                    labels={"app": name.rsplit("-", 1)[0]}, tolerations=[GPU_TOLERATION], age_s=6 * 3600, now=c.now)
        c.place(pod, node, 6 * 3600)


def _operator_cluster(not_ready: list[str] = (), gpu_labels: Callable[[str, str], dict[str, str]] | None = None,
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
    c.add_static_plugin(["gpu-1", "gpu-2"])
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
    c.add_static_plugin(["gpu-1", "gpu-2"])
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
}
