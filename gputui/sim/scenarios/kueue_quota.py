"""The "kueue-quota" scenario: Kueue holds GPU jobs back for want of quota while the nodes have room
(builders/kueue.py has the objects' shapes).

    h100-1 .. h100-3  Ready, 8 GPUs each: 8, 2 and 0 taken (14 free on the nodes)
    cpu-1             no GPUs

    ClusterQueue team-a  cohort research, nvidia.com/gpu nominal 8 (borrowingLimit 0), all 8 reserved by
                         team-a/llm-pretrain (a batch/v1 Job, 2 pods of 4 GPUs running on h100-1, admitted)
                         pending: team-a/llm-ft-x7k2, a plain pod of 4 GPUs (Kueue's pod integration: gated
                         by kueue.x-k8s.io/admission until admitted), and team-a/eval-sweep, a Job of 2 pods
                         of 2 GPUs, suspended (no pods until admitted); both Workloads QuotaReserved=False,
                         reason Pending: "couldn't assign flavors to pod set main: insufficient unused quota
                         for nvidia.com/gpu in flavor h100, 4 more needed"
    ClusterQueue team-b  cohort research, nvidia.com/gpu nominal 8, 2 reserved by team-b/notebook (a Job of
                         one pod of 2 GPUs running on h100-2), nothing pending
    LocalQueues          team-a/user-queue -> team-a, team-b/user-queue -> team-b
    ResourceFlavor h100  nodes labelled nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3

The ClusterQueues' and LocalQueues' status figures are what Kueue would report for these Workloads.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from .. import builders as b
from ..builders import kueue as k
from .cluster_builder import GPU_TOLERATION, ClusterBuilder

Obj = dict[str, Any]

H100 = "NVIDIA-H100-80GB-HBM3"
IMAGE = "nvcr.io/nvidia/pytorch:24.03-py3"
FLAVOR = "h100"
QUEUE = "user-queue"
PENDING = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 4 more needed"
QUOTA = {"cpu": "96", "memory": "1024Gi", "nvidia.com/gpu": "8"}


def _container(gpus: int, cpu: int, memory_gi: int) -> Obj:
    return b.container("main", IMAGE, command=["torchrun", "train.py"], limits={"nvidia.com/gpu": gpus},
                       requests={"cpu": str(cpu), "memory": f"{memory_gi}Gi", "nvidia.com/gpu": str(gpus)})


def _job(namespace: str, name: str, pods: int, container: Obj, *, suspended: bool, age_s: float, now: datetime) -> Obj:
    """A batch/v1 Job submitted to the LocalQueue; Kueue keeps it suspended until its Workload is admitted."""
    uid = b.stable_uid("Job", namespace, name)
    pod_labels = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name, "controller-uid": uid, "job-name": name}
    template_spec = {"containers": [container], "dnsPolicy": "ClusterFirst", "restartPolicy": "Never", "schedulerName": "default-scheduler",
                     "securityContext": {}, "terminationGracePeriodSeconds": 30, "tolerations": [GPU_TOLERATION]}
    status: Obj = {"conditions": [{"type": "Suspended", "status": "True", "reason": "JobSuspended", "message": "Job suspended",
                                   "lastProbeTime": b.ago(age_s, now), "lastTransitionTime": b.ago(age_s, now)}]} if suspended else \
        {"active": pods, "ready": pods, "startTime": b.ago(age_s - 5, now), "terminating": 0, "uncountedTerminatedPods": {}}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "creationTimestamp": b.ago(age_s, now), "generation": 1,
                     "labels": {k.QUEUE_LABEL: QUEUE}},
        "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 6, "completionMode": "NonIndexed", "suspend": suspended,
                 "manualSelector": False, "podReplacementPolicy": "TerminatingOrFailed",
                 "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}},
                 "template": {"metadata": {"labels": pod_labels}, "spec": template_spec}},
        "status": status,
    }


def _job_pods(c: ClusterBuilder, job: Obj, node: str, age_s: float) -> None:
    meta, template = job["metadata"], job["spec"]["template"]
    for i in range(job["spec"]["parallelism"]):
        name = f"{meta['name']}-{b.suffix(meta['namespace'], meta['name'], i)}"
        pod = b.pod(name, meta["namespace"], [b.container("main", IMAGE, command=["torchrun", "train.py"],
                                                          limits=template["spec"]["containers"][0]["resources"]["limits"],
                                                          requests=template["spec"]["containers"][0]["resources"]["requests"])],
                    labels=template["metadata"]["labels"], owner=("batch/v1", "Job", meta["name"]), tolerations=[GPU_TOLERATION],
                    restart_policy="Never", age_s=age_s, now=c.now)
        pod["metadata"]["finalizers"] = ["batch.kubernetes.io/job-tracking"]
        c.place(pod, node, age_s)


def _owner(obj: Obj) -> tuple[str, str, str, str]:
    return obj["apiVersion"], obj["kind"], obj["metadata"]["name"], obj["metadata"]["uid"]


def build(now: datetime | None = None) -> list[Obj]:
    c = ClusterBuilder(now)
    c.add_node("cpu-1", cpu=32, memory_gib=128, labels={"node-role.kubernetes.io/worker": "", "node-pool": "cpu"})
    gpu_nodes = ["h100-1", "h100-2", "h100-3"]
    for node in gpu_nodes:
        c.add_node(node, cpu=192, memory_gib=2048, labels={"node-role.kubernetes.io/worker": "", "node-pool": "gpu",
                                                            **b.gfd_labels(H100, 8, operator=False)},
                   extra_resources={"nvidia.com/gpu": (8, 8)})
    c.add_static_plugin(gpu_nodes, {"node-pool": "gpu"})
    c.others += k.kueue_crds(c.now)
    c.others.append(k.resource_flavor(FLAVOR, {"nvidia.com/gpu.product": H100}, now=c.now))

    # team-a: its quota taken by the pretraining job; a fine-tuning pod and an evaluation job wait for it.
    pretrain = _job("team-a", "llm-pretrain", 2, _container(4, 16, 256), suspended=False, age_s=6 * 3600, now=c.now)
    _job_pods(c, pretrain, "h100-1", 6 * 3600)
    sweep = _job("team-a", "eval-sweep", 2, _container(2, 4, 64), suspended=True, age_s=900, now=c.now)
    finetune = b.pod("llm-ft-x7k2", "team-a", [_container(4, 8, 128)], labels={k.QUEUE_LABEL: QUEUE, k.MANAGED_LABEL: "true"},
                     tolerations=[GPU_TOLERATION], restart_policy="Never", age_s=1200, now=c.now)
    finetune["metadata"]["finalizers"] = [k.MANAGED_LABEL]
    finetune["spec"]["schedulingGates"] = [{"name": k.ADMISSION_GATE}]
    finetune["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "lastProbeTime": None, "lastTransitionTime": None,
                                         "reason": "SchedulingGated", "message": "Scheduling is blocked due to non-empty scheduling gates"}]
    c.pods.append(finetune)
    # team-b: a notebook, room to spare.
    notebook = _job("team-b", "notebook", 1, _container(2, 8, 64), suspended=False, age_s=2 * 3600, now=c.now)
    _job_pods(c, notebook, "h100-2", 2 * 3600)

    c.others += [
        k.workload("team-a", QUEUE, _owner(pretrain), pretrain["spec"]["template"]["spec"], 2, age_s=6 * 3600, now=c.now,
                   admitted_in=("team-a", FLAVOR, {"cpu": "32", "memory": "512Gi", "nvidia.com/gpu": "8"})),
        k.workload("team-a", QUEUE, _owner(finetune), finetune["spec"], 1, pending_message=PENDING, age_s=1200, now=c.now),
        k.workload("team-a", QUEUE, _owner(sweep), sweep["spec"]["template"]["spec"], 2, pending_message=PENDING, age_s=900, now=c.now),
        k.workload("team-b", QUEUE, _owner(notebook), notebook["spec"]["template"]["spec"], 1, age_s=2 * 3600, now=c.now,
                   admitted_in=("team-b", FLAVOR, {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"})),
        k.cluster_queue("team-a", FLAVOR, QUOTA, {"cpu": "32", "memory": "512Gi", "nvidia.com/gpu": "8"}, cohort="research",
                        borrowing_limits={"nvidia.com/gpu": "0"}, pending=2, reserving=1, admitted=1, now=c.now),
        k.cluster_queue("team-b", FLAVOR, QUOTA, {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"}, cohort="research",
                        reserving=1, admitted=1, now=c.now),
        k.local_queue("team-a", QUEUE, "team-a", FLAVOR, {"cpu": "32", "memory": "512Gi", "nvidia.com/gpu": "8"},
                      pending=2, reserving=1, admitted=1, now=c.now),
        k.local_queue("team-b", QUEUE, "team-b", FLAVOR, {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"},
                      reserving=1, admitted=1, now=c.now),
        sweep, pretrain, notebook,
    ]
    return c.objects(["default", "kube-system", "team-a", "team-b"])
