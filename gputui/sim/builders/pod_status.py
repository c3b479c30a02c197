"""Pod and container status: conditions, container states, and the status of a pod that runs."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from .ids import ago, digest, full_image, image_id, utcnow
from .nodes import node_ip

Obj = dict[str, Any]


def container_id(namespace: str, pod_name: str, container_name: str, restart: int) -> str:
    return "containerd://" + digest("ctr", namespace, pod_name, container_name, restart)


def pod_condition(kind: str, status: str, since: str, reason: str | None = None, message: str | None = None) -> Obj:
    cond: Obj = {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": since}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def pod_ip(node_index: int, slot: int) -> str:
    return f"10.244.{node_index}.{2 + slot % 250}"


def running_container_status(pod_obj: Obj, c: Obj, started: str, *, restarts: int = 0, ready: bool = True) -> Obj:
    meta = pod_obj["metadata"]
    return {
        "containerID": container_id(meta["namespace"], meta["name"], c["name"], restarts),
        "image": full_image(c["image"]),
        "imageID": image_id(c["image"]),
        "lastState": {},
        "name": c["name"],
        "ready": ready,
        "restartCount": restarts,
        "started": True,
        "state": {"running": {"startedAt": started}},
    }


def terminated_state(exit_code: int, reason: str, started: str, finished: str, cid: str, message: str | None = None) -> Obj:
    term: Obj = {"containerID": cid, "exitCode": exit_code, "reason": reason, "startedAt": started, "finishedAt": finished}
    if message:
        term["message"] = message
    return {"terminated": term}


INITIAL_BACKOFF = 10.0  # seconds: the kubelet's first back-off, after a container's second exit
MAX_BACKOFF = 300.0  # the kubelet's cap on CrashLoopBackOff (and ImagePullBackOff)


def crash_loop_backoff(restarts: int) -> float:
    """The back-off of a container waiting in CrashLoopBackOff with this restartCount. The kubelet starts a
    container's first exit again at once (restartCount 1); from the second exit on it waits 10 s, doubled
    each time up to 5 minutes: restartCount 1 waits 10s, 2 20s, 3 40s, ... 6 and later 5m0s."""
    return min(INITIAL_BACKOFF * 2 ** (max(1, restarts) - 1), MAX_BACKOFF)


def go_duration(seconds: float) -> str:
    """Go's time.Duration formatting for whole seconds: 10s, 1m20s, 5m0s."""
    s = int(seconds)
    return f"{s // 60}m{s % 60}s" if s >= 60 else f"{s}s"


def back_off_message(seconds: float, container: str, pod: str, namespace: str, uid: str) -> str:
    """The waiting message of a container in CrashLoopBackOff, as the kubelet's doBackOff words it."""
    return f"back-off {go_duration(seconds)} restarting failed container={container} pod={pod}_{namespace}({uid})"


def set_running(pod_obj: Obj, node_obj: Obj, node_index: int, slot: int, started_s: float, now: datetime | None = None) -> Obj:
    """Give a pod the status of one that has run for started_s seconds on the node."""
    now = now or utcnow()
    started = ago(started_s, now)
    spec = pod_obj["spec"]
    spec["nodeName"] = node_obj["metadata"]["name"]
    host_ip = node_ip(node_obj)
    ip = host_ip if spec.get("hostNetwork") else pod_ip(node_index, slot)
    status: Obj = {
        "phase": "Running",
        "conditions": [
            pod_condition("PodReadyToStartContainers", "True", started),
            pod_condition("Initialized", "True", started),
            pod_condition("Ready", "True", started),
            pod_condition("ContainersReady", "True", started),
            pod_condition("PodScheduled", "True", ago(started_s + 2, now)),
        ],
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "qosClass": pod_obj["status"].get("qosClass", "BestEffort"),
        "startTime": ago(started_s + 1, now),
        "containerStatuses": [running_container_status(pod_obj, c, started) for c in spec["containers"]],
    }
    if spec.get("initContainers"):
        meta = pod_obj["metadata"]
        status["initContainerStatuses"] = [
            {
                "containerID": container_id(meta["namespace"], meta["name"], c["name"], 0),
                "image": full_image(c["image"]),
                "imageID": image_id(c["image"]),
                "lastState": {},
                "name": c["name"],
                "ready": True,
                "restartCount": 0,
                "started": c.get("restartPolicy") == "Always",
                "state": {"running": {"startedAt": started}} if c.get("restartPolicy") == "Always" else terminated_state(
                    0, "Completed", ago(started_s + 1, now), started, container_id(meta["namespace"], meta["name"], c["name"], 0)
                ),
            }
            for c in spec["initContainers"]
        ]
    pod_obj["status"] = status
    return pod_obj


def pod_is_ready(pod_obj: Obj) -> bool:
    for cond in (pod_obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False
