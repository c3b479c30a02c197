"""A reflector per resource: list, then watch from the list's resourceVersion.

Lists are read as gently as the server allows, as client-go's reflector does:
a WatchList stream (the initial state as events, from the watch cache, then the
watch on the same connection), else one list from the watch cache
(`resourceVersion=0`), else pages of 500 (an old or odd server). A server that
refuses a mode (or ignores it) moves the reflector to the next one. After a 410
the next list is consistent (`resourceVersion` unset), as client-go's is.

The server ending a watch is normal: watch again from the last resourceVersion
seen (bookmarks included). 410 Gone means our resourceVersion was compacted
away: list again and reconcile, so objects deleted meanwhile leave the model.
After the server was unreachable (refused, reset, timed out) the next read is a
consistent list, not a watch from where we were: a server restored from a backup
that has taken writes since may be past our resourceVersion with another
history, and only a list tells. Anything else backs off exponentially with
jitter, capped at 15 s; a 401 or 403 ("forbidden", a state of its own) backs
off from 3 s to 30 s in case credentials or RBAC change; a 404 is "absent" (the
kind is not served: no CRD, an older cluster), the resource then empty, asked
for again once discovery (discovery.py) has read the server again. A kind whose
group/version discovery does not find is absent without being asked for. A network back-off ends early when the server is heard from
again (`wake`). A silently dead connection is caught by a read-inactivity
timeout, and sooner by the model's liveness check (watches.py), which calls
`not_answering` on a reflector whose data it can no longer vouch for.

Responses are read raw and decoded typed (decoding.py; no generated models:
they are far too slow for big lists): of each object, only the fields of its
sink's `shape`, whatever their order.
"""
from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol

import orjson

from .config import describe_network_error, status_message
from .client import HttpError, Timeout
from .decoding import Decoding
from .turns import Turns

if TYPE_CHECKING:
    from .client import Client
    from .discovery import Discovery

log = logging.getLogger(__name__)

Obj = dict[str, Any]

SYNCING = "syncing"
LIVE = "live"
RETRYING = "retrying"
FORBIDDEN = "forbidden"
ABSENT = "absent"  # 404: the server does not serve this resource (CRD not installed, API group too new)


@dataclass
class ResourceState:
    """What the UI shows for one watched resource."""

    resource: str
    phase: str = SYNCING
    error: str | None = None  # the last failure, one line
    attempt: int = 0  # failures in a row
    retry_at: float | None = None  # time.monotonic() of the next try
    synced: bool = False  # a full list has been applied at least once
    relisting: bool = False  # a synced resource being listed again (after a 410, a 403 or unreadable data)
    # time.monotonic() when a synced resource's data stopped being current (its watch failed, a relist
    # began): the records are as of then. None while it is live, or before the first list.
    stale_since: float | None = None
    since: float = field(default_factory=time.monotonic)
    inactivity_timeout: float | None = None  # a live watch silent this long is started again (for the words)

    def retry_in(self, now: float | None = None) -> float | None:
        if self.retry_at is None:
            return None
        return max(0.0, self.retry_at - (time.monotonic() if now is None else now))

    def describe(self, now: float | None = None) -> str:
        """One plain line, e.g. 'retrying in 4 s: connection refused'."""
        if self.phase == RETRYING:
            wait = self.retry_in(now)
            when = f"retrying in {wait:.0f} s" if wait else "retrying"
            return f"{when}: {self.error_words()}" if self.error else when
        if self.phase == FORBIDDEN:
            return f"forbidden: {self.error}" if self.error else "forbidden"
        if self.phase == ABSENT:
            return "not served by this cluster"
        return self.phase

    def error_words(self) -> str:
        """The last failure in words: a synced watch that timed out went silent (its inactivity timeout)."""
        error = self.error or ""
        if error == "timed out" and self.synced and not self.relisting and self.inactivity_timeout:
            return f"no events on the {self.resource} watch for {self.inactivity_timeout:.0f} s"
        return error


class Sink(Protocol):
    """Where a reflector puts what it reads."""

    def begin_list(self) -> None: ...
    def list_item(self, obj: Obj) -> None: ...
    def end_list(self) -> None: ...  # objects absent from the list are gone
    def apply(self, event_type: str, obj: Obj) -> None: ...  # ADDED / MODIFIED / DELETED

    # Optional: what is decoded of each object (a decoding.py shape); None or absent: all of it.
    @property
    def shape(self) -> Any: ...


