"""The simulated API server's object store: objects, resourceVersions, watch history.

Every write bumps the revision of the etcd that holds the resource (one for every kind,
unless a kind is given its own, as `--etcd-servers-overrides` puts events in an etcd of
their own: its resourceVersions are a sequence apart, comparable only among themselves),
keeps the object's JSON serialised once, appends a watch event to the
resource's bounded history and hands it to open watches and in-process
listeners (scheduler, kubelets). Reads hand out copies, so nobody mutates
stored state by accident.
"""
from __future__ import annotations

import asyncio
import uuid
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Mapping

import orjson

from .event_views import CORE_KEY, EVENTS_KEY, to_core, to_events_v1
from .resources import RESOURCES, ResourceType

Obj = dict[str, Any]


class StoreError(Exception):
    code = 500
    reason = "InternalError"


class NotFound(StoreError):
    code = 404
    reason = "NotFound"


class AlreadyExists(StoreError):
    code = 409
    reason = "AlreadyExists"


class Gone(StoreError):
    code = 410
    reason = "Expired"


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True)
class Entry:
    """A stored object and its JSON, serialised once at write time."""

    obj: Obj
    raw: bytes


@dataclass(slots=True)
class Event:
    type: str  # ADDED, MODIFIED, DELETED
    rv: int
    resource: ResourceType
    entry: Entry
    old: Obj | None  # the previous state for MODIFIED and DELETED

    @property
    def obj(self) -> Obj:
        return self.entry.obj


CLOSED = object()  # put on a watch queue to end the stream


class Watch:
    """One open watch: a queue of Events the server drains into its response."""

    def __init__(self, store: "Store", resource: ResourceType) -> None:
        self.store = store
        self.resource = resource
        self.queue: asyncio.Queue[Event | object] = asyncio.Queue()

    def close(self) -> None:
        self.store._watches[self.resource.key].discard(self)

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


Listener = Callable[[Event], None]


@dataclass(slots=True)
class Revision:
    """One etcd's revision: the resourceVersion of the last write to any kind it holds."""

    value: int = 1


