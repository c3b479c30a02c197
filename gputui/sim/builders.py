"""Builders for complete, realistic Kubernetes objects (nodes, pods, daemonsets, events).

The demo scenario, the synthetic generator and the simulated kubelets all
build their objects here, so every object the simulator serves carries the
fields the real API server and kubelet would set (the generated models of
the Python clients refuse objects without them).
"""
from __future__ import annotations

import functools
import hashlib
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable

Obj = dict[str, Any]

KUBELET_VERSION = "v1.32.4"
CONTAINERD_VERSION = "containerd://1.7.27"
KERNEL = "5.15.0-102-generic"
OS_IMAGE = "Ubuntu 22.04.4 LTS"

GPU_RESOURCE_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-")


def rfc3339(when: datetime) -> str:
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def ago(seconds: float, now: datetime | None = None) -> str:
    return rfc3339((now or utcnow()) - timedelta(seconds=seconds))


def digest(*parts: object, length: int = 64) -> str:
    """A stable hex string derived from the parts (ids, hashes, uids)."""
    h = hashlib.sha256("/".join(str(p) for p in parts).encode()).hexdigest()
    while len(h) < length:
        h += hashlib.sha256(h.encode()).hexdigest()
    return h[:length]


def stable_uid(*parts: object) -> str:
    h = digest("uid", *parts, length=32)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def gpu_uuid(node: str, index: int) -> str:
    h = digest("gpu", node, index, length=32)
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def mig_uuid(node: str, gpu_index: int, gi: int) -> str:
    h = digest("mig", node, gpu_index, gi, length=32)
    return f"MIG-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def suffix(*parts: object, length: int = 5) -> str:
    """A pod-name style random-looking suffix (consonants and digits), stable for the parts."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    n = int(digest("suffix", *parts, length=16), 16)
    out = []
    for _ in range(length):
        n, r = divmod(n, len(alphabet))
        out.append(alphabet[r])
    return "".join(out)


def full_image(image: str) -> str:
    """The image reference as containerd reports it (docker.io/library/ added where implied)."""
    name = image.split("@")[0]
    first = name.split("/")[0]
    if "/" not in name:
        name = "docker.io/library/" + name
    elif "." not in first and ":" not in first and first != "localhost":
        name = "docker.io/" + name
    if ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    return name


def image_id(image: str) -> str:
    repo = full_image(image).rsplit(":", 1)[0]
    return f"{repo}@sha256:{digest('image', full_image(image))}"


# -- resources -------------------------------------------------------------

def parse_quantity(value: object) -> float:
    """A Kubernetes quantity as a number (cpu in cores, memory in bytes)."""
    if isinstance(value, (int, float)):
        return float(value)
    return _parse_quantity_text(str(value))


@functools.lru_cache(maxsize=4096)  # clusters repeat a few quantities over and over
def _parse_quantity_text(text: str) -> float:
    s = text.strip()
    binary = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
    decimal = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
    for unit, factor in binary.items():
        if s.endswith(unit):
            return float(s[: -len(unit)]) * factor
    if s and s[-1] in decimal and not s[-1].isdigit():
        return float(s[:-1]) * decimal[s[-1]]
    return float(s)


def container_requests(container: Obj) -> dict[str, float]:
    """Requests, with extended resources (and missing requests) defaulted from limits as the API server does."""
    resources = container.get("resources") or {}
    out = {k: parse_quantity(v) for k, v in (resources.get("limits") or {}).items()}
    out.update({k: parse_quantity(v) for k, v in (resources.get("requests") or {}).items()})
    return out


def pod_requests(pod: Obj) -> dict[str, float]:
    """The pod's effective request, as the scheduler computes it.

    max(sum of app containers plus restartable (sidecar) init containers,
    each regular init container plus the sidecars started before it).
    """
    spec = pod.get("spec") or {}
    total: dict[str, float] = {}
    for c in spec.get("containers") or []:
        for k, v in container_requests(c).items():
            total[k] = total.get(k, 0) + v
    sidecars: dict[str, float] = {}
    init_peak: dict[str, float] = {}
    for c in spec.get("initContainers") or []:
        req = container_requests(c)
        if c.get("restartPolicy") == "Always":
            for k, v in req.items():
                sidecars[k] = sidecars.get(k, 0) + v
                total[k] = total.get(k, 0) + v
        else:
            for k in set(req) | set(sidecars):
                init_peak[k] = max(init_peak.get(k, 0), req.get(k, 0) + sidecars.get(k, 0))
    for k, v in init_peak.items():
        total[k] = max(total.get(k, 0), v)
    for k, v in (spec.get("overhead") or {}).items():
        total[k] = total.get(k, 0) + parse_quantity(v)
    return total


def is_gpu_resource(name: str) -> bool:
    return name.startswith(GPU_RESOURCE_PREFIXES)


# -- nodes -----------------------------------------------------------------

def node_condition(kind: str, status: str, reason: str, message: str, since: str, heartbeat: str) -> Obj:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastHeartbeatTime": heartbeat,
        "lastTransitionTime": since,
    }


def node(
    name: str,
    index: int,
    *,
    labels: dict[str, str] | None = None,
    extra_resources: dict[str, tuple[int, int]] | None = None,
    cpu: int = 96,
    memory_gib: int = 1024,
    ready: str = "True",
    unschedulable: bool = False,
    taints: Iterable[Obj] = (),
    annotations: dict[str, str] | None = None,
    age_s: float = 86400 * 30,
    now: datetime | None = None,
) -> Obj:
    """A node as the kubelet reports it. extra_resources: name -> (capacity, allocatable)."""
    now = now or utcnow()
    created = ago(age_s, now)
    ip = f"10.0.{index // 250}.{10 + index % 250}"
    base_labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
    }
    base_labels.update(labels or {})
    mem_ki = memory_gib * 1024 * 1024
    capacity = {
        "cpu": str(cpu),
        "ephemeral-storage": "1843238896Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{mem_ki}Ki",
        "pods": "110",
    }
    allocatable = {
        "cpu": str(cpu) if cpu < 8 else f"{cpu * 1000 - 500}m",
        "ephemeral-storage": "1698714478591",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{mem_ki - 1048576}Ki",
        "pods": "110",
    }
    for res, (cap, alloc) in (extra_resources or {}).items():
        capacity[res] = str(cap)
        allocatable[res] = str(alloc)
    heartbeat = ago(20, now) if ready == "True" else ago(3600, now)
    if ready == "True":
        ready_cond = node_condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", created, heartbeat)
    elif ready == "Unknown":
        ready_cond = node_condition("Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.", ago(3500, now), heartbeat)
    else:
        ready_cond = node_condition("Ready", "False", "KubeletNotReady", "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized", ago(3500, now), heartbeat)
    pressure_status = "Unknown" if ready == "Unknown" else "False"
    pressure = [
        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ]
    conditions = [
        node_condition(kind, pressure_status, reason if ready != "Unknown" else "NodeStatusUnknown",
                       msg if ready != "Unknown" else "Kubelet stopped posting node status.", created, heartbeat)
        for kind, reason, msg in pressure
    ]
    conditions.append(ready_cond)
    spec: Obj = {
        "podCIDR": f"10.244.{index}.0/24",
        "podCIDRs": [f"10.244.{index}.0/24"],
        "providerID": f"gputui-sim://{name}",
    }
    taint_list = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
        if not any(t.get("key") == "node.kubernetes.io/unschedulable" for t in taint_list):
            taint_list.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": ago(7200, now)})
    if taint_list:
        spec["taints"] = taint_list
    meta_annotations = {
        "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock",
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
    }
    meta_annotations.update(annotations or {})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": stable_uid("node", name),
            "creationTimestamp": created,
            "labels": base_labels,
            "annotations": meta_annotations,
        },
        "spec": spec,
        "status": {
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "allocatable": allocatable,
            "capacity": capacity,
            "conditions": conditions,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": stable_uid("boot", name),
                "containerRuntimeVersion": CONTAINERD_VERSION,
                "kernelVersion": KERNEL,
                "kubeProxyVersion": KUBELET_VERSION,
                "kubeletVersion": KUBELET_VERSION,
                "machineID": digest("machine", name, length=32),
                "operatingSystem": "linux",
                "osImage": OS_IMAGE,
                "systemUUID": stable_uid("system", name),
            },
        },
    }


def node_ip(node_obj: Obj) -> str:
    for addr in (node_obj.get("status") or {}).get("addresses") or []:
        if addr.get("type") == "InternalIP":
            return addr.get("address", "")
    return ""


def node_is_ready(node_obj: Obj) -> bool:
    for cond in (node_obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


# -- pods --------------------------------------------------------------------

def container(
    name: str,
    image: str,
    *,
    limits: dict[str, object] | None = None,
    requests: dict[str, object] | None = None,
    command: list[str] | None = None,
    args: list[str] | None = None,
    env: dict[str, str] | None = None,
    ports: list[int] | None = None,
    mounts: list[tuple[str, str]] = (),
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
        "tolerations": list(tolerations or []) + default_tolerations,
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


# -- daemonsets -------------------------------------------------------------

def daemonset(
    name: str,
    namespace: str,
    selector: dict[str, str],
    template_pod: Obj,
    *,
    labels: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    age_s: float = 86400 * 30,
    now: datetime | None = None,
) -> Obj:
    """A DaemonSet whose pod template is taken from an example pod (metadata and spec)."""
    tpl_spec = {k: v for k, v in template_pod["spec"].items() if k not in ("nodeName", "affinity")}
    if node_selector:
        tpl_spec["nodeSelector"] = dict(node_selector)
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": stable_uid("DaemonSet", namespace, name),
            "creationTimestamp": ago(age_s, now),
            "generation": 1,
            "labels": dict(labels or selector),
            "annotations": {"deprecated.daemonset.template.generation": "1"},
        },
        "spec": {
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": dict(selector)},
            "template": {"metadata": {"labels": dict(template_pod["metadata"].get("labels") or {})}, "spec": tpl_spec},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
        },
        "status": {
            "currentNumberScheduled": 0,
            "desiredNumberScheduled": 0,
            "numberMisscheduled": 0,
            "numberReady": 0,
            "observedGeneration": 1,
        },
    }


def matches_labels(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def daemonset_status(ds: Obj, pods: Iterable[Obj]) -> Obj:
    """The status a DaemonSet controller would report for these pods: the ones its selector matches, less those
    another controller owns (two DaemonSets of one Helm release may share selector labels)."""
    selector = ((ds.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    namespace = ds["metadata"].get("namespace")

    def owned_by_another(p: Obj) -> bool:
        return any(o.get("controller") and (o.get("kind"), o.get("name")) != ("DaemonSet", ds["metadata"]["name"])
                   for o in p["metadata"].get("ownerReferences") or [])

    owned = [
        p for p in pods
        if p["metadata"].get("namespace") == namespace and matches_labels(selector, p["metadata"].get("labels") or {})
        and not owned_by_another(p)
    ]
    scheduled = [p for p in owned if (p.get("spec") or {}).get("nodeName")]
    ready = [p for p in scheduled if pod_is_ready(p)]
    status = {
        "currentNumberScheduled": len(scheduled),
        "desiredNumberScheduled": len(scheduled),
        "numberMisscheduled": 0,
        "numberReady": len(ready),
        "observedGeneration": ds["metadata"].get("generation", 1),
        "updatedNumberScheduled": len(scheduled),
        "numberAvailable": len(ready),
    }
    if len(scheduled) > len(ready):
        status["numberUnavailable"] = len(scheduled) - len(ready)
    return status


def pod_is_ready(pod_obj: Obj) -> bool:
    for cond in (pod_obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


# -- events -----------------------------------------------------------------

def event(
    involved: Obj,
    reason: str,
    message: str,
    *,
    kind: str = "Normal",
    component: str = "kubelet",
    host: str | None = None,
    field_path: str | None = None,
    count: int = 1,
    first: str | None = None,
    last: str | None = None,
    serial: int = 0,
) -> Obj:
    """A core v1 Event about an object."""
    meta = involved["metadata"]
    namespace = meta.get("namespace") or "default"
    stamp = first or rfc3339(utcnow())
    ref: Obj = {
        "apiVersion": involved.get("apiVersion", "v1"),
        "kind": involved.get("kind", "Pod"),
        "name": meta["name"],
        "namespace": meta.get("namespace", ""),
        "resourceVersion": meta.get("resourceVersion", ""),
        "uid": meta.get("uid", ""),
    }
    if field_path:
        ref["fieldPath"] = field_path
    if not meta.get("namespace"):
        del ref["namespace"]
    source: Obj = {"component": component}
    if host:
        source["host"] = host
    name_hash = digest("event", namespace, meta["name"], reason, message, serial, length=16)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{name_hash}", "namespace": namespace},
        "involvedObject": ref,
        "reason": reason,
        "message": message,
        "type": kind,
        "source": source,
        "count": count,
        "firstTimestamp": stamp,
        "lastTimestamp": last or stamp,
        "eventTime": None,
        "reportingComponent": component,
        "reportingInstance": host or component,
    }


# -- GPU Feature Discovery / NFD labels ------------------------------------

GPU_MODELS: dict[str, dict[str, str]] = {
    # GFD product label -> facts GFD reports about it
    "NVIDIA-H100-80GB-HBM3": {"memory": "81559", "family": "hopper", "compute.major": "9", "compute.minor": "0",
                              "machine": "PIO-4124GS-TNR-01-NC24B"},
    "NVIDIA-A100-SXM4-80GB": {"memory": "81920", "family": "ampere", "compute.major": "8", "compute.minor": "0",
                              "machine": "DGXA100-920-23687-2530-000"},
    "Tesla-T4": {"memory": "15360", "family": "turing", "compute.major": "7", "compute.minor": "5",
                 "machine": "g4dn.12xlarge"},
    "NVIDIA-L40S": {"memory": "46068", "family": "ada-lovelace", "compute.major": "8", "compute.minor": "9",
                    "machine": "SYS-421GE-TNRT"},
}


def gfd_labels(
    product: str,
    count: int,
    *,
    driver: str = "550.54.15",
    cuda: str = "12.4",
    operator: bool = True,
    mig_strategy: str = "single",
    mig_config: str | None = None,
    replicas: int = 1,
    sharing: str = "none",
    renamed_shared: bool = False,
) -> dict[str, str]:
    """The labels NFD, GFD, the device plugin and the GPU Operator put on a GPU node (shape of the real ones)."""
    facts = GPU_MODELS[product]
    major, minor, rev = (driver.split(".") + ["0", "0"])[:3]
    cuda_major, cuda_minor = cuda.split(".")[:2]
    labels = {
        "feature.node.kubernetes.io/cpu-model.vendor_id": "AMD",
        "feature.node.kubernetes.io/kernel-version.full": KERNEL,
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
        "nvidia.com/cuda.driver-version.full": driver,
        "nvidia.com/cuda.driver-version.major": major,
        "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": rev,
        "nvidia.com/cuda.driver.major": major,
        "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": rev,
        "nvidia.com/cuda.runtime-version.full": cuda,
        "nvidia.com/cuda.runtime-version.major": cuda_major,
        "nvidia.com/cuda.runtime-version.minor": cuda_minor,
        "nvidia.com/cuda.runtime.major": cuda_major,
        "nvidia.com/cuda.runtime.minor": cuda_minor,
        "nvidia.com/gfd.timestamp": "1715703041",
        "nvidia.com/gpu.compute.major": facts["compute.major"],
        "nvidia.com/gpu.compute.minor": facts["compute.minor"],
        "nvidia.com/gpu.count": str(count),
        "nvidia.com/gpu.family": facts["family"],
        "nvidia.com/gpu.machine": facts["machine"],
        "nvidia.com/gpu.memory": facts["memory"],
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product + ("-SHARED" if sharing != "none" and not renamed_shared else ""),
        "nvidia.com/gpu.replicas": str(0 if mig_strategy == "mixed" else replicas),
        "nvidia.com/gpu.sharing-strategy": sharing,
        "nvidia.com/mig.capable": "true" if facts["family"] in ("ampere", "hopper") else "false",
        "nvidia.com/mig.strategy": mig_strategy,
        "nvidia.com/mps.capable": "false",
    }
    if operator:
        for component in ("container-toolkit", "dcgm", "dcgm-exporter", "device-plugin", "driver",
                          "gpu-feature-discovery", "node-status-exporter", "operator-validator"):
            labels[f"nvidia.com/gpu.deploy.{component}"] = "true"
        labels["nvidia.com/gpu-driver-upgrade-state"] = "upgrade-done"
        if labels["nvidia.com/mig.capable"] == "true":
            labels["nvidia.com/gpu.deploy.mig-manager"] = "true"
            labels["nvidia.com/mig.config"] = mig_config or "all-disabled"
            labels["nvidia.com/mig.config.state"] = "success"
    return labels


# Facts about MIG profiles on an H100 80GB, as GFD labels them and nvidia-smi shows them.
MIG_PROFILES: dict[str, dict[str, int]] = {
    "1g.10gb": {"memory": 9984, "multiprocessors": 16, "copy": 1, "decoder": 1, "encoder": 0, "jpeg": 1, "ofa": 0,
                "slices": 1, "bar1": 16383, "used": 5},
    "2g.20gb": {"memory": 20096, "multiprocessors": 32, "copy": 2, "decoder": 2, "encoder": 0, "jpeg": 2, "ofa": 0,
                "slices": 2, "bar1": 32767, "used": 11},
    "3g.40gb": {"memory": 40448, "multiprocessors": 60, "copy": 3, "decoder": 3, "encoder": 0, "jpeg": 3, "ofa": 0,
                "slices": 3, "bar1": 65535, "used": 16},
}


def mig_labels(product: str, per_node: dict[str, int]) -> dict[str, str]:
    """GFD's per-profile labels for a MIG mixed node (per_node: profile -> device count)."""
    labels: dict[str, str] = {}
    for profile, count in per_node.items():
        facts = MIG_PROFILES[profile]
        prefix = f"nvidia.com/mig-{profile}"
        labels[f"{prefix}.count"] = str(count)
        for engine in ("copy", "decoder", "encoder", "jpeg", "ofa"):
            labels[f"{prefix}.engines.{engine}"] = str(facts[engine])
        labels[f"{prefix}.memory"] = str(facts["memory"] if profile != "3g.40gb" else 40320)
        labels[f"{prefix}.multiprocessors"] = str(facts["multiprocessors"])
        labels[f"{prefix}.product"] = f"{product}-MIG-{profile}"
        labels[f"{prefix}.replicas"] = "1"
        labels[f"{prefix}.sharing-strategy"] = "none"
        labels[f"{prefix}.slices.ci"] = str(facts["slices"])
        labels[f"{prefix}.slices.gi"] = str(facts["slices"])
    return labels


