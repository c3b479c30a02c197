"""Label and field selectors, parsed once per request into predicates.

Label selectors follow kube-apiserver's grammar: `k=v`, `k==v`, `k!=v`,
`k in (a,b)`, `k notin (a,b)`, `k` (exists), `!k` (does not exist), `k>1`,
`k<1`, comma meaning AND. Field selectors support `=`, `==` and `!=` on the
fields each kind declares; anything else is refused as the real server does.
"""
from __future__ import annotations

import re
from typing import Any, Callable

Obj = dict[str, Any]
Predicate = Callable[[Obj], bool]


class SelectorError(ValueError):
    """A selector the server refuses (400 BadRequest)."""


def _always(_: Obj) -> bool:
    return True


# -- label selectors -----------------------------------------------------
_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET_RE = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^)]*)\)\s*$")
_CMP_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s*(?:(==|!=|=|>|<)\s*(.*?))?\s*$")


def _split_terms(selector: str) -> list[str]:
    """Split on commas that are not inside a set's parentheses."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(selector):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            terms.append(selector[start:i])
            start = i + 1
    terms.append(selector[start:])
    return [t for t in terms if t.strip()]


def _label_term(term: str) -> Callable[[dict[str, str]], bool]:
    m = _SET_RE.match(term)
    if m:
        key, op = m.group(1), m.group(3)
        values = {v.strip() for v in m.group(4).split(",")}
        for v in values:
            if not re.fullmatch(_VALUE, v):
                raise SelectorError(f"unable to parse requirement: invalid label value: {v!r}")
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    m = _CMP_RE.match(term)
    if not m:
        raise SelectorError(f"unable to parse requirement: found '{term.strip()}', expected: identifier")
    negated, key, op, value = m.group(1), m.group(2), m.group(4), m.group(5)
    if negated:
        if op:
            raise SelectorError(f"unable to parse requirement: found '{op}', expected: identifier after '!'")
        return lambda labels: key not in labels
    if op is None:
        return lambda labels: key in labels
    if not re.fullmatch(_VALUE, value):
        raise SelectorError(f"unable to parse requirement: values[0][{key}]: Invalid value: {value!r}")
    if op in ("=", "=="):
        return lambda labels: labels.get(key) == value
    if op == "!=":
        return lambda labels: labels.get(key) != value
    try:
        bound = int(value)
    except ValueError:
        raise SelectorError(f"unable to parse requirement: for 'gt', 'lt' operators, the value must be an integer: {value!r}") from None

    def compare(labels: dict[str, str]) -> bool:
        try:
            n = int(labels[key])
        except (KeyError, ValueError):
            return False
        return n > bound if op == ">" else n < bound

    return compare


def label_selector(selector: str | None) -> Predicate:
    """A predicate over objects for a labelSelector string (empty: everything)."""
    if not selector or not selector.strip():
        return _always
    terms = [_label_term(t) for t in _split_terms(selector)]

    def matches(obj: Obj) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(t(labels) for t in terms)

    return matches


# -- field selectors -----------------------------------------------------
def _path(*keys: str) -> Callable[[Obj], str]:
    def get(obj: Obj) -> str:
        cur: Any = obj
        for k in keys:
            if not isinstance(cur, dict):
                return ""
            cur = cur.get(k)
        if cur is None:
            return ""
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)

    return get


_COMMON_FIELDS = {
    "metadata.name": _path("metadata", "name"),
    "metadata.namespace": _path("metadata", "namespace"),
}

# Fields each kind accepts in fieldSelector, beyond metadata.name/namespace.
FIELDS_BY_KIND: dict[str, dict[str, Callable[[Obj], str]]] = {
    "Pod": {
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.restartPolicy": _path("spec", "restartPolicy"),
        "spec.schedulerName": _path("spec", "schedulerName"),
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "spec.hostNetwork": lambda o: "true" if (o.get("spec") or {}).get("hostNetwork") else "false",
        "status.phase": _path("status", "phase"),
        "status.podIP": _path("status", "podIP"),
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    "Node": {"spec.unschedulable": lambda o: "true" if (o.get("spec") or {}).get("unschedulable") else "false"},
    "Namespace": {"status.phase": _path("status", "phase")},
    "Event": {
        "involvedObject.kind": _path("involvedObject", "kind"),
        "involvedObject.namespace": _path("involvedObject", "namespace"),
        "involvedObject.name": _path("involvedObject", "name"),
        "involvedObject.uid": _path("involvedObject", "uid"),
        "involvedObject.apiVersion": _path("involvedObject", "apiVersion"),
        "involvedObject.resourceVersion": _path("involvedObject", "resourceVersion"),
        "involvedObject.fieldPath": _path("involvedObject", "fieldPath"),
        "reason": _path("reason"),
        "reportingComponent": _path("reportingComponent"),
        "source": _path("source", "component"),
        "type": _path("type"),
    },
    "Service": {"spec.clusterIP": _path("spec", "clusterIP"), "spec.type": _path("spec", "type")},
    # The fields the real server indexes for ResourceSlices (drivers and monitors select their node's slices).
    "ResourceSlice": {
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.driver": _path("spec", "driver"),
        "spec.pool.name": _path("spec", "pool", "name"),
    },
}

_FIELD_TERM = re.compile(r"^\s*([^=!\s]+)\s*(==|!=|=)(.*)$")


def _split_field_terms(selector: str) -> list[str]:
    """Split on commas not escaped with a backslash."""
    terms, current, escaped = [], [], False
    for ch in selector:
        if escaped:
            current.append(ch)
            escaped = False
        elif ch == "\\":
            current.append(ch)
            escaped = True
        elif ch == ",":
            terms.append("".join(current))
            current = []
        else:
            current.append(ch)
    terms.append("".join(current))
    return [t for t in terms if t.strip()]


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def field_selector(selector: str | None, kind: str) -> Predicate:
    """A predicate for a fieldSelector string; SelectorError for an unsupported field."""
    if not selector or not selector.strip():
        return _always
    fields = {**_COMMON_FIELDS, **FIELDS_BY_KIND.get(kind, {})}
    checks: list[tuple[Callable[[Obj], str], bool, str]] = []
    for term in _split_field_terms(selector):
        m = _FIELD_TERM.match(term)
        if not m:
            raise SelectorError(f"invalid selector: '{selector}'; can't understand '{term}'")
        name, op, value = m.group(1), m.group(2), _unescape(m.group(3).strip())
        getter = fields.get(name)
        if getter is None:
            raise SelectorError(f'field label not supported: {name}')
        checks.append((getter, op != "!=", value))

    def matches(obj: Obj) -> bool:
        return all((get(obj) == value) == equal for get, equal, value in checks)

    return matches


def required_name(selector: str | None) -> str | None:
    """The name a list or watch is for when its fieldSelector requires `metadata.name=X` (or `==`): what
    kube-apiserver's RequestInfoFactory makes the request's name, so that RBAC's resourceNames apply to it.
    None when the selector requires none, does not parse, or the name is not a valid path segment."""
    if not selector:
        return None
    terms = [_FIELD_TERM.match(term) for term in _split_field_terms(selector)]
    if not all(terms):
        return None
    for m in terms:
        if m is not None and m.group(1) == "metadata.name" and m.group(2) != "!=":
            name = _unescape(m.group(3).strip())
            return name if name and name not in (".", "..") and "/" not in name and "%" not in name else None
    return None


def both(*predicates: Predicate) -> Predicate:
    active = [p for p in predicates if p is not _always]
    if not active:
        return _always
    if len(active) == 1:
        return active[0]
    return lambda obj: all(p(obj) for p in active)


def _match_expression(expr: dict[str, Any], value: str | None) -> bool:
    op, values = expr.get("operator"), expr.get("values") or []
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and values:
        try:
            left, right = int(value), int(values[0])
        except ValueError:
            return False
        return left > right if op == "Gt" else left < right
    return False


def node_selector_matches(selector: dict[str, Any] | None, node: dict[str, Any]) -> bool:
    """A v1 NodeSelector: terms ORed (an empty term matches nothing); within one, matchExpressions on
    the node's labels and matchFields on metadata.name ANDed. No selector matches every node."""
    if not selector:
        return True
    labels = (node.get("metadata") or {}).get("labels") or {}
    fields = {"metadata.name": node["metadata"]["name"]}
    for term in selector.get("nodeSelectorTerms") or []:
        exprs, field_exprs = term.get("matchExpressions") or [], term.get("matchFields") or []
        if (exprs or field_exprs) and all(_match_expression(e, labels.get(e.get("key", ""))) for e in exprs) \
                and all(_match_expression(e, fields.get(e.get("key", ""))) for e in field_exprs):
            return True
    return False
