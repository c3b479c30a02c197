"""HTTP to one Kubernetes API server: raw bytes in and out, no generated models.

    client = Client("https://10.0.0.1:6443", credentials)
    async with await client.get("/api/v1/nodes", params={"limit": "500"}) as resp:
        body = await resp.read()        # or piece by piece: `async for piece in resp`, `await resp.read_some()`
    node = await client.json("GET", "/api/v1/nodes/gpu-1")   # ApiError on a status >= 300
    await client.close()

HTTP itself is aiohttp's (a C parser, a pool of keep-alive connections, gzip, proxies), made on the first
request in the running loop and imported then: importing this module stays cheap. What kubectl asks
for, gputui asks for: `Accept-Encoding: gzip` (kube-apiserver compresses lists over 128 KiB), the
kubeconfig's `proxy-url` (http, https or socks5) else the environment's proxy as kubectl reads it
(`proxy.py`), and the impersonation headers. Every request carries the credentials' Authorization
header and TLS settings; an exec plugin's token is renewed before it expires, and once more after a 401.
Every failure to get a complete answer is an HttpError (ConnectFailed with TlsError and
CertificateError, Disconnected, PayloadError, BadResponse, HttpTimeout), worded for users by
`config.describe_network_error`. Paths are built with `path()` so that names are quoted once.
"""
from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import quote, urlencode, urlsplit

import orjson

if TYPE_CHECKING:
    import aiohttp

    from .config import Impersonation
    from .credentials import Credentials

JSON = "application/json"
CONNECTIONS = 64  # watches (one per kind), log streams and exporter reads share them
CALL_TIMEOUT = 60.0  # a one-shot call (json()) that takes longer has failed
CONNECT_TIMEOUT = 10.0
IDLE_SECONDS = 15.0  # a pooled connection unused for longer is closed rather than reused (servers and NATs drop them)
READ_BUFFER = 1 << 20  # how much of a body aiohttp reads ahead: big lists come in few pieces


class HttpError(Exception):
    """A request that got no complete answer."""


class ConnectFailed(HttpError):
    """No connection: refused, unresolvable, a proxy that refused the tunnel; os_error: the cause, if any."""

    def __init__(self, message: str, os_error: BaseException | None = None) -> None:
        super().__init__(message)
        self.os_error = os_error


class TlsError(ConnectFailed):
    """The TLS handshake failed."""


class CertificateError(TlsError):
    """The server's certificate was not accepted; verify_code: OpenSSL's reason."""

    @property
    def verify_code(self) -> int | None:
        return getattr(self.os_error, "verify_code", None)


class Disconnected(HttpError):
    """The server closed the connection before its answer began."""


class PayloadError(HttpError):
    """The body was cut short, or its chunks or compression were malformed."""


class BadResponse(HttpError):
    """What came back is not an HTTP/1.x response."""


class HttpTimeout(HttpError, TimeoutError):
    """A connect, read or total timeout ran out."""


@dataclass(frozen=True)
class Timeout:
    """connect: to open a connection (TCP, a proxy's tunnel, TLS); read: the longest wait for the
    next bytes of the answer; total: the whole call, from the request to the body's last byte."""

    connect: float | None = CONNECT_TIMEOUT
    read: float | None = None
    total: float | None = None


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


def _import_aiohttp() -> Any:
    """aiohttp, imported on the first request (importing the model does not load it). Its import builds two default
    TLS contexts that load the system's certificate authorities (some 40 ms of every command's start); gputui never
    uses them (each request carries the credentials' own context, `Client._tls`), so they are built while
    SSL_CERT_FILE names an empty file, and the variable is put back as it was at once."""
    import os  # noqa: PLC0415
    import sys  # noqa: PLC0415

    if "aiohttp" in sys.modules:
        return sys.modules["aiohttp"]
    saved = os.environ.get("SSL_CERT_FILE")
    os.environ["SSL_CERT_FILE"] = os.devnull
    try:
        import aiohttp  # noqa: PLC0415
    finally:
        if saved is None:
            del os.environ["SSL_CERT_FILE"]
        else:
            os.environ["SSL_CERT_FILE"] = saved
    return aiohttp


