"""Which API groups, versions and resources the server serves: one GET /apis, read as the model starts and again
when the CRDs change, or every `interval` seconds. A reflector of a kind whose group/version (or, where the server
says, resource) is not served asks nothing of it (no WatchList answered 404 per absent kind every few seconds, for
every session): the kind is absent until a later read finds it. The core group (/api/v1) and apps/v1 (DaemonSets)
are served by every supported server: their kinds do not wait for the first read (the GPU stack's component matrix
needs the DaemonSets as soon as the pods). Until /apis has been read once (forbidden, unreachable), a reflector
asks for its kind as it would without discovery.

As kubectl asks, /apis is asked for as aggregated discovery (an APIGroupDiscoveryList, every group's resources in
one answer, Kubernetes 1.26+), else the APIGroupList older servers answer. Aggregated discovery carries an ETag: a
read of an unchanged server is a 304 without a body.

A Kueue, a GPU Operator or a DRA driver installed while gputui runs is found at once, without reading /apis any
more often: the CRDs are watched (their names only, as a Table without objects), and a change to one has /apis
read again (twice, a few seconds apart: a new CRD is served once established, a write or two later). While they
are watched, the timer only catches what no CRD says (an API group an upgrade or an aggregated server adds) and
reads WATCHED_SLOWER times more rarely; where they may not be watched (RBAC: the `view` role does not grant CRDs), every
`interval`. A kind that was read and is then no longer served (a 404: its CRD deleted) has /apis read again too.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from typing import TYPE_CHECKING, Any

import orjson

from .client import ApiError, HttpError, Timeout
from .tasks import cancel_and_wait

if TYPE_CHECKING:
    from .client import Client

log = logging.getLogger(__name__)

DISCOVERY_INTERVAL = 120.0  # seconds between reads of /apis where the CRDs cannot be watched
WATCHED_SLOWER = 5  # while they are, reads are this many times rarer (every 10 minutes)
SETTLE = 0.5  # seconds from a CRD's change to the read it asks for: the writes of one install come together
RECHECK = 5.0  # seconds to the second read after a CRD's change (it may be served only once established)
READ_TIMEOUT = 10.0
ALWAYS_SERVED = frozenset({"apps/v1"})
AGGREGATED = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
              "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json")
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
NAMES_ONLY = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"  # with includeObject=None
CRD_WATCH_SECONDS = (240, 300)
CRD_BACKOFF = (5.0, 300.0)


def group_version(collection: str) -> str | None:
    """/apis/nvidia.com/v1/clusterpolicies -> nvidia.com/v1; None for the core group (/api/v1/...)."""
    parts = collection.strip("/").split("/")
    return f"{parts[1]}/{parts[2]}" if len(parts) >= 3 and parts[0] == "apis" else None


def served_of(doc: Any, aggregated: bool) -> tuple[frozenset[str], frozenset[str] | None]:
    """An answer to GET /apis -> its "group/version"s, and its "group/version/resource"s where it names them
    (aggregated discovery; None for an APIGroupList, which does not). TypeError, AttributeError on another shape."""
    if not aggregated:
        return frozenset(str(v.get("groupVersion")) for g in doc.get("groups") or () for v in g.get("versions") or ()), None
    versions: set[str] = set()
    resources: set[str] = set()
    for group in doc.get("items") or ():
        name = (group.get("metadata") or {}).get("name", "")
        for version in group.get("versions") or ():
            gv = f"{name}/{version.get('version')}"
            versions.add(gv)
            resources.update(f"{gv}/{r.get('resource')}" for r in version.get("resources") or ())
    return frozenset(versions), frozenset(resources)


class Discovery:
    def __init__(self, api: Client, interval: float = DISCOVERY_INTERVAL, settle: float = SETTLE, recheck: float = RECHECK) -> None:
        self.api = api
        self.interval = interval
        self.settle = settle
        self.recheck = recheck
        self.served: frozenset[str] | None = None  # "group/version"s from the last good read; None: none read yet
        self.resources: frozenset[str] | None = None  # "group/version/resource"s, where the server names them
        self.etag: str | None = None  # the last good read's, sent back as If-None-Match
        self.reads = 0  # reads tried, good or not
        self.watching = False  # the CRDs' changes are being watched
        self._next = asyncio.Event()  # set by the next read
        self._soon = asyncio.Event()  # a read asked for before the timer's

    def serves(self, collection: str) -> bool | None:
        """Whether the collection is served; None: not known (no good read yet)."""
        gv = group_version(collection)
        if gv is None or gv in ALWAYS_SERVED:
            return True
        if self.served is None:
            return None
        if gv not in self.served:
            return False
        return self.resources is None or f"{gv}/{collection.strip('/').split('/')[-1]}" in self.resources

    def changed(self) -> None:
        """What the server serves may have changed: read /apis again soon (and once more a little later)."""
        self._soon.set()

    async def next_read(self) -> None:
        """Until the next read of /apis is done (good or not)."""
        await self._next.wait()

    async def read_once(self) -> bool:
        """Read /apis; True when what is served changed."""
        changed = False
        try:
            headers = [("If-None-Match", self.etag)] if self.etag and self.served is not None else []
            resp = await self.api.request("GET", "/apis", accept=AGGREGATED, headers=headers,
                                          timeout=Timeout(connect=READ_TIMEOUT, total=READ_TIMEOUT))
            async with resp:
                body = await resp.read()
            if resp.status >= 300 and resp.status != 304:
                raise ApiError.from_body(resp.status, body)
            if resp.status != 304:  # 304: as it was
                aggregated = "as=APIGroupDiscoveryList" in resp.headers.get("Content-Type", "")
                served, resources = served_of(orjson.loads(body), aggregated)
                changed = (served, resources) != (self.served, self.resources)
                if changed:
                    log.info("discovery: %d group/versions served", len(served))
                self.served, self.resources = served, resources
                self.etag = resp.headers.get("ETag") if aggregated else None
        except (ApiError, HttpError, asyncio.TimeoutError, OSError, ValueError, AttributeError, TypeError) as exc:
            log.debug("discovery: /apis not read (%s); kinds are asked for as they are", exc)
        except Exception:  # an exec plugin failing to renew, say: the reflectors say it themselves
            log.debug("discovery: /apis not read", exc_info=True)
        self.reads += 1
        done, self._next = self._next, asyncio.Event()
        done.set()
        return changed

    async def run(self) -> None:
        watch = asyncio.create_task(self._watch_crds(), name="gputui-discovery-crds")
        try:
            await self.read_once()
            while True:
                last = time.monotonic()
                while not self._soon.is_set():  # the CRDs' watch may begin or end meanwhile: the timer follows
                    left = last + self.interval * (WATCHED_SLOWER if self.watching else 1) - time.monotonic()
                    if left <= 0:
                        break
                    with contextlib.suppress(asyncio.TimeoutError):
                        async with asyncio.timeout(min(left, self.interval)):
                            await self._soon.wait()
                if not self._soon.is_set():
                    await self.read_once()  # the timer's
                    continue
                await asyncio.sleep(self.settle)
                self._soon.clear()  # a change from now on asks for another read
                if not await self.read_once():
                    await asyncio.sleep(self.recheck)
                    self._soon.clear()
                    await self.read_once()
        finally:
            await cancel_and_wait([watch])

    # -- the CRDs' changes ---------------------------------------------------------------------------------------
    async def _watch_crds(self) -> None:
        """Watch the CRDs' names; each change asks for a read of /apis. Ends where they may not be watched."""
        version: str | None = None
        failures = 0
        while True:
            try:
                if version is None:
                    version = await self._crds_version()
                started = time.monotonic()
                version = await self._crd_watch(version)
                failures = 0 if time.monotonic() - started > 1.0 else failures + 1  # ended at once: not again at once
            except asyncio.CancelledError:
                self.watching = False
                raise
            except ApiError as exc:
                self.watching = False
                if exc.status in (401, 403, 404):
                    log.info("discovery: CRDs not watched (%s); /apis read every %.0f s", exc.status, self.interval)
                    return
                version, failures = None, failures + 1
            except (HttpError, asyncio.TimeoutError, OSError, ValueError, AttributeError, TypeError, KeyError) as exc:
                log.debug("discovery: the CRDs' watch failed (%s)", exc)
                self.watching = False
                version, failures = None, failures + 1
            if failures:
                first, most = CRD_BACKOFF
                await asyncio.sleep(min(most, first * 2 ** (failures - 1)) * random.uniform(0.5, 1.0))

    async def _crds_version(self) -> str:
        """The CRDs' resourceVersion now, from the watch cache (their names only: a few bytes a CRD)."""
        resp = await self.api.request("GET", CRDS, params={"resourceVersion": "0", "includeObject": "None"}, accept=NAMES_ONLY,
                                      timeout=Timeout(connect=READ_TIMEOUT, total=READ_TIMEOUT))
        async with resp:
            body = await resp.read()
        if resp.status >= 300:
            raise ApiError.from_body(resp.status, body)
        return str(orjson.loads(body)["metadata"]["resourceVersion"])

    async def _crd_watch(self, since: str) -> str | None:
        """One watch from `since`; the version to go on from (None: list again first)."""
        version: str | None = since
        params: dict[str, str | int] = {"watch": "true", "resourceVersion": since, "allowWatchBookmarks": "true", "includeObject": "None",
                  "timeoutSeconds": random.randint(*CRD_WATCH_SECONDS)}
        resp = await self.api.request("GET", CRDS, params=params, accept=NAMES_ONLY,
                                      timeout=Timeout(connect=READ_TIMEOUT, read=CRD_WATCH_SECONDS[1] + 60))
        async with resp:
            if resp.status == 410:
                return None
            if resp.status >= 300:
                raise ApiError.from_body(resp.status, await resp.read())
            self.watching = True
            pending = b""
            while chunk := await resp.read_some():
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    event = orjson.loads(line)
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind == "ERROR":
                        self.changed()  # expired: what changed meanwhile is not known
                        return None
                    if kind != "BOOKMARK":
                        self.changed()
                    # A Table's resourceVersion; where an event has none, the next watch starts from a fresh list
                    # (from the old version it would replay changes already told).
                    version = (obj.get("metadata") or {}).get("resourceVersion") or None
                    if version is None:
                        return None
        return version
