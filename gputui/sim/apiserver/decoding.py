"""What kube-apiserver's decoding refuses before anything else looks at an object (400 BadRequest).

The API server decodes JSON into Go structs: a value of the wrong JSON type for a typed field (`containers: 7`,
`status.capacity` as a list, `containerStatuses` as a mapping) fails with encoding/json's UnmarshalTypeError,
the first one in the document, and a quantity that is none fails resource.Quantity's UnmarshalJSON. Only the
fields the simulator's components read are typed here (a field not listed is taken as it comes); null is the
zero value of any type, as in Go. The scenario loader refuses the same objects, naming the file and item.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Union

from . import quantity


class Undecodable(Exception):
    """400: the body is not an object of its kind."""


@dataclass(frozen=True)
class Struct:
    name: str  # the Go type's name: NodeStatus
    fields: dict[str, "GoType"]


@dataclass(frozen=True)
class Slice:
    of: "GoType"
    name: str  # as Go prints the type: []v1.Container


@dataclass(frozen=True)
class Map:
    of: "GoType"
    name: str  # map[string]string, v1.ResourceList


GoType = Union[str, Struct, Slice, Map]  # a str: a scalar, string, bool, int32, int64, or "quantity"

STRINGS = Slice("string", "[]string")
STRING_MAP = Map("string", "map[string]string")
RESOURCE_LIST = Map("quantity", "v1.ResourceList")

OBJECT_META = Struct("ObjectMeta", {
    "name": "string", "generateName": "string", "namespace": "string", "uid": "string", "resourceVersion": "string",
    "generation": "int64", "labels": STRING_MAP, "annotations": STRING_MAP, "finalizers": STRINGS,
    "ownerReferences": Slice(Struct("OwnerReference", {"apiVersion": "string", "kind": "string", "name": "string",
                                                        "uid": "string", "controller": "bool"}), "[]v1.OwnerReference"),
})
RESOURCE_REQUIREMENTS = Struct("ResourceRequirements", {
    "limits": RESOURCE_LIST, "requests": RESOURCE_LIST,
    "claims": Slice(Struct("ResourceClaim", {"name": "string", "request": "string"}), "[]v1.ResourceClaim"),
})
CONTAINER = Struct("Container", {
    "name": "string", "image": "string", "command": STRINGS, "args": STRINGS, "imagePullPolicy": "string",
    "resources": RESOURCE_REQUIREMENTS,
    "ports": Slice(Struct("ContainerPort", {"name": "string", "containerPort": "int32", "protocol": "string"}), "[]v1.ContainerPort"),
    "env": Slice(Struct("EnvVar", {"name": "string", "value": "string"}), "[]v1.EnvVar"),
})
TOLERATION = Struct("Toleration", {"key": "string", "operator": "string", "value": "string", "effect": "string",
                                   "tolerationSeconds": "int64"})
POD_SPEC = Struct("PodSpec", {
    "containers": Slice(CONTAINER, "[]v1.Container"), "initContainers": Slice(CONTAINER, "[]v1.Container"),
    "nodeName": "string", "nodeSelector": STRING_MAP, "restartPolicy": "string", "schedulerName": "string",
    "tolerations": Slice(TOLERATION, "[]v1.Toleration"), "priority": "int32", "terminationGracePeriodSeconds": "int64",
    "schedulingGates": Slice(Struct("PodSchedulingGate", {"name": "string"}), "[]v1.PodSchedulingGate"),
    "resourceClaims": Slice(Struct("PodResourceClaim", {"name": "string", "resourceClaimName": "string",
                                                         "resourceClaimTemplateName": "string"}), "[]v1.PodResourceClaim"),
})
_CONTAINER_STATE = Struct("ContainerState", {
    "waiting": Struct("ContainerStateWaiting", {"reason": "string", "message": "string"}),
    "running": Struct("ContainerStateRunning", {"startedAt": "string"}),
    "terminated": Struct("ContainerStateTerminated", {"exitCode": "int32", "reason": "string", "message": "string",
                                                      "startedAt": "string", "finishedAt": "string"}),
})
CONTAINER_STATUS = Struct("ContainerStatus", {
    "name": "string", "ready": "bool", "started": "bool", "restartCount": "int32", "image": "string", "imageID": "string",
    "containerID": "string", "state": _CONTAINER_STATE, "lastState": _CONTAINER_STATE,
})
_CONDITION_FIELDS: dict[str, GoType] = {"type": "string", "status": "string", "reason": "string", "message": "string"}
POD_STATUS = Struct("PodStatus", {
    "phase": "string", "reason": "string", "message": "string", "hostIP": "string", "podIP": "string",
    "qosClass": "string", "conditions": Slice(Struct("PodCondition", _CONDITION_FIELDS), "[]v1.PodCondition"),
    "containerStatuses": Slice(CONTAINER_STATUS, "[]v1.ContainerStatus"),
    "initContainerStatuses": Slice(CONTAINER_STATUS, "[]v1.ContainerStatus"),
})
NODE_SPEC = Struct("NodeSpec", {
    "unschedulable": "bool", "providerID": "string",
    "taints": Slice(Struct("Taint", {"key": "string", "value": "string", "effect": "string"}), "[]v1.Taint"),
})
NODE_STATUS = Struct("NodeStatus", {
    "capacity": RESOURCE_LIST, "allocatable": RESOURCE_LIST,
    "conditions": Slice(Struct("NodeCondition", _CONDITION_FIELDS), "[]v1.NodeCondition"),
    "addresses": Slice(Struct("NodeAddress", {"type": "string", "address": "string"}), "[]v1.NodeAddress"),
})
LABEL_SELECTOR = Struct("LabelSelector", {"matchLabels": STRING_MAP})
TEMPLATE = Struct("PodTemplateSpec", {"metadata": OBJECT_META, "spec": POD_SPEC})

# The kinds whose fields are typed: the top-level fields of each, by kind.
KINDS: dict[str, Struct] = {
    "Pod": Struct("Pod", {"metadata": OBJECT_META, "spec": POD_SPEC, "status": POD_STATUS}),
    "Node": Struct("Node", {"metadata": OBJECT_META, "spec": NODE_SPEC, "status": NODE_STATUS}),
    "Namespace": Struct("Namespace", {"metadata": OBJECT_META}),
    "DaemonSet": Struct("DaemonSet", {"metadata": OBJECT_META, "spec": Struct("DaemonSetSpec", {
        "selector": LABEL_SELECTOR, "template": TEMPLATE})}),
    "ResourceQuota": Struct("ResourceQuota", {"metadata": OBJECT_META, "spec": Struct("ResourceQuotaSpec", {"hard": RESOURCE_LIST}),
                                              "status": Struct("ResourceQuotaStatus", {"hard": RESOURCE_LIST, "used": RESOURCE_LIST})}),
    "LimitRange": Struct("LimitRange", {"metadata": OBJECT_META, "spec": Struct("LimitRangeSpec", {"limits": Slice(Struct(
        "LimitRangeItem", {"type": "string", "max": RESOURCE_LIST, "min": RESOURCE_LIST, "default": RESOURCE_LIST,
                           "defaultRequest": RESOURCE_LIST, "maxLimitRequestRatio": RESOURCE_LIST}), "[]v1.LimitRangeItem")})}),
    "Event": Struct("Event", {"metadata": OBJECT_META, "reason": "string", "message": "string", "type": "string", "count": "int32",
                              "involvedObject": Struct("ObjectReference", {"kind": "string", "namespace": "string", "name": "string",
                                                                           "uid": "string", "fieldPath": "string"}),
                              "source": Struct("EventSource", {"component": "string", "host": "string"})}),
}

_SCALARS: dict[str, tuple[type, ...]] = {"string": (str,), "bool": (bool,), "int32": (int,), "int64": (int,)}


def _json_kind(value: Any) -> str:
    """How encoding/json names a JSON value in an UnmarshalTypeError."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return f"number {value!r}" if isinstance(value, float) else "number"
    return "string" if isinstance(value, str) else "array" if isinstance(value, list) else "object" if isinstance(value, dict) else "value"


