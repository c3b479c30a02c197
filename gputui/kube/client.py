"""HTTP to one Kubernetes API server: raw bytes in and out, no generated models.

    client = Client("https://10.0.0.1:6443", credentials)
    async with await client.get("/api/v1/nodes", params={"limit": "500"}) as resp:
        body = await resp.read()
    node = await client.json("GET", "/api/v1/nodes/gpu-1")   # ApiError on a status >= 300
    await client.close()

The aiohttp session is made on the first request, in the running loop. Every
request carries the credentials' Authorization header and TLS settings; an
exec plugin's token is renewed before it expires, and once more after a 401.
Paths are built with `path()` so that names are quoted once, in one place.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import orjson

if TYPE_CHECKING:
    import aiohttp

    from .credentials import Credentials

JSON = "application/json"
CONNECTIONS = 64  # watches (one per kind), log streams and exporter reads share them
CONNECT_TIMEOUT = 10.0
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
    def __init__(self, server: str, credentials: Credentials | None = None) -> None:
        self.server = server.rstrip("/")
        self.credentials = credentials
        self._session: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:
        return f"Client({self.server!r})"

    def _session_now(self) -> aiohttp.ClientSession:
        import aiohttp  # noqa: PLC0415  (loaded on connecting: the app draws its first frame before)

        if self._session is None or self._session.closed:
            ssl = self.credentials.ssl if self.credentials is not None else True
            connector = aiohttp.TCPConnector(limit=CONNECTIONS, ssl=ssl)
            # No total limit by default: watches and followed logs last; callers give their own.
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT)
            self._session = aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False)
        return self._session

    async def request(
        self,
        method: str,
        url_path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: aiohttp.ClientTimeout | None = None,
        accept: str = JSON,
    ) -> aiohttp.ClientResponse:
        """The response, its body unread: use it as `async with`. `body` is sent as JSON unless bytes."""
        session = self._session_now()
        creds = self.credentials
        headers = {"Accept": accept, "User-Agent": "gputui"}
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else orjson.dumps(body)
            headers["Content-Type"] = content_type
        query = {k: str(v) for k, v in (params or {}).items()}
        options: dict[str, Any] = {"params": query, "data": data}
        if timeout is not None:
            options["timeout"] = timeout
        if creds is not None:
            if creds.proxy:
                options["proxy"] = creds.proxy
            if creds.server_hostname:
                options["server_hostname"] = creds.server_hostname
        for attempt in (1, 2):
            auth = await creds.headers() if creds is not None else {}
            resp = await session.request(method, self.server + url_path, headers={**headers, **auth}, **options)
            if resp.status == 401 and attempt == 1 and creds is not None and creds.plugin is not None:
                resp.release()
                await creds.renew()  # as kubectl does: the plugin may have a fresh token
                continue
            return resp
        raise AssertionError("unreachable")

    async def get(self, url_path: str, *, params: Mapping[str, str | int] | None = None,
                  timeout: aiohttp.ClientTimeout | None = None) -> aiohttp.ClientResponse:
        return await self.request("GET", url_path, params=params, timeout=timeout)

    async def json(self, method: str, url_path: str, *, params: Mapping[str, str | int] | None = None, body: Any = None,
                   timeout: aiohttp.ClientTimeout | None = None) -> dict[str, Any]:
        """The parsed answer; ApiError for a status of 300 or more."""
        if timeout is None:
            import aiohttp  # noqa: PLC0415

            timeout = aiohttp.ClientTimeout(total=CALL_TIMEOUT, sock_connect=CONNECT_TIMEOUT)
        resp = await self.request(method, url_path, params=params, body=body, timeout=timeout)
        async with resp:
            data = await resp.read()
        if resp.status >= 300:
            raise ApiError.from_body(resp.status, data)
        return orjson.loads(data)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
