"""Reading: get, list (pages after a continue token, tables for kubectl) and watch (with bookmarks and filters)."""
from __future__ import annotations

import asyncio
import bisect
import time
from datetime import datetime, timezone
from typing import Any, Callable

import orjson
from aiohttp import web

from .. import custom_columns, tables
from ..resources import ResourceType
from ..store import CLOSED, Entry, Event, Gone
from .base import ApiBase
from .request import Target, _decode_continue, _encode_continue, _flag, _int_param, _sort_key, _wants_table
from ..features import ApiCounts
from .responses import (
    JSON,
    LIST_TOO_OLD,
    ApiError,
    bad_request,
    expired_continue,
    invalid_list_options,
    raw_response,
    send_large,
    status_body,
    too_large_status,
)

Obj = dict[str, Any]

# How often a quiet watch checks that its client is still there.
WATCH_IDLE_CHECK = 5.0
WATCH_CHUNK = 256 * 1024  # bytes of a watch's backlog sent in one write


NOT_OLDER_THAN = "NotOlderThan"
# etcd's answer to a read at a revision it has not reached (rpctypes.ErrFutureRev).
FUTURE_REVISION = "etcdserver: mvcc: required revision is a future revision"

Entries = list[Entry]  # (`list` is a method's name in Reading)


