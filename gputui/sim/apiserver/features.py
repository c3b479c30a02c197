"""What kube-apiserver release the simulator plays, as far as lists and watches go, and what it counts.

Feature gates (kube-apiserver's defaults for the release played, 1.34 unless told):
  WatchList               watch with sendInitialEvents (beta, on in 1.32, off in 1.33, on from 1.34)
  ConsistentListFromCache a list with no resourceVersion served from the watch cache (on from 1.31)
  ListFromCacheSnapshot   continue pages and exact revisions served from the watch cache (on from 1.34)

`ApiCounts` tallies what a real server would have done with each read: served
from the watch cache or from etcd, and the bytes sent, and every request answered
by verb (server/app.py), so that benchmarks can tell how gentle a client is
(`GET /counts` on the control endpoint, control.py).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

DEFAULT_MINOR = 34


def features_for(minor: int = DEFAULT_MINOR) -> dict[str, bool]:
    return {
        "WatchList": minor == 32 or minor >= 34,
        "ConsistentListFromCache": minor >= 31,
        "ListFromCacheSnapshot": minor >= 34,
    }


@dataclass
class ApiCounts:
    lists_from_cache: int = 0
    lists_from_etcd: int = 0  # what kube-apiserver would have read from etcd (the load that hurts)
    watches: int = 0
    watch_lists: int = 0  # watches with sendInitialEvents
    bytes_sent: int = 0
    by_resource: dict[str, int] = field(default_factory=dict)  # requests per resource
    expired_continues: int = 0  # continue tokens refused with 410 (compacted)
    # Every request answered, by verb (a watch as it opens); "discovery" under /api and /apis, "other" for the rest
    # (/version, /healthz, a path naming no served resource).
    requests: dict[str, int] = field(default_factory=dict)
    get_bytes: int = 0  # bodies of the other reads' answers (get, discovery); lists and watches are in bytes_sent
    not_modified: int = 0  # aggregated discovery answered 304 (If-None-Match its ETag)
    # The latest reads as (verb, resource, the query's list and watch parameters): tests assert their shapes.
    recent: deque[tuple[str, str, dict[str, str]]] = field(default_factory=lambda: deque(maxlen=1000))

    def note(self, verb: str, resource: str, query: dict[str, str], namespace: str | None = None) -> None:
        """namespace: the path's (a namespaced list or watch), kept as the shape's "namespace"."""
        keep = ("resourceVersion", "resourceVersionMatch", "limit", "continue", "sendInitialEvents", "allowWatchBookmarks", "fieldSelector")
        shape = {k: query[k] for k in keep if k in query}
        if namespace is not None:
            shape["namespace"] = namespace
        self.recent.append((verb, resource, shape))

    def list(self, resource: str, from_etcd: bool, size: int) -> None:
        if from_etcd:
            self.lists_from_etcd += 1
        else:
            self.lists_from_cache += 1
        self.bytes_sent += size
        self.by_resource[resource] = self.by_resource.get(resource, 0) + 1

    def watch(self, resource: str, initial_events: bool) -> None:
        self.watches += 1
        self.watch_lists += initial_events
        self.by_resource[resource] = self.by_resource.get(resource, 0) + 1

    def request(self, verb: str) -> None:
        self.requests[verb] = self.requests.get(verb, 0) + 1

    def as_dict(self) -> dict[str, object]:
        return {"lists_from_cache": self.lists_from_cache, "lists_from_etcd": self.lists_from_etcd, "watches": self.watches,
                "watch_lists": self.watch_lists, "bytes_sent": self.bytes_sent, "by_resource": dict(self.by_resource),
                "expired_continues": self.expired_continues, "requests": dict(self.requests), "get_bytes": self.get_bytes,
                "not_modified": self.not_modified}
