"""Kueue's objects as Kueue 0.15 and later serve and write them (kueue.x-k8s.io/v1beta2, its storage
version since 0.16): the CustomResourceDefinitions (names, short names and printer columns as
Kueue's config/components/crd/bases declare them), ResourceFlavors, ClusterQueues and LocalQueues
with the status Kueue's controllers give them, and Workloads with the conditions its scheduler sets
(apis/kueue/v1beta2, pkg/workload, pkg/scheduler/flavorassigner).
"""
from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from .crds import custom_resource_definition
from .ids import ago, stable_uid

Obj = dict[str, Any]

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
API_VERSION = f"{GROUP}/{VERSION}"
ADMISSION_GATE = "kueue.x-k8s.io/admission"  # the pod integration's scheduling gate, removed on admission
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MANAGED_LABEL = "kueue.x-k8s.io/managed"  # on pods of Kueue's pod integration (also its finalizer)
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
RESOURCE_IN_USE = "kueue.x-k8s.io/resource-in-use"  # the finalizer of workloads and queues

# plural -> (kind, namespaced, short names, printer columns (name, type, jsonPath, priority)), from Kueue's CRDs.
KINDS: dict[str, tuple[str, bool, tuple[str, ...], tuple[tuple[str, str, str, int], ...]]] = {
    "workloads": ("Workload", True, ("kwl", "kueueworkload", "kueueworkloads"), (
        ("Queue", "string", ".spec.queueName", 0), ("Reserved in", "string", ".status.admission.clusterQueue", 0),
        ("Admitted", "string", ".status.conditions[?(@.type=='Admitted')].status", 0),
        ("Finished", "string", ".status.conditions[?(@.type=='Finished')].status", 0),
        ("Age", "date", ".metadata.creationTimestamp", 0))),
    "localqueues": ("LocalQueue", True, ("queue", "queues", "lq"), (
        ("ClusterQueue", "string", ".spec.clusterQueue", 0), ("Pending Workloads", "integer", ".status.pendingWorkloads", 0),
        ("Admitted Workloads", "integer", ".status.admittedWorkloads", 0))),
    "clusterqueues": ("ClusterQueue", False, ("cq",), (
        ("Cohort", "string", ".spec.cohortName", 0), ("Strategy", "string", ".spec.queueingStrategy", 1),
        ("Pending Workloads", "integer", ".status.pendingWorkloads", 0),
        ("Admitted Workloads", "integer", ".status.admittedWorkloads", 1))),
    "resourceflavors": ("ResourceFlavor", False, ("flavor", "flavors", "rf"), ()),
}


def kueue_crds(now: datetime | None = None) -> list[Obj]:
    """The CRDs of the kinds in KINDS."""
    out = []
    for plural, (kind, namespaced, short_names, columns) in KINDS.items():
        crd = custom_resource_definition(GROUP, VERSION, plural, kind, namespaced=namespaced,
                                         printer_columns=[(n, t, p) for n, t, p, _ in columns], now=now)
        crd["spec"]["names"]["shortNames"] = list(short_names)
        crd["status"]["acceptedNames"] = crd["spec"]["names"]
        for column, (_, _, _, priority) in zip(crd["spec"]["versions"][0]["additionalPrinterColumns"], columns, strict=True):
            if priority:
                column["priority"] = priority
        out.append(crd)
    return out


def _meta(kind: str, name: str, namespace: str | None, age_s: float, now: datetime | None, **extra: Any) -> Obj:
    meta: Obj = {"name": name, "uid": stable_uid(kind, namespace or "", name), "creationTimestamp": ago(age_s, now), "generation": 1}
    if namespace is not None:
        meta["namespace"] = namespace
    meta.update(extra)
    return meta


def condition(type_: str, status: bool, reason: str, message: str, since: str, generation: int = 1) -> Obj:
    """A metav1.Condition, as Kueue sets them."""
    return {"type": type_, "status": "True" if status else "False", "reason": reason, "message": message,
            "lastTransitionTime": since, "observedGeneration": generation}


def resource_flavor(name: str, node_labels: dict[str, str], *, age_s: float = 86400 * 30, now: datetime | None = None) -> Obj:
    return {"apiVersion": API_VERSION, "kind": "ResourceFlavor",
            "metadata": _meta("ResourceFlavor", name, None, age_s, now, finalizers=[RESOURCE_IN_USE]),
            "spec": {"nodeLabels": dict(node_labels)}}


def _usage(flavor: str, amounts: dict[str, str], borrowed: dict[str, str] | None = None) -> list[Obj]:
    return [{"name": flavor, "resources": [{"name": r, "total": q, "borrowed": (borrowed or {}).get(r, "0")} for r, q in amounts.items()]}]