def _failure(exc: BaseException, where: str) -> NoReturn:
    """Raise the HttpError for an aiohttp (or SOCKS, or timeout) failure; anything else as it is."""
    import aiohttp  # noqa: PLC0415  (loaded: the request was made with it)

    if isinstance(exc, HttpError):
        raise exc
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        raise HttpTimeout(f"connecting to {where} timed out") from None
    if isinstance(exc, (aiohttp.SocketTimeoutError, aiohttp.ServerTimeoutError)):
        raise HttpTimeout("reading the answer timed out") from None
    if isinstance(exc, TimeoutError):
        raise HttpTimeout("the request timed out") from None
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        cause = exc.certificate_error
        raise CertificateError(f"{where}: {getattr(cause, 'verify_message', None) or cause}", cause) from None
    if isinstance(exc, aiohttp.ClientConnectorSSLError):
        raise TlsError(f"{where}: {exc.os_error}", exc.os_error) from None
    if isinstance(exc, aiohttp.ClientConnectorError):
        raise ConnectFailed(f"{where}: {exc.os_error.strerror or exc.os_error}", exc.os_error) from None
    if isinstance(exc, aiohttp.ClientHttpProxyError):
        raise ConnectFailed(f"the proxy refused the tunnel to {where}: {exc.status} {exc.message}".rstrip()) from None
    if type(exc).__module__.startswith("python_socks"):  # aiohttp-socks: the SOCKS proxy said no, or is not there
        os_error = exc if isinstance(exc, OSError) else None
        raise ConnectFailed(f"SOCKS proxy: {exc}", os_error) from None
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        raise Disconnected("the server closed the connection without answering") from None
    if isinstance(exc, aiohttp.ClientPayloadError):
        raise PayloadError(f"response cut short: {exc}") from None
    if isinstance(exc, aiohttp.ClientResponseError):
        raise BadResponse(f"not an HTTP/1.x response: {exc.message}") from None
    if isinstance(exc, (aiohttp.ClientOSError, ConnectionError)):
        raise Disconnected(f"the connection failed: {exc}") from None
    if isinstance(exc, aiohttp.InvalidURL):
        raise ConnectFailed(f"not an http:// or https:// address: {exc}") from None
    if isinstance(exc, aiohttp.ClientError):
        raise HttpError(str(exc) or type(exc).__name__) from None
    raise exc


async def _whole(content: aiohttp.StreamReader) -> bytes:
    """A body's pieces as they were fed, joined once. aiohttp's read() joins the pieces each readany finds, then
    all of them again: on uvloop, whose TLS hands over a piece a record, a gzipped list was copied twice whole."""
    pieces: list[bytes] = []
    while True:
        piece, _chunk_end = await content.readchunk()
        if piece:
            pieces.append(piece)
        elif content.at_eof():  # not (b"", False): aiohttp's shared empty body says so only once a process
            return b"".join(pieces)


class Response:
    """status, reason, headers (any case); the body read whole (read, text) or in pieces (read_some,
    async for), gzip undone. Release it (`async with`): a connection whose body was read to its end
    goes back to the pool, any other is closed."""

    def __init__(self, raw: aiohttp.ClientResponse, where: str) -> None:
        self._raw = raw
        self._where = where
        self.status = raw.status
        self.reason = raw.reason or ""
        self.headers = raw.headers
        self._body: bytes | None = None

    def __repr__(self) -> str:
        return f"<Response {self.status} {self.reason}>"

    async def read_some(self) -> bytes:
        """The next bytes of the body as they come; b"" at its end."""
        try:
            return await self._raw.content.readany()
        except Exception as exc:  # noqa: BLE001  (each becomes its HttpError; others are raised as they are)
            _failure(exc, self._where)

    async def read(self) -> bytes:
        """The whole body (kept: a second call returns it again)."""
        if self._body is None:
            try:
                self._body = await _whole(self._raw.content)
            except Exception as exc:  # noqa: BLE001
                _failure(exc, self._where)
            finally:
                self._raw.release()
        return self._body

    async def text(self, encoding: str = "utf-8") -> str:
        return (await self.read()).decode(encoding, "replace")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while piece := await self.read_some():
            yield piece

    def release(self) -> None:
        self._raw.release()

    def close(self) -> None:
        """Done with it, and with its connection."""
        self._raw.close()

    async def __aenter__(self) -> "Response":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()


