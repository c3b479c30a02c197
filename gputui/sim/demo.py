"""The built-in demo cluster (`gputui sim --scenario demo`): one realistic GPU cluster that shows every case.

Nodes (fixed names, deterministic objects; timestamps are relative to start):
  cp-1          control plane, tainted node-role.kubernetes.io/control-plane:NoSchedule, no GPU
  cpu-1         CPU-only worker (the operator and core add-ons run here)
  h100-1        8x H100 80GB HBM3, GPU Operator; training and a notebook whose init container asks for GPUs
  h100-2        8x H100, tainted nvidia.com/gpu=present:NoSchedule; inference, a two-container GPU pod
  h100-mig-1    8x H100, MIG mixed (all-balanced: 16x 1g.10gb, 8x 2g.20gb, 8x 3g.40gb, stale nvidia.com/gpu: 0)
  h100-3        8x H100, NotReady (kubelet stopped posting status); its pods keep their stale state
  h100-4        8x H100, cordoned, still running a job
  t4-shared-1   4x Tesla T4, time-sliced x4, renamed: advertises nvidia.com/gpu.shared: 16 (standalone plugin)
  a100-1        8x A100 80GB, one GPU unhealthy (Xid 79): capacity 8, allocatable 7 (standalone plugin)
  a100-2        8x A100 labelled by GFD but no GPU resource registered: the driver is broken
                (sim.gputui.io/fault: driver-broken), the standalone plugin pod crash-loops

GPU Operator operands run in namespace gpu-operator on the H100 nodes; the standalone
(static manifest) device plugin runs in kube-system on the node-pool=legacy-gpu nodes.
Finished pods (Succeeded, Failed) still declare GPUs; three pods cannot be scheduled.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from . import builders as b
from .scenarios import namespace

Obj = dict[str, Any]

DAY = 86400
OPERATOR_NS = "gpu-operator"
OPERATOR_VERSION = "v24.3.0"
PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.15.0-ubi8"
STATIC_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.15.0"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
MIG_LAYOUT = {"1g.10gb": 16, "2g.20gb": 8, "3g.40gb": 8}

# DaemonSet pods tolerate these (added by the DaemonSet controller).
DS_TOLERATIONS = [
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]


class _Demo:
    def __init__(self) -> None:
        self.now = b.utcnow()
        self.nodes: dict[str, Obj] = {}
        self.node_index: dict[str, int] = {}
        self.slots: dict[str, int] = {}
        self.pods: list[Obj] = []
        self.daemonsets: list[Obj] = []
        self.events: list[Obj] = []

    # -- nodes -----------------------------------------------------------
    def add_node(self, name: str, **kw: Any) -> Obj:
        index = len(self.nodes)
        obj = b.node(name, index, now=self.now, **kw)
        self.nodes[name] = obj
        self.node_index[name] = index
        return obj

    def build_nodes(self) -> None:
        self.add_node("cp-1", cpu=16, memory_gib=64,
                      labels={"node-role.kubernetes.io/control-plane": "", "node.kubernetes.io/exclude-from-external-load-balancers": ""},
                      taints=[{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}])
        self.add_node("cpu-1", cpu=64, memory_gib=256, labels={"node-role.kubernetes.io/worker": "", "node-pool": "cpu"})
        h100 = b.gfd_labels("NVIDIA-H100-80GB-HBM3", 8)
        worker = {"node-role.kubernetes.io/worker": "", "node-pool": "h100"}
        self.add_node("h100-1", cpu=192, memory_gib=2048, labels={**worker, **h100},
                      extra_resources={"nvidia.com/gpu": (8, 8)})
        self.add_node("h100-2", cpu=192, memory_gib=2048, labels={**worker, **h100},
                      extra_resources={"nvidia.com/gpu": (8, 8)}, taints=[GPU_TAINT])
        mig = b.gfd_labels("NVIDIA-H100-80GB-HBM3", 8, mig_strategy="mixed", mig_config="all-balanced")
        mig.update(b.mig_labels("NVIDIA-H100-80GB-HBM3", {p: n // 8 for p, n in MIG_LAYOUT.items()}))
        self.add_node("h100-mig-1", cpu=192, memory_gib=2048, labels={**worker, **mig},
                      extra_resources={"nvidia.com/gpu": (0, 0), **{f"nvidia.com/mig-{p}": (n, n) for p, n in MIG_LAYOUT.items()}})
        self.add_node("h100-3", cpu=192, memory_gib=2048, labels={**worker, **h100}, ready="Unknown",
                      extra_resources={"nvidia.com/gpu": (8, 8)},
                      taints=[{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": b.ago(3500, self.now)},
                              {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": b.ago(3490, self.now)}])
        self.add_node("h100-4", cpu=192, memory_gib=2048, labels={**worker, **h100}, unschedulable=True,
                      extra_resources={"nvidia.com/gpu": (8, 8)})
        legacy = {"node-role.kubernetes.io/worker": "", "node-pool": "legacy-gpu", "nvidia.com/gpu.deploy.operands": "false"}
        t4 = b.gfd_labels("Tesla-T4", 4, driver="535.161.08", cuda="12.2", operator=False, replicas=4,
                          sharing="time-slicing", renamed_shared=True)
        t4["nvidia.com/gpu.shared.replicas"] = "4"
        self.add_node("t4-shared-1", cpu=48, memory_gib=192, labels={**legacy, **t4},
                      extra_resources={"nvidia.com/gpu.shared": (16, 16)})
        a100 = b.gfd_labels("NVIDIA-A100-SXM4-80GB", 8, driver="535.161.08", cuda="12.2", operator=False)
        self.add_node("a100-1", cpu=256, memory_gib=2048, labels={**legacy, **a100},
                      extra_resources={"nvidia.com/gpu": (8, 7)})
        self.add_node("a100-2", cpu=256, memory_gib=2048, labels={**legacy, **a100},
                      annotations={"sim.gputui.io/fault": "driver-broken"})

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

    def build_operator(self) -> None:
        ns = OPERATOR_NS
        managed = {"app.kubernetes.io/managed-by": "gpu-operator", "helm.sh/chart": f"gpu-operator-{OPERATOR_VERSION}"}
        gpu_nodes = ["h100-1", "h100-2", "h100-mig-1", "h100-3", "h100-4"]
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
             lambda: [b.container("nvidia-dcgm-exporter", "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5-3.4.1-ubuntu22.04",
                                  env={"DCGM_EXPORTER_LISTEN": ":9400", "DCGM_EXPORTER_KUBERNETES": "true",
                                       "DCGM_EXPORTER_COLLECTORS": "/etc/dcgm-exporter/dcp-metrics-included.csv"},
                                  ports=[9400])],
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
        for node in [n for n in self.nodes if n != "cp-1"]:
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
            self.place(pod, "cpu-1", 14 * DAY)

        # The operator's validator runs a CUDA sample on each node once; those pods stay Completed.
        for node in ["h100-1", "h100-2", "h100-mig-1"]:
            resource = "nvidia.com/mig-1g.10gb" if node == "h100-mig-1" else "nvidia.com/gpu"
            pod = b.pod(f"nvidia-cuda-validator-{b.suffix('cuda-validator', node)}", ns,
                        [b.container("nvidia-cuda-validator", f"nvcr.io/nvidia/cloud-native/gpu-operator-validator:{OPERATOR_VERSION}",
                                     command=["sh", "-c"], args=["vectorAdd"], limits={resource: 1})],
                        labels={"app": "nvidia-cuda-validator", **managed}, restart_policy="OnFailure",
                        tolerations=[GPU_TOLERATION], age_s=14 * DAY - 120, now=self.now)
            self.finish(pod, node, 14 * DAY - 120, 8, 0, "Completed")

    def build_static_plugin(self) -> None:
        ns = "kube-system"
        labels = {"name": "nvidia-device-plugin-ds"}
        example = None
        for node in ["t4-shared-1", "a100-1", "a100-2"]:
            ctr = b.container("nvidia-device-plugin-ctr", STATIC_PLUGIN_IMAGE,
                              env={"FAIL_ON_INIT_ERROR": "true"}, mounts=[("device-plugin", "/var/lib/kubelet/device-plugins")])
            ctr["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
            example = self.ds_pod("nvidia-device-plugin-daemonset", ns, node, [ctr], labels,
                                  host_volumes={"device-plugin": "/var/lib/kubelet/device-plugins"},
                                  tolerations=[GPU_TOLERATION, {"key": "CriticalAddonsOnly", "operator": "Exists"}],
                                  age_s=30 * DAY, priority="system-node-critical")
            if node == "a100-2":
                self.crash_loop(example, restarts=14)
        self.daemonset("nvidia-device-plugin-daemonset", ns, labels, example, {"node-pool": "legacy-gpu"})

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

    def build_core(self) -> None:
        ns = "kube-system"
        example = None
        for node in self.nodes:
            example = self.ds_pod("kube-proxy", ns, node,
                                  [b.container("kube-proxy", f"registry.k8s.io/kube-proxy:{b.KUBELET_VERSION}",
                                               command=["/usr/local/bin/kube-proxy", "--config=/var/lib/kube-proxy/config.conf",
                                                        "--hostname-override=$(NODE_NAME)"])],
                                  {"k8s-app": "kube-proxy"}, host_network=True,
                                  tolerations=[{"operator": "Exists"}], age_s=30 * DAY, priority="system-node-critical",
                                  service_account="kube-proxy")
        self.daemonset("kube-proxy", ns, {"k8s-app": "kube-proxy"}, example, {"kubernetes.io/os": "linux"})
        for i in range(2):
            name = f"coredns-7db6d8ff4d-{b.suffix('coredns', i)}"
            pod = b.pod(name, ns, [b.container("coredns", "registry.k8s.io/coredns/coredns:v1.11.1", args=["-conf", "/etc/coredns/Corefile"],
                                               requests={"cpu": "100m", "memory": "70Mi"}, limits={"memory": "170Mi"}, ports=[53, 9153])],
                        labels={"k8s-app": "kube-dns", "pod-template-hash": "7db6d8ff4d"},
                        owner=("apps/v1", "ReplicaSet", "coredns-7db6d8ff4d"), age_s=30 * DAY, now=self.now,
                        priority_class="system-cluster-critical", service_account="coredns")
            self.place(pod, "cpu-1", 30 * DAY)
        for component, image in [("etcd", "registry.k8s.io/etcd:3.5.15-0"),
                                 ("kube-apiserver", f"registry.k8s.io/kube-apiserver:{b.KUBELET_VERSION}"),
                                 ("kube-controller-manager", f"registry.k8s.io/kube-controller-manager:{b.KUBELET_VERSION}"),
                                 ("kube-scheduler", f"registry.k8s.io/kube-scheduler:{b.KUBELET_VERSION}")]:
            pod = b.pod(f"{component}-cp-1", ns, [b.container(component, image, command=[component], requests={"cpu": "100m"})],
                        labels={"component": component, "tier": "control-plane"}, owner=("v1", "Node", "cp-1"),
                        tolerations=[{"operator": "Exists", "effect": "NoExecute"}], age_s=30 * DAY, now=self.now,
                        priority_class="system-node-critical")
            pod["metadata"].pop("generateName", None)
            pod["spec"]["hostNetwork"] = True
            self.place(pod, "cp-1", 30 * DAY)

    def build_workloads(self) -> None:
        now = self.now
        cuda = "nvcr.io/nvidia/pytorch:24.03-py3"
        # h100-1: a training worker (several containers) and a notebook whose init container asks for 2 GPUs.
        for i, node in enumerate(["h100-1"]):
            pod = b.pod(f"llm-pretrain-worker-{i}", "ml-training", [
                b.container("trainer", cuda, command=["torchrun"], args=["--nproc_per_node=4", "train.py", "--config=configs/7b.yaml"],
                            limits={"nvidia.com/gpu": 4, "memory": "512Gi"}, requests={"cpu": "32"},
                            env={"NCCL_DEBUG": "WARN", "MASTER_ADDR": "llm-pretrain-master-0"}),
                b.container("log-shipper", "docker.io/fluent/fluent-bit:3.0.4", requests={"cpu": "100m", "memory": "64Mi"}),
            ], labels={"training.kubeflow.org/job-name": "llm-pretrain", "training.kubeflow.org/replica-type": "worker"},
                owner=("kubeflow.org/v1", "PyTorchJob", "llm-pretrain"), age_s=5 * 3600, now=now)
            pod["metadata"].pop("generateName", None)
            self.place(pod, node, 5 * 3600)
        notebook = b.pod("notebook-alice-0", "research", [
            b.container("jupyter", "quay.io/jupyter/pytorch-notebook:cuda12-2024-05-13", limits={"nvidia.com/gpu": 1},
                        requests={"cpu": "4", "memory": "32Gi"}, ports=[8888]),
        ], init_containers=[b.container("gpu-warmup", cuda, command=["python", "-c"], args=["import torch; torch.cuda.init()"],
                                        limits={"nvidia.com/gpu": 2})],
            labels={"app": "notebook", "notebook-name": "alice"}, owner=("apps/v1", "StatefulSet", "notebook-alice"),
            age_s=2 * 3600, now=now)
        notebook["metadata"].pop("generateName", None)
        self.place(notebook, "h100-1", 2 * 3600)
        self.finish(b.pod(f"eval-sweep-7-{b.suffix('eval7')}", "research", [
            b.container("eval", cuda, command=["python", "eval.py"], limits={"nvidia.com/gpu": 2})],
            labels={"job-name": "eval-sweep-7"}, owner=("batch/v1", "Job", "eval-sweep-7"), restart_policy="Never",
            age_s=9 * 3600, now=now), "h100-1", 9 * 3600, 3 * 3600, 0, "Completed")

        # h100-2 (tainted for GPU workloads): serving, and a pod with two GPU containers.
        serve = b.pod(f"llama-70b-serving-5d8f7c9b6d-{b.suffix('llama')}", "inference", [
            b.container("vllm", "docker.io/vllm/vllm-openai:v0.4.2", args=["--model", "meta-llama/Llama-2-70b-chat-hf", "--tensor-parallel-size", "4"],
                        limits={"nvidia.com/gpu": 4}, requests={"cpu": "16", "memory": "256Gi"}, ports=[8000])],
            labels={"app": "llama-70b-serving", "pod-template-hash": "5d8f7c9b6d"},
            owner=("apps/v1", "ReplicaSet", "llama-70b-serving-5d8f7c9b6d"), tolerations=[GPU_TOLERATION], age_s=DAY, now=now)
        self.place(serve, "h100-2", DAY)
        transcode = b.pod(f"video-transcode-{b.suffix('transcode')}", "inference", [
            b.container("decoder", "nvcr.io/nvidia/deepstream:7.0-triton-multiarch", limits={"nvidia.com/gpu": 1}),
            b.container("encoder", "nvcr.io/nvidia/deepstream:7.0-triton-multiarch", limits={"nvidia.com/gpu": 1}),
        ], labels={"app": "video-transcode"}, tolerations=[GPU_TOLERATION], age_s=6 * 3600, now=now)
        self.place(transcode, "h100-2", 6 * 3600)
        self.finish(b.pod(f"ablation-3-{b.suffix('ablation3')}", "research", [
            b.container("train", cuda, command=["python", "train.py", "--ablation=3"], limits={"nvidia.com/gpu": 1, "memory": "64Gi"})],
            labels={"job-name": "ablation-3"}, owner=("batch/v1", "Job", "ablation-3"), restart_policy="Never",
            tolerations=[GPU_TOLERATION], age_s=7 * 3600, now=now), "h100-2", 7 * 3600, 1800, 137, "OOMKilled")

        # h100-mig-1: MIG slices.
        for i in range(2):
            pod = b.pod(f"whisper-asr-6b9c8d7f5-{b.suffix('whisper', i)}", "inference", [
                b.container("whisper", "ghcr.io/ggerganov/whisper.cpp:main-cuda", limits={"nvidia.com/mig-1g.10gb": 1}, ports=[8080])],
                labels={"app": "whisper-asr", "pod-template-hash": "6b9c8d7f5"},
                owner=("apps/v1", "ReplicaSet", "whisper-asr-6b9c8d7f5"), age_s=3 * DAY, now=now)
            self.place(pod, "h100-mig-1", 3 * DAY)
        self.place(b.pod(f"embeddings-7f6d5c4b3-{b.suffix('emb')}", "inference", [
            b.container("tei", "ghcr.io/huggingface/text-embeddings-inference:hopper-1.2", limits={"nvidia.com/mig-3g.40gb": 1})],
            labels={"app": "embeddings", "pod-template-hash": "7f6d5c4b3"},
            owner=("apps/v1", "ReplicaSet", "embeddings-7f6d5c4b3"), age_s=2 * DAY, now=now), "h100-mig-1", 2 * DAY)
        self.place(b.pod("mig-sweep-0", "research", [
            b.container("sweep", cuda, command=["python", "sweep.py"], limits={"nvidia.com/mig-2g.20gb": 1})],
            labels={"app": "mig-sweep"}, age_s=40 * 60, now=now), "h100-mig-1", 40 * 60)

        # h100-3 is NotReady: this job's state is stale. h100-4 is cordoned but still runs a job.
        self.place(b.pod("resnet-sweep-3", "ml-training", [
            b.container("train", cuda, command=["python", "resnet.py"], limits={"nvidia.com/gpu": 8})],
            labels={"app": "resnet-sweep"}, age_s=8 * 3600, now=now), "h100-3", 8 * 3600)
        self.place(b.pod(f"batch-scoring-{b.suffix('scoring')}", "inference", [
            b.container("score", cuda, command=["python", "score.py"], limits={"nvidia.com/gpu": 2})],
            labels={"job-name": "batch-scoring"}, owner=("batch/v1", "Job", "batch-scoring"), restart_policy="Never",
            age_s=3 * 3600, now=now), "h100-4", 3 * 3600)

        # t4-shared-1: time-sliced GPUs.
        for i in range(3):
            self.place(b.pod(f"stable-diffusion-8c7b6a5d4-{b.suffix('sd', i)}", "inference", [
                b.container("sd", "ghcr.io/ai-dock/stable-diffusion-webui:latest-cuda", limits={"nvidia.com/gpu.shared": 1}, ports=[7860])],
                labels={"app": "stable-diffusion", "pod-template-hash": "8c7b6a5d4"},
                owner=("apps/v1", "ReplicaSet", "stable-diffusion-8c7b6a5d4"), age_s=4 * DAY, now=now), "t4-shared-1", 4 * DAY)

        # a100-1: 7 healthy GPUs, 6 in use.
        self.place(b.pod("finetune-a100-0", "ml-training", [
            b.container("finetune", cuda, command=["accelerate", "launch", "finetune.py"], limits={"nvidia.com/gpu": 6})],
            labels={"app": "finetune-a100"}, owner=("apps/v1", "StatefulSet", "finetune-a100"), age_s=12 * 3600, now=now),
            "a100-1", 12 * 3600)

        # Pending: no node can take these.
        pending = [
            b.pod("llm-pretrain-big-worker-0", "ml-training", [
                b.container("trainer", cuda, command=["torchrun"], args=["--nproc_per_node=16", "train.py"], limits={"nvidia.com/gpu": 16})],
                labels={"training.kubeflow.org/job-name": "llm-pretrain-big"}, age_s=25 * 60, now=now),
            b.pod("notebook-bob-0", "research", [
                b.container("jupyter", "quay.io/jupyter/pytorch-notebook:cuda12-2024-05-13", limits={"nvidia.com/gpu": 4})],
                labels={"app": "notebook", "notebook-name": "bob"}, age_s=10 * 60, now=now),
            b.pod("b200-benchmark", "research", [
                b.container("bench", cuda, command=["python", "bench.py"], limits={"nvidia.com/gpu": 8})],
                node_selector={"nvidia.com/gpu.product": "NVIDIA-B200"}, age_s=15 * 60, now=now),
        ]
        self.pods.extend(pending)

        # Ordinary CPU workloads.
        for i in range(2):
            self.place(b.pod(f"web-frontend-59d7c6b8f4-{b.suffix('web', i)}", "default", [
                b.container("nginx", "nginx:1.27", requests={"cpu": "250m", "memory": "128Mi"}, ports=[80])],
                labels={"app": "web-frontend", "pod-template-hash": "59d7c6b8f4"},
                owner=("apps/v1", "ReplicaSet", "web-frontend-59d7c6b8f4"), age_s=10 * DAY, now=now), "cpu-1", 10 * DAY)

    def build_node_events(self) -> None:
        h3, h4 = self.nodes["h100-3"], self.nodes["h100-4"]
        self.events.append(b.event(h3, "NodeNotReady", "Node h100-3 status is now: NodeNotReady", component="node-controller",
                                   first=b.ago(3500, self.now)))
        self.events.append(b.event(h4, "NodeNotSchedulable", "Node h100-4 status is now: NodeNotSchedulable", host="h100-4",
                                   first=b.ago(7200, self.now)))

    def mark_unreachable_pods_not_ready(self, node: str) -> None:
        """What the node lifecycle controller does to the pods of a node that stopped reporting."""
        for pod in self.pods:
            if pod["spec"].get("nodeName") == node and pod["status"]["phase"] == "Running":
                for cond in pod["status"]["conditions"]:
                    if cond["type"] == "Ready":
                        cond["status"] = "False"
                        cond["lastTransitionTime"] = b.ago(3480, self.now)

    def build(self) -> list[Obj]:
        self.build_nodes()
        self.build_core()
        self.build_operator()
        self.build_static_plugin()
        self.build_workloads()
        self.build_node_events()
        self.mark_unreachable_pods_not_ready("h100-3")
        for ds in self.daemonsets:
            ds["status"] = b.daemonset_status(ds, self.pods)
        namespaces = [namespace(n) for n in ("default", "kube-system", "kube-public", "kube-node-lease", OPERATOR_NS,
                                             "ml-training", "inference", "research")]
        return [*namespaces, *self.nodes.values(), *self.daemonsets, *self.pods, *self.events]


def build(now: datetime | None = None) -> list[Obj]:
    """The demo cluster's objects (fresh copies each call)."""
    demo = _Demo()
    if now is not None:
        demo.now = now
    return demo.build()
