"""Raw API JSON read without parsing it whole: an object's labels and a pod's phase from its
bytes, a list's metadata, and where each item of a list page lies, so that a reflector parses
only the items its sink may keep.

Each reader relies on how kube-apiserver lays JSON out (Go's field order) and says when a body
is not laid out so; the caller then parses it whole.
"""
from __future__ import annotations

import re
from typing import Any

import orjson

Obj = dict[str, Any]


# -- one object ----------------------------------------------------------------
# A Kubernetes object's opening as servers write it: `{`, plain string members
# (apiVersion, kind, when present), then `"metadata":{`.
OBJECT_OPENING = re.compile(rb'\{(?:"[A-Za-z]+":"[^"\\]*",)*"metadata":\{')
# An escape that could spell a name differently from its plain bytes (\/ or \uXXXX).
JSON_NAME_ESCAPE = re.compile(rb"\\[u/]")


def raw_metadata_labels(body: bytes, start: int, end: int) -> bytes | None:
    """The raw JSON of metadata.labels of the object body[start:end], found without
    parsing the object; None when the labels cannot be located with certainty this
    way (no labels, unusual layout).

    Servers write labels after metadata's scalar members (name, namespace, uid,
    timestamps). `,"labels":{` cannot lie inside a string (its `"` follows a `,`, so
    it is not escaped, and a closing quote is never followed by a letter); it is
    metadata's own key when no bracket or brace stands between metadata's `{` and it.
    The slice returned runs from the labels' `{` to the first `}` after it: that is
    the whole labels object exactly when it parses as an object (a `}` inside a value
    would leave a string open), which the caller must check.
    """
    opening = OBJECT_OPENING.match(body, start, end)
    if opening is None:
        return None
    inside = opening.end()
    if body.startswith(b'"labels":{', inside):
        at = inside
    else:
        at = body.find(b',"labels":{', inside, end) + 1
        if at <= 0:
            return None
        before = body[inside:at]
        if b"{" in before or b"}" in before or b"[" in before or b"]" in before:
            return None
    close = body.find(b"}", at + 10, end)
    return None if close < 0 else body[at + 9:close + 1]


def raw_pod_phase(body: bytes, start: int, end: int) -> str | None:
    """status.phase of the raw pod body[start:end], parsing only its status; None when
    that cannot be done with certainty. Servers write status last: the slice from the
    last `,"status":{` to the pod's closing brace is the pod's own status exactly when
    it parses as one object (a nested status would leave closing brackets over)."""
    at = body.rfind(b',"status":{', start, end)
    if at < 0 or body[end - 1:end] != b"}":
        return None
    try:
        status = orjson.loads(memoryview(body)[at + 10:end - 1])
    except orjson.JSONDecodeError:
        return None
    phase = status.get("phase") if isinstance(status, dict) else None
    return phase if isinstance(phase, str) else None


# -- lists ---------------------------------------------------------------------
_ITEMS_KEY = b',"items":['


def list_head(body: bytes) -> tuple[Obj, int]:
    """(metadata, offset just past `"items":[`), or offset -1 when the head could not be
    read alone. The head parsing as a complete object proves `items` is a top-level key."""
    head_end = body.find(_ITEMS_KEY, 0, 1 << 16)
    if head_end > 0:
        try:
            head = orjson.loads(body[:head_end] + b"}")
        except orjson.JSONDecodeError:
            pass
        else:
            if isinstance(head, dict):
                return head.get("metadata") or {}, head_end + len(_ITEMS_KEY)
    return orjson.loads(body).get("metadata") or {}, -1


def list_metadata(body: bytes) -> Obj:
    """A list's metadata without parsing its items: servers write metadata before items
    (Go field order), so the head is parsed alone; otherwise the whole body is."""
    return list_head(body)[0]


def item_spans(body: bytes, items_at: int) -> list[tuple[int, int]] | None:
    """Where each item of a raw list lies (start, end), found without parsing the items;
    None when the body is not laid out so (then it must be parsed whole).

    Items are cut where `},` is followed by the first item's opening (`{"metadata":{` from
    kube-apiserver). Such a match is always structural, never inside a string: a string
    cannot hold an unescaped `"`, and the `"` after `{` is followed by a letter, which
    cannot follow a closing quote; so the `}`, `,` and `{` before it are outside strings
    too, and the match is the boundary between two objects of an array. That array is the
    items array because an object whose members start with `metadata` occurs in a
    Kubernetes object only at its top level (templates are members, not array elements).
    Callers still check that every span they parse is an object.
    """
    if items_at < 0:
        return None
    tail = len(body.rstrip())
    if body[tail - 2:tail] != b"]}":
        return None
    end = tail - 2  # the items array's closing bracket
    if body[items_at:end].strip() == b"":
        return []
    opening = OBJECT_OPENING.match(body, items_at)
    if opening is None:
        return None
    cut = b"}," + opening.group()
    spans = []
    start = items_at
    at = body.find(cut, start, end)
    while at >= 0:
        spans.append((start, at + 1))
        start = at + 2
        at = body.find(cut, start, end)
    spans.append((start, end))
    return spans