class Client:
    def __init__(self, server: str, credentials: Credentials | None = None, impersonation: Impersonation | None = None) -> None:
        self.server = server.rstrip("/")
        self.credentials = credentials
        self.impersonation = impersonation
        self.authority = urlsplit(self.server).netloc.rpartition("@")[2] or self.server
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._proxy: str | None = None

    def __repr__(self) -> str:
        return f"Client({self.server!r})"

    def _session_now(self) -> aiohttp.ClientSession:
        """The session (its pool of connections), made in the running loop (one of another loop is dropped)."""
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop:
            http = _import_aiohttp()
            from .proxy import choose_proxy  # noqa: PLC0415

            creds = self.credentials
            proxy = choose_proxy(self.server, creds.proxy if creds is not None else None)
            tls = self._tls() if self.server.startswith("https:") else False
            connector: aiohttp.BaseConnector
            if proxy is not None and proxy.startswith("socks5"):
                from aiohttp_socks import ProxyConnector  # noqa: PLC0415  (only for a SOCKS proxy)

                # The server's name goes to the proxy, which resolves it (as Go's SOCKS5 dialer does).
                connector = ProxyConnector.from_url(proxy.replace("socks5h://", "socks5://", 1), rdns=True, ssl=tls,
                                                    limit=CONNECTIONS, keepalive_timeout=IDLE_SECONDS)
                proxy = None
            else:
                connector = http.TCPConnector(ssl=tls, limit=CONNECTIONS, keepalive_timeout=IDLE_SECONDS)
            self._proxy = proxy
            self._session = http.ClientSession(
                connector=connector, trust_env=False, read_bufsize=READ_BUFFER, timeout=http.ClientTimeout(total=None),
                skip_auto_headers=("User-Agent",), cookie_jar=http.DummyCookieJar(),
            )
            self._loop = loop
        return self._session

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
        headers: Sequence[tuple[str, str]] = (),
    ) -> Response:
        """The response, its body unread: use it as `async with`. `body` is sent as JSON unless bytes.
        No timeout given: only connecting is bounded (watches and followed logs last). `headers`: more to send
        (If-None-Match, say)."""
        import aiohttp  # noqa: PLC0415
        from yarl import URL  # noqa: PLC0415  (aiohttp's)

        session = self._session_now()
        creds = self.credentials
        headers = [("Accept", accept), ("User-Agent", "gputui"), ("Accept-Encoding", "gzip"), *headers]
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else orjson.dumps(body)
            headers.append(("Content-Type", content_type))
        if self.impersonation:
            headers += self.impersonation.headers()
        query = "?" + urlencode({k: str(v) for k, v in params.items()}) if params else ""
        url = URL(self.server + url_path + query, encoded=True)  # quoted once, by path() and urlencode
        limits = timeout or Timeout()
        client_timeout = aiohttp.ClientTimeout(total=limits.total, sock_connect=limits.connect, sock_read=limits.read)
        server_hostname = creds.server_hostname if creds is not None else None
        for attempt in (1, 2):
            auth = await creds.headers() if creds is not None else {}
            try:
                raw = await session.request(
                    method, url, headers=[*headers, *auth.items()], data=data, timeout=client_timeout, proxy=self._proxy,
                    allow_redirects=False, server_hostname=server_hostname,
                )
            except Exception as exc:  # noqa: BLE001  (each becomes its HttpError; others are raised as they are)
                _failure(exc, self.authority)
            resp = Response(raw, self.authority)
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
        if self._session is not None:
            session, self._session = self._session, None
            if self._loop is asyncio.get_running_loop():
                await session.close()
