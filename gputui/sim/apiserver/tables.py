"""Server-side printing: `meta.k8s.io/v1 Table` rows as kube-apiserver prints them.

kubectl's default output asks for a Table; the server sends every column
(wide ones with priority 1) and kubectl shows the priority-0 ones unless `-o
wide`. One printer per kind, registered by kind; anything else gets NAME/AGE.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable

Obj = dict[str, Any]
Column = tuple[str, str, int]  # name, type, priority
Cells = Callable[[Obj, datetime], list[Any]]  # an object's row at a time
Printer = tuple[list[Column], Cells]

PRINTERS: dict[str, Printer] = {}


def printer(kind: str, columns: list[Column]) -> Callable[[Cells], Cells]:
    def register(cells: Cells) -> Cells:
        PRINTERS[kind] = (columns, cells)
        return cells

    return register


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """Go's duration.HumanDuration, as kubectl shows ages."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def since(value: str | None, now: datetime) -> str:
    when = parse_time(value)
    if when is None:
        return "<unknown>"
    return human_duration((now - when).total_seconds())


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _age(obj: Obj, now: datetime) -> str:
    return since(_meta(obj).get("creationTimestamp"), now)


def format_labels(labels: dict[str, str] | None) -> str:
    if not labels:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def format_label_selector(selector: Obj | None) -> str:
    if not selector:
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        op, key, values = expr.get("operator", ""), expr.get("key", ""), expr.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) if parts else "<none>"


