"""Reading a request: the resource path as a Target, query parameters, list continue tokens."""
from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Callable

import orjson
from aiohttp import web

from ..resources import ResourceType, find
from ..store import Entry
from .responses import PATH_NOT_FOUND, ApiError, bad_request

Obj = dict[str, Any]


@dataclass
class Target:
    resource: ResourceType
    namespace: str | None  # None: every namespace (or a cluster-scoped kind)
    name: str | None  # for proxy: `name[:port]` as given
    subresource: str | None
    proxy_path: str = "/"  # the path after `/proxy`


def parse_resource_path(segments: list[str], served: Callable[[ResourceType], bool] = lambda r: True,
                        lookup: Callable[[str, str, str], ResourceType | None] = find) -> Target:
    """Resolve `/api/v1/...` or `/apis/g/v/...` (split, without the prefix) to a Target; lookup(group, version,
    plural) names the kinds there are (by default the built-in ones; a cluster's store adds its custom ones)."""
    if segments[0] == "api":
        group, version, rest = "", segments[1], segments[2:]
    else:
        group, version, rest = segments[1], segments[2], segments[3:]
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        r = lookup(group, version, rest[2])
        if r is not None and r.namespaced:
            namespace, rest = rest[1], rest[2:]
    r = lookup(group, version, rest[0])
    if r is None or not served(r) or (len(rest) > 3 and rest[2] != "proxy"):
        raise PATH_NOT_FOUND
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if sub is not None and sub not in r.subresources:
        raise PATH_NOT_FOUND
    if r.namespaced and name is not None and namespace is None:
        raise PATH_NOT_FOUND
    return Target(r, namespace if r.namespaced else None, name, sub, "/" + "/".join(rest[3:]))


def _flag(value: str | None) -> bool:
    """A boolean query parameter as kube-apiserver reads it (runtime.Convert_Slice_string_To_bool): absent is
    false, and so are "0" and "false" in any case; anything else given is true ("1", "t", "yes", even "")."""
    return value is not None and value != "0" and value.lower() != "false"


def _int_param(query: Any, name: str) -> int | None:
    value = query.get(name)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError:
        raise bad_request(f'invalid value for {name}: "{value}"') from None


def _wants_table(request: web.Request) -> bool:
    accept = request.headers.get("Accept", "")
    return "as=Table" in accept and "g=meta.k8s.io" in accept


def _sort_key(entry: Entry) -> tuple[str, str]:
    meta = entry.obj["metadata"]
    return meta.get("namespace", ""), meta["name"]


def _encode_continue(rv: int, key: tuple[str, str]) -> str:
    """A continue token as kube-apiserver writes one (storage.EncodeContinue): the list's resourceVersion (-1: the
    latest) and the key to start from, just after the last one served."""
    ns, name = key
    start = f"{ns}/{name}\x00" if ns else f"{name}\x00"
    return base64.urlsafe_b64encode(orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start})).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    """(the resourceVersion of the list it continues, -1 for the latest; the last key served)."""
    try:
        data = orjson.loads(base64.urlsafe_b64decode(token.encode() + b"=" * (-len(token) % 4)))
        if data["v"] != "meta.k8s.io/v1":
            raise bad_request("continue key is not valid: server does not recognize this encoded version")
        rv, start = int(data["rv"]), str(data["start"])
    except ApiError:
        raise
    except Exception as e:  # noqa: BLE001  (any malformed token is the client's error)
        raise bad_request(f"continue key is not valid: {e}") from None
    if rv == 0:
        raise bad_request("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
    if not start:
        raise bad_request("continue key is not valid: encoded start key empty (version meta.k8s.io/v1)")
    ns, _, name = start.rstrip("\x00").rpartition("/")
    return rv, (ns, name)


def _verb(method: str, t: Target, watching: bool) -> str:
    if method == "GET":
        return "watch" if watching else ("list" if t.name is None else "get")
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete" if t.name else "deletecollection"}.get(method, method.lower())
