"""The model's tables: the records of one kind each, fed by a reflector (each implements its Sink),
with the change feed's `Change` and the few indexes the screens need (pods per node, events per object)."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Generic, Hashable, Iterable, TypeVar

from . import gpu
from .decoding import EventShape, NodeShape, PodShape
from .records import DaemonSet, Event, Node, Obj, Pod, PodKey, object_key


@dataclass(frozen=True, slots=True)
class Change:
    kind: str  # a watched kind (nodes, pods, ..., deviceclasses), state, or metrics
    key: Hashable | None  # the record's key; None: everything of this kind changed


Listener = Callable[[Change], None]
R = TypeVar("R")
K = TypeVar("K", bound=Hashable)
UNREADABLE = "unreadable"  # the Change kind when the set of unreadable objects changes (key: the kind)
MAX_REASON = 200


def singular(kind: str) -> str:
    """pods -> pod, clusterpolicies -> clusterpolicy, deviceclasses -> deviceclass."""
    if kind.endswith("ies"):
        return kind[:-3] + "y"
    if kind.endswith("sses"):
        return kind[:-2]
    return kind[:-1] if kind.endswith("s") else kind


def unreadable_line(items: list[tuple[str, str, str]]) -> str:
    """'1 pod unreadable: ml/train-0: TypeError: ...', or '3 objects unreadable (2 pods, 1 node); first ml/a: ...'."""
    if not items:
        return ""
    kind, name, why = items[0]
    kinds = sorted({k for k, _, _ in items})
    if len(items) == 1:
        return f"1 {singular(kind)} unreadable: {name}: {why}"
    if len(kinds) == 1:
        return f"{len(items)} {kind} unreadable; first {name}: {why}"
    counts = ", ".join(f"{sum(1 for k, _, _ in items if k == each)} {each}" for each in kinds)
    return f"{len(items)} objects unreadable ({counts}); first {name}: {why}"


class _Unreadable:
    """What a record builder gives back for an object it could not read (see Table._build)."""


_SKIPPED = _Unreadable()


class BaseTable(Generic[K, R]):
    """Records of one kind by their keys (key_of), fed by a reflector (implements its Sink)."""

    shape: Any = None  # what is decoded of each object (decoding.py); None: all of it

    def __init__(self, kind: str, build: Callable[[Obj], R | None], notify: Callable[[Change], None]) -> None:
        self.kind = kind
        self.build = build  # None: the object does not matter, do not keep it
        self.notify = notify
        self.records: dict[K, R] = {}
        self._seen: set[K] | None = None
        # Objects whose record could not be built (a malformed status, a bug): skipped, counted,
        # and said; the watch goes on. key -> one line: why.
        self.unreadable: dict[K, str] = {}

    def key_of(self, obj: Obj) -> K:
        raise NotImplementedError

    def _key(self, obj: Obj) -> K | None:
        try:
            return self.key_of(obj)
        except (AttributeError, TypeError, ValueError):
            return None  # no usable metadata at all: nothing to key it by

    def _build(self, obj: Obj, key: K | None) -> R | None | _Unreadable:
        """The object's record; key None: not read yet, read here only where an unreadable entry needs it (most
        objects listed are not kept, and have none)."""
        try:
            record = self.build(obj)
        except Exception as exc:  # noqa: BLE001  (one object must never end a watch)
            key = self._key(obj) if key is None else key
            if key is None:
                return None  # no usable metadata at all: nothing to count it under
            why = f"{type(exc).__name__}: {exc}".splitlines()[0][:MAX_REASON]
            if self.unreadable.get(key) != why:
                self.unreadable[key] = why
                self.notify(Change(UNREADABLE, self.kind))
            return _SKIPPED
        if self.unreadable:
            key = self._key(obj) if key is None else key
            if key is not None and self.unreadable.pop(key, None) is not None:
                self.notify(Change(UNREADABLE, self.kind))
        return record

    # hooks for indexes
    def _stored(self, key: K, old: R | None, new: R) -> None:
        pass

    def _removed(self, key: K, old: R) -> None:
        pass

    def _put(self, key: K, record: R) -> None:
        old = self.records.get(key)
        self.records[key] = record
        self._stored(key, old, record)

    def _drop(self, key: K) -> bool:
        old = self.records.pop(key, None)
        if old is None:
            return False
        self._removed(key, old)
        return True

    # Sink
    def begin_list(self) -> None:
        self._seen = set()

    def list_item(self, obj: Obj) -> None:
        key = self.put_listed(obj)
        if key is not None:
            assert self._seen is not None
            self._seen.add(key)

    def end_list(self) -> None:
        seen = self._seen or set()
        self._seen = None
        self.forget([k for k in self.records if k not in seen] + [k for k in self.unreadable if k not in seen])

    def put_listed(self, obj: Obj) -> K | None:
        """Keep one listed object's record; its key when kept (or counted unreadable), else None."""
        record = self._build(obj, None)
        if record is None:
            return None  # not kept (most pods): not remembered either
        key = self._key(obj)
        if key is None:
            return None
        if not isinstance(record, _Unreadable):
            self._put(key, record)
        return key

    def forget(self, keys: Iterable[K]) -> None:
        """A list ended without these keys: drop their records and unreadable entries."""
        unread = False
        for key in keys:
            self._drop(key)
            unread = self.unreadable.pop(key, None) is not None or unread
        if unread:
            self.notify(Change(UNREADABLE, self.kind))
        self.notify(Change(self.kind, None))

    def holds(self, key: K) -> bool:
        return key in self.records or key in self.unreadable

    def change_key(self, key: K, record: R) -> Hashable:
        """The key listeners receive for a change of this record."""
        return key

    def apply(self, event_type: str, obj: Obj) -> None:
        key = self._key(obj)
        if key is None:
            return
        old = self.records.get(key)
        if event_type == "DELETED":
            record = None
            if self.unreadable.pop(key, None) is not None:
                self.notify(Change(UNREADABLE, self.kind))
        else:
            record = self._build(obj, key)
        if record is None or isinstance(record, _Unreadable):
            if old is None or not self._drop(key):
                return
            self.notify(Change(self.kind, self.change_key(key, old)))
        elif record != old:  # most updates (heartbeats, annotations, timestamps) change nothing kept
            self._put(key, record)
            self.notify(Change(self.kind, self.change_key(key, record)))