class Gone(Exception):
    pass


class Unsupported(Exception):
    """The server does not do what this list mode asks (WatchList): try the next mode."""


class ApiFailure(Exception):
    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"{status}: {message}" if message else str(status))
        self.status = status
        self.message = message
        self.retry_after = retry_after  # seconds the server asked us to wait (429, 503 with Retry-After)

    def line(self) -> str:
        if self.status == 401:
            return "unauthorized (401): credentials rejected"
        return f"{self.message} ({self.status})" if self.message else f"HTTP {self.status}"


class _GcPause:
    """Reflectors list concurrently; the collector resumes when the last list ends,
    and only if it was running when the first began."""

    depth = 0
    resume = False

    def __init__(self) -> None:
        if _GcPause.depth == 0:
            _GcPause.resume = gc.isenabled()
            gc.disable()
        _GcPause.depth += 1
        self.ended = False

    def end(self) -> None:
        """This list is over (again: nothing). A WatchList stream ends its pause at the initial
        events' end and goes on as the watch: paused for the stream's life (minutes), the cycles
        each frame of the UI leaves behind piled up, hundreds of MB at a tall terminal."""
        if self.ended:
            return
        self.ended = True
        _GcPause.depth -= 1
        if _GcPause.depth == 0 and _GcPause.resume:
            gc.enable()


@contextlib.contextmanager
def gc_paused() -> Iterator[_GcPause]:
    """A big list creates millions of short-lived objects and thousands of records kept
    for good: the cyclic GC would scan them again and again while the list lasts.
    The pause ends with the block, or sooner with its end()."""
    pause = _GcPause()
    try:
        yield pause
    finally:
        pause.end()


# Bytes of whole lines decoded at once: the objects of a batch are freed before the next is decoded, their memory
# reused while still in the CPU's caches (one read of a WatchList may bring megabytes).
BATCH = 1 << 17


def _batches(pending: bytearray, chunk: bytes, start: int, end: int) -> Iterator[bytes | bytearray | memoryview]:
    """pending (whole lines, if any), then chunk[start:end] (whole lines) in batches of about BATCH bytes, each
    ending at a line's end."""
    if pending:
        yield pending
    view = memoryview(chunk)
    while end - start > BATCH:
        # a line longer than BATCH: whole
        cut = chunk.rfind(b"\n", start, start + BATCH) + 1 or chunk.find(b"\n", start + BATCH) + 1
        yield view[start:cut]
        start = cut
    if start < end:
        yield view[start:end]


QUICK_CLOSES = 3  # watches in a row ended at once before that counts as a failure
WATCHLIST, CACHE, PAGED = "watchlist", "cache", "paged"
# Tried in this order: the WatchList stream, a list from the watch cache (resourceVersion=0), pages.
LIST_MODES = (WATCHLIST, CACHE, PAGED)
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
WATCHLIST_FIRST_LINE = 15.0  # seconds a WatchList may take to send its first line
RETRY_AFTER_MAX = 60.0
AUTH_BACKOFF_FIRST = 3.0  # seconds before the first retry of a 401 or 403; doubled up to forbidden_retry


def _too_large(status: Obj) -> bool:
    """A Status saying our resourceVersion is from the server's future: it was reset; list again (as client-go)."""
    causes = (status.get("details") or {}).get("causes") or []
    return any(isinstance(c, dict) and c.get("reason") == "ResourceVersionTooLarge" for c in causes) or (
        "Too large resource version" in str(status.get("message") or ""))


def _older(rv: str, held: str | None) -> bool:
    """rv comes before held. resourceVersions are opaque; etcd's are integers, compared only then."""
    if not held or not rv.isdigit() or not held.isdigit():
        return False
    return int(rv) < int(held)


