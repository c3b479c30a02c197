"""DaemonSet objects and the status their controller reports."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from .ids import ago, stable_uid
from .pod_status import pod_is_ready

Obj = dict[str, Any]


def daemonset(
    name: str,
    namespace: str,
    selector: dict[str, str],
    template_pod: Obj,
    *,
    labels: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    age_s: float = 86400 * 30,
    now: datetime | None = None,
) -> Obj:
    """A DaemonSet whose pod template is taken from an example pod (metadata and spec)."""
    tpl_spec = {k: v for k, v in template_pod["spec"].items() if k not in ("nodeName", "affinity")}
    if node_selector:
        tpl_spec["nodeSelector"] = dict(node_selector)
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": stable_uid("DaemonSet", namespace, name),
            "creationTimestamp": ago(age_s, now),
            "generation": 1,
            "labels": dict(labels or selector),
            "annotations": {"deprecated.daemonset.template.generation": "1"},
        },
        "spec": {
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": dict(selector)},
            "template": {"metadata": {"labels": dict(template_pod["metadata"].get("labels") or {})}, "spec": tpl_spec},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
        },
        "status": {
            "currentNumberScheduled": 0,
            "desiredNumberScheduled": 0,
            "numberMisscheduled": 0,
            "numberReady": 0,
            "observedGeneration": 1,
        },
    }


def matches_labels(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def daemonset_status(ds: Obj, pods: Iterable[Obj]) -> Obj:
    """The status a DaemonSet controller would report for these pods: the ones its selector matches, less those
    another controller owns (two DaemonSets of one Helm release may share selector labels)."""
    selector = ((ds.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    namespace = ds["metadata"].get("namespace")

    def owned_by_another(p: Obj) -> bool:
        return any(o.get("controller") and (o.get("kind"), o.get("name")) != ("DaemonSet", ds["metadata"]["name"])
                   for o in p["metadata"].get("ownerReferences") or [])

    owned = [
        p for p in pods
        if p["metadata"].get("namespace") == namespace and matches_labels(selector, p["metadata"].get("labels") or {})
        and not owned_by_another(p)
    ]
    scheduled = [p for p in owned if (p.get("spec") or {}).get("nodeName")]
    ready = [p for p in scheduled if pod_is_ready(p)]
    status = {
        "currentNumberScheduled": len(scheduled),
        "desiredNumberScheduled": len(scheduled),
        "numberMisscheduled": 0,
        "numberReady": len(ready),
        "observedGeneration": ds["metadata"].get("generation", 1),
        "updatedNumberScheduled": len(scheduled),
        "numberAvailable": len(ready),
    }
    if len(scheduled) > len(ready):
        status["numberUnavailable"] = len(scheduled) - len(ready)
    return status
