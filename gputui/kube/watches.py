"""The model's reflectors: which run for each kind, what they cover, their tasks and their states.

Every kind is watched cluster-wide, one reflector per field selector (the model's SELECTORS): the
server leaves out what no screen shows. A kind may have namespaced reflectors too, each feeding the
same table through a Share of its own (tables.py), and the cluster-wide ones then leave that
namespace's objects to them, so that no record is held by two reflectors:

- `read_whole(kind, namespaces)`: namespaces whose objects are read without the selector. The model
  asks it for the GPU stack's namespaces: the GPU Operator's validator pods and its 1.x validation
  pods end Succeeded or Failed, and the stack's component states read them, while the cluster-wide
  pods watch leaves finished pods out (a field selector cannot say "or"). A namespace once read
  whole stays so: handing it back would take the cluster-wide list again, and the set of the
  stack's namespaces about never changes.
- When a kind's cluster-wide list is forbidden (403) and it may be read per namespace (pods,
  events, DaemonSets), each namespace to try (`namespaces_to_try`) gets its reflectors. What is
  read then is partial: `scope(kind)` says which namespaces, and a figure computed from it must
  not pass as complete.

A reflector whose task ends while the model runs is said as retrying and started again (the
watchdog): the screen never calls a dead watch live. Nor a silent one: the liveness check asks
`/version` (with a short timeout) whenever nothing was heard from the server for a few seconds
(`Liveness`), and a watch asked for and not answered within seconds is not live either; their
records then read as of the last time they were known current. Any answer after a network failure
wakes every reflector waiting out its back-off.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping
from urllib.parse import quote

from .config import describe_network_error
from .client import HttpError, Timeout
from .tables import BaseTable, Share
from .tasks import cancel_and_wait
from .watch import ABSENT, FORBIDDEN, LIVE, RETRYING, SYNCING, Reflector, ResourceState

if TYPE_CHECKING:
    from .client import Client
    from .discovery import Discovery

log = logging.getLogger(__name__)

WATCHDOG_INTERVAL = 1.0  # seconds between looks at the reflectors' tasks


@dataclass(frozen=True)
class Liveness:
    """Seconds of the liveness check."""

    interval: float = 2.0  # between looks at when the server was last heard from
    quiet_after: float = 5.0  # nothing heard for this long: ask /version whether the server answers at all
    probe_timeout: float = 4.0  # /version not answered within this: the server is not answering
    answer_within: float = 5.0  # a watch asked for and not answered within this is not live
_WORST = {RETRYING: 3, SYNCING: 2, LIVE: 1, ABSENT: 0}


def namespaced(collection: str, namespace: str) -> str:
    """/api/v1/pods -> /api/v1/namespaces/NS/pods."""
    root, _, resource = collection.rpartition("/")
    return f"{root}/namespaces/{quote(namespace, safe='')}/{resource}"


def namespaces_to_try(explicit: Iterable[str], context_namespace: str | None, configured: Iterable[str] = ()) -> tuple[str, ...]:
    """Where to read a kind whose cluster-wide list is forbidden: the `-n` namespaces when given (as
    with kubectl, they replace the context's), else the context's namespace, then the config file's."""
    chosen = list(explicit) or [context_namespace or "", *configured]
    return tuple(dict.fromkeys(n for n in chosen if n))


def _namespace_of(obj: dict[str, Any]) -> str:
    return (obj.get("metadata") or {}).get("namespace") or ""


@dataclass(frozen=True)
class Scope:
    """What one kind's watches cover."""

    kind: str
    cluster_wide: bool  # not forbidden cluster-wide: every object of the kind is read
    namespaces: tuple[str, ...] = ()  # tried one by one, the cluster-wide list being forbidden: listed or forbidden
    forbidden: tuple[str, ...] = ()  # of those, the ones forbidden too

    @property
    def readable(self) -> tuple[str, ...]:
        return tuple(n for n in self.namespaces if n not in self.forbidden)

    @property
    def partial(self) -> bool:
        """Some namespaces are read, not the cluster: the others may hold anything."""
        return not self.cluster_wide and bool(self.readable)

    def words(self) -> str:
        """'pods in 2 namespaces: ml, research; cluster-wide forbidden; forbidden in kube-system'."""
        readable = self.readable
        where = f"namespace {readable[0]}" if len(readable) == 1 else f"{len(readable)} namespaces: {', '.join(readable)}"
        out = f"{self.kind} in {where}; cluster-wide forbidden"
        return out + (f"; forbidden in {', '.join(self.forbidden)}" if self.forbidden else "")

    def to_json(self) -> dict[str, Any]:
        return {"cluster_wide": self.cluster_wide, "namespaces": list(self.readable), "forbidden": list(self.forbidden),
                "partial": self.partial}


def scope_lines(scopes: Iterable[Scope]) -> list[str]:
    """Scope.words, once for the kinds that cover the same namespaces: 'pods, events in namespace ml; ...'."""
    groups: dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for scope in scopes:
        groups.setdefault((scope.readable, scope.forbidden), []).append(scope.kind)
    return [Scope(", ".join(kinds), False, readable + forbidden, forbidden).words() for (readable, forbidden), kinds in groups.items()]


@dataclass(eq=False)
class Watch:
    kind: str
    namespace: str | None  # None: cluster-wide
    reflector: Reflector
    sink: Share | BaseTable[Any, Any]
    whole: bool = False  # a namespace read without the kind's selector
    # A namespace read whole once the cluster-wide list was complete: it took over every object of the selector's
    # there, and holds them while it lists the rest (complete(kind, whole=False) does not wait for it).
    covered: bool = False
    task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        selector = self.reflector.field_selector
        return self.kind + (f"@{self.namespace}" if self.namespace is not None else "") + (f"[{selector}]" if selector else "")


class Watches:
    def __init__(
        self,
        api: Client,
        tables: Mapping[str, BaseTable[Any, Any]],
        collections: Mapping[str, str],
        kinds: Iterable[str],
        *,
        selectors: Mapping[str, tuple[str | None, ...]],
        namespaced_kinds: Iterable[str],
        namespaces: Iterable[str],
        on_state: Callable[[ResourceState], None],
        options: Mapping[str, Any],
        liveness: Liveness = Liveness(),
        discovery: Discovery | None = None,
    ) -> None:
        self.api = api
        self.discovery = discovery  # read by its own task: which kinds are served (discovery.py)
        self.tables = tables
        self.collections = collections
        self.selectors = selectors
        self.namespaced_kinds = frozenset(namespaced_kinds)
        self.namespaces = tuple(namespaces)  # to try when a kind is forbidden cluster-wide
        self.on_state = on_state
        self.options = dict(options)
        self.liveness = liveness
        self.all: list[Watch] = []
        self.primary: dict[str, Reflector] = {}  # per kind, its first cluster-wide reflector
        self._owned: dict[str, set[str]] = {}  # per kind, the namespaces its namespaced reflectors read
        self._fallen_back: set[str] = set()
        self._running = False
        self._watchdog: asyncio.Task[None] | None = None
        self._liveness: asyncio.Task[None] | None = None
        self._discovery: asyncio.Task[None] | None = None
        self.answered_at = time.monotonic()  # the last answer to the liveness check's /version
        for kind in kinds:
            shared = kind in self.namespaced_kinds or len(self._selectors(kind)) > 1
            for selector in self._selectors(kind):
                watch = self._add(kind, None, selector, shared=shared)
                self.primary.setdefault(kind, watch.reflector)

    def _selectors(self, kind: str) -> tuple[str | None, ...]:
        return self.selectors.get(kind) or (None,)

    def _add(self, kind: str, namespace: str | None, selector: str | None, *, shared: bool = True, whole: bool = False) -> Watch:
        table = self.tables[kind]
        owned = self._owned.setdefault(kind, set())
        sink: Share | BaseTable[Any, Any]
        if namespace is None:
            sink = Share(table, accepts=lambda obj: not owned or _namespace_of(obj) not in owned) if shared else table
            path = self.collections[kind]
        else:
            owned.add(namespace)
            sink = share = Share(table)
            path = namespaced(self.collections[kind], namespace)
            for other in self.of(kind):
                if other.namespace is None and isinstance(other.sink, Share):
                    other.sink.hand_over(share, namespace)
        watch = Watch(kind, namespace, Reflector(kind, self.api, path, sink, field_selector=selector, **self.options), sink, whole)
        watch.reflector.on_state = lambda state: self._state_changed(watch, state)
        watch.reflector.on_contact = self._contact
        watch.reflector.discovery = self.discovery
        self.all.append(watch)
        if self._running:
            self._start(watch)
        return watch

    def of(self, kind: str) -> list[Watch]:
        return [w for w in self.all if w.kind == kind]

    # -- namespaces ------------------------------------------------------------------
    def read_whole(self, kind: str, namespaces: Iterable[str]) -> None:
        """Read these namespaces' objects of `kind` without its selector, from now on."""
        for namespace in namespaces:
            mine = [w for w in self.of(kind) if w.namespace == namespace]
            if any(w.whole for w in mine) or kind not in self.primary:
                continue
            log.info("%s: reading namespace %s whole", kind, namespace)
            covered = self.complete(kind, whole=False)
            whole = self._add(kind, namespace, None, whole=True)
            whole.covered = covered
            for watch in mine:  # read through the selector, per namespace, until now
                assert isinstance(watch.sink, Share) and isinstance(whole.sink, Share)  # namespaced watches feed a Share
                watch.sink.hand_over(whole.sink, namespace)
                self._remove(watch)

    def _state_changed(self, watch: Watch, state: ResourceState) -> None:
        kind = watch.kind
        if (state.phase == FORBIDDEN and watch.reflector is self.primary.get(kind) and kind in self.namespaced_kinds
                and kind not in self._fallen_back and self.namespaces):
            self._fallen_back.add(kind)
            log.info("%s: forbidden cluster-wide; reading namespaces %s", kind, ", ".join(self.namespaces))
            read = {w.namespace for w in self.of(kind) if w.namespace is not None}
            for namespace in self.namespaces:
                if namespace not in read:
                    for selector in self._selectors(kind):
                        self._add(kind, namespace, selector)
        self.on_state(state)

    def scope(self, kind: str) -> Scope:
        primary = self.primary.get(kind)
        if primary is None or primary.state.phase != FORBIDDEN:
            return Scope(kind, cluster_wide=primary is not None)
        by_namespace: dict[str, list[Watch]] = {}
        for w in self.of(kind):
            if w.namespace is not None:
                by_namespace.setdefault(w.namespace, []).append(w)
        # A namespace counts once known: listed (readable), or forbidden; one still being tried is neither yet.
        forbidden = tuple(ns for ns, ws in by_namespace.items() if all(w.reflector.state.phase == FORBIDDEN for w in ws))
        known = tuple(ns for ns, ws in by_namespace.items()
                      if ns in forbidden or any(w.reflector.state.synced and w.reflector.state.phase != FORBIDDEN for w in ws))
        return Scope(kind, False, known, forbidden)

    # -- states ----------------------------------------------------------------------
    def state(self, kind: str) -> ResourceState:
        """The kind's state from its reflectors': the worst of those not forbidden, synced once they
        all are; forbidden when all are (the cluster-wide 403, and the namespaces tried)."""
        primary = self.primary[kind].state
        # A namespace read whole counts once listed: until then complete() says the kind is not.
        states = [w.reflector.state for w in self.of(kind) if not w.whole or w.reflector.state.synced]
        playing = [s for s in states if s.phase != FORBIDDEN]
        if not playing:
            tried = [w.namespace for w in self.of(kind) if w.namespace is not None]
            if not tried:
                return primary
            also = f"; in namespace{'s' if len(tried) > 1 else ''} {', '.join(dict.fromkeys(tried))} too"
            return dataclasses.replace(primary, error=(primary.error or "forbidden") + also)
        if len(playing) == 1:
            return playing[0]
        worst = max(playing, key=lambda s: _WORST.get(s.phase, 0))
        stale = [s.stale_since for s in playing if s.stale_since is not None]
        return dataclasses.replace(worst, synced=all(s.synced for s in playing), relisting=any(s.relisting for s in playing),
                                   stale_since=min(stale) if stale else None)

    def complete(self, kind: str, whole: bool = True) -> bool:
        """Listed cluster-wide and every namespace read whole, neither forbidden nor unserved. whole=False: what the
        selectors select is (a namespace read whole that took over a complete list's objects need not be listed)."""
        primary = self.primary.get(kind)
        if primary is None or not primary.state.synced or primary.state.phase in (FORBIDDEN, ABSENT):
            return False
        return all(w.reflector.state.synced for w in self.of(kind)
                   if w.namespace is None or (w.whole and (whole or not w.covered)))

    def settled(self, kinds: Iterable[str]) -> bool:
        wanted = set(kinds)
        return all(w.reflector.settled.is_set() for w in self.all if w.kind in wanted)

    async def wait_settled(self, kinds: Iterable[str], timeout: float | None) -> bool:
        """Until every reflector of `kinds` has listed once or is forbidden or unserved, those a 403
        starts included. False on timeout."""
        wanted = set(kinds)
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            pending = [w.reflector.settled for w in self.all if w.kind in wanted and not w.reflector.settled.is_set()]
            if not pending:
                return True
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                return False
            try:
                async with asyncio.timeout(left):
                    await asyncio.gather(*(settled.wait() for settled in pending))
            except TimeoutError:
                return False

    # -- tasks -----------------------------------------------------------------------
    def start(self) -> None:
        self._running = True
        if self.discovery is not None:
            self._discovery = asyncio.create_task(self.discovery.run(), name="gputui-discovery")
        for watch in self.all:
            self._start(watch)
        self._watchdog = asyncio.create_task(self._watch_tasks(), name="gputui-reflector-watchdog")
        self._liveness = asyncio.create_task(self._check_liveness(), name="gputui-liveness")

    def _contact(self) -> None:
        """The server answered after a network failure: every reflector in a network back-off tries now."""
        for watch in self.all:
            watch.reflector.wake()

    async def _check_liveness(self) -> None:
        every = self.liveness
        while True:
            await asyncio.sleep(every.interval)
            now = time.monotonic()
            reflectors = [w.reflector for w in self.all]
            for r in reflectors:
                if r.asked_at is not None and now - r.asked_at > every.answer_within:
                    r.not_answering(r.heard_at, f"the server has not answered the {r.resource} watch for {now - r.asked_at:.0f} s")
            heard = max([self.answered_at, *(r.heard_at for r in reflectors)])
            if now - heard < every.quiet_after:
                continue
            try:
                resp = await self.api.get("/version", timeout=Timeout(connect=every.probe_timeout, total=every.probe_timeout))
                async with resp:
                    await resp.read()
            except (HttpError, asyncio.TimeoutError, OSError) as exc:
                why = f"the server does not answer ({describe_network_error(exc)})"
                for r in reflectors:
                    r.not_answering(max(self.answered_at, r.heard_at), why)
                continue
            except Exception:  # an exec plugin failing to renew, say: the reflectors say it themselves
                log.debug("liveness check failed", exc_info=True)
                continue
            self.answered_at = time.monotonic()
            for r in reflectors:
                r.server_answers()
            self._contact()

    def _start(self, watch: Watch) -> None:
        watch.task = asyncio.create_task(watch.reflector.run(), name=f"gputui-reflector-{watch.name}")

    def _remove(self, watch: Watch) -> None:
        self.all.remove(watch)
        if watch.task is not None:
            watch.task.cancel()

    @property
    def tasks(self) -> dict[str, asyncio.Task[None]]:
        return {w.name: w.task for w in self.all if w.task is not None}

    async def _watch_tasks(self) -> None:
        while True:
            await asyncio.sleep(WATCHDOG_INTERVAL)
            for watch in list(self.all):
                task = watch.task
                if task is None or not task.done() or not self._running:
                    continue
                why = "stopped" if task.cancelled() else f"stopped ({type(task.exception()).__name__})"
                log.debug("reflector %s %s; starting it again", watch.name, why)
                watch.reflector.stopped(f"the {watch.kind} watch {why}; starting it again")
                self._start(watch)

    def all_running(self) -> bool:
        """Every reflector's task is alive (the watchdog restarts one that is not)."""
        return bool(self.all) and all(w.task is not None and not w.task.done() for w in self.all)

    async def stop(self) -> None:
        self._running = False
        tasks = [w.task for w in self.all if w.task is not None] + [t for t in (self._watchdog, self._liveness, self._discovery) if t is not None]
        for error in await cancel_and_wait(tasks):
            log.debug("reflector ended with an error", exc_info=error)
        for watch in self.all:
            watch.task = None
        self._watchdog = self._liveness = self._discovery = None
