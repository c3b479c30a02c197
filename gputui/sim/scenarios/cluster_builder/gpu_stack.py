"""The NVIDIA stack's installs, as the cluster builder adds them: the GPU Operator and its ClusterPolicy,
the DCGM exporter Service, the device plugin's static manifest, Helm chart and GKE DaemonSet."""
from __future__ import annotations

from typing import Any, Sequence

from ... import builders as b
from .base import DAY, GPU_TOLERATION, ClusterBase

Obj = dict[str, Any]

OPERATOR_NS = "gpu-operator"
OPERATOR_VERSION = "v24.3.0"
PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.15.0-ubi8"
STATIC_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.15.0"
DCGM_EXPORTER_IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5-3.4.1-ubuntu22.04"
DCGM_EXPORTER_PORT = 9400

# The operator's reconcile states, by the component they deploy.
OPERATOR_STATES = {
    "driver": "state-driver", "container-toolkit": "state-container-toolkit", "validator": "state-operator-validation",
    "device-plugin": "state-device-plugin", "dcgm-exporter": "state-dcgm-exporter", "gfd": "gpu-feature-discovery",
    "mig-manager": "state-mig-manager",
}


class GpuStackInstalls(ClusterBase):
    """ClusterBuilder's methods that install the NVIDIA stack."""

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
                          crash_looping: tuple[str, ...] = (), tolerations: tuple[Obj, ...] = ()) -> None:
        """The device plugin's static manifest (kube-system, name=nvidia-device-plugin-ds); `tolerations`: added to its own."""
        ns = "kube-system"
        labels = {"name": "nvidia-device-plugin-ds"}
        example = None
        for node in nodes:
            ctr = b.container("nvidia-device-plugin-ctr", STATIC_PLUGIN_IMAGE,
                              env={"FAIL_ON_INIT_ERROR": "true"}, mounts=[("device-plugin", "/var/lib/kubelet/device-plugins")])
            ctr["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
            example = self.ds_pod("nvidia-device-plugin-daemonset", ns, node, [ctr], labels,
                                  host_volumes={"device-plugin": "/var/lib/kubelet/device-plugins"},
                                  tolerations=[GPU_TOLERATION, {"key": "CriticalAddonsOnly", "operator": "Exists"}, *tolerations],
                                  age_s=30 * DAY, priority="system-node-critical")
            if node in crash_looping:
                self.crash_loop(example, restarts=14)
        self.daemonset("nvidia-device-plugin-daemonset", ns, labels, example, node_selector)

    def add_cluster_policy(self, namespace: str = OPERATOR_NS, *, not_ready: Sequence[str] = (), disabled: tuple[str, ...] = (),
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