class Table(BaseTable[PodKey, R]):
    """Records keyed by their objects' (namespace, name)."""

    def key_of(self, obj: Obj) -> PodKey:
        return object_key(obj)


class Share:
    """One reflector's share of a table that several reflectors feed (a kind read namespace by
    namespace, or through several field selectors): a Sink whose lists reconcile only the
    records it put there. `accepts(obj)`: whether an object is this share's to keep (None: all
    it is sent), so that two reflectors that both see an object never both hold it."""

    def __init__(self, table: BaseTable[Any, Any], accepts: Callable[[Obj], bool] | None = None) -> None:
        self.table = table
        self.accepts = accepts
        self.keys: set[Hashable] = set()
        self._seen: set[Hashable] | None = None

    @property
    def shape(self) -> Any:
        return self.table.shape

    def begin_list(self) -> None:
        self._seen = set()

    def list_item(self, obj: Obj) -> None:
        if self.accepts is not None and not self.accepts(obj):
            return
        key = self.table.put_listed(obj)
        if key is not None:
            assert self._seen is not None
            self._seen.add(key)

    def end_list(self) -> None:
        seen = self._seen or set()
        self._seen = None
        gone, self.keys = self.keys - seen, seen
        self.table.forget(gone)

    def apply(self, event_type: str, obj: Obj) -> None:
        if self.accepts is not None and not self.accepts(obj):
            return
        self.table.apply(event_type, obj)
        key = self.table._key(obj)
        if key is not None and self.table.holds(key):
            self.keys.add(key)
        else:
            self.keys.discard(key)

    def hand_over(self, other: "Share", namespace: str) -> None:
        """The records of one namespace become other's (its next list reconciles them). Those this
        share's list in progress put there count too: kept here, its next list would drop them from
        the table while other still holds them."""
        def of_namespace(keys: set[Hashable]) -> set[Hashable]:
            return {key for key in keys if isinstance(key, tuple) and key[0] == namespace}

        mine = of_namespace(self.keys)
        self.keys -= mine
        if self._seen is not None:
            listed = of_namespace(self._seen)
            self._seen -= listed
            mine |= listed
        other.keys |= mine