# -- services ---------------------------------------------------------------

def cluster_ip(namespace: str, name: str) -> str:
    """A stable address in the default service range 10.96.0.0/12."""
    h = digest("service", namespace, name, length=4)
    return f"10.96.{int(h[:2], 16)}.{max(1, int(h[2:], 16))}"


def service(
    name: str,
    namespace: str,
    selector: dict[str, str] | None,
    ports: list[tuple[str, int, int | str]],
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    ip: str | None = None,
    age_s: float = 86400 * 30,
    now: datetime | None = None,
) -> Obj:
    """A ClusterIP Service. ports: (name, port, targetPort)."""
    address = ip or cluster_ip(namespace, name)
    meta: Obj = {"name": name, "namespace": namespace, "uid": stable_uid("Service", namespace, name),
                 "creationTimestamp": ago(age_s, now), "labels": dict(labels or {})}
    if annotations:
        meta["annotations"] = dict(annotations)
    spec: Obj = {
        "clusterIP": address,
        "clusterIPs": [address],
        "internalTrafficPolicy": "Cluster",
        "ipFamilies": ["IPv4"],
        "ipFamilyPolicy": "SingleStack",
        "ports": [{"name": n, "port": p, "protocol": "TCP", "targetPort": t} if n else {"port": p, "protocol": "TCP", "targetPort": t}
                  for n, p, t in ports],
        "sessionAffinity": "None",
        "type": "ClusterIP",
    }
    if selector:
        spec["selector"] = dict(selector)
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec, "status": {"loadBalancer": {}}}


