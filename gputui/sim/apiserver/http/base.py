"""What every part of the API server uses: the cluster, which kinds are served, selectors, request bodies."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import orjson
from aiohttp import web

from ..proxy import Proxy
from ..resources import CRD_KEY, ResourceType, groups
from ..selectors import SelectorError, both, field_selector, label_selector
from ..store import Entry, NotFound
from . import protobuf
from .request import Target
from .responses import ApiError, bad_request, not_found

if TYPE_CHECKING:
    from ...cluster import SimCluster

Obj = dict[str, Any]


class ApiBase:
    """The state and helpers the handlers share (Api is made of the handler classes, see app.py)."""

    def __init__(self, cluster: "SimCluster") -> None:
        self.cluster = cluster
        self.store = cluster.store
        self.proxy = Proxy(cluster.store, listening=getattr(cluster, "exporters", True))

    def served(self, r: ResourceType) -> bool:
        """A built-in kind always; a custom one while its CustomResourceDefinition exists."""
        return not r.custom or self.store.find(CRD_KEY, "", r.key) is not None

    def _groups(self) -> dict[str, list[str]]:
        return groups(self.served, self.store.resources.values())

    def _selectors(self, request: web.Request, r: ResourceType) -> Callable[[Obj], bool]:
        labels = request.query.get("labelSelector", "")
        fields = request.query.get("fieldSelector", "")
        try:
            return both(label_selector(labels), field_selector(fields, r.key, r.api_version, r.kind))
        except SelectorError as e:
            # kubectl itself prefixes 'Unable to find "/v1, Resource=pods" that match ...'.
            raise bad_request(str(e)) from None

    def _entry(self, t: Target) -> Entry:
        try:
            return self.store.get_entry(t.resource.key, t.namespace or "", t.name or "")
        except NotFound:
            raise not_found(t.resource, t.name or "") from None

    async def _body(self, request: web.Request, r: ResourceType | None = None) -> Any:
        """The request's object: JSON, or for r (a kind created or replaced) Kubernetes protobuf where its kind is read
        so (415 where it is not)."""
        data = await request.read()
        if not data:
            raise bad_request("the body of the request was empty")
        if r is not None and request.content_type == protobuf.PROTOBUF:
            if (r.api_version, r.kind) not in protobuf.KINDS:
                raise ApiError(415, "UnsupportedMediaType",
                               f"the body of the request was in an unknown format - accepted media types include: {protobuf.ACCEPTED}")
            try:
                return protobuf.decode(data, r.api_version, r.kind)
            except (protobuf.Unreadable, UnicodeDecodeError) as e:
                raise bad_request(f"the body of the request was in an unknown format: {e}") from None
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as e:
            raise bad_request(f"the body of the request was in an unknown format: {e}") from None
