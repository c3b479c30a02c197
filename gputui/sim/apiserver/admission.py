"""What kube-apiserver does to an object between the request and the store.

Create: a quantity that is none is refused as decoding refuses it (400),
server-owned metadata is dropped, the name is validated (422 Invalid with
causes, as the real server words it), a pod's resources too (a request above
its limit; an extended resource such as nvidia.com/gpu limited and requested
alike), a ResourceQuota's names and amounts, and a pod is defaulted (requests
from limits, the usual spec defaults, status reset to Pending with its QoS
class). The admission plugins run around this (admission_plugins.py). Update: the main resource keeps the stored status, the `status`
subresource changes only status. A pod created with schedulingGates gets
PodScheduled=False/SchedulingGated (the API server sets it, not the
scheduler); an update may remove gates, never add one.
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from . import decoding, quantity, quota
from .decoding import Undecodable  # noqa: F401  (re-exported: the server catches it here)
from .quantity import Quantity
from .resources import ResourceType

Obj = dict[str, Any]

DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
SUBDOMAIN_HELP = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation "
    "is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_HELP = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SERVER_OWNED_METADATA = ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink")


@dataclass
class Cause:
    reason: str  # FieldValueInvalid, FieldValueRequired, ...
    field: str
    message: str

    def text(self) -> str:
        return f"{self.field}: {self.message}"


class Invalid(Exception):
    """422: the object fails validation."""

    def __init__(self, kind: str, name: str, causes: list[Cause]) -> None:
        self.kind, self.name, self.causes = kind, name, causes
        listed = causes[0].text() if len(causes) == 1 else "[" + ", ".join(c.text() for c in causes) + "]"
        super().__init__(f'{kind} "{name}" is invalid: {listed}')


def _invalid_value(field: str, value: str, why: str) -> Cause:
    return Cause("FieldValueInvalid", field, f'Invalid value: "{value}": {why}')


def _required(field: str, why: str = "") -> Cause:
    return Cause("FieldValueRequired", field, "Required value" + (f": {why}" if why else ""))


def validate_name(resource: ResourceType, name: str) -> list[Cause]:
    if resource.kind == "Namespace":
        if len(name) > 63 or not DNS1123_LABEL.fullmatch(name):
            return [_invalid_value("metadata.name", name, LABEL_HELP)]
        return []
    if len(name) > 253:
        return [_invalid_value("metadata.name", name, "must be no more than 253 characters")]
    if not DNS1123_SUBDOMAIN.fullmatch(name):
        return [_invalid_value("metadata.name", name, SUBDOMAIN_HELP)]
    return []


def check_decodable(resource: ResourceType, obj: Obj) -> None:
    """What decoding refuses (decoding.py): a field of the wrong JSON type, a quantity that is none. Raises Undecodable."""
    decoding.check(resource.kind, resource.version, obj)


def _mapping(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def admit_create(resource: ResourceType, obj: Obj) -> Obj:
    """Validate and default a new object; raises Invalid. Returns the object to store."""
    meta = obj.setdefault("metadata", {}) or {}
    obj["metadata"] = meta
    for key in SERVER_OWNED_METADATA:
        meta.pop(key, None)
    obj["apiVersion"], obj["kind"] = resource.api_version, resource.kind
    causes: list[Cause] = []
    name = meta.get("name") or ""
    if name:
        causes += validate_name(resource, name)
    elif not meta.get("generateName"):
        causes.append(_required("metadata.name", "name or generateName is required"))
    if resource.kind == "Pod":
        causes += _validate_pod(obj)
    elif resource.kind == "ResourceClaim":
        causes += _validate_claim(obj)
        obj.pop("status", None)  # status is the scheduler's (the status subresource)
    elif resource.kind == "ResourceQuota":
        causes += _validate_quota(obj)
        obj.pop("status", None)  # status is the quota controller's
    if causes:
        raise Invalid(resource.kind, name, causes)
    if resource.kind == "Pod":
        default_pod(obj)
    elif resource.kind == "Namespace":
        obj["status"] = {"phase": "Active"}
        # The namespace strategy adds the kubernetes finalizer to whatever finalizers are given (kubectl sends "spec": {}).
        spec = obj["spec"] = _mapping(obj.get("spec"))
        finalizers = spec["finalizers"] = list(spec.get("finalizers") or [])
        if "kubernetes" not in finalizers:
            finalizers.append("kubernetes")
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = name
    elif resource.kind == "Secret":
        obj["type"] = obj.get("type") or "Opaque"  # SetDefaults_Secret
    elif resource.kind == "DaemonSet":
        meta["generation"] = 1
        obj["status"] = {"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0, "numberReady": 0}
    return obj


def _validate_pod(pod: Obj) -> list[Cause]:
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or []
    if not containers:
        return [_required("spec.containers")]
    claim_names, causes = _claim_entries(spec)
    causes += _gate_causes(spec)
    for field_name in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(field_name) or []):
            where = f"spec.{field_name}[{i}]"
            if not c.get("name"):
                causes.append(_required(f"{where}.name"))
            elif not DNS1123_LABEL.fullmatch(c["name"]):
                causes.append(_invalid_value(f"{where}.name", c["name"], LABEL_HELP))
            if not c.get("image"):
                causes.append(_required(f"{where}.image"))
            causes += _resource_causes(f"{where}.resources", c.get("resources") or {})
            for j, ref in enumerate((c.get("resources") or {}).get("claims") or []):
                if ref.get("name") not in claim_names:
                    causes.append(Cause("FieldValueNotFound", f"{where}.resources.claims[{j}].name", f'Not found: "{ref.get("name", "")}"'))
    return causes


def _resource_causes(where: str, resources: Obj) -> list[Cause]:
    """ValidateResourceRequirements: quantities, a request no more than its limit, and an extended resource
    (nvidia.com/gpu), which cannot be overcommitted, limited and requested alike."""
    causes: list[Cause] = []
    parsed: dict[str, dict[str, Quantity]] = {"limits": {}, "requests": {}}
    for kind in ("limits", "requests"):
        for name, value in (resources.get(kind) or {}).items():
            try:
                parsed[kind][name] = quantity.parse(value)
            except quantity.QuantityError:
                continue  # refused at decode already (check_decodable)
            if parsed[kind][name].value < 0:
                causes.append(_invalid_value(f"{where}.{kind}[{name}]", str(parsed[kind][name]), "must be greater than or equal to 0"))
    limits = parsed["limits"]
    for name, request in parsed["requests"].items():
        limit = limits.get(name)
        overcommittable = not quota.is_extended(name) and not name.startswith("hugepages-")
        if limit is not None:
            if not overcommittable and request.value != limit.value:
                causes.append(_invalid_value(f"{where}.requests", str(request), f"must be equal to {name} limit of {limit}"))
            elif request.value > limit.value:
                causes.append(_invalid_value(f"{where}.requests", str(request), f"must be less than or equal to {name} limit of {limit}"))
        elif not overcommittable:
            causes.append(_required(f"{where}.limits", "Limit must be set for non overcommitable resources"))
    return causes


STANDARD_QUOTA_RESOURCES = frozenset({
    "pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps", "persistentvolumeclaims",
    "services.nodeports", "services.loadbalancers", "cpu", "memory", "requests.cpu", "requests.memory", "requests.storage",
    "limits.cpu", "limits.memory", "ephemeral-storage", "requests.ephemeral-storage", "limits.ephemeral-storage",
})


def _validate_quota(quota_obj: Obj) -> list[Cause]:
    """ValidateResourceQuota's spec.hard: a name without a domain is a standard quota resource (a name with one,
    nvidia.com/gpu, is accepted and limits nothing: `requests.nvidia.com/gpu` does), amounts not negative."""
    causes: list[Cause] = []
    for name, value in _mapping(_mapping(quota_obj.get("spec")).get("hard")).items():
        where = f"spec.hard[{name}]"
        if "/" not in name and name not in STANDARD_QUOTA_RESOURCES and not name.startswith(("hugepages-", "requests.hugepages-")):
            causes.append(_invalid_value(where, name, "must be a standard resource for quota"))
        try:
            if quantity.parse(value).value < 0:
                causes.append(_invalid_value(where, str(quantity.parse(value)), "must be greater than or equal to 0"))
        except quantity.QuantityError:
            continue  # refused at decode already (check_decodable)
    return causes


def _gate_causes(spec: Obj) -> list[Cause]:
    gates = spec.get("schedulingGates") or []
    causes = []
    seen: set[str] = set()
    for i, gate in enumerate(gates):
        name = gate.get("name") or ""
        if not name:
            causes.append(_required(f"spec.schedulingGates[{i}].name"))
        elif name in seen:
            causes.append(Cause("FieldValueDuplicate", f"spec.schedulingGates[{i}].name", f'Duplicate value: "{name}"'))
        seen.add(name)
    if gates and spec.get("nodeName"):
        causes.append(Cause("FieldValueForbidden", "spec.nodeName", "Forbidden: cannot be set until all schedulingGates have been cleared"))
    return causes


def _claim_entries(spec: Obj) -> tuple[set[str], list[Cause]]:
    """The names in pod.spec.resourceClaims, and what is wrong with its entries."""
    names: set[str] = set()
    causes: list[Cause] = []
    for i, entry in enumerate(spec.get("resourceClaims") or []):
        where = f"spec.resourceClaims[{i}]"
        name = entry.get("name") or ""
        if not name:
            causes.append(_required(f"{where}.name"))
        elif not DNS1123_LABEL.fullmatch(name):
            causes.append(_invalid_value(f"{where}.name", name, LABEL_HELP))
        elif name in names:
            causes.append(Cause("FieldValueDuplicate", f"{where}.name", f'Duplicate value: "{name}"'))
        names.add(name)
        sources = [k for k in ("resourceClaimName", "resourceClaimTemplateName") if entry.get(k)]
        if len(sources) != 1:
            causes.append(Cause("FieldValueInvalid", where, "Invalid value: must specify exactly one of resourceClaimName, resourceClaimTemplateName"
                                if sources else "Required value: must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"))
    return names, causes


def _validate_claim(claim: Obj) -> list[Cause]:
    """resource.k8s.io/v1 ResourceClaim: named requests, each `exactly` (a device class, a mode) or `firstAvailable`."""
    requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, request in enumerate(requests):
        where = f"spec.devices.requests[{i}]"
        name = request.get("name") or ""
        if not name:
            causes.append(_required(f"{where}.name"))
        elif not DNS1123_LABEL.fullmatch(name):
            causes.append(_invalid_value(f"{where}.name", name, LABEL_HELP))
        elif name in seen:
            causes.append(Cause("FieldValueDuplicate", f"{where}.name", f'Duplicate value: "{name}"'))
        seen.add(name)
        exactly, first = request.get("exactly"), request.get("firstAvailable")
        if bool(exactly) == bool(first):
            causes.append(Cause("FieldValueRequired", where, "Required value: exactly one of `exactly` or `firstAvailable` is required"))
            continue
        if exactly:
            if not exactly.get("deviceClassName"):
                causes.append(_required(f"{where}.exactly.deviceClassName"))
            mode = exactly.setdefault("allocationMode", "ExactCount")  # the defaults kube-apiserver fills in
            if mode == "ExactCount":
                exactly.setdefault("count", 1)
            if mode not in ("ExactCount", "All"):
                causes.append(Cause("FieldValueNotSupported", f"{where}.exactly.allocationMode",
                                    f'Unsupported value: "{mode}": supported values: "All", "ExactCount"'))
            elif mode == "ExactCount" and "count" in exactly and (not isinstance(exactly["count"], int) or exactly["count"] < 1):
                causes.append(_invalid_value(f"{where}.exactly.count", str(exactly["count"]), "must be greater than zero"))
    return causes


# -- pod defaulting ------------------------------------------------------
def _image_pull_policy(image: str) -> str:
    last = image.rsplit("/", 1)[-1]
    if "@" in last:
        return "IfNotPresent"
    tag = last.split(":", 1)[1] if ":" in last else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _default_container(c: Obj) -> None:
    resources = c.setdefault("resources", {})
    limits = resources.get("limits") or {}
    if limits:
        requests = resources.setdefault("requests", {})
        for key, value in limits.items():
            requests.setdefault(key, value)
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    c.setdefault("imagePullPolicy", _image_pull_policy(c.get("image", "")))


def qos_class(pod: Obj) -> str:
    """Guaranteed, Burstable or BestEffort, from the containers' cpu and memory."""
    spec = pod.get("spec") or {}
    containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
    any_set = False
    guaranteed = True
    for c in containers:
        resources = c.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for name in ("cpu", "memory"):
            if name in requests or name in limits:
                any_set = True
            if name not in limits or requests.get(name, limits.get(name)) != limits.get(name):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def default_pod(pod: Obj) -> None:
    spec = pod["spec"]
    for c in (spec.get("initContainers") or []) + spec["containers"]:
        _default_container(c)
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    # DefaultTolerationSeconds: 300 s on a lost node, unless a toleration of the pod's own covers the taint
    tolerations = spec.setdefault("tolerations", [])
    for taint in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if not any(t.get("key") in (taint, None, "") and t.get("effect") in ("NoExecute", None, "") for t in tolerations):
            tolerations.append({"key": taint, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
    pod["status"] = {"phase": "Pending", "qosClass": qos_class(pod)}
    if spec.get("schedulingGates"):
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "lastProbeTime": None, "lastTransitionTime": None,
                                        "reason": "SchedulingGated", "message": "Scheduling is blocked due to non-empty scheduling gates"}]


