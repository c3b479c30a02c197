"""API bodies decoded typed: list pages, WatchList streams and watch events become dicts that hold only what the
record builders read (records.py, keep.py), the shapes below. A pod as kube-apiserver writes it is some 5 KB of JSON
(managedFields, env, probes, volume mounts...) of which gputui reads a few hundred bytes: msgspec skips the rest
without building it, whatever the order of the fields.

    decoding = Decoding.of(POD)
    metadata, items = decoding.page(body)        # items still raw: decode each with decoding.object(item)
    event_type, obj = decoding.event(line)        # a watch event; BOOKMARK and ERROR objects whole
    for event_type, obj in decoding.events(buf):  # many whole lines at once (a WatchList's initial state)
    record = build(filled(obj))                   # Lazy fields decoded: only for an object the model keeps

Most pods of a big cluster do not matter to gputui (no GPU, not the GPU stack's): the fields read only to build
a kept pod's record (its conditions, container statuses, owners) are Lazy, left as their bytes until `filled`.

A field the builders read must be in its kind's shape (tests/model/test_decoding.py builds every scenario's objects
both ways). A kind without a shape is decoded whole. An object that does not fit its shape (a field of another type:
no server writes one, but the simulator keeps objects as given) is decoded whole instead, and its builder judges it
as before (it may count it unreadable).
"""
from __future__ import annotations

from typing import Any, Generic, TypedDict, TypeVar

import msgspec

Obj = dict[str, Any]


# -- shapes (TypedDicts: decoded as plain dicts, every key optional; a leaf typed Any is taken whole) ---------------
Lazy = msgspec.Raw  # a field read only for a kept object: its JSON as it came, decoded by `filled` to its shape below


class OwnerShape(TypedDict, total=False):  # not apiVersion, uid, blockOwnerDeletion
    kind: Any
    name: Any
    controller: Any


class ConditionShape(TypedDict, total=False):  # not lastProbeTime, lastTransitionTime
    type: Any
    status: Any
    reason: Any
    message: Any


class ContainerStatusShape(TypedDict, total=False):  # not image, imageID, containerID, resources, volumeMounts, user
    name: Any
    ready: Any
    started: Any
    restartCount: Any
    state: Any
    lastState: Any
    allocatedResourcesStatus: Any


class ObjectMeta(TypedDict, total=False):
    name: str
    namespace: str
    uid: str
    resourceVersion: str
    labels: dict[str, str]
    creationTimestamp: Any
    deletionTimestamp: Any
    ownerReferences: Lazy


class NodeMeta(ObjectMeta, total=False):
    annotations: dict[str, str]  # the driver upgrade's (records.NODE_ANNOTATIONS); a pod's are not read


class NodeSpec(TypedDict, total=False):
    unschedulable: Any
    taints: Any


class NodeStatus(TypedDict, total=False):  # not images, addresses, volumes: most of a node's bytes
    capacity: Any
    allocatable: Any
    conditions: Any
    nodeInfo: Any


class NodeShape(TypedDict, total=False):
    metadata: NodeMeta
    spec: NodeSpec
    status: NodeStatus


class Resources(TypedDict, total=False):
    limits: Any
    requests: Any


class Container(TypedDict, total=False):  # not image, command, env, ports, probes, mounts
    name: str
    resources: Resources
    restartPolicy: Any  # an init container's "Always": a sidecar


class HostPath(TypedDict, total=False):
    path: Any


class Volume(TypedDict, total=False):  # only a hostPath is read (the kubelet's device-plugin directory)
    hostPath: HostPath


class PodSpec(TypedDict, total=False):
    nodeName: str
    containers: list[Container]
    initContainers: list[Container]
    schedulingGates: Any
    volumes: list[Volume]
    resourceClaims: Any


class PodStatus(TypedDict, total=False):  # not hostIP(s), podIP(s), qosClass
    phase: str
    startTime: Any
    reason: str
    conditions: Lazy
    containerStatuses: Lazy
    initContainerStatuses: Lazy
    resourceClaimStatuses: Any


class PodShape(TypedDict, total=False):
    metadata: ObjectMeta
    spec: PodSpec
    status: PodStatus


class EventShape(TypedDict, total=False):  # core v1 and events.k8s.io/v1 alike; not managedFields, annotations
    metadata: ObjectMeta
    involvedObject: Any
    regarding: Any
    series: Any
    lastTimestamp: Any
    eventTime: Any
    firstTimestamp: Any
    source: Any
    reportingComponent: Any
    reportingController: Any
    reason: Any
    type: Any
    message: Any
    note: Any
    count: Any


