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
_SET_RE = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^)]*)\)\s*$")
_CMP_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s*(?:(==|!=|=|>|<)\s*(.*?))?\s*$")


def _split_terms(selector: str) -> list[str]:
    """Split on commas that are not inside a set's parentheses; a comma followed by nothing is refused as the
    parser refuses it."""
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
    if len(terms) > 1 and not terms[-1].strip():
        raise SelectorError("found '', expected: identifier after ','")
    return [t for t in terms if t.strip()]


_QUALIFIED_NAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_HELP = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
                   f"(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{_QUALIFIED_NAME}')")
_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_SUBDOMAIN_HELP = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
                   f"and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '{_SUBDOMAIN}')")
_LABEL_VALUE_HELP = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
                     f"and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation "
                     f"is '({_QUALIFIED_NAME})?')")


def _key_errors(key: str) -> list[str]:
    """apimachinery's IsQualifiedName: an optional DNS subdomain prefix and '/', then a name of at most 63 characters."""
    parts = key.split("/")
    if len(parts) > 2:
        return [f"a qualified name {_QUALIFIED_HELP} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    errors = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        elif len(prefix) > 253:
            errors.append("prefix part must be no more than 253 characters")
        elif not re.fullmatch(_SUBDOMAIN, prefix):
            errors.append(f"prefix part {_SUBDOMAIN_HELP}")
    name = parts[-1]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if not re.fullmatch(_QUALIFIED_NAME, name):
        errors.append(f"name part {_QUALIFIED_HELP}")
    return errors


def _check_requirement(key: str, values: list[str]) -> None:
    """NewRequirement's validation of the key and each value, worded as labels.Parse reports it."""
    errors = _key_errors(key)
    if errors:
        raise SelectorError(f'unable to parse requirement: key: Invalid value: "{key}": {"; ".join(errors)}')
    for i, value in enumerate(values):
        problems = (["must be no more than 63 characters"] if len(value) > 63 else []) + \
            ([_LABEL_VALUE_HELP] if value and not re.fullmatch(_QUALIFIED_NAME, value) else [])
        if problems:
            raise SelectorError(f'unable to parse requirement: values[{i}][{key}]: Invalid value: "{value}": {"; ".join(problems)}')


def _label_term(term: str) -> Callable[[dict[str, str]], bool]:
    m = _SET_RE.match(term)
    if m:
        key, op = m.group(1), m.group(3)
        listed = [v.strip() for v in m.group(4).split(",")]
        _check_requirement(key, listed)
        values = set(listed)
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
        _check_requirement(key, [])
        return lambda labels: key not in labels
    if op is None:
        _check_requirement(key, [])
        return lambda labels: key in labels
    _check_requirement(key, [value] if op not in (">", "<") else [])
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


_NAME = {"metadata.name": _path("metadata", "name")}
_NAME_AND_NAMESPACE = {**_NAME, "metadata.namespace": _path("metadata", "namespace")}
_CORE_EVENT_FIELDS = {
    **_NAME_AND_NAMESPACE,
    **{f"involvedObject.{f}": _path("involvedObject", f) for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")},
    "reason": _path("reason"),
    "reportingComponent": _path("reportingComponent"),
    "source": _path("source", "component"),
    "type": _path("type"),
}

# The field labels each resource's conversion function accepts (kube-apiserver's AddFieldLabelConversionFunc; a
# kind without one takes metadata.name and metadata.namespace, DefaultMetaV1FieldSelectorConversion), by resource key.
FIELDS: dict[str, dict[str, Callable[[Obj], str]]] = {
    "pods": {
        **_NAME_AND_NAMESPACE,
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.restartPolicy": _path("spec", "restartPolicy"),
        "spec.schedulerName": _path("spec", "schedulerName"),
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "spec.hostNetwork": lambda o: "true" if (o.get("spec") or {}).get("hostNetwork") else "false",
        "status.phase": _path("status", "phase"),
        "status.podIP": _path("status", "podIP"),
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    "nodes": {**_NAME, "spec.unschedulable": lambda o: "true" if (o.get("spec") or {}).get("unschedulable") else "false"},
    "namespaces": {**_NAME, "status.phase": _path("status", "phase")},
    "events": _CORE_EVENT_FIELDS,
    # events.k8s.io's labels, each mapped onto the stored core event's
    "events.events.k8s.io": {
        **_NAME_AND_NAMESPACE,
        **{f"regarding.{f}": _path("regarding", f) for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")},
        "reason": _path("reason"),
        "reportingController": _path("reportingController"),
        "source": _path("deprecatedSource", "component"),
        "type": _path("type"),
    },
    "services": {**_NAME_AND_NAMESPACE, "spec.clusterIP": _path("spec", "clusterIP"), "spec.type": _path("spec", "type")},
    "secrets": {**_NAME_AND_NAMESPACE, "type": _path("type")},
    "replicationcontrollers": {**_NAME_AND_NAMESPACE, "status.replicas": _path("status", "replicas")},
    # The fields the real server indexes for ResourceSlices (drivers and monitors select their node's slices).
    "resourceslices.resource.k8s.io": {**_NAME, "spec.nodeName": _path("spec", "nodeName"), "spec.driver": _path("spec", "driver")},
}
_CORE_WORDING = {"pods", "nodes", "namespaces", "events", "events.events.k8s.io", "services", "secrets", "replicationcontrollers"}


def _unsupported(key: str, api_version: str, kind: str, label: str) -> SelectorError:
    """The resource's conversion function's words for a label it does not take."""
    if key in _CORE_WORDING:
        return SelectorError(f"field label not supported: {label}")
    if key in FIELDS:
        group_version = api_version if "/" in api_version else f"/{api_version}"
        return SelectorError(f"field label not supported for {group_version}, Kind={kind}: {label}")
    return SelectorError(f'"{label}" is not a known field selector: only "metadata.name", "metadata.namespace"')


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


def field_selector(selector: str | None, key: str, api_version: str = "v1", kind: str = "") -> Predicate:
    """A predicate for a fieldSelector string on the resource `key`; SelectorError for a label it does not take."""
    if not selector or not selector.strip():
        return _always
    fields = FIELDS.get(key, _NAME_AND_NAMESPACE)
    checks: list[tuple[Callable[[Obj], str], bool, str]] = []
    for term in _split_field_terms(selector):
        m = _FIELD_TERM.match(term)
        if not m:
            raise SelectorError(f"invalid selector: '{selector}'; can't understand '{term}'")
        name, op, value = m.group(1), m.group(2), _unescape(m.group(3).strip())
        getter = fields.get(name)
        if getter is None:
            raise _unsupported(key, api_version, kind, name)
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