def _type_name(t: GoType) -> str:
    return t if isinstance(t, str) else t.name if not isinstance(t, Struct) else f"v1.{t.name}"


def _first_error(value: Any, t: GoType, struct: str, path: str) -> str | None:
    if value is None:
        return None
    wrong = f"json: cannot unmarshal {_json_kind(value)} into Go struct field {struct}.{path} of type {_type_name(t)}"
    if t == "quantity":
        try:
            quantity.parse(value)
        except quantity.QuantityError as error:
            return str(error)
        return None
    if isinstance(t, str):
        ok = isinstance(value, _SCALARS[t]) and not (t != "bool" and isinstance(value, bool))
        return None if ok else wrong
    if isinstance(t, Slice):
        return _first_of(((item, t.of, struct, path) for item in value)) if isinstance(value, list) else wrong
    if not isinstance(value, dict):
        return wrong
    if isinstance(t, Map):
        return _first_of((item, t.of, struct, path) for item in value.values())
    # the document's order: the first error in it is the one reported
    return _first_of((item, t.fields[key], t.name, f"{path}.{key}") for key, item in value.items() if key in t.fields)


def _first_of(checks: Iterable[tuple[Any, GoType, str, str]]) -> str | None:
    for check in checks:
        error = _first_error(*check)
        if error is not None:
            return error
    return None


def check(kind: str, version: str, obj: Any) -> None:
    """Raises Undecodable, worded as kube-apiserver words it, when decoding would refuse the object."""
    struct = KINDS.get(kind)
    if struct is None or not isinstance(obj, dict):
        return
    for key, value in obj.items():
        field = struct.fields.get(key)
        if field is not None and (error := _first_error(value, field, kind, key)) is not None:
            raise Undecodable(f'{kind} in version "{version}" cannot be handled as a {kind}: {error}')
