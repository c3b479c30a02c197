"""The "restricted" scenario: namespaces locked down as a production cluster locks them, where the API server's
admission plugins (admission_plugins.py) refuse what does not comply, and `gputui verify` still passes.

    gpu-1, gpu-2  Ready, 8x H100 each (the static device plugin); cpu-1 without GPUs

    ml-team       PodSecurity restricted (enforce, warn and audit); ResourceQuota `compute` (requests.cpu 16,
                  requests.memory 64Gi, limits.cpu 32, limits.memory 128Gi: every container must name its cpu
                  and memory), ResourceQuota `gpus` (requests.nvidia.com/gpu 4), LimitRange `defaults`
                  (a container's cpu and memory default to 500m/512Mi limits and 100m/128Mi requests, at most
                  16 cpu and 64Gi). trainer-0 runs on gpu-1 with 2 GPUs: 2 of the quota's 4 are left.
                      gputui verify gpu-1 -n ml-team --yes            passes
    ml-small      the same standards and a stricter ResourceQuota `gpus` (requests.nvidia.com/gpu 2), both
                  taken by notebook-0 on gpu-2: a verification pod there exceeds it
                      gputui verify gpu-2 -n ml-small --yes           exceeded quota: gpus, requested: ...
    retired       being deleted (Terminating): its content is gone but a ConfigMap's finalizer holds the
                  namespace, so nothing new may be created in it
                      gputui verify gpu-1 -n retired --yes            unable to create new content in namespace ...
    (no such)     a namespace that does not exist
                      gputui verify gpu-1 -n no-such-namespace --yes  namespaces "no-such-namespace" not found

The running pods comply with "restricted" themselves (they were admitted under these labels).
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from .. import builders as b
from .cluster_builder import DAY, GPU_TOLERATION, ClusterBuilder

Obj = dict[str, Any]

H100 = "NVIDIA-H100-80GB-HBM3"
IMAGE = "nvcr.io/nvidia/pytorch:24.03-py3"
TEAM, SMALL, RETIRED = "ml-team", "ml-small", "retired"
RESTRICTED_LABELS = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "warn", "audit")} | {
    f"pod-security.kubernetes.io/{mode}-version": "latest" for mode in ("enforce", "warn", "audit")}
HOLD_FINALIZER = "example.com/hold"


def _restricted(pod: Obj) -> Obj:
    """A pod that passes PodSecurity "restricted": not root, RuntimeDefault seccomp, no escalation, no capabilities."""
    pod["spec"]["securityContext"] = {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000,
                                      "seccompProfile": {"type": "RuntimeDefault"}}
    for c in pod["spec"]["containers"]:
        c["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    return pod


def _gpu_pod(name: str, namespace: str, gpus: int, command: list[str], c: ClusterBuilder, age_s: float) -> Obj:
    container = b.container("main", IMAGE, command=command, limits={"nvidia.com/gpu": gpus, "cpu": "8", "memory": "32Gi"},
                            requests={"cpu": "8", "memory": "32Gi"})
    return _restricted(b.pod(name, namespace, [container], labels={"app": name.rsplit("-", 1)[0]}, tolerations=[GPU_TOLERATION],
                             age_s=age_s, now=c.now))


def _quota(name: str, namespace: str, hard: dict[str, str], c: ClusterBuilder) -> Obj:
    """A ResourceQuota (its status is the quota controller's: quota.py fills it in when the cluster starts)."""
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": name, "namespace": namespace, "uid": b.stable_uid("ResourceQuota", namespace, name),
                         "creationTimestamp": b.ago(30 * DAY, c.now)},
            "spec": {"hard": hard}}


def _limit_range(name: str, namespace: str, c: ClusterBuilder) -> Obj:
    return {"apiVersion": "v1", "kind": "LimitRange",
            "metadata": {"name": name, "namespace": namespace, "uid": b.stable_uid("LimitRange", namespace, name),
                         "creationTimestamp": b.ago(30 * DAY, c.now)},
            "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m", "memory": "512Mi"},
                                 "defaultRequest": {"cpu": "100m", "memory": "128Mi"}, "max": {"cpu": "16", "memory": "64Gi"}}]}}