class Reflector:
    def __init__(
        self,
        resource: str,
        client: Client,
        path: str,
        sink: Sink,
        *,
        page_size: int = 500,
        list_modes: tuple[str, ...] = LIST_MODES,
        watch_seconds: tuple[int, int] = (240, 300),
        inactivity_timeout: float = 90.0,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        backoff_initial: float = 0.5,
        backoff_max: float = 15.0,
        forbidden_retry: float = 30.0,
        on_state: Callable[[ResourceState], None] | None = None,
        field_selector: str | None = None,
    ) -> None:
        self.resource = resource
        self.client = client
        self.path = path  # the collection, e.g. /api/v1/pods
        self.field_selector = field_selector  # on every list, page and watch: the server filters
        self.sink = sink
        self.decoding = Decoding.of(getattr(sink, "shape", None))
        self.page_size = page_size
        self.watch_seconds = watch_seconds
        self.inactivity_timeout = inactivity_timeout
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.forbidden_retry = forbidden_retry
        self.on_state = on_state
        self.state = ResourceState(resource, inactivity_timeout=inactivity_timeout)
        self.resource_version: str | None = None
        self.settled = asyncio.Event()  # first list applied, or forbidden
        self.lists = 0  # full lists done (1 + relists)
        self.list_modes = tuple(list_modes)
        self.list_mode = self.list_modes[0]  # how the next list is read; a server that refuses one moves us on
        self._consistent = False  # after a 410 or a reset server: the next list must be consistent, not from a cache
        self.events = 0  # watch events applied
        self._quick_closes = 0  # watches in a row that the server ended at once, with no event
        self._server_was_away = False  # a connection failed since the last list: list again before watching
        self.heard_at = time.monotonic()  # the last byte or answer from the server, for the liveness check
        self.asked_at: float | None = None  # a watch request sent and not answered yet
        self.on_contact: Callable[[], None] | None = None  # the server answered after a network failure
        self.discovery: Discovery | None = None  # which group/versions are served (None: ask, a 404 says)
        self._unreachable = False  # the last failure was the network's (refused, reset, timed out)
        self._wake = asyncio.Event()  # ends a network back-off early: the server is back
        self._silence: str | None = None  # the words not_answering gave a watch whose stream stayed open

    # -- state -------------------------------------------------------------
    def _set(self, phase: str, error: str | None = None, retry_at: float | None = None) -> None:
        s = self.state
        if s.phase != phase:
            s.since = time.monotonic()
        s.phase, s.error, s.retry_at = phase, error, retry_at
        if phase == LIVE:
            s.attempt = 0
            if not s.relisting:
                s.stale_since = None
        elif s.synced and s.stale_since is None:
            s.stale_since = time.monotonic()
        if phase in (LIVE, FORBIDDEN, ABSENT):
            self.settled.set()
        if self.on_state is not None:
            self.on_state(s)

    def _heard(self) -> None:
        """An answer came: the server is reachable (the other reflectors waiting out a network back-off are woken)."""
        self.heard_at = time.monotonic()
        if self._unreachable:
            self._unreachable = False
            if self.on_contact is not None:
                self.on_contact()

    def wake(self) -> None:
        """The server answered someone: a network back-off under way ends now."""
        if self._unreachable:
            self._wake.set()

    def not_answering(self, since: float, why: str) -> None:
        """The liveness check can no longer vouch for a live watch (the server does not answer, or this
        watch was asked for and not answered): no longer live, its records as of `since`, the last time
        it was known to be current. The next byte on its stream makes it live again."""
        state = self.state
        if state.phase != LIVE:
            return
        if state.synced and state.stale_since is None:
            state.stale_since = since
        self._silence = why if self.asked_at is None else None
        self._set(RETRYING, why)

    def server_answers(self) -> None:
        """The liveness check was answered again: a watch it gave up on while its stream stayed open is
        as current as before (a quiet watch has nothing to send to say so itself, until a bookmark)."""
        if self._silence is not None and self.state.phase == RETRYING and self.state.error == self._silence and self.asked_at is None:
            self._set(LIVE)
        self._silence = None

    def stopped(self, why: str) -> None:
        """Its task ended without the model stopping (the watchdog starts it again): retrying, listed anew."""
        self.resource_version = None
        self.state.attempt += 1
        self._set(RETRYING, why, time.monotonic())

    def _backoff(self) -> float:
        return self._backoff_for(self.state.attempt)

    def _backoff_for(self, attempt: int) -> float:
        base = min(self.backoff_max, self.backoff_initial * 2 ** max(0, attempt - 1))
        return base * random.uniform(0.5, 1.0)

    # -- the loop ------------------------------------------------------------
    async def run(self) -> None:
        from .credentials import CredentialError  # noqa: PLC0415

        while True:
            try:
                if self.resource_version is not None and self._server_was_away:
                    # Not a watch from where we were: a restored server past our resourceVersion would
                    # send only its own later changes, and ours that it never had would stay as ghosts.
                    log.info("%s: the server was unreachable; listing again before watching", self.resource)
                    self.resource_version = None
                    self._consistent = True
                self._server_was_away = False
                if self.resource_version is None and self.discovery is not None:
                    await self._until_served()
                if self.resource_version is None and self.list_mode == WATCHLIST:
                    await self._watch_list()  # the list, then the watch, on one stream
                    continue
                if self.resource_version is None:
                    await self._list()
                await self._watch()
            except asyncio.CancelledError:
                raise
            except Gone:
                log.info("%s: resourceVersion %s expired, listing again", self.resource, self.resource_version)
                self.resource_version = None
                self._consistent = True
            except Unsupported as exc:
                following = self.list_modes[self.list_modes.index(self.list_mode) + 1:]
                log.info("%s: %s; listing as %s from now on", self.resource, exc, following[0] if following else "pages")
                self.list_mode = following[0] if following else PAGED
            except ApiFailure as exc:
                if exc.status == 403:
                    self.state.attempt += 1
                    delay = self._auth_backoff()
                    self._set(FORBIDDEN, exc.message or "forbidden", time.monotonic() + delay)
                    await asyncio.sleep(delay)
                    self.resource_version = None
                elif exc.status == 401:
                    await self._retry_later(exc.line(), delay=self._auth_backoff(self.state.attempt + 1))
                elif exc.status == 404:
                    await self._absent(exc.message or "not found")
                    self.resource_version = None
                elif exc.retry_after is not None:
                    await self._retry_later(f"server busy: {exc.line()}", delay=exc.retry_after)
                else:
                    await self._retry_later(exc.line())
            except (HttpError, asyncio.TimeoutError, OSError) as exc:
                self._server_was_away = self._unreachable = True
                await self._retry_later(describe_network_error(exc), wakeable=True)
            except CredentialError as exc:  # an exec plugin that failed to renew its token
                await self._retry_later(str(exc))
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                # A malformed answer: start over from a fresh list.
                log.debug("%s: unreadable response", self.resource, exc_info=True)
                self.resource_version = None
                await self._retry_later(f"unreadable response from the server ({type(exc).__name__})")
            except Exception as exc:
                log.debug("%s: reflector error", self.resource, exc_info=True)
                self.resource_version = None
                await self._retry_later(f"internal error ({type(exc).__name__}: {str(exc)[:120]}); listing again")

    async def _absent(self, why: str) -> None:
        """The kind is not served: nothing of it exists (any more). Asked for again after discovery's next read,
        or, without discovery, after forbidden_retry."""
        self.sink.begin_list()
        self.sink.end_list()
        if self.discovery is not None and self.discovery.served is not None:
            if self.state.phase != ABSENT and self.state.synced:
                self.discovery.changed()  # it was served: discovery's last read is out of date
            self._set(ABSENT, why)
            await self.discovery.next_read()
        else:
            self._set(ABSENT, why, time.monotonic() + self.forbidden_retry)
            await asyncio.sleep(self.forbidden_retry)

    async def _until_served(self) -> None:
        """Until discovery finds the kind's group/version (absent meanwhile, nothing asked of the server)."""
        discovery = self.discovery
        assert discovery is not None
        if discovery.reads == 0 and discovery.serves(self.path) is None:
            await discovery.next_read()  # the first, made as the model starts
        while discovery.serves(self.path) is False:
            if self.state.phase != ABSENT:
                self.sink.begin_list()  # nothing of the kind exists (any more)
                self.sink.end_list()
                self._set(ABSENT, "not served")
            await discovery.next_read()

    async def _retry_later(self, error: str, delay: float | None = None, wakeable: bool = False) -> None:
        """delay: the server's Retry-After (bounded), else exponential back-off with jitter.
        wakeable: a network failure's back-off, ended early by `wake` once the server answers again."""
        self.state.attempt += 1
        delay = self._backoff() if delay is None else min(max(delay, 0.1), RETRY_AFTER_MAX)
        log.info("%s: %s; retrying in %.1f s", self.resource, error, delay)
        self._set(RETRYING, error, time.monotonic() + delay)
        if not wakeable:
            await asyncio.sleep(delay)
            return
        self._wake.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            async with asyncio.timeout(delay):
                await self._wake.wait()

    def _auth_backoff(self, attempt: int | None = None) -> float:
        """A 401 or 403: from AUTH_BACKOFF_FIRST, doubled each time, up to forbidden_retry, with jitter."""
        n = self.state.attempt if attempt is None else attempt
        return min(self.forbidden_retry, AUTH_BACKOFF_FIRST * 2 ** max(0, n - 1)) * random.uniform(0.75, 1.0)

    def _first_page_params(self) -> dict[str, Any]:
        """From the watch cache (resourceVersion=0: one answer, no pages) unless the list must be
        consistent (after a 410, as client-go) or the server is listed in pages."""
        if self.list_mode == PAGED or self._consistent:
            return {"limit": self.page_size}
        return {"resourceVersion": "0"}

    async def _fetch_page(self, token: str | None) -> bytes:
        timeout = Timeout(connect=self.connect_timeout, read=self.read_timeout)
        params: dict[str, Any] = {"limit": self.page_size, "continue": token} if token else self._first_page_params()
        resp = await self.client.get(self.path, params=self._selecting(params), timeout=timeout)
        async with resp:
            body = await resp.read()
        self._heard()
        if resp.status != 200:
            raise self._failure(resp.status, body, resp.headers.get("Retry-After"))
        return body

    def _selecting(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.field_selector:
            params["fieldSelector"] = self.field_selector
        return params

    def _listing(self) -> None:
        if not self.state.synced and self.state.phase not in (RETRYING, FORBIDDEN):
            self._set(SYNCING)
        elif self.state.synced and not self.state.relisting:
            self.state.relisting = True  # the records are as of the last event seen until the list ends
            if self.state.stale_since is None:
                self.state.stale_since = time.monotonic()
            self._set(self.state.phase, self.state.error, self.state.retry_at)

    def _listed(self, resource_version: str | None) -> None:
        # Synced before the sink hears the list ended: what listens to the end (the model pruning the events of
        # pods not kept once every namespace's pods are listed) sees this list counted.
        self.state.synced = True
        self.state.relisting = False
        self.sink.end_list()
        self.resource_version = resource_version
        self.lists += 1
        self._consistent = False
        self._set(LIVE)  # the data is current; a failing watch turns this to retrying

    async def _list(self) -> None:
        self._listing()
        self.sink.begin_list()
        page: asyncio.Future[bytes] = asyncio.ensure_future(self._fetch_page(None))
        turns = Turns()
        try:
            with gc_paused():
                while True:
                    body = await page
                    # Ask for the next page before decoding this one; yielding now and then while
                    # decoding lets its request go out and its bytes come in meanwhile.
                    meta, items = self.decoding.page(body)
                    token = meta.get("continue")
                    if token:
                        page = asyncio.ensure_future(self._fetch_page(token))
                    list_item, decode = self.sink.list_item, self.decoding.object
                    for item in items:
                        list_item(decode(item))
                        if turns.due():
                            await turns.take()
                    del body, items
                    if not token:
                        break
        finally:
            if not page.done():
                page.cancel()
        self._listed(meta.get("resourceVersion"))

    async def _watch(self) -> None:
        assert self.resource_version is not None
        params = {"watch": "true", "resourceVersion": self.resource_version, "allowWatchBookmarks": "true"}
        await self._stream(params, initial=False)

    async def _watch_list(self) -> None:
        """WatchList: the initial state as ADDED events up to the bookmark annotated
        k8s.io/initial-events-end, then the watch goes on on the same stream. Served from the
        watch cache; a server that refuses it (or ignores it) moves us to the next list mode."""
        params = {"watch": "true", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
                  "allowWatchBookmarks": "true", "resourceVersion": ""}
        self._listing()
        await self._stream(params, initial=True)

    async def _stream(self, params: dict[str, Any], initial: bool) -> None:
        params["timeoutSeconds"] = random.randint(*self.watch_seconds)
        timeout = Timeout(connect=self.connect_timeout, read=self.inactivity_timeout)
        started = self.asked_at = time.monotonic()
        try:
            resp = await self.client.get(self.path, params=self._selecting(params), timeout=timeout)
        finally:
            self.asked_at = None
        self._heard()
        applied = 0
        async with resp:
            if initial and resp.status in (400, 422):
                raise Unsupported(f"the server refuses WatchList ({status_message(await resp.read())})")
            if initial and resp.status == 403:
                # May list but not watch? The list says so in its own words (and a read-only report needs no watch).
                raise Unsupported("watching is forbidden; a list may not be")
            if resp.status != 200:
                raise self._failure(resp.status, await resp.read(), resp.headers.get("Retry-After"))
            listing = initial
            if listing:
                self.sink.begin_list()
            else:
                self._set(LIVE)
            pending = bytearray()
            turns = Turns()
            with gc_paused() if listing else contextlib.nullcontext() as pause:
                while True:
                    if listing and applied == 0:
                        try:  # a server that ignores sendInitialEvents sends nothing now
                            # asyncio.timeout, not wait_for: 3.11's wait_for loses a cancellation that
                            # meets a finished read, and the model's stop then waits forever
                            async with asyncio.timeout(WATCHLIST_FIRST_LINE):
                                chunk = await resp.read_some()
                        except asyncio.TimeoutError:
                            raise Unsupported("no initial events: the server ignores WatchList") from None
                    else:
                        chunk = await resp.read_some()
                    self.heard_at = time.monotonic()
                    if not chunk:
                        break
                    if not listing and self.state.phase != LIVE:
                        self._set(LIVE)  # the stream the liveness check gave up on goes on: nothing was missed
                    end = chunk.rfind(b"\n")
                    if end < 0:
                        pending += chunk
                        continue
                    # The chunk's whole lines decoded a batch at a time, where they lie (a line begun in an earlier
                    # chunk ends in its first line: that one is joined to its beginning).
                    first = 0
                    if pending:
                        first = chunk.find(b"\n") + 1
                        pending += chunk[:first]
                    for batch in _batches(pending, chunk, first, end + 1):
                        for event_type, obj in self.decoding.events(batch):
                            if listing:
                                listing = self._initial_event(event_type, obj)
                                if not listing and pause is not None:
                                    pause.end()  # the initial state is in; the same stream is now the watch
                            else:
                                self._apply(event_type, obj)
                            applied += 1
                    pending = bytearray(chunk[end + 1:])
                    if turns.due():
                        await turns.take()
                for event_type, obj in self.decoding.events(pending):  # a last line without its newline
                    if listing:
                        listing = self._initial_event(event_type, obj)
                    else:
                        self._apply(event_type, obj)
                    applied += 1
            if listing:
                raise ApiFailure(500, "the stream ended before the initial events did")
        if applied == 0 and time.monotonic() - started < 1.0:
            # Servers close watches now and then (a restart, a load balancer): watch again after a
            # pause. Only a server that closes every watch at once is a failure, and must not make us spin.
            self._quick_closes += 1
            if self._quick_closes >= QUICK_CLOSES:
                await self._retry_later(f"the server closed the watch at once, {self._quick_closes} times in a row")
            else:
                await asyncio.sleep(self._backoff_for(self._quick_closes))
        else:
            self._quick_closes = 0

    def _initial_event(self, event_type: str, obj: Obj) -> bool:
        """One event of a WatchList's initial state; False once the initial events have ended."""
        if event_type == "ADDED":
            self.sink.list_item(obj)
            return True
        if event_type == "BOOKMARK":
            meta = obj.get("metadata") or {}
            if (meta.get("annotations") or {}).get(INITIAL_EVENTS_END) != "true":
                raise Unsupported("a bookmark before the initial events' end: the server ignores WatchList")
            self._listed(meta.get("resourceVersion"))
            return False
        if event_type == "ERROR":
            self._apply(event_type, obj)  # raises
        raise Unsupported(f"a {event_type} event before the initial state ended: the server ignores WatchList")

    def _apply(self, event_type: str, obj: Obj) -> int:
        if event_type == "ERROR":
            code = int(obj.get("code") or 500)
            if code == 410 or _too_large(obj):
                raise Gone()
            raise ApiFailure(code, obj.get("message", ""))
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if rv and _older(rv, self.resource_version):
            # The server went back in time (restored, rebuilt): what we hold may name objects it
            # never had. List again and reconcile, or they would stay as ghosts.
            log.info("%s: resourceVersion %s after %s: the server was reset, listing again", self.resource, rv, self.resource_version)
            raise Gone()
        if event_type != "BOOKMARK":
            self.sink.apply(event_type, obj)
            self.events += 1
        if rv:
            self.resource_version = rv
        return 1

    def _failure(self, status: int, body: bytes, retry_after: str | None = None) -> Exception:
        if status == 410:
            return Gone()
        if status in (429, 503) and retry_after and retry_after.strip().isdigit():
            return ApiFailure(status, status_message(body), float(retry_after))
        try:
            if status == 504 and _too_large(orjson.loads(body)):
                return Gone()
        except (orjson.JSONDecodeError, AttributeError):
            pass
        return ApiFailure(status, status_message(body))