def _option_errors(query: Any, watching: bool, watch_list_enabled: bool) -> list[tuple[str, str, str]]:
    """apimachinery's ValidateListOptions: what kube-apiserver refuses with 422 before any read. A watch with
    sendInitialEvents needs no allowWatchBookmarks: without it the server sends the initial state and no
    initial-events-end bookmark (the cacher's isListWatchRequest), and client-go never asks so."""
    match = query.get("resourceVersionMatch", "")
    initial = "sendInitialEvents" in query
    errors = []
    if watching:
        if initial:
            if match != NOT_OLDER_THAN:
                errors.append(("FieldValueForbidden", "resourceVersionMatch", f"sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}"))
            if not watch_list_enabled:
                errors.append(("FieldValueForbidden", "sendInitialEvents", "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"))
        if match:
            if not initial:
                errors.append(("FieldValueForbidden", "resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"))
            if match != NOT_OLDER_THAN:
                errors.append(("FieldValueNotSupported", "resourceVersionMatch", f'"{match}": supported values: "{NOT_OLDER_THAN}"'))
            if query.get("continue"):
                errors.append(("FieldValueForbidden", "resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"))
        return errors
    if match:
        if not query.get("resourceVersion"):
            errors.append(("FieldValueForbidden", "resourceVersionMatch", "resourceVersionMatch is forbidden unless resourceVersion is provided"))
        if query.get("continue"):
            errors.append(("FieldValueForbidden", "resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"))
        if match not in ("Exact", NOT_OLDER_THAN):
            errors.append(("FieldValueNotSupported", "resourceVersionMatch", f'"{match}": supported values: "Exact", "{NOT_OLDER_THAN}", ""'))
        if match == "Exact" and query.get("resourceVersion") == "0":
            errors.append(("FieldValueForbidden", "resourceVersionMatch", 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'))
    if initial:
        errors.append(("FieldValueForbidden", "sendInitialEvents", "sendInitialEvents is forbidden for list"))
    return errors


class Reading(ApiBase):
    """Api's handlers for get, list and watch."""

    @property
    def features(self) -> dict[str, bool]:
        return self.cluster.features

    @property
    def counts(self) -> ApiCounts:
        return self.cluster.api_counts

    # -- reading ---------------------------------------------------------
    def _table(self, r: ResourceType, entries: list[Entry], request: web.Request, meta: Obj, with_columns: bool = True) -> bytes:
        include = request.query.get("includeObject", "Metadata")
        now = datetime.now(timezone.utc)
        rows = []
        for e in entries:
            row: Obj = {"cells": custom_columns.cells(r, e.obj, now) if r.printer_columns else tables.cells(r.kind, e.obj, now)}
            if include == "Object":
                row["object"] = orjson.Fragment(e.raw)
            elif include != "None":
                row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": e.obj["metadata"]}
            rows.append(row)
        body: Obj = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
        if with_columns:
            body["columnDefinitions"] = custom_columns.column_definitions(r) if r.printer_columns else tables.column_definitions(r.kind)
        body["rows"] = rows
        return orjson.dumps(body)

    async def _too_large(self, r: ResourceType, wanted: int) -> Obj | None:
        """kube-apiserver's answer to a list (or a watch with sendInitialEvents) from a resourceVersion in the
        future of the resource's etcd (the watch cache's waitUntilFreshAndBlock): wait a little for it to
        reach it, then a 504 Timeout Status with the ResourceVersionTooLarge cause."""
        deadline = time.monotonic() + float(getattr(self.cluster, "too_large_wait", 3.0))
        while self.store.resource_version_of(r.key) < wanted:
            if time.monotonic() >= deadline:
                return too_large_status(wanted, self.store.resource_version_of(r.key))
            await asyncio.sleep(0.02)
        return None

    async def list(self, request: web.Request, t: Target) -> web.StreamResponse:
        r = t.resource
        self.counts.note("list", r.key, dict(request.query), t.namespace)
        errors = _option_errors(request.query, watching=False, watch_list_enabled=self.features["WatchList"])
        if errors:
            raise invalid_list_options(errors)
        matches = self._selectors(request, r)
        rv_param = request.query.get("resourceVersion", "")
        if rv_param not in ("", "0"):
            try:
                wanted = int(rv_param)
            except ValueError:
                raise bad_request(f'invalid resource version "{rv_param}"') from None
            if wanted > self.store.resource_version_of(r.key):
                if self._exact(request.query) and not self.features["ListFromCacheSnapshot"]:
                    # Read from etcd at that revision (before 1.34's cache snapshots): etcd's error, passed on
                    # unconverted as a 500 with no reason.
                    raise ApiError(500, "", FUTURE_REVISION)
                # The watch cache (1.34 serves an exact revision from its snapshots too, cacher's
                # shouldDelegateExactRV): waits for it, then 504.
                too_large = await self._too_large(r, wanted)
                if too_large is not None:
                    raise ApiError(504, "Timeout", too_large["message"], too_large["details"])
        token = request.query.get("continue")
        match = request.query.get("resourceVersionMatch", "")
        # resourceVersion=0: any data, from the watch cache, which ignores limit (one answer, no pages).
        limit = 0 if rv_param == "0" and not token else (_int_param(request.query, "limit") or 0)
        from_etcd = self._from_etcd(rv_param, token, self._exact(request.query))
        # The revision the list is cut from: the latest (None), or an exact one (etcd's WithRev): the one asked for
        # with Exact (or, with a limit, without resourceVersionMatch), or the first page's for a continue token.
        at: int | None = None
        start_after = None
        if token:
            if rv_param not in ("", "0"):
                raise bad_request("specifying resource version is not allowed when using continue")
            token_rv, start_after = _decode_continue(token)
            at = token_rv if token_rv > 0 else None
        elif rv_param not in ("", "0") and (match == "Exact" or (not match and limit)):
            at = int(rv_param)
        undo: dict[tuple[str, str], Entry | None] = {}
        if at is not None:
            try:
                undo = self.store.undo_since(r.key, at)
            except Gone:
                if token:
                    self.counts.expired_continues += 1
                    raise expired_continue(_encode_continue(-1, start_after or ("", ""))) from None
                raise ApiError(410, "Expired", LIST_TOO_OLD) from None
        rv = self.store.resource_version_of(r.key) if at is None else at
        selected, remaining = self._page(r.key, t.namespace, start_after, undo, matches, limit)
        meta: Obj = {"resourceVersion": str(rv)}
        if remaining is not None:
            meta["continue"] = _encode_continue(rv, _sort_key(selected[-1]))
            if not request.query.get("labelSelector") and not request.query.get("fieldSelector"):
                meta["remainingItemCount"] = remaining
        if _wants_table(request):
            body = self._table(r, selected, request, meta)
        else:
            head = orjson.dumps({"kind": r.list_kind, "apiVersion": r.api_version, "metadata": meta})[:-1] + b',"items":['
            # One join, one copy: the list body is the stored JSON of each object, comma-separated.
            parts = [head]
            for e in selected:
                parts.append(e.raw)
                parts.append(b",")
            if selected:
                parts.pop()
            parts.append(b"]}")
            body = b"".join(parts)
        self.counts.list(r.key, from_etcd, len(body))
        return await send_large(request, body)

    def _page(self, key: str, namespace: str | None, start_after: tuple[str, str] | None, undo: dict[tuple[str, str], Entry | None],
              matches: Callable[[Obj], bool], limit: int) -> tuple[Entries, int | None]:
        """The objects of one list page, in key order after start_after, as they were where `undo` takes the store
        back to: (the page, how many objects follow it when there are more, else None). A page costs its own size
        and the changes since, not the list's."""
        idents = self.store.sorted_idents(key)
        lo, hi = 0, len(idents)
        low, high = ("", ""), None
        if namespace is not None:
            low, high = (namespace, ""), (namespace + "\x00", "")
            lo, hi = bisect.bisect_left(idents, low), bisect.bisect_left(idents, high)
        if start_after is not None:
            lo = max(lo, bisect.bisect_right(idents, start_after))
        # Objects changed since the revision listed, merged into the current keys in order.
        changed = sorted(k for k in undo if k >= low and (high is None or k < high) and (start_after is None or k > start_after))
        selected: Entries = []
        i, j = lo, 0
        while i < hi or j < len(changed):
            if j == len(changed) or (i < hi and idents[i] < changed[j]):
                ident, i = idents[i], i + 1
                entry: Entry | None = self.store.entry_at(key, ident)
            else:
                ident, j = changed[j], j + 1
                if i < hi and idents[i] == ident:
                    i += 1
                entry = undo[ident]
            if entry is None or not matches(entry.obj):
                continue
            if limit and len(selected) == limit:
                # What follows the page at that revision: the current keys after it, as they were then.
                last = _sort_key(selected[-1])
                after = hi - bisect.bisect_right(idents, last, lo=0, hi=hi)
                for k in changed:
                    if k > last:
                        after += (undo[k] is not None) - self.store.holds(key, k)
                return selected, after
            selected.append(entry)
        return selected, None

    @staticmethod
    def _exact(query: Any) -> bool:
        """A list of the state at one revision: resourceVersionMatch=Exact, or (the legacy paged list) a limit and a
        resourceVersion other than 0 with no match."""
        match, rv = query.get("resourceVersionMatch", ""), query.get("resourceVersion", "")
        return match == "Exact" or (not match and rv not in ("", "0") and bool(_int_param(query, "limit")))

    def _from_etcd(self, rv: str, token: str | None, exact: bool) -> bool:
        """Would kube-apiserver (of the release played) read this list from etcd rather than its watch cache?"""
        if token:
            return not self.features["ListFromCacheSnapshot"]  # "watch cache doesn't support continuations"
        if rv == "":
            return not self.features["ConsistentListFromCache"]  # a consistent read
        # An exact revision: from the cache's snapshots from 1.34, else etcd; resourceVersion=0 or NotOlderThan: the cache.
        return exact and not self.features["ListFromCacheSnapshot"]

    def get(self, request: web.Request, t: Target) -> web.Response:
        entry = self._entry(t)
        if _wants_table(request):
            return raw_response(self._table(t.resource, [entry], request, {"resourceVersion": entry.obj["metadata"]["resourceVersion"]}))
        return raw_response(entry.raw)

    # -- watching --------------------------------------------------------
    async def watch(self, request: web.Request, t: Target) -> web.StreamResponse:
        r, store = t.resource, self.store
        self.counts.note("watch", r.key, dict(request.query), t.namespace)
        errors = _option_errors(request.query, watching=True, watch_list_enabled=self.features["WatchList"])
        if errors:
            raise invalid_list_options(errors)
        matches = self._selectors(request, r)
        namespace = t.namespace
        as_table = _wants_table(request)
        timeout = _int_param(request.query, "timeoutSeconds")
        bookmarks = _flag(request.query.get("allowWatchBookmarks"))
        # sendInitialEvents given: true sends the state first, false none; not given (the legacy watch): the state
        # first from resourceVersion "" or "0" only. Without a state first the watch starts at the version given,
        # or now.
        asked = "sendInitialEvents" in request.query
        initial_events = asked and _flag(request.query.get("sendInitialEvents"))
        rv_param = request.query.get("resourceVersion", "")
        wanted: int | None = None
        if rv_param not in ("", "0"):
            try:
                wanted = int(rv_param)
            except ValueError:
                raise bad_request(f'invalid resource version "{rv_param}"') from None
        state_first = initial_events or (not asked and wanted is None)
        since = None if state_first else wanted

        self.counts.watch(r.key, initial_events)
        response = web.StreamResponse(headers={"Content-Type": JSON, "Cache-Control": "no-cache, private"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        first_table = True

        def visible(obj: Obj | None) -> bool:
            if obj is None:
                return False
            if namespace is not None and obj["metadata"].get("namespace") != namespace:
                return False
            return matches(obj)

        def encode(kind: str, raw: bytes, obj: Obj) -> bytes:
            nonlocal first_table
            if as_table:
                raw = self._table(r, [Entry(obj, raw)], request, {"resourceVersion": obj["metadata"].get("resourceVersion", "")}, first_table)
                first_table = False
            line = b'{"type":"' + kind.encode() + b'","object":' + raw + b"}\n"
            self.counts.bytes_sent += len(line)
            return line

        # A watch from a resourceVersion in the future of the resource's etcd: with sendInitialEvents the watch
        # cache waits to be that fresh, then fails (waitUntilFreshAndBlock); a plain watch starts there and stays
        # silent until later changes come (getAllEventsSinceLocked: nothing after it yet), bookmarks too.
        if initial_events and wanted is not None and wanted > store.resource_version_of(r.key):
            failure = await self._too_large(r, wanted)
            if failure is not None:
                # Past admission a watch fails with an ERROR event, not an HTTP error (cacher's newErrWatcher).
                await response.write(b'{"type":"ERROR","object":' + orjson.dumps(failure) + b"}\n")
                await response.write_eof()
                return response
        after = since or 0  # nothing at or before this resourceVersion is sent
        try:
            w, replay = store.watch(r.key, since)
            snapshot_rv = store.resource_version_of(r.key)  # the initial state below is the store's at this point
        except Gone as e:
            await response.write(b'{"type":"ERROR","object":' + orjson.dumps(status_body(410, "Expired", str(e))) + b"}\n")
            await response.write_eof()
            return response
        try:
            if state_first:
                initial = sorted(store.entries(r.key, namespace), key=_sort_key)
                backlog = [("ADDED", e.raw, e.obj) for e in initial if visible(e.obj)]
            elif since is None:
                backlog = []
            else:
                backlog = [ev for ev in (self._translate(e, visible) for e in replay) if ev]
            # The backlog (the initial state, or the events replayed) goes out in chunks, as a server's
            # buffered writer sends it, not one write per event.
            chunk: list[bytes] = []
            size = 0
            for kind, raw, obj in backlog:
                line = encode(kind, raw, obj)
                chunk.append(line)
                size += len(line)
                if size >= WATCH_CHUNK:
                    await response.write(b"".join(chunk))
                    chunk, size = [], 0
            if initial_events and bookmarks:
                # The initial-events-end bookmark, only to a client that takes bookmarks (isListWatchRequest).
                # At the snapshot's resourceVersion: what changed since is queued on the watch and follows,
                # each event later than the bookmark, as kube-apiserver's watch cache sends them.
                chunk.append(self._bookmark(r, {"k8s.io/initial-events-end": "true"}, rv=snapshot_rv))
            if chunk:
                await response.write(b"".join(chunk))
            deadline = time.monotonic() + timeout if timeout else None
            interval = self.cluster.bookmark_interval
            next_bookmark = time.monotonic() + interval
            faults = self.cluster.faults
            while True:
                if faults.enabled:
                    await faults.answering()  # a silenced server sends nothing more on its open watches
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    break
                wait = WATCH_IDLE_CHECK
                if deadline is not None:
                    wait = min(wait, deadline - now)
                if bookmarks:
                    wait = min(wait, max(0.0, next_bookmark - now))
                try:
                    # Events already queued go first: a bookmark must never get ahead of them (its
                    # resourceVersion is the store's, later than theirs).
                    if w.queue.empty():
                        async with asyncio.timeout(wait):  # not 3.11's wait_for, which can lose a cancellation
                            item = await w.queue.get()
                    else:
                        item = w.queue.get_nowait()
                        await asyncio.sleep(0)  # one event at a time, the others' turn between, as before
                except asyncio.TimeoutError:
                    if request.transport is None or request.transport.is_closing():
                        break
                    if bookmarks and time.monotonic() >= next_bookmark and w.queue.empty():
                        if store.resource_version_of(r.key) >= after:
                            await response.write(self._bookmark(r))
                        next_bookmark = time.monotonic() + interval
                    continue
                if item is CLOSED:
                    break
                if isinstance(item, Event) and item.rv <= after:
                    continue
                translated = self._translate(item, visible)
                if translated:
                    await response.write(encode(*translated))
            await response.write_eof()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            w.close()
        return response

    @staticmethod
    def _translate(event: Any, visible: Callable[[Obj | None], bool]) -> tuple[str, bytes, Obj] | None:
        """The event a filtered watch sees: objects moving into or out of the selection become ADDED/DELETED."""
        now_visible = event.type != "DELETED" and visible(event.obj)
        was_visible = visible(event.old)
        if event.type == "DELETED":
            return ("DELETED", event.entry.raw, event.obj) if was_visible else None
        if now_visible:
            return ("MODIFIED" if was_visible else "ADDED", event.entry.raw, event.obj)
        if was_visible:
            # Left the selection: the last state it was seen in, at the event's resourceVersion.
            old = orjson.loads(orjson.dumps(event.old))
            old["metadata"]["resourceVersion"] = str(event.rv)
            return ("DELETED", orjson.dumps(old), old)
        return None

    def _bookmark(self, r: ResourceType, annotations: dict[str, str] | None = None, rv: int | None = None) -> bytes:
        meta: Obj = {"resourceVersion": str(self.store.resource_version_of(r.key) if rv is None else rv)}
        if annotations:
            meta["annotations"] = annotations
        return orjson.dumps({"type": "BOOKMARK", "object": {"kind": r.kind, "apiVersion": r.api_version, "metadata": meta}}) + b"\n"
