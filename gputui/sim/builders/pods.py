"""Pod and container objects as the API server stores them after admission."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping, Sequence

from .ids import ago, stable_uid, suffix, utcnow

Obj = dict[str, Any]


def container(
    name: str,
    image: str,
    *,
    limits: Mapping[str, object] | None = None,
    requests: Mapping[str, object] | None = None,
    command: list[str] | None = None,
    args: list[str] | None = None,
    env: dict[str, str] | None = None,
    ports: list[int] | None = None,
    mounts: Sequence[tuple[str, str]] = (),
    restart_policy: str | None = None,
) -> Obj:
    c: Obj = {"name": name, "image": image, "imagePullPolicy": "IfNotPresent"}
    if command:
        c["command"] = list(command)
    if args:
        c["args"] = list(args)
    if env:
        c["env"] = [{"name": k, "value": v} for k, v in env.items()]
    if ports:
        c["ports"] = [{"containerPort": p, "protocol": "TCP"} for p in ports]
    resources: Obj = {}
    if limits:
        resources["limits"] = {k: str(v) for k, v in limits.items()}
    req = {k: str(v) for k, v in (requests or {}).items()}
    for k, v in (limits or {}).items():
        req.setdefault(k, str(v))  # the API server defaults requests from limits
    if req:
        resources["requests"] = req
    c["resources"] = resources
    if restart_policy:
        c["restartPolicy"] = restart_policy
    c["terminationMessagePath"] = "/dev/termination-log"
    c["terminationMessagePolicy"] = "File"
    c["volumeMounts"] = [{"name": vol, "mountPath": path} for vol, path in mounts]
    return c


def pod(
    name: str,
    namespace: str,
    containers: list[Obj],
    *,
    node_name: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    init_containers: list[Obj] | None = None,
    owner: tuple[str, str, str] | None = None,
    restart_policy: str = "Always",
    tolerations: list[Obj] | None = None,
    node_selector: dict[str, str] | None = None,
    affinity: Obj | None = None,
    priority_class: str | None = None,
    service_account: str = "default",
    host_volumes: dict[str, str] | None = None,
    active_deadline: int | None = None,
    age_s: float = 3600,
    now: datetime | None = None,
) -> Obj:
    """A pod as the API server stores it after admission (defaults filled). owner: (apiVersion, kind, name)."""
    now = now or utcnow()
    token_volume = f"kube-api-access-{suffix(namespace, name, 'token')}"
    for c in list(containers) + list(init_containers or []):
        c.setdefault("volumeMounts", []).append(
            {"name": token_volume, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}
        )
    meta: Obj = {
        "name": name,
        "namespace": namespace,
        "uid": stable_uid("pod", namespace, name),
        "creationTimestamp": ago(age_s, now),
        "labels": dict(labels or {}),
    }
    if annotations:
        meta["annotations"] = dict(annotations)
    if owner:
        api_version, kind, owner_name = owner
        meta["generateName"] = name.rsplit("-", 1)[0] + "-"
        meta["ownerReferences"] = [{
            "apiVersion": api_version,
            "kind": kind,
            "name": owner_name,
            "uid": stable_uid(kind, namespace, owner_name),
            "controller": True,
            "blockOwnerDeletion": True,
        }]
    volumes: list[Obj] = [
        {"name": vol, "hostPath": {"path": path, "type": ""}} for vol, path in (host_volumes or {}).items()
    ]
    volumes.append({
        "name": token_volume,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
        },
    })
    default_tolerations = [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    ]
    spec: Obj = {
        "containers": containers,
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 2000001000 if priority_class == "system-node-critical" else 0,
        "restartPolicy": restart_policy,
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccount": service_account,
        "serviceAccountName": service_account,
        "terminationGracePeriodSeconds": 30,
        # DefaultTolerationSeconds adds its two where the pod has no toleration of its own for the taint
        "tolerations": list(tolerations or []) + [d for d in default_tolerations if not any(
            t.get("key") in (d["key"], None, "") and t.get("effect") in (None, "", "NoExecute") for t in tolerations or [])],
        "volumes": volumes,
    }
    if init_containers:
        spec["initContainers"] = init_containers
    if node_name:
        spec["nodeName"] = node_name
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if affinity:
        spec["affinity"] = affinity
    if priority_class:
        spec["priorityClassName"] = priority_class
    if active_deadline:
        spec["activeDeadlineSeconds"] = active_deadline
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": "Pending", "qosClass": qos_class(containers)},
    }


def qos_class(containers: list[Obj]) -> str:
    any_set = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        limits, requests = res.get("limits") or {}, res.get("requests") or {}
        if limits or requests:
            any_set = True
        for r in ("cpu", "memory"):
            if r not in limits or requests.get(r, limits.get(r)) != limits.get(r):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