# -- custom resource definitions ----------------------------------------------

def custom_resource_definition(
    group: str,
    version: str,
    plural: str,
    kind: str,
    *,
    namespaced: bool,
    printer_columns: list[tuple[str, str, str]] = (),
    labels: dict[str, str] | None = None,
    age_s: float = 86400 * 30,
    now: datetime | None = None,
) -> Obj:
    """An established CRD with one served version, a status subresource and an open schema.
    printer_columns: (name, type, jsonPath)."""
    name = f"{plural}.{group}"
    names = {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()}
    created = ago(age_s, now)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name, "uid": stable_uid("crd", name), "creationTimestamp": created, "generation": 1,
                     "labels": dict(labels or {}), "annotations": {"controller-gen.kubebuilder.io/version": "v0.14.0"}},
        "spec": {
            "conversion": {"strategy": "None"},
            "group": group,
            "names": names,
            "scope": "Namespaced" if namespaced else "Cluster",
            "versions": [{
                "name": version,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [{"name": n, "type": t, "jsonPath": p} for n, t, p in printer_columns],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": f"{kind} is the Schema for the {plural} API",
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    },
                }},
            }],
        },
        "status": {
            "acceptedNames": names,
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found",
                 "lastTransitionTime": created},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted", "lastTransitionTime": created},
            ],
            "storedVersions": [version],
        },
    }