# -- envelopes -------------------------------------------------------------------------------------------------------
class _Page(msgspec.Struct):
    """A list: its metadata (resourceVersion, continue) and its items, each still raw."""

    metadata: Obj | None = None
    items: list[msgspec.Raw] | None = None


Shape = TypeVar("Shape")


class _Event(msgspec.Struct, Generic[Shape]):
    type: str
    object: Shape | None = None


_TYPED_EVENTS = frozenset({"ADDED", "MODIFIED", "DELETED"})  # a BOOKMARK's annotations and an ERROR's Status: whole
_WHOLE = msgspec.json.Decoder()
_PAGE = msgspec.json.Decoder(_Page)
_EVENT = msgspec.json.Decoder(_Event[Any])


def _whole(raw: bytes | msgspec.Raw) -> Any:
    """All of it, as it is (a list item that is not an object reaches the table as it is, which skips it)."""
    return _WHOLE.decode(raw)


# Each Lazy field, and how `filled` decodes it (a list of what its shape holds; what does not fit it: whole)
LAZY_FIELDS = tuple(
    (outer, field, msgspec.json.Decoder(list[shape] | None))  # type: ignore[valid-type]
    for outer, field, shape in (("metadata", "ownerReferences", OwnerShape), ("status", "conditions", ConditionShape),
                                ("status", "containerStatuses", ContainerStatusShape),
                                ("status", "initContainerStatuses", ContainerStatusShape))
)


def filled(obj: Obj) -> Obj:
    """The object with its Lazy fields decoded (in place): what a record builder reads. An object read whole has
    none left as bytes."""
    for outer, field, decoder in LAZY_FIELDS:
        part = obj.get(outer)
        if part.__class__ is dict:
            value = part.get(field)
            if value.__class__ is msgspec.Raw:
                try:
                    part[field] = decoder.decode(value)
                except msgspec.ValidationError:
                    part[field] = _WHOLE.decode(value)
    return obj


class Decoding:
    """How one kind's bodies are decoded; `of(shape)` shares one per shape (None: whole)."""

    _made: dict[Any, "Decoding"] = {}

    def __init__(self, shape: Any = None) -> None:
        self._typed = self._typed_event = None
        if shape is not None:
            self._typed = msgspec.json.Decoder(shape)
            self._typed_event = msgspec.json.Decoder(_Event[shape])

    @classmethod
    def of(cls, shape: Any = None) -> "Decoding":
        made = cls._made.get(shape)
        if made is None:
            made = cls._made[shape] = cls(shape)
        return made

    def object(self, raw: bytes | msgspec.Raw) -> Any:
        """One object: its shape's fields, or all of it when it does not fit its shape."""
        if self._typed is None:
            return _whole(raw)
        try:
            return self._typed.decode(raw)
        except msgspec.ValidationError:
            return _whole(raw)

    @staticmethod
    def page(body: bytes) -> tuple[Obj, list[msgspec.Raw]]:
        """A list's metadata and its items, not decoded yet (the caller yields between them).
        msgspec.DecodeError (a ValueError) for a body that is not a list."""
        page = _PAGE.decode(body)
        return page.metadata or {}, page.items or []

    def event(self, line: bytes | bytearray) -> tuple[str, Obj]:
        """A watch event's type and object (ADDED, MODIFIED, DELETED: typed). msgspec.DecodeError (a ValueError)
        for a line that is not one."""
        if self._typed_event is not None:
            try:
                typed = self._typed_event.decode(line)
            except msgspec.ValidationError:  # an object that does not fit its shape, an ERROR's Status: whole
                typed = None
            if typed is not None and typed.type in _TYPED_EVENTS and typed.object is not None:
                return typed.type, typed.object
        event = _EVENT.decode(line)
        return event.type, event.object or {}

    def events(self, lines: bytes | bytearray | memoryview) -> list[tuple[str, Obj]]:
        """The watch events of whole lines (each ending in a newline), decoded in one pass over the buffer. Where
        one of them is not ADDED, MODIFIED or DELETED or does not fit its shape, line by line as `event`."""
        if self._typed_event is not None:
            try:
                typed = self._typed_event.decode_lines(lines)
            except msgspec.ValidationError:
                pass
            else:
                events = [(e.type, e.object) for e in typed if e.type in _TYPED_EVENTS and e.object is not None]
                if len(events) == len(typed):
                    return events
        return [self.event(line) for line in bytes(lines).split(b"\n") if line.strip()]
