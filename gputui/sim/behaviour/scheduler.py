"""The simulated default-scheduler: binds pending pods to nodes that fit.

Filters run per node in the real scheduler's order and stop at the first
failure: NodeUnschedulable, TaintToleration (a NotReady node counts as
tainted not-ready/unreachable), NodeAffinity (nodeSelector and required node
affinity, matchExpressions and matchFields), NodeResourcesFit (pods,
cpu, memory and extended resources: allocatable minus what bound, unfinished
pods request), DynamicResources (a pod's ResourceClaims: PreFilter, Filter and
the allocation written before binding, see dra.py). A pod that fits nowhere gets PodScheduled=False/Unschedulable
and a FailedScheduling event with the real message shape; unschedulable pods
are tried again when a node changes or a pod ends or goes away. A pod with
spec.schedulingGates is not looked at (kube-scheduler's SchedulingGates
PreEnqueue; its PodScheduled=False/SchedulingGated condition is the API
server's, admission.py) until an update removes the last gate.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from .. import builders as b
from ..apiserver.selectors import node_selector_matches
from .dra import DRA_KEYS, ClaimAllocator
from ..apiserver.store import Event, NotFound

if TYPE_CHECKING:
    from .controllers import Controllers

Obj = dict[str, Any]

UNRESOLVABLE = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
FINISHED = ("Succeeded", "Failed")


def tolerates(tolerations: list[Obj], taint: Obj) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        operator = t.get("operator") or "Equal"
        if not t.get("key"):
            if operator == "Exists":
                return True
            continue
        if t.get("key") != taint.get("key"):
            continue
        if operator == "Exists" or (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def effective_taints(node: Obj) -> list[Obj]:
    """The node's taints, plus the one the node lifecycle controller would add to a NotReady node."""
    taints = list((node.get("spec") or {}).get("taints") or [])
    ready = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
    status = (ready or {}).get("status", "Unknown")
    if status != "True":
        key = "node.kubernetes.io/not-ready" if status == "False" else "node.kubernetes.io/unreachable"
        if not any(t.get("key") in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable") for t in taints):
            taints.append({"key": key, "effect": "NoSchedule"})
    return taints


def matches_affinity(pod: Obj, node: Obj) -> bool:
    spec = pod.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    if required.get("nodeSelectorTerms") is None:
        return True
    return node_selector_matches(required, node)


def fit_error(total_nodes: int, reasons: dict[str, int], preemption: dict[str, int] | None) -> str:
    """The scheduler's FitError text: reasons counted over nodes, sorted as strings, as the real one does."""
    if total_nodes == 0:
        return "no nodes available to schedule pods"
    message = f"0/{total_nodes} nodes are available: " + ", ".join(sorted(f"{n} {r}" for r, n in reasons.items())) + "."
    if preemption is None:
        return message + " preemption: not eligible due to preemptionPolicy=Never."
    return message + f" preemption: 0/{total_nodes} nodes are available: " + \
        ", ".join(sorted(f"{n} {r}" for r, n in preemption.items())) + "."


class Scheduler:
    def __init__(self, controllers: "Controllers") -> None:
        self.controllers = controllers
        self.store = controllers.store
        # What bound, unfinished pods hold, per node: kept up to date from store events.
        self.usage: dict[str, dict[str, float]] = {}
        self.pod_counts: dict[str, int] = {}
        self._holding: dict[tuple[str, str], tuple[str, dict[str, float]]] = {}
        self._queue: set[tuple[str, str]] = set()
        self._unschedulable: set[tuple[str, str]] = set()
        self._retry = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.claims = ClaimAllocator(self.store)

    def start(self) -> None:
        for entry in self.store.entries("pods"):
            try:
                self._account(entry.obj)
            except Exception as error:  # noqa: BLE001  (a malformed pod is skipped, never the scheduler stopped)
                self.controllers.skip("kube-scheduler", f"pod {_name(entry.obj)}", error)
        self._task = asyncio.create_task(self._loop(), name="scheduler")
        if self._queue:
            self._wake.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    # -- bookkeeping from store events -----------------------------------
    @staticmethod
    def _key(pod: Obj) -> tuple[str, str]:
        return pod["metadata"].get("namespace", ""), pod["metadata"]["name"]

    def _account(self, pod: Obj | None, key: tuple[str, str] | None = None) -> None:
        """Make the usage tables reflect the pod's current state (None: the pod is gone)."""
        if key is None:
            assert pod is not None, "a gone pod is accounted by its key"
            key = self._key(pod)
        held = self._holding.pop(key, None)
        if held is not None:
            held_node, held_requests = held
            usage = self.usage[held_node]
            for resource, value in held_requests.items():
                usage[resource] -= value
            self.pod_counts[held_node] -= 1
        if pod is None:
            self._queue.discard(key)
            self._unschedulable.discard(key)
            return
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        node = spec.get("nodeName")
        if node and status.get("phase") not in FINISHED:
            requests = b.pod_requests(pod)
            usage = self.usage.setdefault(node, {})
            for resource, value in requests.items():
                usage[resource] = usage.get(resource, 0) + value
            self.pod_counts[node] = self.pod_counts.get(node, 0) + 1
            self._holding[key] = (node, requests)
        elif spec.get("schedulingGates"):
            self._queue.discard(key)
            self._unschedulable.discard(key)
        elif not node and status.get("phase") not in FINISHED and not pod["metadata"].get("deletionTimestamp") \
                and spec.get("schedulerName", "default-scheduler") == "default-scheduler":
            if key not in self._unschedulable:
                self._queue.add(key)

    def on_event(self, event: Event) -> None:
        kind = event.resource.key
        if kind == "nodes" or kind in DRA_KEYS:
            self._retry_unschedulable()
        elif kind == "pods":
            pod = event.obj
            key = self._key(pod)
            self._account(None if event.type == "DELETED" else pod, key)
            was_holding = event.old is not None and (event.old.get("spec") or {}).get("nodeName") and \
                (event.old.get("status") or {}).get("phase") not in FINISHED
            if was_holding and (event.type == "DELETED" or (pod.get("status") or {}).get("phase") in FINISHED):
                self._retry_unschedulable()
            if event.type != "DELETED" and key in self._queue:  # new, or its last scheduling gate removed
                self._wake.set()

    def _retry_unschedulable(self) -> None:
        if self._unschedulable:
            self._retry = True
            self._wake.set()

    # -- scheduling --------------------------------------------------------
    async def _loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(0)  # let a burst of writes settle into one pass
            try:
                self.schedule_pending()
            except Exception as error:  # noqa: BLE001  (the scheduler keeps running; the next pass tries again)
                self.controllers.skip("kube-scheduler", "a scheduling pass", error)

    def schedule_pending(self) -> None:
        keys = set(self._queue)
        self._queue.clear()
        if self._retry:
            keys |= self._unschedulable
            self._unschedulable.clear()
            self._retry = False
        if not keys:
            return
        nodes = [e.obj for e in self.store.entries("nodes")]
        pods = []
        for key in keys:
            try:
                pods.append(self.store.get("pods", *key))
            except NotFound:
                continue
        pods.sort(key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]))
        for pod in pods:
            try:
                spec = pod.get("spec") or {}
                if spec.get("nodeName") or spec.get("schedulingGates") or pod["metadata"].get("deletionTimestamp") or \
                        (pod.get("status") or {}).get("phase") in FINISHED:
                    continue
                self._schedule_one(pod, nodes)
            except Exception as error:  # noqa: BLE001  (a malformed pod is skipped, never the scheduler stopped)
                self.controllers.skip("kube-scheduler", f"pod {_name(pod)}", error)

    def _schedule_one(self, pod: Obj, nodes: list[Obj]) -> None:
        requests = b.pod_requests(pod)
        reasons: dict[str, int] = {}
        preemption: dict[str, int] = {}
        feasible: list[tuple[float, str]] = []
        key = self._key(pod)
        never = (pod.get("spec") or {}).get("preemptionPolicy") == "Never"
        claims, claim_error = self.claims.pod_claims(pod)
        if claim_error:  # the DynamicResources plugin's PreFilter: no node is looked at
            message = f"0/{len(nodes)} nodes are available: {claim_error}."
            message += " preemption: not eligible due to preemptionPolicy=Never." if never else \
                f" preemption: 0/{len(nodes)} nodes are available: {len(nodes)} {UNRESOLVABLE}."
            self._unschedulable.add(key)
            self._mark_unschedulable(pod, message)
            return
        allocations: dict[str, dict[str, list[Obj]]] = {}
        readable = []
        for node in nodes:
            try:
                failures, resolvable = self._filter(pod, requests, node)
                if not failures and claims:
                    why, plans = self.claims.filter(claims, node)
                    if why:
                        failures, resolvable = [why], False
                    else:
                        allocations[node["metadata"]["name"]] = plans
                score = 0.0 if failures else self._score(requests, node)
            except Exception as error:  # noqa: BLE001  (a node it cannot read is left out, as if it were not there)
                self.controllers.skip("kube-scheduler", f"node {_name(node)}", error)
                continue
            readable.append(node)
            if not failures:
                feasible.append((score, node["metadata"]["name"]))
                continue
            for reason in failures:
                reasons[reason] = reasons.get(reason, 0) + 1
            outcome = NO_VICTIMS if resolvable else UNRESOLVABLE
            preemption[outcome] = preemption.get(outcome, 0) + 1
        if feasible:
            feasible.sort(key=lambda f: (-f[0], f[1]))
            chosen = feasible[0][1]
            if claims and not self.claims.reserve(pod, chosen, claims, allocations.get(chosen, {})):
                self._queue.add(key)  # a claim went away meanwhile: PreFilter says why next time
                self._wake.set()
                return
            self._bind(pod, chosen)
            return
        message = fit_error(len(readable), reasons, None if never else preemption)
        self._unschedulable.add(key)
        self._mark_unschedulable(pod, message)

    def _filter(self, pod: Obj, requests: dict[str, float], node: Obj) -> tuple[list[str], bool]:
        """Why the pod cannot go on the node (empty: it can), and whether preemption could help."""
        spec = node.get("spec") or {}
        tolerations = (pod.get("spec") or {}).get("tolerations") or []
        if spec.get("unschedulable") and not tolerates(
                tolerations, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}):
            return ["node(s) were unschedulable"], False
        for taint in effective_taints(node):
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
                return [f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"], False
        if not matches_affinity(pod, node):
            return ["node(s) didn't match Pod's node affinity/selector"], False
        name = node["metadata"]["name"]
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        usage = self.usage.get(name, {})
        failures = []
        if self.pod_counts.get(name, 0) + 1 > b.parse_quantity(allocatable.get("pods", "110")):
            failures.append("Too many pods")
        for resource, wanted in sorted(requests.items()):
            if wanted <= 0:
                continue
            free = b.parse_quantity(allocatable.get(resource, 0)) - usage.get(resource, 0)
            if wanted > free + 1e-9:
                failures.append(f"Insufficient {resource}")
        return failures, True

    def _score(self, requests: dict[str, float], node: Obj) -> float:
        """LeastAllocated over the resources the pod asks for (cpu and memory when it asks for nothing)."""
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        usage = self.usage.get(node["metadata"]["name"], {})
        resources = [r for r, v in requests.items() if v > 0] or ["cpu", "memory"]
        scores = []
        for resource in resources:
            total = b.parse_quantity(allocatable.get(resource, 0))
            if total > 0:
                scores.append((total - usage.get(resource, 0) - requests.get(resource, 0)) / total)
        return sum(scores) / len(scores) if scores else 0.0

    def _bind(self, pod: Obj, node: str) -> None:
        ns, name = self._key(pod)
        stamp = b.rfc3339(b.utcnow())

        def assign(p: Obj) -> None:
            p["spec"]["nodeName"] = node
            status = p.setdefault("status", {})
            conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conditions.append(b.pod_condition("PodScheduled", "True", stamp))
            status["conditions"] = conditions

        try:
            bound = self.store.mutate("pods", ns, name, assign)
        except NotFound:
            return
        self.controllers.scheduler_events.record(bound, "Scheduled", f"Successfully assigned {ns}/{name} to {node}", action="Binding")

    def _mark_unschedulable(self, pod: Obj, message: str) -> None:
        ns, name = self._key(pod)
        stamp = b.rfc3339(b.utcnow())

        def mark(p: Obj) -> None:
            status = p.setdefault("status", {})
            status.setdefault("phase", "Pending")
            conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conditions.append(b.pod_condition("PodScheduled", "False", stamp, "Unschedulable", message))
            status["conditions"] = conditions

        current = next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        if not current or current.get("status") != "False" or current.get("message") != message:
            try:
                pod = self.store.mutate("pods", ns, name, mark)
            except NotFound:
                return
        self.controllers.scheduler_events.record(pod, "FailedScheduling", message, action="Scheduling", kind="Warning")


def _name(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta['namespace']}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))
