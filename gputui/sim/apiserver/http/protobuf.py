"""Request bodies in Kubernetes protobuf, as client-go sends typed objects (kubectl's `create namespace`, `create quota`,
`create configmap`, `create secret`, `create serviceaccount`, `auth can-i`): the `k8s\\0` envelope around a
runtime.Unknown that holds the object's message (k8s.io/api's generated.proto), read into the JSON the object has
once kube-apiserver has decoded it: zero values of plain fields omitted, as Go's JSON encoder writes them.

Only the kinds in SCHEMAS are read; kube-apiserver reads every built-in kind so (a custom resource only from JSON or
YAML, 415 otherwise), which the simulator answers with a 415 for the others too (README: not yet)."""
from __future__ import annotations

import base64
from datetime import datetime, timezone
from typing import Any

Obj = dict[str, Any]

PROTOBUF = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
# What a body in another format may be instead (a custom resource's accepted types, CBOR being off in 1.34).
ACCEPTED = "application/json, application/yaml"


class Unreadable(ValueError):
    """A protobuf body that does not decode."""


def fields(data: bytes) -> list[tuple[int, bytes | int]]:
    """The (field number, value) pairs of one protobuf message: varints as ints, length-delimited fields as bytes."""
    out: list[tuple[int, bytes | int]] = []
    at = 0

    def varint() -> int:
        nonlocal at
        value = shift = 0
        while True:
            if at >= len(data):
                raise Unreadable("unexpected EOF")
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while at < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            out.append((number, varint()))
        elif wire == 2:
            size = varint()
            if at + size > len(data):
                raise Unreadable("unexpected EOF")
            out.append((number, data[at:at + size]))
            at += size
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        else:
            raise Unreadable(f"illegal wireType {wire} for field {number}")
    return out


# message -> field number -> (JSON name, type, how). Types: "string", "bytes" (base64 in JSON), "int", "bool", "time"
# (meta/v1 Time), "quantity" (resource.Quantity), or another message here. How: "one" (a plain Go field: its zero value
# is omitted), "ptr" (a pointer field: kept when sent), "list" (repeated), "map" (map<string, type>).
Schema = dict[int, tuple[str, str, str]]
SCHEMAS: dict[str, Schema] = {
    "ObjectMeta": {
        1: ("name", "string", "one"), 2: ("generateName", "string", "one"), 3: ("namespace", "string", "one"),
        4: ("selfLink", "string", "one"), 5: ("uid", "string", "one"), 6: ("resourceVersion", "string", "one"),
        7: ("generation", "int", "one"), 8: ("creationTimestamp", "time", "one"), 9: ("deletionTimestamp", "time", "ptr"),
        10: ("deletionGracePeriodSeconds", "int", "ptr"), 11: ("labels", "string", "map"), 12: ("annotations", "string", "map"),
        13: ("ownerReferences", "OwnerReference", "list"), 14: ("finalizers", "string", "list"),
    },
    "OwnerReference": {
        1: ("kind", "string", "one"), 3: ("name", "string", "one"), 4: ("uid", "string", "one"), 5: ("apiVersion", "string", "one"),
        6: ("controller", "bool", "ptr"), 7: ("blockOwnerDeletion", "bool", "ptr"),
    },
    "Namespace": {1: ("metadata", "ObjectMeta", "one"), 2: ("spec", "NamespaceSpec", "one"), 3: ("status", "NamespaceStatus", "one")},
    "NamespaceSpec": {1: ("finalizers", "string", "list")},
    "NamespaceStatus": {1: ("phase", "string", "one")},
    "ConfigMap": {1: ("metadata", "ObjectMeta", "one"), 2: ("data", "string", "map"), 3: ("binaryData", "bytes", "map"),
                  4: ("immutable", "bool", "ptr")},
    "Secret": {1: ("metadata", "ObjectMeta", "one"), 2: ("data", "bytes", "map"), 3: ("type", "string", "one"),
               4: ("stringData", "string", "map"), 5: ("immutable", "bool", "ptr")},
    "ServiceAccount": {1: ("metadata", "ObjectMeta", "one"), 2: ("secrets", "ObjectReference", "list"),
                       3: ("imagePullSecrets", "LocalObjectReference", "list"), 4: ("automountServiceAccountToken", "bool", "ptr")},
    "ObjectReference": {1: ("kind", "string", "one"), 2: ("namespace", "string", "one"), 3: ("name", "string", "one"),
                        4: ("uid", "string", "one"), 5: ("apiVersion", "string", "one"), 6: ("resourceVersion", "string", "one"),
                        7: ("fieldPath", "string", "one")},
    "LocalObjectReference": {1: ("name", "string", "one")},
    "ResourceQuota": {1: ("metadata", "ObjectMeta", "one"), 2: ("spec", "ResourceQuotaSpec", "one"),
                      3: ("status", "ResourceQuotaStatus", "one")},
    "ResourceQuotaSpec": {1: ("hard", "quantity", "map"), 2: ("scopes", "string", "list"), 3: ("scopeSelector", "ScopeSelector", "ptr")},
    "ResourceQuotaStatus": {1: ("hard", "quantity", "map"), 2: ("used", "quantity", "map")},
    "ScopeSelector": {1: ("matchExpressions", "ScopedResourceSelectorRequirement", "list")},
    "ScopedResourceSelectorRequirement": {1: ("scopeName", "string", "one"), 2: ("operator", "string", "one"), 3: ("values", "string", "list")},
}
# The kinds read from protobuf, by apiVersion and kind.
KINDS = {("v1", kind) for kind in ("Namespace", "ConfigMap", "Secret", "ServiceAccount", "ResourceQuota")}
_ZERO: dict[str, Any] = {"string": "", "int": 0, "bool": False}