class Store:
    def __init__(self, history_limit: int = 10_000, resources: Iterable[ResourceType] = RESOURCES,
                 own_etcd: Mapping[str, int] | None = None, first_revision: int = 1) -> None:
        """own_etcd: resource key -> the first revision of an etcd of its own (kube-apiserver's
        `--etcd-servers-overrides=/events#...`); first_revision: the main etcd's. Two etcds far
        apart give resourceVersions that lag or lead each other's."""
        self._main = Revision(first_revision)
        self._revisions: dict[str, Revision] = {key: Revision(first) for key, first in (own_etcd or {}).items()}
        self._history_limit = history_limit
        self.resources: dict[str, ResourceType] = {}
        self._objects: dict[str, dict[tuple[str, str], Entry]] = {}
        self._history: dict[str, deque[Event]] = {}
        # Watches that start before this resourceVersion cannot be served: 410 Gone.
        self._floor: dict[str, int] = {}
        # The watch cache's own floor: the revision it listed at when kube-apiserver last started. Watches from
        # before it get 410 though etcd (lists at a revision, continue tokens) still has that history.
        self._watch_floor: dict[str, int] = {}
        self._watches: dict[str, set[Watch]] = {}
        self._listeners: list[Listener] = []
        # (namespace, name) of each resource's objects in list order; rebuilt lazily after a create or delete.
        self._sorted: dict[str, list[tuple[str, str]] | None] = {}
        # A resource served as a view of another's objects (events.k8s.io/v1 of core v1 Events): key -> (the
        # stored resource's key, stored -> view, view -> stored). Its objects are the stored ones converted, with
        # their resourceVersions; writes through it are stored converted back.
        self._views: dict[str, tuple[str, Callable[[Obj], Obj], Callable[[Obj], Obj]]] = {}
        self._view_of: dict[str, str] = {}  # stored resource key -> its view's key
        for r in resources:
            self.add_resource(r)
        if EVENTS_KEY in self.resources:
            self.add_view(EVENTS_KEY, CORE_KEY, to_events_v1, to_core)

    def add_view(self, key: str, stored: str, to_view: Callable[[Obj], Obj], from_view: Callable[[Obj], Obj]) -> None:
        self._views[key] = (stored, to_view, from_view)
        self._view_of[stored] = key
        self._revisions[key] = self._revisions[stored]  # one etcd, one sequence

    def is_view(self, key: str) -> bool:
        return key in self._views

    def add_resource(self, r: ResourceType) -> None:
        """Serve one more kind (a scenario's custom resource); a kind already known stays as it is."""
        if r.key in self.resources:
            return
        self.resources[r.key] = r
        self._objects[r.key] = {}
        self._history[r.key] = deque(maxlen=self._history_limit)
        self._floor[r.key] = 0
        self._watch_floor[r.key] = 0
        self._watches[r.key] = set()
        self._sorted[r.key] = None
        self._revisions.setdefault(r.key, self._main)

    # -- reading ---------------------------------------------------------
    @property
    def resource_version(self) -> int:
        """The main etcd's revision (every kind's, but those with an etcd of their own)."""
        return self._main.value

    def resource_version_of(self, key: str) -> int:
        """The revision of the etcd that holds the resource: what its lists and bookmarks carry."""
        return self._revisions[key].value

    def resource(self, key: str) -> ResourceType:
        return self.resources[key]

    def resource_at(self, group: str, version: str, plural: str) -> ResourceType | None:
        """The kind served at /apis/GROUP/VERSION/PLURAL (/api/v1/PLURAL for the core group)."""
        r = self.resources.get(f"{plural}.{group}" if group else plural)
        return r if r is not None and r.version == version else None

    def entries(self, key: str, namespace: str | None = None) -> list[Entry]:
        objs = self._objects[key]
        if namespace is None:
            return list(objs.values())
        return [e for (ns, _), e in objs.items() if ns == namespace]

    def sorted_idents(self, key: str) -> list[tuple[str, str]]:
        """(namespace, name) of every object of a resource, sorted: the order lists are served in."""
        idents = self._sorted[key]
        if idents is None:
            idents = self._sorted[key] = sorted(self._objects[key])
        return idents

    def entry_at(self, key: str, ident: tuple[str, str]) -> Entry:
        return self._objects[key][ident]

    def holds(self, key: str, ident: tuple[str, str]) -> bool:
        return ident in self._objects[key]

    def get_entry(self, key: str, namespace: str, name: str) -> Entry:
        try:
            return self._objects[key][(namespace or "", name)]
        except KeyError:
            raise NotFound(f'{self.resources[key].plural}{"." + self.resources[key].group if self.resources[key].group else ""} "{name}" not found') from None

    def get(self, key: str, namespace: str, name: str) -> Obj:
        """A private copy of the object; raises NotFound."""
        return orjson.loads(self.get_entry(key, namespace, name).raw)

    def find(self, key: str, namespace: str, name: str) -> Obj | None:
        try:
            return self.get(key, namespace, name)
        except NotFound:
            return None

    def objects(self, key: str, namespace: str | None = None) -> list[Obj]:
        """Private copies of every object of a resource."""
        return [orjson.loads(e.raw) for e in self.entries(key, namespace)]

    # -- writing ---------------------------------------------------------
    def _next_rv(self, key: str) -> int:
        revision = self._revisions[key]
        revision.value += 1
        return revision.value

    def create(self, key: str, obj: Obj) -> Obj:
        """Store a new object as given (status included); fills uid, creationTimestamp, resourceVersion."""
        if key in self._views:
            stored, to_view, from_view = self._views[key]
            return to_view(self.create(stored, from_view(obj)))
        r = self.resources[key]
        meta = obj.setdefault("metadata", {})
        obj.setdefault("apiVersion", r.api_version)
        obj.setdefault("kind", r.kind)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        ns = meta.get("namespace", "") if r.namespaced else ""
        if r.namespaced and not ns:
            ns = meta["namespace"] = "default"
        ident = (ns, meta["name"])
        if ident in self._objects[key]:
            raise AlreadyExists(f'{r.plural} "{meta["name"]}" already exists')
        meta.setdefault("uid", str(uuid.uuid4()))
        if not meta.get("creationTimestamp"):
            meta["creationTimestamp"] = now_rfc3339()
        rv = self._next_rv(key)
        meta["resourceVersion"] = str(rv)
        entry = Entry(obj, orjson.dumps(obj))
        self._objects[key][ident] = entry
        self._sorted[key] = None
        self._emit(Event("ADDED", rv, r, entry, None))
        self._mirror(key, "ADDED", rv, ident, entry, None)
        return orjson.loads(entry.raw)

    def replace(self, key: str, obj: Obj) -> Obj:
        """Store a new state of an existing object (MODIFIED)."""
        if key in self._views:
            stored, to_view, from_view = self._views[key]
            return to_view(self.replace(stored, from_view(obj)))
        r = self.resources[key]
        meta = obj["metadata"]
        ident = ((meta.get("namespace") or "") if r.namespaced else "", meta["name"])
        old = self._objects[key].get(ident)
        if old is None:
            raise NotFound(f'{r.plural} "{meta["name"]}" not found')
        # Identity fields belong to the server.
        for field_name in ("uid", "creationTimestamp", "namespace", "name"):
            if field_name in old.obj["metadata"]:
                meta[field_name] = old.obj["metadata"][field_name]
        rv = self._next_rv(key)
        meta["resourceVersion"] = str(rv)
        entry = Entry(obj, orjson.dumps(obj))
        self._objects[key][ident] = entry
        self._emit(Event("MODIFIED", rv, r, entry, old.obj))
        self._mirror(key, "MODIFIED", rv, ident, entry, old.obj)
        return orjson.loads(entry.raw)

    def mutate(self, key: str, namespace: str, name: str, change: Callable[[Obj], None]) -> Obj:
        """Apply change() to a copy of the object and store it."""
        obj = self.get(key, namespace, name)
        change(obj)
        return self.replace(key, obj)

    def delete(self, key: str, namespace: str, name: str) -> Obj:
        if key in self._views:
            stored, to_view, _ = self._views[key]
            return to_view(self.delete(stored, namespace, name))
        r = self.resources[key]
        ident = ((namespace or "") if r.namespaced else "", name)
        old = self._objects[key].pop(ident, None)
        if old is None:
            raise NotFound(f'{r.plural} "{name}" not found')
        self._sorted[key] = None
        rv = self._next_rv(key)
        obj = orjson.loads(old.raw)
        obj["metadata"]["resourceVersion"] = str(rv)
        entry = Entry(obj, orjson.dumps(obj))
        self._emit(Event("DELETED", rv, r, entry, old.obj))
        self._mirror(key, "DELETED", rv, ident, entry, old.obj)
        return orjson.loads(entry.raw)

    def _mirror(self, key: str, kind: str, rv: int, ident: tuple[str, str], entry: Entry, old: Obj | None) -> None:
        """A write to a stored resource, seen through its view: the view's objects, history and watches (not
        the listeners: the components hear of each write once)."""
        view = self._view_of.get(key)
        if view is None:
            return
        to_view = self._views[view][1]
        shown = Entry(to_view(entry.obj), b"")
        shown.raw = orjson.dumps(shown.obj)
        if kind == "DELETED":
            self._objects[view].pop(ident, None)
        else:
            self._objects[view][ident] = shown
        if kind != "MODIFIED":
            self._sorted[view] = None
        self._emit(Event(kind, rv, self.resources[view], shown, to_view(old) if old is not None else None), listeners=False)

    # -- watching --------------------------------------------------------
    def watch(self, key: str, since: int | None) -> tuple[Watch, list[Event]]:
        """Open a watch. Returns it with the kept events after `since` to replay first.

        `since=None` means "from now, no replay" (the caller sends synthetic
        ADDED events for the current objects itself). Raises Gone when `since`
        is older than the kept history.
        """
        r = self.resources[key]
        floor = max(self._floor[key], self._watch_floor[key])
        if since is not None and since < floor:
            raise Gone(f"too old resource version: {since} ({floor})")
        replay = [] if since is None else [e for e in self._history[key] if e.rv > since]
        w = Watch(self, r)
        self._watches[key].add(w)
        return w, replay

    def undo_since(self, key: str, rv: int) -> dict[tuple[str, str], Entry | None]:
        """The resource as it was at rv, as the changes from now: each object written since, with its entry at rv
        (None: there was none). Raises Gone when rv is compacted away (before the kept history)."""
        if rv < self._floor[key]:
            raise Gone(f"too old resource version: {rv} ({self._floor[key]})")
        namespaced = self.resources[key].namespaced
        undo: dict[tuple[str, str], Entry | None] = {}
        for event in reversed(self._history[key]):  # newest first: what an older write left wins
            if event.rv <= rv:
                break
            meta = event.obj["metadata"]
            ident = (meta.get("namespace", "") if namespaced else "", meta["name"])
            undo[ident] = None if event.old is None else Entry(event.old, orjson.dumps(event.old))
        return undo

    def compacted_below(self, key: str) -> int:
        """resourceVersions below this one are compacted away for this resource (lists from them are gone too)."""
        return self._floor[key]

    def open_watches(self, key: str | None = None) -> int:
        """How many watches are open (for one resource, or all): tests check that none leak."""
        if key is not None:
            return len(self._watches[key])
        return sum(len(w) for w in self._watches.values())

    def subscribe(self, listener: Listener) -> None:
        """Call listener(event) synchronously after every write."""
        self._listeners.append(listener)

    def _emit(self, event: Event, listeners: bool = True) -> None:
        key = event.resource.key
        history = self._history[key]
        if history.maxlen is not None and len(history) == history.maxlen:
            self._floor[key] = history[0].rv
        history.append(event)
        for w in tuple(self._watches[key]):
            w.queue.put_nowait(event)
        for listener in tuple(self._listeners) if listeners else ():
            listener(event)

    # -- faults ----------------------------------------------------------
    def compact(self) -> None:
        """Forget all watch history, as etcd compaction does: older watches get 410."""
        for key in self.resources:
            self._history[key].clear()
            self._floor[key] = self._revisions[key].value

    def start_watch_cache(self) -> None:
        """kube-apiserver starting (again): each watch cache lists at the current revision and keeps events from
        there, so a watch from an older resourceVersion gets 410 (getAllEventsSinceLocked: `rv < listRV`), and
        its client lists again; etcd's history is untouched."""
        for key in self.resources:
            self._watch_floor[key] = self._revisions[key].value

    def drop_watches(self) -> int:
        """End every open watch stream; returns how many were open."""
        n = 0
        for watches in self._watches.values():
            for w in tuple(watches):
                w.queue.put_nowait(CLOSED)
                n += 1
            watches.clear()
        return n
