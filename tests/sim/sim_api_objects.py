"""A tiny, complete GPU cluster for the HTTP-layer tests.

Complete means the generated models of the `kubernetes` clients accept every
object (containerStatuses with imageID, full nodeInfo, ...).
"""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

Obj = dict[str, Any]
NOW = datetime.now(timezone.utc)


def stamp(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def uid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(parts)))


def node(name: str, *, gpus: int = 8, ready: bool = True, unschedulable: bool = False, ip: str = "10.0.0.1") -> Obj:
    resources = {"cpu": "96", "memory": "1056000000Ki", "pods": "110", "nvidia.com/gpu": str(gpus)}
    condition_times = {"lastHeartbeatTime": stamp(10), "lastTransitionTime": stamp(86400)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "creationTimestamp": stamp(86400 * 3),
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node-role.kubernetes.io/worker": "",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "nvidia.com/gpu.count": str(gpus),
            },
        },
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory", "message": "kubelet has sufficient memory available", **condition_times},
                {"type": "Ready", "status": "True" if ready else "Unknown", "reason": "KubeletReady" if ready else "NodeStatusUnknown",
                 "message": "kubelet is posting ready status" if ready else "Kubelet stopped posting node status.", **condition_times},
            ],
            "nodeInfo": {
                "architecture": "amd64", "bootID": "b0b0", "containerRuntimeVersion": "containerd://1.7.27",
                "kernelVersion": "5.15.0-1063-nvidia", "kubeProxyVersion": "", "kubeletVersion": "v1.34.1",
                "machineID": "m1", "operatingSystem": "linux", "osImage": "Ubuntu 22.04.4 LTS", "systemUUID": "u1",
            },
        },
    }


def container(name: str, *, gpus: int = 0, image: str = "nvcr.io/nvidia/pytorch:24.05-py3") -> Obj:
    c: Obj = {"name": name, "image": image, "command": ["sleep", "infinity"], "resources": {}}
    if gpus:
        c["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"nvidia.com/gpu": str(gpus)}}
    return c


def running_status(c: Obj, *, restarts: int = 0) -> Obj:
    status: Obj = {
        "name": c["name"], "image": c["image"], "imageID": f"{c['image']}@sha256:{'a' * 64}",
        "containerID": f"containerd://{'c' * 64}", "ready": True, "started": True, "restartCount": restarts,
        "state": {"running": {"startedAt": stamp(3000)}},
    }
    if restarts:
        status["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": stamp(4000), "finishedAt": stamp(150)}}
    return status


def pod(name: str, namespace: str = "default", *, node_name: str | None = "gpu-1", containers: list[Obj] | None = None,
        labels: dict[str, str] | None = None, phase: str = "Running", restarts: int = 0) -> Obj:
    containers = containers or [container("main", gpus=1)]
    spec: Obj = {"containers": containers, "restartPolicy": "Always", "terminationGracePeriodSeconds": 30}
    status: Obj = {"phase": phase, "qosClass": "BestEffort"}
    if node_name:
        spec["nodeName"] = node_name
        status.update({
            "hostIP": "10.0.0.1", "podIP": "10.244.1.5", "startTime": stamp(3600),
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": stamp(3600)},
                {"type": "Ready", "status": "True" if phase == "Running" else "False", "lastProbeTime": None, "lastTransitionTime": stamp(3000)},
            ],
        })
        if phase == "Running":
            status["containerStatuses"] = [running_status(c, restarts=restarts) for c in containers]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid(namespace, name), "creationTimestamp": stamp(3600),
                     "labels": labels or {"app": name}},
        "spec": spec,
        "status": status,
    }


def event(name: str, involved: Obj, reason: str, message: str, *, type_: str = "Normal", namespace: str = "default") -> Obj:
    meta = involved["metadata"]
    # The kubelet names a node in its events by the node's name, not its uid (kubectl describe looks for both).
    involved_uid = meta["name"] if involved["kind"] == "Node" else meta["uid"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": stamp(120)},
        "involvedObject": {"kind": involved["kind"], "name": meta["name"], "namespace": meta.get("namespace", ""),
                           "uid": involved_uid, "apiVersion": "v1"},
        "reason": reason,
        "message": message,
        "type": type_,
        "count": 1,
        "firstTimestamp": stamp(120),
        "lastTimestamp": stamp(60),
        "source": {"component": "default-scheduler"},
        "reportingComponent": "default-scheduler",
        "reportingInstance": "",
    }


def daemonset(name: str, namespace: str = "kube-system") -> Obj:
    labels = {"name": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": stamp(86400), "generation": 1, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.present": "true"},
                    "containers": [{"name": name + "-ctr", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"}],
                },
            },
            "updateStrategy": {"type": "RollingUpdate"},
        },
        "status": {
            "currentNumberScheduled": 2, "desiredNumberScheduled": 2, "numberMisscheduled": 0, "numberReady": 2,
            "numberAvailable": 2, "updatedNumberScheduled": 2, "observedGeneration": 1,
        },
    }


def small_cluster() -> list[Obj]:
    """Two Ready GPU nodes, a cordoned one, training pods, a device plugin DaemonSet with its pods, events."""
    gpu1, gpu2 = node("gpu-1"), node("gpu-2", ip="10.0.0.2")
    cordoned = node("gpu-3", unschedulable=True, ip="10.0.0.3")
    plugin = daemonset("nvidia-device-plugin-ds")
    plugin_pods = [
        pod(f"nvidia-device-plugin-ds-{suffix}", "kube-system", node_name=n, labels={"name": "nvidia-device-plugin-ds"},
            containers=[container("nvidia-device-plugin-ctr", image="nvcr.io/nvidia/k8s-device-plugin:v0.17.1")])
        for suffix, n in (("abcde", "gpu-1"), ("fghij", "gpu-2"))
    ]
    train = pod("train-0", "ml", containers=[container("trainer", gpus=4)], labels={"app": "train", "tier": "gpu"}, restarts=3)
    sidecar = pod("infer-0", "ml", node_name="gpu-2",
                  containers=[container("server", gpus=1), container("metrics", image="prom/statsd-exporter:v0.26.0")],
                  labels={"app": "infer", "tier": "gpu"})
    pending = pod("waiting-0", "ml", node_name=None, phase="Pending", labels={"app": "train", "tier": "gpu"},
                  containers=[container("trainer", gpus=16)])
    return [
        gpu1, gpu2, cordoned, plugin, *plugin_pods, train, sidecar, pending,
        event("waiting-0.1", pending, "FailedScheduling",
              "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient nvidia.com/gpu.", type_="Warning", namespace="ml"),
        event("gpu-1.1", gpu1, "NodeReady", "Node gpu-1 status is now: NodeReady"),
    ]