def _time(data: bytes) -> str | None:
    parts = dict(fields(data))
    seconds = parts.get(1, 0)
    if not isinstance(seconds, int):
        raise Unreadable("Time.seconds is not a varint")
    if not seconds:
        return None  # the zero Time: null in JSON
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _value(value: bytes | int, kind: str) -> Any:
    if kind in ("int", "bool"):
        if not isinstance(value, int):
            raise Unreadable(f"a {kind} field is not a varint")
        if kind == "bool":
            return bool(value)
        return value - (1 << 64) if value >= 1 << 63 else value  # int64 in two's complement
    if not isinstance(value, bytes):
        raise Unreadable(f"a {kind} field is a varint")
    if kind == "string":
        return value.decode()
    if kind == "bytes":
        return base64.b64encode(value).decode()
    if kind == "time":
        return _time(value)
    if kind == "quantity":
        return next((v.decode() for n, v in fields(value) if n == 1 and isinstance(v, bytes)), "")
    return message(value, kind)


def message(data: bytes, name: str) -> Obj:
    """One message of SCHEMAS as JSON; fields it does not know are dropped, as Go's decoder skips them."""
    schema = SCHEMAS[name]
    out: Obj = {}
    for number, raw in fields(data):
        if number not in schema:
            continue
        json_name, kind, how = schema[number]
        if how == "map":
            if not isinstance(raw, bytes):
                raise Unreadable(f"{name}.{json_name} entry is a varint")
            entry = dict(fields(raw))
            out.setdefault(json_name, {})[_value(entry.get(1, b""), "string")] = _value(entry.get(2, b""), kind)
        elif how == "list":
            out.setdefault(json_name, []).append(_value(raw, kind))
        else:
            out[json_name] = _value(raw, kind)
    for json_name, kind, how in schema.values():
        if how == "one" and kind in _ZERO and json_name in out and out[json_name] == _ZERO[kind]:
            del out[json_name]
    return out


def decode(data: bytes, api_version: str, kind: str) -> Obj:
    """An object of one of KINDS from its protobuf body; raises Unreadable. The envelope's apiVersion and kind are the
    object's (the caller checks them against the path's)."""
    if not data.startswith(MAGIC):
        raise Unreadable("provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]")
    unknown = dict(fields(data[len(MAGIC):]))
    type_meta = unknown.get(1, b"")
    raw = unknown.get(2, b"")
    if not isinstance(type_meta, bytes) or not isinstance(raw, bytes):
        raise Unreadable("the envelope is not a runtime.Unknown")
    meta = {n: v.decode() for n, v in fields(type_meta) if isinstance(v, bytes)}
    obj = message(raw, kind)
    return {"apiVersion": meta.get(1, api_version), "kind": meta.get(2, kind), **obj}
