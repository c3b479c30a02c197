"""The DaemonSet controller's arithmetic: on which nodes a DaemonSet wants a pod, and the status it reports.

Pure functions of a DaemonSet, pods and nodes: the controller (controllers.DaemonSetController) writes
`daemonset_status_for` whenever one of them changes; scenario builders use it for a status not given.
"""
from __future__ import annotations

from typing import Any

from .. import builders as b
from .scheduler import matches_affinity, tolerates

Obj = dict[str, Any]

# Tolerations the DaemonSet controller adds to every DaemonSet pod (hostNetwork pods also tolerate network-unavailable).
DAEMONSET_TOLERATIONS: tuple[Obj, ...] = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
DS_KEY = "daemonsets.apps"


def daemonset_should_run(ds: Obj, node: Obj) -> bool:
    """Whether the DaemonSet controller wants a pod of `ds` on `node`: the template's nodeName, nodeSelector and
    required node affinity match, and it tolerates the node's NoSchedule and NoExecute taints."""
    template = ((ds.get("spec") or {}).get("template") or {})
    spec = template.get("spec") or {}
    if spec.get("nodeName") and spec["nodeName"] != node["metadata"]["name"]:
        return False
    if not matches_affinity({"spec": spec}, node):
        return False
    tolerations = list(spec.get("tolerations") or []) + list(DAEMONSET_TOLERATIONS)
    if spec.get("hostNetwork"):
        tolerations.append({"key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule"})
    return all(tolerates(tolerations, t) for t in (node.get("spec") or {}).get("taints") or []
               if t.get("effect") in ("NoSchedule", "NoExecute"))


def owned_by(ds: Obj, pod: Obj) -> bool:
    """The DaemonSet's pod: its controller reference names it, or (no controller) its selector matches."""
    meta = ds["metadata"]
    if pod["metadata"].get("namespace") != meta.get("namespace"):
        return False
    refs = [o for o in pod["metadata"].get("ownerReferences") or [] if o.get("controller")]
    if refs:
        return any(o.get("kind") == "DaemonSet" and o.get("name") == meta["name"] for o in refs)
    selector = ((ds.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return bool(selector) and b.matches_labels(selector, pod["metadata"].get("labels") or {})


def daemonset_status_for(ds: Obj, pods: list[Obj], nodes: list[Obj]) -> Obj:
    """The status the DaemonSet controller reports (updateDaemonSetStatus): per node, desired where a pod should
    run, current where one also does, ready/available where the newest is Ready, misscheduled where one runs and
    should not, updated where the pod has the current template generation."""
    by_node: dict[str, list[Obj]] = {}
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name and owned_by(ds, pod):
            by_node.setdefault(node_name, []).append(pod)
    generation = ((ds["metadata"].get("annotations") or {}).get("deprecated.daemonset.template.generation")
                  or str(ds["metadata"].get("generation", 1)))
    desired = current = ready = updated = misscheduled = 0
    for node in nodes:
        here = by_node.get(node["metadata"]["name"], [])
        if not daemonset_should_run(ds, node):
            misscheduled += bool(here)
            continue
        desired += 1
        if not here:
            continue
        current += 1
        newest = max(here, key=lambda p: p["metadata"].get("creationTimestamp") or "")
        ready += b.pod_is_ready(newest)
        pod_generation = (newest["metadata"].get("labels") or {}).get("pod-template-generation")
        updated += pod_generation is None or pod_generation == generation
    status: Obj = {
        "currentNumberScheduled": current,
        "desiredNumberScheduled": desired,
        "numberMisscheduled": misscheduled,
        "numberReady": ready,
        "observedGeneration": ds["metadata"].get("generation", 1),
        "updatedNumberScheduled": updated,
        "numberAvailable": ready,
    }
    if desired > ready:
        status["numberUnavailable"] = desired - ready
    return status