def cluster_queue(name: str, flavor: str, quota: dict[str, str], used: dict[str, str], *, cohort: str | None = None,
                  borrowing_limits: dict[str, str] | None = None, pending: int = 0, reserving: int = 0, admitted: int = 0,
                  age_s: float = 86400 * 30, now: datetime | None = None) -> Obj:
    """A ClusterQueue with one resource group and one flavor, active; quota and used: resource -> quantity
    (used: what its admitted workloads reserve, in flavorsReservation and flavorsUsage alike)."""
    resources = []
    for resource, nominal in quota.items():
        entry: Obj = {"name": resource, "nominalQuota": nominal}
        if borrowing_limits and resource in borrowing_limits:
            entry["borrowingLimit"] = borrowing_limits[resource]
        resources.append(entry)
    spec: Obj = {
        "namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO", "stopPolicy": "None",
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        "preemption": {"borrowWithinCohort": {"policy": "Never"}, "reclaimWithinCohort": "Never", "withinClusterQueue": "Never"},
        "resourceGroups": [{"coveredResources": list(quota), "flavors": [{"name": flavor, "resources": resources}]}],
    }
    if cohort:
        spec["cohortName"] = cohort
    totals = {r: used.get(r, "0") for r in quota}
    since = ago(age_s - 60, now)
    return {
        "apiVersion": API_VERSION, "kind": "ClusterQueue",
        "metadata": _meta("ClusterQueue", name, None, age_s, now, finalizers=[RESOURCE_IN_USE]),
        "spec": spec,
        "status": {
            "conditions": [condition("Active", True, "Ready", "Can admit new workloads", since)],
            "flavorsReservation": _usage(flavor, totals), "flavorsUsage": _usage(flavor, totals),
            "pendingWorkloads": pending, "reservingWorkloads": reserving, "admittedWorkloads": admitted,
        },
    }


def local_queue(namespace: str, name: str, cluster_queue_name: str, flavor: str, used: dict[str, str], *, pending: int = 0,
                reserving: int = 0, admitted: int = 0, age_s: float = 86400 * 30, now: datetime | None = None) -> Obj:
    usage = [{"name": flavor, "resources": [{"name": r, "total": q} for r, q in used.items()]}]
    return {
        "apiVersion": API_VERSION, "kind": "LocalQueue",
        "metadata": _meta("LocalQueue", name, namespace, age_s, now, finalizers=[RESOURCE_IN_USE]),
        "spec": {"clusterQueue": cluster_queue_name, "stopPolicy": "None"},
        "status": {
            "conditions": [condition("Active", True, "Ready", "Can submit new workloads to localQueue", ago(age_s - 60, now))],
            "flavorsReservation": usage, "flavorsUsage": usage,
            "pendingWorkloads": pending, "reservingWorkloads": reserving, "admittedWorkloads": admitted,
        },
    }


def workload_name(owner_kind: str, owner_name: str, owner_uid: str) -> str:
    """`<kind>-<owner>-<hash>`, as Kueue's jobframework names a job's Workload (GetWorkloadNameForOwnerWithGVK)."""
    return f"{owner_kind.lower()}-{owner_name}-{stable_uid('workload', owner_kind, owner_name, owner_uid)[:5]}"


def workload(namespace: str, queue: str, owner: tuple[str, str, str, str], pod_spec: Obj, count: int, *,
             admitted_in: tuple[str, str, dict[str, str]] | None = None, pending_message: str | None = None,
             age_s: float = 3600, now: datetime | None = None) -> Obj:
    """The Workload Kueue makes for a job or a plain pod. owner: (apiVersion, kind, name, uid); one pod set, `main`.
    admitted_in: (ClusterQueue, flavor, resource usage of the whole pod set): quota reserved and admitted.
    pending_message: the scheduler found no room: QuotaReserved=False, reason Pending, this message."""
    api_version, kind, owner_name, owner_uid = owner
    name = workload_name(kind, owner_name, owner_uid)
    labels = {JOB_UID_LABEL: owner_uid} if kind != "Pod" else {}
    meta = _meta("Workload", name, namespace, age_s, now, labels=labels, finalizers=[RESOURCE_IN_USE], ownerReferences=[
        {"apiVersion": api_version, "kind": kind, "name": owner_name, "uid": owner_uid, "controller": True, "blockOwnerDeletion": True}])
    requests: dict[str, str] = {}  # of the whole pod set, as status.resourceRequests has them
    for container in pod_spec.get("containers") or ():  # the scenario's pods have one container each
        for resource, quantity in ((container.get("resources") or {}).get("requests") or {}).items():
            match = re.fullmatch(r"(\d+)(\D*)", quantity)
            assert match is not None, quantity  # the scenarios' requests: a whole number and a unit
            number, unit = match.groups()
            requests[resource] = f"{int(number) * count}{unit}"
    status: Obj = {}
    since = ago(age_s - 2, now)
    if admitted_in is not None:
        cq, flavor, usage = admitted_in
        status["admission"] = {"clusterQueue": cq, "podSetAssignments": [
            {"name": "main", "count": count, "flavors": {r: flavor for r in usage}, "resourceUsage": dict(usage)}]}
        status["conditions"] = [condition("QuotaReserved", True, "QuotaReserved", f"Quota reserved in ClusterQueue {cq}", since),
                                condition("Admitted", True, "Admitted", "The workload is admitted", since)]
    elif pending_message is not None:
        status["conditions"] = [condition("QuotaReserved", False, "Pending", pending_message, since)]
        status["resourceRequests"] = [{"name": "main", "resources": requests}]
    return {
        "apiVersion": API_VERSION, "kind": "Workload", "metadata": meta,
        "spec": {"active": True, "queueName": queue, "priority": 0,
                 "podSets": [{"name": "main", "count": count, "template": {"metadata": {}, "spec": pod_spec}}]},
        "status": status,
    }