class NodeTable(BaseTable[str, Node]):
    shape = NodeShape

    def key_of(self, obj: Obj) -> str:
        return (obj.get("metadata") or {}).get("name", "")


class PodTable(Table[Pod]):
    shape = PodShape

    def __init__(self, *args: Any, on_node_dirty: Callable[[str | None], None]) -> None:
        super().__init__(*args)
        self.by_node: dict[str, set[PodKey]] = {}
        self.on_node_dirty = on_node_dirty

    def _stored(self, key: PodKey, old: Pod | None, new: Pod) -> None:
        if old is not None and old.node != new.node:
            self._unindex(key, old)
        if new.node:
            self.by_node.setdefault(new.node, set()).add(key)
        if old is None:
            self.on_node_dirty(new.node)
        elif gpu.summary_inputs(old) != gpu.summary_inputs(new):  # a workload pod's restarts, say, change no summary
            self.on_node_dirty(old.node)
            self.on_node_dirty(new.node)

    def _removed(self, key: PodKey, old: Pod) -> None:
        self._unindex(key, old)
        self.on_node_dirty(old.node)

    def _unindex(self, key: PodKey, pod: Pod) -> None:
        if pod.node and pod.node in self.by_node:
            keys = self.by_node[pod.node]
            keys.discard(key)
            if not keys:
                del self.by_node[pod.node]


class DaemonSetTable(Table[DaemonSet]):
    """DaemonSets; `stack_changed` tells whether a write touched what the GPU stack is built from.
    Their status counts change with every pod they run: that must not recompute every node."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.stack_changed = False

    @staticmethod
    def _shape(ds: DaemonSet) -> tuple[Any, ...]:
        return ds.labels, ds.selector, ds.pod_labels, ds.node_selector, ds.affinity, ds.tolerations, ds.containers

    def _stored(self, key: PodKey, old: DaemonSet | None, new: DaemonSet) -> None:
        if old is None or self._shape(old) != self._shape(new):
            self.stack_changed = True

    def _removed(self, key: PodKey, old: DaemonSet) -> None:
        self.stack_changed = True


class EventTable(Table[Event]):
    """Events about nodes and kept pods; at most `per_object` per object and `limit` in all.
    Listeners get the involved object's (kind, namespace, name) as the key."""

    shape = EventShape

    def __init__(self, *args: Any, per_object: int, limit: int) -> None:
        super().__init__(*args)
        self.records: OrderedDict[PodKey, Event] = OrderedDict()  # oldest update first
        self.by_object: dict[tuple[str, str, str], dict[PodKey, Event]] = {}
        self.per_object = per_object
        self.limit = limit

    def _stored(self, key: PodKey, old: Event | None, new: Event) -> None:
        self.records.move_to_end(key)
        if old is not None and old.object_key != new.object_key:
            self._unindex(key, old)
        mine = self.by_object.setdefault(new.object_key, {})
        mine[key] = new
        if len(mine) > self.per_object:
            oldest = min(mine, key=lambda k: mine[k].last or 0.0)
            self._drop(oldest)
        while len(self.records) > self.limit:
            self._drop(next(iter(self.records)))

    def _removed(self, key: PodKey, old: Event) -> None:
        self._unindex(key, old)

    def change_key(self, key: PodKey, record: Event) -> Hashable:
        return record.object_key

    def _unindex(self, key: PodKey, event: Event) -> None:
        mine = self.by_object.get(event.object_key)
        if mine is not None:
            mine.pop(key, None)
            if not mine:
                del self.by_object[event.object_key]

    def drop_object(self, object_key: tuple[str, str, str]) -> None:
        for key in list(self.by_object.get(object_key, ())):
            self._drop(key)

    def prune(self, keep: Callable[[Event], bool]) -> None:
        for key in [k for k, ev in self.records.items() if not keep(ev)]:
            self._drop(key)
