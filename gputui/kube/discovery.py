"""Which API groups and versions the server serves: one GET /apis (an APIGroupList, a few KB), read as the model
starts and again every `interval` seconds. A reflector of a kind whose group/version is not served asks nothing
of it (no WatchList answered 404 per absent kind every few seconds, for every session): the kind is absent until
a later read finds its group/version. A kind not served although its group/version is (a 404) waits for the next
read too. The core group (/api/v1) and apps/v1 (DaemonSets) are served by every supported server: their kinds do
not wait for the first read (the GPU stack's component matrix needs the DaemonSets as soon as the pods). Until
/apis has been read once (forbidden, unreachable), a reflector asks for its kind as it would without discovery.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from .client import ApiError, HttpError, Timeout

if TYPE_CHECKING:
    from .client import Client

log = logging.getLogger(__name__)

DISCOVERY_INTERVAL = 120.0  # seconds between reads of /apis: a GPU Operator or Kueue installed meanwhile shows within this
READ_TIMEOUT = 10.0
ALWAYS_SERVED = frozenset({"apps/v1"})


def group_version(collection: str) -> str | None:
    """/apis/nvidia.com/v1/clusterpolicies -> nvidia.com/v1; None for the core group (/api/v1/...)."""
    parts = collection.strip("/").split("/")
    return f"{parts[1]}/{parts[2]}" if len(parts) >= 3 and parts[0] == "apis" else None


class Discovery:
    def __init__(self, api: Client, interval: float = DISCOVERY_INTERVAL) -> None:
        self.api = api
        self.interval = interval
        self.served: frozenset[str] | None = None  # "group/version"s from the last good read; None: none read yet
        self.reads = 0  # reads tried, good or not
        self._next = asyncio.Event()  # set by the next read

    def serves(self, collection: str) -> bool | None:
        """Whether the collection's group/version is served; None: not known (no good read yet)."""
        gv = group_version(collection)
        if gv is None or gv in ALWAYS_SERVED:
            return True
        return None if self.served is None else gv in self.served

    async def next_read(self) -> None:
        """Until the next read of /apis is done (good or not)."""
        await self._next.wait()

    async def read_once(self) -> None:
        try:
            doc = await self.api.json("GET", "/apis", timeout=Timeout(connect=READ_TIMEOUT, total=READ_TIMEOUT))
            served = frozenset(str(v.get("groupVersion")) for g in doc.get("groups") or () for v in g.get("versions") or ())
        except (ApiError, HttpError, asyncio.TimeoutError, OSError, ValueError, AttributeError, TypeError) as exc:
            log.debug("discovery: /apis not read (%s); kinds are asked for as they are", exc)
        except Exception:  # an exec plugin failing to renew, say: the reflectors say it themselves
            log.debug("discovery: /apis not read", exc_info=True)
        else:
            if served != self.served:
                log.info("discovery: %d group/versions served", len(served))
            self.served = served
        self.reads += 1
        done, self._next = self._next, asyncio.Event()
        done.set()

    async def run(self) -> None:
        while True:
            await self.read_once()
            await asyncio.sleep(self.interval)
