"""Slim records built from the API server's objects, as decoded to their kind's shape (decoding.py: a field
read here for nodes, pods or events must be in its shape).

Only the fields gputui uses are kept, so that a model of a big cluster stays
small. Records are plain slotted dataclasses; treat them as immutable (a
change in the cluster replaces the whole record). Every string in them comes
from the cluster and is untrusted: never feed one to Rich markup unescaped.
"""
from __future__ import annotations

import posixpath
import sys
from dataclasses import dataclass, field
from typing import Any

from .quantities import parse_time, whole_count


Obj = dict[str, Any]
PodKey = tuple[str, str]  # (namespace, name)

_intern = sys.intern

# NFD publishes a hundred or more CPU/kernel feature labels per node; of its
# labels gputui needs only the NVIDIA PCI vendor ones and those the GPU
# Operator's driver DaemonSets select nodes by (kernel, OS, RHCOS version).
_NFD_PREFIX = "feature.node.kubernetes.io/"
# The node annotations a verdict reads (kube/stuck.py): the GPU driver upgrade controller's start times, and its
# note that the node was cordoned before the upgrade began; NVSentinel's fault quarantine's cordon and the health
# events it holds the node for.
NODE_ANNOTATIONS = frozenset({
    "nvidia.com/gpu-driver-upgrade-wait-for-pod-completion-start-time",
    "nvidia.com/gpu-driver-upgrade-validation-start-time",
    "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable",
    "quarantineHealthEventIsCordoned",
    "quarantineHealthEvent",
})
_NFD_KEPT_PREFIXES = (
    "feature.node.kubernetes.io/pci-10de", "feature.node.kubernetes.io/kernel-version.full",
    "feature.node.kubernetes.io/system-os_release.",
)


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def object_key(obj: Obj) -> PodKey:
    """(namespace, name) of any raw object; namespace is "" for cluster-scoped ones."""
    meta = _meta(obj)
    return meta.get("namespace") or "", meta.get("name") or ""


