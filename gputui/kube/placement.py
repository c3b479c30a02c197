"""Where a DaemonSet should run: its pod template's node selector, required node affinity and
tolerations against a node record, as the DaemonSet controller decides (stack.py's component matrix)."""
from __future__ import annotations

from typing import Iterable

from .records import DaemonSet, Node, Taint

# Tolerations the DaemonSet controller adds to every DaemonSet pod.
_DAEMONSET_TOLERATED = {
    ("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"), ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"), ("node.kubernetes.io/unschedulable", "NoSchedule"),
}


def _expression_matches(expr: dict, value: str | None) -> bool:
    operator, values = expr.get("operator"), expr.get("values") or []
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and values:
        try:
            return int(value) > int(values[0]) if operator == "Gt" else int(value) < int(values[0])
        except ValueError:
            return False
    return False


def _term_matches(term: dict, node: Node) -> bool:
    fields = {"metadata.name": node.name}
    return all(_expression_matches(e, node.labels.get(e.get("key"))) for e in term.get("matchExpressions") or []) and all(
        _expression_matches(e, fields.get(e.get("key"))) for e in term.get("matchFields") or []
    )


def _tolerates(tolerations: Iterable[dict], taint: Taint) -> bool:
    if (taint.key, taint.effect) in _DAEMONSET_TOLERATED:
        return True
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.effect:
            continue
        if t.get("operator") == "Exists" and not t.get("key"):
            return True
        if t.get("key") != taint.key:
            continue
        if t.get("operator") == "Exists" or t.get("value", "") == taint.value:
            return True
    return False


def daemonset_targets(ds: DaemonSet, node: Node) -> tuple[bool, str | None]:
    """Whether the DaemonSet should run a pod on the node, and if not, why.

    Of NFD's labels the node record keeps only NVIDIA's (pci-10de) and the kernel
    and OS ones the operator's driver DaemonSets select by: a selector on another
    feature.node.kubernetes.io label does not match here.
    """
    labels = node.labels
    for key, value in ds.node_selector.items():
        if labels.get(key) != value:
            has = f"; the node has {key}={labels[key]}" if key in labels else ""
            return False, f"its nodeSelector wants {key}={value}{has}"
    required = (ds.affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms") or []
    if terms and not any(_term_matches(t, node) for t in terms):
        return False, "its node affinity excludes the node"
    for taint in node.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not _tolerates(ds.tolerations, taint):
            return False, f"the node's taint {taint.key}:{taint.effect} is not tolerated"
    return True, None
