"""The built-in demo cluster (`gputui sim --scenario demo`): one realistic GPU cluster that shows every case.

Nodes (fixed names, deterministic objects; timestamps are relative to start):
  cp-1          control plane, tainted node-role.kubernetes.io/control-plane:NoSchedule, no GPU
  cpu-1         CPU-only worker (the operator and core add-ons run here)
  h100-1        8x H100 80GB HBM3, GPU Operator; training and a notebook whose init container asks for GPUs;
                its DCGM exporter reports XID 48 on GPU 2 (sim.gputui.io/xid: "2:48")
  h100-2        8x H100, tainted nvidia.com/gpu=present:NoSchedule; inference, a two-container GPU pod
  h100-mig-1    8x H100, MIG mixed (all-balanced: 16x 1g.10gb, 8x 2g.20gb, 8x 3g.40gb, stale nvidia.com/gpu: 0)
  h100-3        8x H100, NotReady (kubelet stopped posting status): its pods not ready, its job evicted
                (Terminating: no kubelet to end it), the DaemonSets' pods kept (node_lifecycle.py)
  h100-4        8x H100, cordoned, still running a job; its DCGM exporter crash-loops
                (sim.gputui.io/fault: dcgm-broken), so the ClusterPolicy is notReady [state-dcgm-exporter]
  t4-shared-1   4x Tesla T4, time-sliced x4, renamed: advertises nvidia.com/gpu.shared: 16 (standalone plugin)
  a100-1        8x A100 80GB, one GPU unhealthy (Xid 79): capacity 8, allocatable 7 (standalone plugin)
  a100-2        8x A100 labelled by GFD but no GPU resource registered: the driver is broken
                (sim.gputui.io/fault: driver-broken), the standalone plugin pod crash-loops
  h100-dra-1    8x H100 handed out by Dynamic Resource Allocation (resource.k8s.io/v1): a ResourceSlice
                from driver gpu.nvidia.com (gpu-0..6, and gpu-7 as seven 1g.10gb MIG devices), no device
                plugin; DeviceClasses gpu.nvidia.com (extendedResourceName nvidia.com/gpu) and
                mig.nvidia.com; qwen-72b-serving-0 holds gpu-0 and gpu-1, whisper-dra-0 one MIG device

GPU Operator operands run in namespace gpu-operator on the H100 nodes (ClusterPolicy
cluster-policy, Service nvidia-dcgm-exporter :gpu-metrics/9400); the standalone (static
manifest) device plugin runs in kube-system on the node-pool=legacy-gpu nodes; the DRA
driver's kubelet plugin in nvidia-dra-driver-gpu.
Finished pods (Succeeded, Failed) still declare GPUs; three pods cannot be scheduled.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from .. import builders as b
from .cluster_builder import DAY, FAULT_ANNOTATION, GPU_TAINT, GPU_TOLERATION, OPERATOR_NS, OPERATOR_STATES, ClusterBuilder
from ..exporters.dcgm import XID_ANNOTATION

Obj = dict[str, Any]

MIG_LAYOUT = {"1g.10gb": 16, "2g.20gb": 8, "3g.40gb": 8}
DRA_NODE = "h100-dra-1"


class _Demo(ClusterBuilder):
    # -- nodes -----------------------------------------------------------
    def build_nodes(self) -> None:
        self.add_node("cp-1", cpu=16, memory_gib=64,
                      labels={"node-role.kubernetes.io/control-plane": "", "node.kubernetes.io/exclude-from-external-load-balancers": ""},
                      taints=[{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}])
        self.add_node("cpu-1", cpu=64, memory_gib=256, labels={"node-role.kubernetes.io/worker": "", "node-pool": "cpu"})
        h100 = b.gfd_labels("NVIDIA-H100-80GB-HBM3", 8)
        worker = {"node-role.kubernetes.io/worker": "", "node-pool": "h100"}
        self.add_node("h100-1", cpu=192, memory_gib=2048, labels={**worker, **h100},
                      extra_resources={"nvidia.com/gpu": (8, 8)}, annotations={XID_ANNOTATION: "2:48"})
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
                      extra_resources={"nvidia.com/gpu": (8, 8)}, annotations={FAULT_ANNOTATION: "dcgm-broken"})
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
                      annotations={FAULT_ANNOTATION: "driver-broken"})
        # DRA: NFD labels only (no GFD, no device plugin, no extended resource); the DRA driver's kubelet plugin runs here.
        nfd = {k: v for k, v in h100.items() if k.startswith("feature.node.kubernetes.io/")}
        self.add_node(DRA_NODE, cpu=192, memory_gib=2048,
                      labels={"node-role.kubernetes.io/worker": "", "node-pool": "dra", "nvidia.com/dra-kubelet-plugin": "true", **nfd})

    # -- the GPU stack ---------------------------------------------------
    def build_operator(self) -> None:
        self.add_operator(gpu_nodes=["h100-1", "h100-2", "h100-mig-1", "h100-3", "h100-4"],
                          nfd_nodes=[n for n in self.nodes if n != "cp-1"], control_node="cpu-1",
                          validated_nodes=["h100-1", "h100-2", "h100-mig-1"])
        # The broken operand: h100-4's DCGM exporter cannot start its host engine, so the ClusterPolicy is notReady.
        self.crash_loop(self.pod_of("nvidia-dcgm-exporter", "h100-4"), restarts=23)
        self.add_cluster_policy(OPERATOR_NS, not_ready=[OPERATOR_STATES["dcgm-exporter"]])
        self.add_dcgm_service(OPERATOR_NS)

    def build_static_plugin(self) -> None:
        self.add_static_plugin(["t4-shared-1", "a100-1", "a100-2"], {"node-pool": "legacy-gpu"}, crash_looping=("a100-2",))

    def build_dra(self) -> None:
        """h100-dra-1's GPUs as ResourceSlice devices (GPU 7 split into seven 1g.10gb MIG devices), the DeviceClasses,
        and two running pods holding devices through ResourceClaims: two full GPUs, and one MIG device."""
        self.add_dra_driver([DRA_NODE])
        self.add_resource_slice(DRA_NODE, "NVIDIA H100 80GB HBM3", 81559, 8, mig={7: {"1g.10gb": 7}})
        serve = b.pod("qwen-72b-serving-0", "inference", [
            b.container("vllm", "docker.io/vllm/vllm-openai:v0.10.1", args=["--model", "Qwen/Qwen2.5-72B-Instruct", "--tensor-parallel-size", "2"],
                        requests={"cpu": "16", "memory": "256Gi"}, ports=[8000])],
            labels={"app": "qwen-72b-serving"}, owner=("apps/v1", "StatefulSet", "qwen-72b-serving"), age_s=9 * 3600, now=self.now)
        serve["metadata"].pop("generateName", None)
        self.add_claimed_pod(serve, DRA_NODE, "gpus", "gpu.nvidia.com", ["gpu-0", "gpu-1"], age_s=9 * 3600)
        asr = b.pod("whisper-dra-0", "inference", [
            b.container("whisper", "ghcr.io/ggerganov/whisper.cpp:main-cuda", ports=[8080])],
            labels={"app": "whisper-dra"}, age_s=3 * 3600, now=self.now)
        self.add_claimed_pod(asr, DRA_NODE, "mig", "mig.nvidia.com", ["gpu-7-mig-1g10gb-19-0"],
                             selector="device.attributes['gpu.nvidia.com'].profile == '1g.10gb'", age_s=3 * 3600)

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
        self.others.append(b.service("kubernetes", "default", None, [("https", 443, 6443)], ip="10.96.0.1",
                                     labels={"component": "apiserver", "provider": "kubernetes"}, age_s=30 * DAY, now=self.now))

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
        self.build_dra()
        self.build_node_events()
        self.mark_unreachable_pods_not_ready("h100-3")
        return self.objects(["default", "kube-system", "kube-public", "kube-node-lease", OPERATOR_NS,
                             "ml-training", "inference", "research"])


def build(now: datetime | None = None) -> list[Obj]:
    """The demo cluster's objects (fresh copies each call)."""
    return _Demo(now).build()
