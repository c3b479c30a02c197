"""Events: one stored object, two views, as kube-apiserver serves them.

kube-apiserver stores core v1 Events; events.k8s.io/v1 is a second view of the same objects (same name, uid and
resourceVersion), converted field by field as its conversion functions do:

    core v1                     events.k8s.io/v1
    involvedObject              regarding
    message                     note
    source                      deprecatedSource
    firstTimestamp              deprecatedFirstTimestamp
    lastTimestamp               deprecatedLastTimestamp
    count                       deprecatedCount
    reportingComponent          reportingController
    eventTime, series, action, reason, related, type, reportingInstance: the same

Each view is written as Go serialises its type: a struct field without a value is `null` or `{}` rather than
absent (core's firstTimestamp, lastTimestamp, eventTime, source; events.k8s.io's eventTime, deprecatedSource,
the deprecated timestamps), empty strings and zero counts are left out where the field is `omitempty`.
"""
from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

CORE_KEY, EVENTS_KEY = "events", "events.events.k8s.io"

_RENAMED = (("involvedObject", "regarding"), ("message", "note"), ("source", "deprecatedSource"),
            ("firstTimestamp", "deprecatedFirstTimestamp"), ("lastTimestamp", "deprecatedLastTimestamp"),
            ("count", "deprecatedCount"), ("reportingComponent", "reportingController"))
_SAME = ("eventTime", "series", "action", "reason", "related", "type", "reportingInstance")


def _converted(obj: Obj, api_version: str, names: list[tuple[str, str]]) -> Obj:
    out: Obj = {"apiVersion": api_version, "kind": "Event", "metadata": obj.get("metadata") or {}}
    for src, dst in names:
        value = obj.get(src)
        if value not in (None, "", 0, {}):
            out[dst] = value
    return out


def to_events_v1(core: Obj) -> Obj:
    """The events.k8s.io/v1 view of a core v1 Event."""
    out = _converted(core, "events.k8s.io/v1", [*_RENAMED, *((f, f) for f in _SAME)])
    out.setdefault("eventTime", None)
    out.setdefault("regarding", {})
    out.setdefault("deprecatedSource", {})
    out.setdefault("deprecatedFirstTimestamp", None)
    out.setdefault("deprecatedLastTimestamp", None)
    return out


def to_core(event: Obj) -> Obj:
    """The core v1 Event an events.k8s.io/v1 one is stored as."""
    out = _converted(event, "v1", [*((dst, src) for src, dst in _RENAMED), *((f, f) for f in _SAME)])
    out.setdefault("involvedObject", {})
    out.setdefault("source", {})
    out.setdefault("firstTimestamp", None)
    out.setdefault("lastTimestamp", None)
    out.setdefault("eventTime", None)
    out.setdefault("reportingComponent", "")
    out.setdefault("reportingInstance", "")
    return out
