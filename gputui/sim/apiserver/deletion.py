"""What a DELETE does to a stored object, for the API (server/writing.py) and the namespace controller, and the
namespace controller itself.

    a pod              bound and running: marked (deletionTimestamp now + grace, deletionGracePeriodSeconds);
                       its kubelet ends it and removes it. Unbound, finished, or grace 0: gone at once
    a namespace        marked Terminating (deletionTimestamp, status.phase); the namespace controller deletes its
                       content, then its `kubernetes` finalizer, and the namespace goes. default, kube-system and
                       kube-public may not be deleted (NamespaceLifecycle: 403)
    anything else      held by metadata.finalizers: marked, and gone once they are removed; else gone at once

The namespace controller (kube-controller-manager's) sweeps a Terminating namespace whenever something in it
changes: what may be deleted is, pods gracefully; while anything remains (a pod still stopping, an object held
by a finalizer) the namespace stays Terminating, and creating in it is refused (admission_plugins.py).
"""
from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from typing import Any

from .resources import ResourceType
from .store import NotFound

Obj = dict[str, Any]
NAMESPACES = "namespaces"
NAMESPACE_FINALIZER = "kubernetes"


def _now(after: float = 0) -> str:
    return (datetime.now(timezone.utc) + timedelta(seconds=after)).strftime("%Y-%m-%dT%H:%M:%SZ")


def delete_stored(store: Any, logs: Any, resource: ResourceType, current: Obj, grace: int | None = None) -> Obj:
    """Delete (or mark for deletion) a stored object as kube-apiserver does; returns what the DELETE answers with."""
    meta = current["metadata"]
    namespace, name = (meta.get("namespace") or "") if resource.namespaced else "", meta["name"]
    if resource.kind == "Namespace":
        if meta.get("deletionTimestamp"):
            return current
        if not (current.get("spec") or {}).get("finalizers") and not meta.get("finalizers"):
            return store.delete(resource.key, "", name)

        def terminating(obj: Obj) -> None:
            obj["metadata"]["deletionTimestamp"] = _now()
            obj["metadata"]["deletionGracePeriodSeconds"] = 0
            obj.setdefault("status", {})["phase"] = "Terminating"

        return store.mutate(resource.key, "", name, terminating)
    if resource.kind != "Pod":
        if meta.get("finalizers"):
            # Finalizers hold the object: it is marked for deletion and goes once they are removed
            # (for ResourceClaims, by the claim controller: sim/behaviour/dra.py).
            if meta.get("deletionTimestamp"):
                return current

            def mark_deleting(obj: Obj) -> None:
                obj["metadata"]["deletionTimestamp"] = _now()
                obj["metadata"]["deletionGracePeriodSeconds"] = 0

            return store.mutate(resource.key, namespace, name, mark_deleting)
        return store.delete(resource.key, namespace, name)
    if grace is None:
        grace = (current.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
    assert grace is not None
    unbound = not (current.get("spec") or {}).get("nodeName")
    finished = (current.get("status") or {}).get("phase") in ("Succeeded", "Failed")
    if grace <= 0 or unbound or finished:
        deleted = store.delete(resource.key, namespace, name)
        logs.forget_pod(namespace, name)
        return deleted
    if meta.get("deletionTimestamp") and meta.get("deletionGracePeriodSeconds", grace) <= grace:
        return current  # already terminating with a shorter or equal grace period

    def mark(pod: Obj) -> None:
        pod["metadata"]["deletionTimestamp"] = _now(grace)
        pod["metadata"]["deletionGracePeriodSeconds"] = grace

    return store.mutate(resource.key, namespace, name, mark)


class NamespaceController:
    """Empties a Terminating namespace, then removes it (see the module docstring)."""

    DELAY = 0.05  # real seconds: a burst of changes makes one sweep

    def __init__(self, store: Any, logs: Any) -> None:
        self.store, self.logs = store, logs
        self._dirty: set[str] = set()
        self._handle: asyncio.TimerHandle | None = None

    def on_event(self, event: Any) -> None:
        resource = event.resource
        if resource.key == NAMESPACES:
            if event.type != "DELETED" and event.obj["metadata"].get("deletionTimestamp"):
                self._mark(event.obj["metadata"]["name"])
        elif resource.namespaced:
            namespace = event.obj["metadata"].get("namespace") or ""
            try:
                found = self.store.get_entry(NAMESPACES, "", namespace).obj  # read only: no copy on every event
            except NotFound:
                return
            if found["metadata"].get("deletionTimestamp"):
                self._mark(namespace)

    def _mark(self, namespace: str) -> None:
        self._dirty.add(namespace)
        if self._handle is None:
            self._handle = asyncio.get_running_loop().call_later(self.DELAY, self.flush)

    def settle_all(self) -> None:
        """At start: sweep the namespaces a scenario gives as Terminating."""
        for entry in self.store.entries(NAMESPACES):
            if entry.obj["metadata"].get("deletionTimestamp"):
                self.sweep(entry.obj["metadata"]["name"])

    def flush(self) -> None:
        self._handle = None
        dirty, self._dirty = self._dirty, set()
        for namespace in sorted(dirty):
            self.sweep(namespace)

    def sweep(self, namespace: str) -> None:
        found = self.store.find(NAMESPACES, "", namespace)
        if found is None or not found["metadata"].get("deletionTimestamp"):
            return
        remaining = 0
        for resource in list(self.store.resources.values()):
            if not resource.namespaced:
                continue
            for entry in list(self.store.entries(resource.key, namespace)):
                obj = entry.obj
                if obj["metadata"].get("deletionTimestamp"):
                    remaining += 1  # on its way out already
                    continue
                delete_stored(self.store, self.logs, resource, obj)
                if self.store.find(resource.key, namespace, obj["metadata"]["name"]) is not None:
                    remaining += 1
        if remaining:
            return
        finalizers = (found.get("spec") or {}).get("finalizers") or []
        if NAMESPACE_FINALIZER in finalizers:
            def finalize(obj: Obj) -> None:
                obj.setdefault("spec", {})["finalizers"] = [f for f in finalizers if f != NAMESPACE_FINALIZER]

            found = self.store.mutate(NAMESPACES, "", namespace, finalize)
        if not (found.get("spec") or {}).get("finalizers") and not found["metadata"].get("finalizers"):
            self.store.delete(NAMESPACES, "", namespace)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