# -- nodes -----------------------------------------------------------------
@dataclass(slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(slots=True)
class Condition:
    type: str
    status: str  # "True", "False", "Unknown"
    reason: str
    message: str
    since: float | None = None  # lastTransitionTime


@dataclass(slots=True)
class Node:
    name: str
    uid: str
    labels: dict[str, str]
    capacity: dict[str, str]  # raw quantities, every resource
    allocatable: dict[str, str]
    ready: bool | None  # None: the node reports no Ready condition
    unschedulable: bool
    taints: tuple[Taint, ...]
    conditions: tuple[Condition, ...]
    created: float | None
    kubelet_version: str
    annotations: dict[str, str] = field(default_factory=dict)  # only those gputui reads (NODE_ANNOTATIONS)

    @property
    def key(self) -> str:
        return self.name


def _node_labels(labels: dict[str, str]) -> dict[str, str]:
    return {
        _intern(k): v
        for k, v in labels.items()
        if not k.startswith(_NFD_PREFIX) or k.startswith(_NFD_KEPT_PREFIXES)
    }


def _node_resources(status: Obj, key: str) -> dict[str, str]:
    """status.capacity or allocatable, raw; an extended resource kube-apiserver would refuse (negative,
    fractional, not a quantity) is InvalidQuantity: the node is unreadable, in no figure."""
    resources = status.get(key) or {}
    for name, quantity in resources.items():
        if _is_extended(name):
            whole_count(quantity, f"status.{key}[{name}]")
    return {_intern(k): v for k, v in resources.items()}


def node_from(obj: Obj) -> Node:
    meta = _meta(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    conditions = tuple(
        Condition(c.get("type", ""), c.get("status", "Unknown"), c.get("reason", ""), c.get("message", ""),
                  parse_time(c.get("lastTransitionTime")))
        for c in status.get("conditions") or ()
    )
    ready = None
    for c in conditions:
        if c.type == "Ready":
            ready = c.status == "True"
    return Node(
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        labels=_node_labels(meta.get("labels") or {}),
        capacity=_node_resources(status, "capacity"),
        allocatable=_node_resources(status, "allocatable"),
        ready=ready,
        unschedulable=bool(spec.get("unschedulable")),
        taints=tuple(Taint(t.get("key", ""), t.get("value", ""), t.get("effect", "")) for t in spec.get("taints") or ()),
        conditions=conditions,
        created=parse_time(meta.get("creationTimestamp")),
        kubelet_version=(status.get("nodeInfo") or {}).get("kubeletVersion", ""),
        annotations={k: v for k, v in (meta.get("annotations") or {}).items() if k in NODE_ANNOTATIONS},
    )


# -- pods ------------------------------------------------------------------
@dataclass(slots=True)
class ContainerStatus:
    name: str
    ready: bool
    started: bool
    restarts: int
    state: str  # "waiting", "running", "terminated" or "" when unknown
    reason: str  # the current state's reason (CrashLoopBackOff, ImagePullBackOff, Completed...)
    message: str
    exit_code: int | None  # set when terminated
    last_reason: str  # the last termination's reason (OOMKilled, Error...)
    last_exit_code: int | None


@dataclass(frozen=True, slots=True)
class DeviceHealth:
    """One device a container was given, and its health as the kubelet reports it (KEP-4680's
    `containerStatuses[].allocatedResourcesStatus`)."""

    container: str
    resource: str  # nvidia.com/gpu, or "claim:<claim>/<request>" for a DRA device
    device: str  # the resourceID: the device plugin's id (a GPU UUID, UUID::replica, a MIG UUID), or driver/pool/device
    health: str  # Healthy, Unhealthy, Unknown


@dataclass(slots=True)
class Pod:
    namespace: str
    name: str
    uid: str
    node: str | None
    phase: str
    status: str  # kubectl's STATUS column
    requests: dict[str, int]  # effective pod request of every extended (domain-prefixed) resource
    restarts: int
    ready: int  # ready containers
    total: int  # app containers
    containers: tuple[str, ...]
    init_containers: tuple[str, ...]
    container_statuses: tuple[ContainerStatus, ...]
    init_container_statuses: tuple[ContainerStatus, ...]
    owner: tuple[str, str] | None  # (kind, name) of the controller
    labels: dict[str, str]
    created: float | None
    deleted: float | None  # deletionTimestamp: terminating
    scheduled_reason: str  # PodScheduled=False reason ("Unschedulable"), else ""
    scheduled_message: str  # PodScheduled=False message, else ""
    gates: tuple[str, ...] = ()  # spec.schedulingGates' names: the scheduler leaves the pod alone until they are removed
    devices: tuple[DeviceHealth, ...] = ()  # its containers' allocated devices and their health, where the kubelet says
    started: float | None = None  # status.startTime: when the kubelet took the pod, its GPUs held from then on
    claims: tuple[str, ...] = ()  # its ResourceClaims' names (a template's once the claim is made, in status)

    @property
    def key(self) -> PodKey:
        return self.namespace, self.name

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


def _is_extended(resource: str) -> bool:
    # Extended resources are domain-prefixed; kubernetes.io/ names are native.
    return "/" in resource and not resource.startswith(("kubernetes.io/", "requests.", "limits."))


def _container_requests(container: Obj, where: str) -> dict[str, int]:
    """Extended-resource requests of one container; a limit alone implies the request. A quantity
    kube-apiserver refuses (negative, fractional, not one) is InvalidQuantity naming it (`where`: the
    container's field path): the pod is unreadable, in no figure."""
    resources = container.get("resources") or {}
    out: dict[str, int] = {}
    for key in ("limits", "requests"):  # requests win where both are given
        for name, quantity in (resources.get(key) or {}).items():
            if _is_extended(name):
                out[name] = whole_count(quantity, f"{where}.resources.{key}[{name}]")
    return out


def effective_requests(spec: Obj) -> dict[str, int]:
    """The pod's effective request per extended resource, as the scheduler computes it.

    The sum over app containers, then the larger of that and the largest init
    container; restartable (sidecar) init containers keep running, so they add
    to everything that starts after them.
    """
    total: dict[str, int] = {}
    for i, c in enumerate(spec.get("containers") or ()):
        for name, n in _container_requests(c, f"spec.containers[{i}]").items():
            total[name] = total.get(name, 0) + n
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for i, c in enumerate(spec.get("initContainers") or ()):
        own = _container_requests(c, f"spec.initContainers[{i}]")
        if c.get("restartPolicy") == "Always":
            for name, n in own.items():
                sidecars[name] = sidecars.get(name, 0) + n
                total[name] = total.get(name, 0) + n
            during = dict(sidecars)
        else:
            during = dict(sidecars)
            for name, n in own.items():
                during[name] = during.get(name, 0) + n
        for name, n in during.items():
            if n > init_peak.get(name, 0):
                init_peak[name] = n
    for name, n in init_peak.items():
        if n > total.get(name, 0):
            total[name] = n
    return {_intern(k): v for k, v in total.items() if v}


def _container_status(raw: Obj) -> ContainerStatus:
    state = raw.get("state") or {}
    kind = ""
    detail: Obj = {}
    for candidate in ("waiting", "running", "terminated"):
        if candidate in state:
            kind, detail = candidate, state[candidate] or {}
            break
    last = (raw.get("lastState") or {}).get("terminated") or {}
    return ContainerStatus(
        name=raw.get("name", ""),
        ready=bool(raw.get("ready")),
        started=bool(raw.get("started")),
        restarts=int(raw.get("restartCount") or 0),
        state=kind,
        reason=detail.get("reason", "") or "",
        message=detail.get("message", "") or "",
        exit_code=detail.get("exitCode") if kind == "terminated" else None,
        last_reason=last.get("reason", "") or "",
        last_exit_code=last.get("exitCode"),
    )


def _terminated_label(raw_terminated: Obj, prefix: str) -> str:
    if raw_terminated.get("reason"):
        return prefix + raw_terminated["reason"]
    if raw_terminated.get("signal"):
        return f"{prefix}Signal:{raw_terminated['signal']}"
    return f"{prefix}ExitCode:{raw_terminated.get('exitCode', 0)}"


def _has_condition(status: Obj, cond_type: str) -> bool:
    return any(c.get("type") == cond_type and c.get("status") == "True" for c in status.get("conditions") or ())


def display_status(obj: Obj) -> tuple[str, int, int]:
    """(STATUS, restarts, ready containers) the way `kubectl get pods` derives them."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    meta = _meta(obj)
    phase = status.get("phase") or "Pending"
    label = status.get("reason") or phase
    if any(c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated" for c in status.get("conditions") or ()):
        label = "SchedulingGated"
    restarts = 0
    ready = 0

    init_specs = spec.get("initContainers") or []
    initializing = False
    for i, cs in enumerate(status.get("initContainerStatuses") or ()):
        restarts += int(cs.get("restartCount") or 0)
        state = cs.get("state") or {}
        terminated = state.get("terminated")
        waiting = state.get("waiting")
        sidecar = i < len(init_specs) and init_specs[i].get("restartPolicy") == "Always"
        if terminated is not None and terminated.get("exitCode", 0) == 0:
            continue
        if sidecar and cs.get("started"):
            if cs.get("ready"):
                ready += 1
            continue
        if terminated is not None:
            label = _terminated_label(terminated, "Init:")
        elif waiting is not None and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            label = "Init:" + waiting["reason"]
        else:
            label = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break

    if not initializing or _has_condition(status, "Initialized"):
        restarts = 0
        running = False
        for cs in reversed(status.get("containerStatuses") or ()):
            restarts += int(cs.get("restartCount") or 0)
            state = cs.get("state") or {}
            waiting = state.get("waiting")
            terminated = state.get("terminated")
            if waiting is not None and waiting.get("reason"):
                label = waiting["reason"]
            elif terminated is not None:
                label = _terminated_label(terminated, "")
            elif cs.get("ready") and "running" in state:
                running = True
                ready += 1
        if label == "Completed" and running:
            label = "Running" if _has_condition(status, "Ready") else "NotReady"

    if meta.get("deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            label = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            label = "Terminating"
    return label, restarts, ready


def _controller(meta: Obj) -> tuple[str, str] | None:
    refs = meta.get("ownerReferences") or ()
    for ref in refs:
        if ref.get("controller"):
            return ref.get("kind", ""), ref.get("name", "")
    if refs:
        return refs[0].get("kind", ""), refs[0].get("name", "")
    return None


def pod_from(obj: Obj, requests: dict[str, int] | None = None) -> Pod:
    """Build a Pod record; pass `requests` when already computed by a filter."""
    meta = _meta(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    label, restarts, ready = display_status(obj)
    scheduled_reason = scheduled_message = ""
    for c in status.get("conditions") or ():
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            scheduled_reason = c.get("reason", "") or ""
            scheduled_message = c.get("message", "") or ""
    containers = tuple(c.get("name", "") for c in spec.get("containers") or ())
    return Pod(
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        node=spec.get("nodeName") or None,
        phase=status.get("phase") or "Pending",
        status=label,
        requests=effective_requests(spec) if requests is None else requests,
        restarts=restarts,
        ready=ready,
        total=len(containers),
        containers=containers,
        init_containers=tuple(c.get("name", "") for c in spec.get("initContainers") or ()),
        container_statuses=tuple(_container_status(c) for c in status.get("containerStatuses") or ()),
        init_container_statuses=tuple(_container_status(c) for c in status.get("initContainerStatuses") or ()),
        owner=_controller(meta),
        labels=dict(meta.get("labels") or {}),
        created=parse_time(meta.get("creationTimestamp")),
        deleted=parse_time(meta.get("deletionTimestamp")),
        scheduled_reason=scheduled_reason,
        scheduled_message=scheduled_message,
        gates=tuple(g.get("name", "") for g in spec.get("schedulingGates") or ()),
        devices=_device_health(status),
        started=parse_time(status.get("startTime")),
        claims=_claim_names(spec, status) if spec.get("resourceClaims") else (),
    )


def _claim_names(spec: Obj, status: Obj) -> tuple[str, ...]:
    """The names of the pod's ResourceClaims: given, or made from a template and named in status.resourceClaimStatuses."""
    made = {s.get("name"): s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or () if isinstance(s, dict)}
    names = []
    for entry in spec.get("resourceClaims") or ():
        if isinstance(entry, dict):
            name = entry.get("resourceClaimName") or made.get(entry.get("name"))
            if isinstance(name, str) and name:
                names.append(name)
    return tuple(names)


def _device_health(status: Obj) -> tuple[DeviceHealth, ...]:
    out = []
    for cs in status.get("containerStatuses") or ():
        for resource in cs.get("allocatedResourcesStatus") or ():  # most pods have none: this stays cheap for them
            for device in resource.get("resources") or ():
                out.append(DeviceHealth(cs.get("name", ""), resource.get("name", ""), str(device.get("resourceID", "")),
                                        device.get("health") or "Unknown"))
    return tuple(out)


# -- events ----------------------------------------------------------------
@dataclass(slots=True)
class Event:
    namespace: str
    name: str
    object_kind: str
    object_namespace: str
    object_name: str
    object_uid: str
    reason: str
    type: str  # Normal, Warning
    message: str
    count: int
    last: float | None  # when it last happened
    source: str  # the component that reported it

    @property
    def key(self) -> PodKey:
        return self.namespace, self.name

    @property
    def object_key(self) -> tuple[str, str, str]:
        return self.object_kind, self.object_namespace, self.object_name


def event_from(obj: Obj) -> Event:
    meta = _meta(obj)
    involved = obj.get("involvedObject") or obj.get("regarding") or {}
    series = obj.get("series") or {}
    last = (
        obj.get("lastTimestamp")
        or series.get("lastObservedTime")
        or obj.get("eventTime")
        or obj.get("firstTimestamp")
        or meta.get("creationTimestamp")
    )
    source = obj.get("source") or {}
    return Event(
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        object_kind=involved.get("kind", ""),
        object_namespace=involved.get("namespace", "") or "",
        object_name=involved.get("name", ""),
        object_uid=involved.get("uid", "") or "",
        reason=obj.get("reason", "") or "",
        type=obj.get("type", "") or "",
        message=obj.get("message", "") or obj.get("note", "") or "",
        count=int(obj.get("count") or series.get("count") or 1),
        last=parse_time(last),
        source=source.get("component", "") or obj.get("reportingComponent", "") or obj.get("reportingController", "") or "",
    )


# -- daemonsets --------------------------------------------------------------
@dataclass(slots=True)
class DaemonSet:
    namespace: str
    name: str
    uid: str
    labels: dict[str, str]
    selector: dict[str, str]  # spec.selector.matchLabels
    pod_labels: dict[str, str]  # spec.template.metadata.labels
    node_selector: dict[str, str]  # spec.template.spec.nodeSelector
    affinity: Obj  # spec.template.spec.affinity, raw
    tolerations: tuple[Obj, ...]  # raw
    containers: tuple[str, ...]
    desired: int
    current: int
    ready: int
    available: int
    updated: int
    misscheduled: int
    created: float | None
    # The template mounts the kubelet's device-plugin directory (a device plugin's, whoever made it); only
    # then are its containers' command and args, and env given by value, kept (to tell what it advertises).
    plugin_dir: bool = False
    plugin_args: tuple[str, ...] = ()
    plugin_env: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> PodKey:
        return self.namespace, self.name


DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"  # where the kubelet's device-plugin sockets live


def mounts_device_plugin_dir(pod_spec: Obj) -> bool:
    """A hostPath volume at the kubelet's device-plugin directory, or below it."""
    for volume in pod_spec.get("volumes") or ():
        host = volume.get("hostPath")  # most pods have none: this stays cheap for them
        path = host.get("path") if host else None
        if isinstance(path, str) and "device-plugins" in path:
            path = "/" + posixpath.normpath(path).lstrip("/")
            if path == DEVICE_PLUGIN_DIR or path.startswith(DEVICE_PLUGIN_DIR + "/"):
                return True
    return False


def _plugin_hints(pod_spec: Obj) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    containers = [*(pod_spec.get("initContainers") or ()), *(pod_spec.get("containers") or ())]
    args = tuple(str(a) for c in containers for a in [*(c.get("command") or ()), *(c.get("args") or ())])
    return args, tuple((str(e.get("name", "")), str(e["value"])) for c in containers for e in c.get("env") or () if "value" in e)


def daemonset_from(obj: Obj) -> DaemonSet:
    meta = _meta(obj)
    spec = obj.get("spec") or {}
    template = spec.get("template") or {}
    pod_spec = template.get("spec") or {}
    status = obj.get("status") or {}
    plugin_dir = mounts_device_plugin_dir(pod_spec)
    args, env = _plugin_hints(pod_spec) if plugin_dir else ((), ())
    return DaemonSet(
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        labels=dict(meta.get("labels") or {}),
        selector=dict((spec.get("selector") or {}).get("matchLabels") or {}),
        pod_labels=dict((template.get("metadata") or {}).get("labels") or {}),
        node_selector=dict(pod_spec.get("nodeSelector") or {}),
        affinity=pod_spec.get("affinity") or {},
        tolerations=tuple(pod_spec.get("tolerations") or ()),
        containers=tuple(c.get("name", "") for c in pod_spec.get("containers") or ()),
        desired=int(status.get("desiredNumberScheduled") or 0),
        current=int(status.get("currentNumberScheduled") or 0),
        ready=int(status.get("numberReady") or 0),
        available=int(status.get("numberAvailable") or 0),
        updated=int(status.get("updatedNumberScheduled") or 0),
        misscheduled=int(status.get("numberMisscheduled") or 0),
        created=parse_time(meta.get("creationTimestamp")),
        plugin_dir=plugin_dir,
        plugin_args=args,
        plugin_env=env,
    )
