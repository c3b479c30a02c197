"""HTTP to one Kubernetes API server: raw bytes in and out, no generated models.

    client = Client("https://10.0.0.1:6443", credentials)
    async with await client.get("/api/v1/nodes", params={"limit": "500"}) as resp:
        body = await resp.read()
    node = await client.json("GET", "/api/v1/nodes/gpu-1")   # ApiError on a status >= 300
    await client.close()

HTTP itself is `http.py` (HTTP/1.1 over asyncio streams, a pool of keep-alive
connections); its pool is made on the first request, in the running loop.
Every request carries the credentials' Authorization header and TLS settings;
an exec plugin's token is renewed before it expires, and once more after a 401.
Paths are built with `path()` so that names are quoted once, in one place.
"""
from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

import orjson

from .http import Pool, Response, Timeout

if TYPE_CHECKING:
    from .config import Impersonation
    from .credentials import Credentials

JSON = "application/json"
CONNECTIONS = 64  # watches (one per kind), log streams and exporter reads share them
CALL_TIMEOUT = 60.0  # a one-shot call (json()) that takes longer has failed


class ApiError(Exception):
    """An HTTP answer of 300 or more: status, the Status body's message and reason."""

    def __init__(self, status: int, message: str = "", reason: str = "") -> None:
        super().__init__(message or f"HTTP {status}")
        self.status = status
        self.message = message
        self.reason = reason

    @classmethod
    def from_body(cls, status: int, body: bytes) -> "ApiError":
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            doc = None
        if isinstance(doc, dict):
            return cls(status, str(doc.get("message") or ""), str(doc.get("reason") or ""))
        text = body[:200].decode("utf-8", "replace").strip().splitlines()
        return cls(status, text[0] if text else "")


def path(group_version: str, resource: str, name: str | None = None, *, namespace: str | None = None, sub: str | None = None) -> str:
    """/api/v1/namespaces/NS/pods/NAME/log, /apis/apps/v1/daemonsets, ...; names quoted."""
    root = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    parts = [root]
    if namespace is not None:
        parts.append(f"namespaces/{quote(namespace, safe='')}")
    parts.append(resource)
    if name is not None:
        parts.append(quote(name, safe=":"))
    if sub is not None:
        parts.append(sub)
    return "/".join(parts)


class Client:
    def __init__(self, server: str, credentials: Credentials | None = None, impersonation: Impersonation | None = None) -> None:
        self.server = server.rstrip("/")
        self.credentials = credentials
        self.impersonation = impersonation
        self._pool: Pool | None = None

    def __repr__(self) -> str:
        return f"Client({self.server!r})"

    def _pool_now(self) -> Pool:
        """The connection pool, made in the running loop (a pool of another loop is dropped)."""
        if self._pool is None or self._pool.loop is not asyncio.get_running_loop():
            creds = self.credentials
            self._pool = Pool(self.server, tls=self._tls() if self.server.startswith("https:") else None, limit=CONNECTIONS,
                              server_hostname=creds.server_hostname if creds else None, proxy=creds.proxy if creds else None)
        return self._pool

    def _tls(self) -> ssl.SSLContext:
        context = self.credentials.ssl if self.credentials is not None else True
        if isinstance(context, ssl.SSLContext):
            return context
        if context is False:  # insecure-skip-tls-verify
            unchecked = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            unchecked.check_hostname = False
            unchecked.verify_mode = ssl.CERT_NONE
            return unchecked
        return ssl.create_default_context()

    async def request(
        self,
        method: str,
        url_path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: Timeout | None = None,
        accept: str = JSON,
    ) -> Response:
        """The response, its body unread: use it as `async with`. `body` is sent as JSON unless bytes.
        No timeout given: only connecting is bounded (watches and followed logs last)."""
        pool = self._pool_now()
        creds = self.credentials
        headers = [("Accept", accept), ("User-Agent", "gputui")]
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else orjson.dumps(body)
            headers.append(("Content-Type", content_type))
        if self.impersonation:
            headers += self.impersonation.headers()
        target = url_path + ("?" + urlencode({k: str(v) for k, v in params.items()}) if params else "")
        for attempt in (1, 2):
            auth = await creds.headers() if creds is not None else {}
            resp = await pool.request(method, target, [*headers, *auth.items()], data, timeout or Timeout())
            if resp.status == 401 and attempt == 1 and creds is not None and creds.plugin is not None:
                resp.release()
                await creds.renew()  # as kubectl does: the plugin may have a fresh token
                continue
            return resp
        raise AssertionError("unreachable")

    async def get(self, url_path: str, *, params: Mapping[str, str | int] | None = None,
                  timeout: Timeout | None = None) -> Response:
        return await self.request("GET", url_path, params=params, timeout=timeout)

    async def json(self, method: str, url_path: str, *, params: Mapping[str, str | int] | None = None, body: Any = None,
                   timeout: Timeout | None = None) -> dict[str, Any]:
        """The parsed answer; ApiError for a status of 300 or more."""
        resp = await self.request(method, url_path, params=params, body=body, timeout=timeout or Timeout(total=CALL_TIMEOUT))
        async with resp:
            data = await resp.read()
        if resp.status >= 300:
            raise ApiError.from_body(resp.status, data)
        return orjson.loads(data)

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()