# -- pods ----------------------------------------------------------------
def _has_true_condition(pod: Obj, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def pod_status(pod: Obj, now: datetime) -> tuple[str, int, str, str]:
    """(ready count, total, STATUS, RESTARTS) as kubectl prints a pod (printPod)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    init_specs = spec.get("initContainers") or []
    total = len(spec.get("containers") or [])
    ready = 0
    restarts = 0
    last_restart: datetime | None = None
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    if any(c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated" for c in status.get("conditions") or []):
        reason = "SchedulingGated"

    def note_restart(cs: Obj) -> None:
        nonlocal restarts, last_restart
        restarts += cs.get("restartCount") or 0
        finished = parse_time(((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt"))
        if finished and (last_restart is None or finished > last_restart):
            last_restart = finished

    sidecars = {c.get("name") for c in init_specs if c.get("restartPolicy") == "Always"}
    initializing = False
    for i, cs in enumerate(status.get("initContainerStatuses") or []):
        note_restart(cs)
        state = cs.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated and terminated.get("exitCode") == 0:
            continue
        if cs.get("name") in sidecars and cs.get("started"):
            continue
        if terminated:
            if terminated.get("reason"):
                reason = "Init:" + terminated["reason"]
            elif terminated.get("signal"):
                reason = f"Init:Signal:{terminated['signal']}"
            else:
                reason = f"Init:ExitCode:{terminated.get('exitCode')}"
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break

    if not initializing or _has_true_condition(pod, "Initialized"):
        restarts = 0
        has_running = False
        for cs in reversed(status.get("containerStatuses") or []):
            note_restart(cs)
            state = cs.get("state") or {}
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if waiting and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated and terminated.get("reason"):
                reason = terminated["reason"]
            elif terminated:
                reason = f"Signal:{terminated['signal']}" if terminated.get("signal") else f"ExitCode:{terminated.get('exitCode')}"
            elif cs.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            reason = "Running" if _has_true_condition(pod, "Ready") else "NotReady"

    if _meta(pod).get("deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"
    restarts_text = str(restarts)
    if restarts and last_restart is not None:
        restarts_text = f"{restarts} ({human_duration((now - last_restart).total_seconds())} ago)"
    return f"{ready}/{total}", total, reason, restarts_text


@printer("Pod", [
    ("Name", "string", 0), ("Ready", "string", 0), ("Status", "string", 0), ("Restarts", "string", 0),
    ("Age", "string", 0), ("IP", "string", 1), ("Node", "string", 1), ("Nominated Node", "string", 1),
    ("Readiness Gates", "string", 1),
])
def _pod_cells(pod: Obj, now: datetime) -> list[Any]:
    ready, _, reason, restarts = pod_status(pod, now)
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    gates = spec.get("readinessGates") or []
    if gates:
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        passed = sum(1 for g in gates if conditions.get(g.get("conditionType")) == "True")
        gates_text = f"{passed}/{len(gates)}"
    else:
        gates_text = "<none>"
    return [
        _meta(pod).get("name", ""), ready, reason, restarts, _age(pod, now),
        status.get("podIP") or "<none>", spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>", gates_text,
    ]


# -- nodes ---------------------------------------------------------------
def node_roles(node: Obj) -> str:
    roles = set()
    for key, value in (_meta(node).get("labels") or {}).items():
        if key.startswith("node-role.kubernetes.io/"):
            role = key.split("/", 1)[1]
            if role:
                roles.add(role)
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return ",".join(sorted(roles)) or "<none>"


def node_status(node: Obj) -> str:
    parts = []
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            parts.append("Ready" if c.get("status") == "True" else "NotReady")
            break
    if not parts:
        parts.append("Unknown")
    if (node.get("spec") or {}).get("unschedulable"):
        parts.append("SchedulingDisabled")
    return ",".join(parts)


def _address(node: Obj, kind: str) -> str:
    for a in (node.get("status") or {}).get("addresses") or []:
        if a.get("type") == kind:
            return a.get("address") or "<none>"
    return "<none>"


@printer("Node", [
    ("Name", "string", 0), ("Status", "string", 0), ("Roles", "string", 0), ("Age", "string", 0),
    ("Version", "string", 0), ("Internal-IP", "string", 1), ("External-IP", "string", 1),
    ("OS-Image", "string", 1), ("Kernel-Version", "string", 1), ("Container-Runtime", "string", 1),
])
def _node_cells(node: Obj, now: datetime) -> list[Any]:
    info = (node.get("status") or {}).get("nodeInfo") or {}
    return [
        _meta(node).get("name", ""), node_status(node), node_roles(node), _age(node, now),
        info.get("kubeletVersion", ""), _address(node, "InternalIP"), _address(node, "ExternalIP"),
        info.get("osImage") or "<unknown>", info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


# -- events --------------------------------------------------------------
def _event_source(event: Obj) -> str:
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    host = source.get("host") or event.get("reportingInstance") or ""
    return f"{component}, {host}" if host else component


@printer("Event", [
    ("Last Seen", "string", 0), ("Type", "string", 0), ("Reason", "string", 0), ("Object", "string", 0),
    ("Subobject", "string", 1), ("Source", "string", 1), ("Message", "string", 0),
    ("First Seen", "string", 1), ("Count", "integer", 1), ("Name", "string", 1),
])
def _event_cells(event: Obj, now: datetime) -> list[Any]:
    first = event.get("firstTimestamp") or event.get("eventTime")
    last = event.get("lastTimestamp") or first
    count = event.get("count") or 1
    series = event.get("series")
    if series:
        last = series.get("lastObservedTime") or last
        count = series.get("count") or count
    involved = event.get("involvedObject") or {}
    kind = (involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    return [
        since(last, now), event.get("type", ""), event.get("reason", ""), target,
        involved.get("fieldPath", ""), _event_source(event), (event.get("message") or "").strip(),
        since(first, now), count, _meta(event).get("name", ""),
    ]


# -- daemonsets ----------------------------------------------------------
@printer("DaemonSet", [
    ("Name", "string", 0), ("Desired", "integer", 0), ("Current", "integer", 0), ("Ready", "integer", 0),
    ("Up-to-date", "integer", 0), ("Available", "integer", 0), ("Node Selector", "string", 0),
    ("Age", "string", 0), ("Containers", "string", 1), ("Images", "string", 1), ("Selector", "string", 1),
])
def _daemonset_cells(ds: Obj, now: datetime) -> list[Any]:
    spec, status = ds.get("spec") or {}, ds.get("status") or {}
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    containers = pod_spec.get("containers") or []
    return [
        _meta(ds).get("name", ""), status.get("desiredNumberScheduled", 0), status.get("currentNumberScheduled", 0),
        status.get("numberReady", 0), status.get("updatedNumberScheduled", 0), status.get("numberAvailable", 0),
        format_labels(pod_spec.get("nodeSelector")), _age(ds, now),
        ",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers),
        format_label_selector(spec.get("selector")),
    ]


# -- services --------------------------------------------------------------
def _service_ports(spec: Obj) -> str:
    parts = []
    for port in spec.get("ports") or []:
        node_port = f":{port['nodePort']}" if port.get("nodePort") else ""
        parts.append(f"{port.get('port')}{node_port}/{port.get('protocol', 'TCP')}")
    return ",".join(parts) or "<none>"


@printer("Service", [
    ("Name", "string", 0), ("Type", "string", 0), ("Cluster-IP", "string", 0), ("External-IP", "string", 0),
    ("Port(s)", "string", 0), ("Age", "string", 0), ("Selector", "string", 1),
])
def _service_cells(svc: Obj, now: datetime) -> list[Any]:
    spec = svc.get("spec") or {}
    ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    external = [i.get("ip") or i.get("hostname") for i in ingress] + list(spec.get("externalIPs") or [])
    if spec.get("type") == "ExternalName":
        external = [spec.get("externalName", "")]
    return [
        _meta(svc).get("name", ""), spec.get("type", "ClusterIP"), spec.get("clusterIP") or "<none>",
        ",".join(e for e in external if e) or ("<pending>" if spec.get("type") == "LoadBalancer" else "<none>"),
        _service_ports(spec), _age(svc, now), format_labels(spec.get("selector")),
    ]


# -- custom resources ------------------------------------------------------
@printer("CustomResourceDefinition", [("Name", "string", 0), ("Created At", "date", 0)])
def _crd_cells(crd: Obj, now: datetime) -> list[Any]:
    return [_meta(crd).get("name", ""), _meta(crd).get("creationTimestamp", "")]


# The ClusterPolicy CRD's printer columns: Status (.status.state) and Age, which the
# CRD declares as a string column, so kubectl shows the creation timestamp itself.
@printer("ClusterPolicy", [("Name", "string", 0), ("Status", "string", 0), ("Age", "string", 0)])
def _cluster_policy_cells(policy: Obj, now: datetime) -> list[Any]:
    return [_meta(policy).get("name", ""), (policy.get("status") or {}).get("state", ""), _meta(policy).get("creationTimestamp", "")]


# -- dynamic resource allocation --------------------------------------------
@printer("ResourceSlice", [
    ("Name", "string", 0), ("Node", "string", 0), ("Driver", "string", 0), ("Pool", "string", 0), ("Age", "string", 0),
])
def _resource_slice_cells(rs: Obj, now: datetime) -> list[Any]:
    spec = rs.get("spec") or {}
    return [_meta(rs).get("name", ""), spec.get("nodeName") or "<none>", spec.get("driver", ""),
            (spec.get("pool") or {}).get("name", ""), _age(rs, now)]


def claim_state(claim: Obj) -> str:
    """The STATE column of a ResourceClaim: pending, or allocated[,reserved][,deleted]."""
    status = claim.get("status") or {}
    states = []
    if status.get("allocation"):
        states.append("allocated")
    if status.get("reservedFor"):
        states.append("reserved")
    if _meta(claim).get("deletionTimestamp") or _meta(claim).get("deletionGracePeriodSeconds"):
        states.append("deleted")
    return ",".join(states) or "pending"


@printer("ResourceClaim", [("Name", "string", 0), ("State", "string", 0), ("Age", "string", 0)])
def _resource_claim_cells(claim: Obj, now: datetime) -> list[Any]:
    return [_meta(claim).get("name", ""), claim_state(claim), _age(claim, now)]


# -- namespaces and everything else --------------------------------------
@printer("Namespace", [("Name", "string", 0), ("Status", "string", 0), ("Age", "string", 0)])
def _namespace_cells(ns: Obj, now: datetime) -> list[Any]:
    return [_meta(ns).get("name", ""), (ns.get("status") or {}).get("phase", ""), _age(ns, now)]


# -- kinds kept as given (resources.py): the common ones of a dump -----------
@printer("ConfigMap", [("Name", "string", 0), ("Data", "integer", 0), ("Age", "string", 0)])
def _config_map_cells(cm: Obj, now: datetime) -> list[Any]:
    return [_meta(cm).get("name", ""), len(cm.get("data") or {}) + len(cm.get("binaryData") or {}), _age(cm, now)]


@printer("Secret", [("Name", "string", 0), ("Type", "string", 0), ("Data", "integer", 0), ("Age", "string", 0)])
def _secret_cells(secret: Obj, now: datetime) -> list[Any]:
    return [_meta(secret).get("name", ""), secret.get("type", ""), len(secret.get("data") or {}), _age(secret, now)]


@printer("Deployment", [
    ("Name", "string", 0), ("Ready", "string", 0), ("Up-to-date", "integer", 0), ("Available", "integer", 0),
    ("Age", "string", 0), ("Containers", "string", 1), ("Images", "string", 1), ("Selector", "string", 1),
])
def _deployment_cells(deployment: Obj, now: datetime) -> list[Any]:
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    return [
        _meta(deployment).get("name", ""), f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 1)}",
        status.get("updatedReplicas", 0), status.get("availableReplicas", 0), _age(deployment, now),
        ",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers),
        format_label_selector(spec.get("selector")),
    ]


_GENERIC: Printer = ([("Name", "string", 0), ("Age", "string", 0)], lambda o, now: [_meta(o).get("name", ""), _age(o, now)])


def column_definitions(kind: str) -> list[Obj]:
    columns, _ = PRINTERS.get(kind, _GENERIC)
    return [
        {"name": name, "type": typ, "format": "name" if name == "Name" else "", "description": "", "priority": priority}
        for name, typ, priority in columns
    ]


def cells(kind: str, obj: Obj, now: datetime | None = None) -> list[Any]:
    _, make = PRINTERS.get(kind, _GENERIC)
    return make(obj, now or datetime.now(timezone.utc))