# -- updates -------------------------------------------------------------
def prepare_update(resource: ResourceType, old: Obj, new: Obj, subresource: str | None) -> Obj:
    """What an update stores: status changes only through `status` when the kind has it. Raises Invalid."""
    meta = new.setdefault("metadata", {})
    new["apiVersion"], new["kind"] = resource.api_version, resource.kind
    for key in ("deletionTimestamp", "deletionGracePeriodSeconds"):
        if key in old["metadata"]:
            meta[key] = old["metadata"][key]
        else:
            meta.pop(key, None)
    if resource.kind == "Pod" and subresource is None:
        old_gates = {g.get("name") for g in (old.get("spec") or {}).get("schedulingGates") or []}
        added = [Cause("FieldValueForbidden", f"spec.schedulingGates[{i}].name", f"Forbidden: only deletion is allowed, but found new scheduling gate '{g.get('name')}'")
                 for i, g in enumerate((new.get("spec") or {}).get("schedulingGates") or []) if g.get("name") not in old_gates]
        if added:
            raise Invalid(resource.kind, old["metadata"].get("name", ""), added)
    if "status" not in resource.subresources:
        return new
    if subresource == "status":
        merged = copy.deepcopy(old)
        merged["status"] = new.get("status") or {}
        merged["metadata"]["resourceVersion"] = new["metadata"].get("resourceVersion", old["metadata"].get("resourceVersion"))
        return merged
    if "status" in old:
        new["status"] = copy.deepcopy(old["status"])
    else:
        new.pop("status", None)
    return new