def build(now: datetime | None = None) -> list[Obj]:
    c = ClusterBuilder(now)
    c.add_node("cpu-1", cpu=32, memory_gib=128, labels={"node-role.kubernetes.io/worker": "", "node-pool": "cpu"})
    gpu_nodes = ["gpu-1", "gpu-2"]
    for node in gpu_nodes:
        c.add_node(node, cpu=128, memory_gib=1024, labels={"node-role.kubernetes.io/worker": "", "node-pool": "gpu",
                                                           **b.gfd_labels(H100, 8, operator=False)},
                   extra_resources={"nvidia.com/gpu": (8, 8)})
    c.add_static_plugin(gpu_nodes, {"node-pool": "gpu"})
    c.place(_gpu_pod("trainer-0", TEAM, 2, ["torchrun", "train.py"], c, 6 * 3600), "gpu-1", 6 * 3600)
    c.place(_gpu_pod("notebook-0", SMALL, 2, ["jupyter", "lab"], c, 3 * 3600), "gpu-2", 3 * 3600)
    c.others += [
        _quota("compute", TEAM, {"requests.cpu": "16", "requests.memory": "64Gi", "limits.cpu": "32", "limits.memory": "128Gi"}, c),
        _quota("gpus", TEAM, {"requests.nvidia.com/gpu": "4"}, c),
        _limit_range("defaults", TEAM, c),
        _quota("gpus", SMALL, {"requests.nvidia.com/gpu": "2"}, c),
        _limit_range("defaults", SMALL, c),
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "held", "namespace": RETIRED, "uid": b.stable_uid("ConfigMap", RETIRED, "held"),
                      "creationTimestamp": b.ago(40 * DAY, c.now), "deletionTimestamp": b.ago(DAY, c.now),
                      "deletionGracePeriodSeconds": 0, "finalizers": [HOLD_FINALIZER]},
         "data": {}},
    ]
    objects = c.objects(["default", "kube-system", TEAM, SMALL, RETIRED])
    for obj in objects:
        meta = obj["metadata"]
        if obj["kind"] == "Namespace" and meta["name"] in (TEAM, SMALL):
            meta["labels"].update(RESTRICTED_LABELS)
        elif obj["kind"] == "Namespace" and meta["name"] == RETIRED:
            _terminating(obj, c)
    return objects


def _terminating(namespace: Obj, c: ClusterBuilder) -> None:
    """A namespace deleted a day ago whose deletion waits on a finalizer, with the conditions the namespace
    controller reports."""
    since = b.ago(DAY, c.now)
    namespace["metadata"]["deletionTimestamp"] = since
    namespace["status"] = {"phase": "Terminating", "conditions": [
        {"type": "NamespaceDeletionDiscoveryFailure", "status": "False", "reason": "ResourcesDiscovered",
         "message": "All resources successfully discovered", "lastTransitionTime": since},
        {"type": "NamespaceDeletionGroupVersionParsingFailure", "status": "False", "reason": "ParsedGroupVersions",
         "message": "All legacy kube types successfully parsed", "lastTransitionTime": since},
        {"type": "NamespaceDeletionContentFailure", "status": "False", "reason": "ContentDeleted",
         "message": "All content successfully deleted, may be waiting on finalization", "lastTransitionTime": since},
        {"type": "NamespaceContentRemaining", "status": "True", "reason": "SomeResourcesRemain",
         "message": "Some resources are remaining: configmaps. has 1 resource instances", "lastTransitionTime": since},
        {"type": "NamespaceFinalizersRemaining", "status": "True", "reason": "SomeFinalizersRemain",
         "message": f"Some content in the namespace has finalizers remaining: {HOLD_FINALIZER} in 1 resource instances",
         "lastTransitionTime": since},
    ]}
