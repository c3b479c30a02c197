"""HTTP/1.1 over asyncio streams: the part of it that gputui speaks to an API server.

    pool = Pool("https://10.0.0.1:6443", tls=context)
    resp = await pool.request("GET", "/api/v1/nodes?limit=500", {"Accept": "application/json"}, None, Timeout(total=60))
    async with resp:
        body = await resp.read()        # or piece by piece: `async for piece in resp`, `await resp.read_some()`
    await pool.close()

A body comes with a Content-Length, chunked, or until the server closes. A
connection whose response was read to its end (and that the server keeps
open) goes back to the pool; any other is closed. At most `limit`
connections are in use at once; further requests wait for one. A GET on a
reused connection that the server had closed meanwhile is sent again once, on
a new one. No compression is asked for, no redirect followed, no cookie kept.
Every failure is an HttpError: ConnectFailed (with CertificateError and
TlsError), Disconnected, PayloadError, BadResponse and HttpTimeout (also a
TimeoutError).
"""
from __future__ import annotations

import asyncio
import base64
import ssl
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

CONNECT_TIMEOUT = 10.0
STREAM_LIMIT = 1 << 18  # the longest response head or chunk-size line; a connection buffers up to twice this
PIECE = 1 << 20  # the most read_some() hands out at once
IDLE_SECONDS = 15.0  # a pooled connection unused for longer is closed rather than reused (servers and NATs drop them)
CLOSE_WAIT = 0.25  # seconds close() waits for TLS connections to shut down politely
RESEND_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})  # sent again after a reused connection turned out closed


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
    """The body was cut short or its chunks were malformed."""


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


class Headers(dict[str, str]):
    """Response headers by lower-case name (a repeated one joined with ", "); get() takes any case."""

    def get(self, name: str, default: Any = None) -> Any:
        return super().get(name.lower(), default)

    def __getitem__(self, name: str) -> str:
        return super().__getitem__(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and super().__contains__(name.lower())


class _Deadline:
    """How long the next step may wait: its own limit, within the call's total."""

    def __init__(self, timeout: Timeout) -> None:
        self.timeout = timeout
        self.at = None if timeout.total is None else time.monotonic() + timeout.total

    def budget(self, step: float | None) -> float | None:
        if self.at is None:
            return step
        left = max(0.0, self.at - time.monotonic())
        return left if step is None else min(step, left)

    async def run(self, awaitable: Any, step: float | None, what: str) -> Any:
        delay = self.budget(step)
        if delay is None:
            return await awaitable
        try:
            async with asyncio.timeout(delay):
                return await awaitable
        except TimeoutError:
            raise HttpTimeout(f"{what} timed out") from None


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.reused = False
        self.idle_since = 0.0

    def usable(self) -> bool:
        return (not self.writer.transport.is_closing() and not self.reader.at_eof() and self.reader.exception() is None
                and time.monotonic() - self.idle_since < IDLE_SECONDS)


@dataclass(frozen=True)
class _Endpoint:
    scheme: str
    host: str
    port: int
    prefix: str  # a server URL's path (a proxy in front of several clusters)
    userinfo: str

    @classmethod
    def parse(cls, url: str) -> "_Endpoint":
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            parts, port = None, None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConnectFailed(f"not an http:// or https:// address: {url}")
        userinfo = parts.netloc.rpartition("@")[0]
        return cls(parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80), parts.path.rstrip("/"), userinfo)

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


class Pool:
    """Connections to one server (through its proxy, if any), made in the running loop."""

    def __init__(self, server: str, *, tls: ssl.SSLContext | None = None, server_hostname: str | None = None,
                 proxy: str | None = None, limit: int = 64) -> None:
        self.server = _Endpoint.parse(server)
        self.proxy = _Endpoint.parse(proxy) if proxy else None
        self.tls = tls if self.server.scheme == "https" else None
        self.server_hostname = server_hostname
        self.loop = asyncio.get_running_loop()
        self._slots = asyncio.Semaphore(limit)
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()  # idle or in use
        self._closing: dict[_Connection, asyncio.Future[None]] = {}  # closed, until the transport is gone
        self.connections_made = 0  # for tests and benchmarks: how often a connection was opened rather than reused

    async def request(self, method: str, target: str, headers: Mapping[str, str] | list[tuple[str, str]], body: bytes | None,
                      timeout: Timeout) -> Response:
        """The response with its head read and its body not: release it (`async with`). target: path and query."""
        deadline = _Deadline(timeout)
        head = self._head(method, target, headers, body)
        fresh = False
        while True:
            conn = await self._acquire(deadline, fresh)
            try:
                conn.writer.write(head)
                await deadline.run(conn.writer.drain(), timeout.read, "sending the request")
                return await _start(self, conn, method, deadline)
            except HttpTimeout:  # a TimeoutError, and so an OSError: not a closed connection
                self._discard(conn)
                raise
            except (Disconnected, OSError) as exc:
                self._discard(conn)
                if conn.reused and method in RESEND_SAFE and not fresh:
                    fresh = True  # the server had closed it while it waited in the pool
                    continue
                if isinstance(exc, Disconnected):
                    raise
                raise Disconnected(f"the connection failed while sending: {exc}") from None
            except BaseException:
                self._discard(conn)
                raise

    def _head(self, method: str, target: str, headers: Mapping[str, str] | list[tuple[str, str]], body: bytes | None) -> bytes:
        server = self.server
        proxy = self.proxy if server.scheme == "http" else None  # plain HTTP through a proxy: the absolute form
        through_proxy = proxy is not None
        fields = [("Host", server.authority), *(headers.items() if isinstance(headers, Mapping) else headers)]
        if proxy is not None and proxy.userinfo:
            fields.append(("Proxy-Authorization", _basic(proxy.userinfo)))
        if body is not None or method in ("POST", "PUT", "PATCH"):
            fields.append(("Content-Length", str(len(body or b""))))
        target = (f"http://{server.authority}" if through_proxy else "") + server.prefix + target
        lines = [f"{method} {target} HTTP/1.1", *(f"{name}: {value}" for name, value in fields)]
        if any("\r" in line or "\n" in line for line in lines):
            raise HttpError("a request line or header contains a line break")
        try:
            return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")
        except UnicodeEncodeError:
            raise HttpError("a request header is not plain text") from None

    async def _acquire(self, deadline: _Deadline, fresh: bool) -> _Connection:
        await deadline.run(self._slots.acquire(), None, "waiting for a free connection")
        try:
            while self._idle and not fresh:
                conn = self._idle.pop()
                if conn.usable():
                    conn.reused = True
                    return conn
                self._close(conn)
            conn = await deadline.run(self._connect(), deadline.timeout.connect, f"connecting to {self.server.authority}")
        except BaseException:
            self._slots.release()
            raise
        self._open.add(conn)
        self.connections_made += 1
        return conn

    async def _connect(self) -> _Connection:
        server, proxy = self.server, self.proxy
        name = self.server_hostname or server.host
        try:
            if proxy is None:
                reader, writer = await asyncio.open_connection(
                    server.host, server.port, ssl=self.tls, server_hostname=name if self.tls else None, limit=STREAM_LIMIT)
                return _Connection(reader, writer)
            # An https:// proxy is checked as kubectl checks it: with the server's TLS settings, under its own name.
            proxy_tls = (self.tls or ssl.create_default_context()) if proxy.scheme == "https" else None
            reader, writer = await asyncio.open_connection(
                proxy.host, proxy.port, ssl=proxy_tls, server_hostname=proxy.host if proxy_tls else None, limit=STREAM_LIMIT)
            try:
                if self.tls is not None:
                    await self._tunnel(reader, writer)
                    await writer.start_tls(self.tls, server_hostname=name)
            except BaseException:
                writer.transport.abort()
                raise
            return _Connection(reader, writer)
        except ssl.SSLCertVerificationError as exc:
            raise CertificateError(f"{server.authority}: {exc.verify_message or exc}", exc) from None
        except ssl.SSLError as exc:
            raise TlsError(f"{server.authority}: {exc}", exc) from None
        except OSError as exc:
            raise ConnectFailed(f"{(proxy or server).authority}: {exc.strerror or exc}", exc) from None

    async def _tunnel(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """CONNECT through the proxy to the server: after a 2xx the stream is the server's."""
        assert self.proxy is not None
        target = f"{self.server.host}:{self.server.port}" if ":" not in self.server.host else f"[{self.server.host}]:{self.server.port}"
        lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}"]
        if self.proxy.userinfo:
            lines.append(f"Proxy-Authorization: {_basic(self.proxy.userinfo)}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        await writer.drain()
        try:
            status, reason, _, _ = _parse_head(await reader.readuntil(b"\r\n\r\n"))
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, BadResponse):
            raise ConnectFailed(f"proxy {self.proxy.authority} closed the connection instead of tunnelling") from None
        if not 200 <= status < 300:
            raise ConnectFailed(f"proxy {self.proxy.authority} refused the tunnel to {target}: {status} {reason}".rstrip())

    def _put(self, conn: _Connection) -> None:
        conn.idle_since = time.monotonic()
        self._idle.append(conn)
        self._slots.release()

    def _discard(self, conn: _Connection) -> None:
        self._close(conn)
        self._slots.release()

    def _close(self, conn: _Connection) -> None:
        if conn not in self._open:
            return
        self._open.discard(conn)
        conn.writer.close()  # TLS says goodbye (close_notify) and waits to hear it back
        closing = self._closing[conn] = asyncio.ensure_future(conn.writer.wait_closed())
        closing.add_done_callback(lambda task: self._closed(conn, task))

    def _closed(self, conn: _Connection, task: asyncio.Future[None]) -> None:
        self._closing.pop(conn, None)
        if not task.cancelled():
            task.exception()  # retrieved: a reset while closing is no news

    async def close(self) -> None:
        """Close every connection, in use or idle (reading a response still open then fails), and
        wait a moment for them to be gone; those that take longer are cut."""
        self._idle = []
        for conn in list(self._open):
            self._close(conn)
        if self._closing:
            await asyncio.wait(list(self._closing.values()), timeout=CLOSE_WAIT)
        for conn in list(self._closing):
            conn.writer.transport.abort()


def _basic(userinfo: str) -> str:
    user, _, password = userinfo.partition(":")
    return "Basic " + base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()


def _parse_head(raw: bytes) -> tuple[int, str, str, Headers]:
    """(status, reason, version, headers) of a response head that ends with an empty line."""
    try:
        text = raw.decode("latin-1")
        status_line, *lines = text[:-4].split("\r\n")
        version, _, rest = status_line.partition(" ")
        code, _, reason = rest.partition(" ")
        if version not in ("HTTP/1.1", "HTTP/1.0") or len(code) != 3 or not (code.isascii() and code.isdigit()):
            raise ValueError
        status = int(code)
    except ValueError:
        raise BadResponse(f"not an HTTP/1.x response: {raw[:60]!r}") from None
    headers = Headers()
    for line in lines:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise BadResponse(f"a malformed response header: {line[:60]!r}")
        key, value = name.lower(), value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return status, reason, version, headers


async def _start(pool: Pool, conn: _Connection, method: str, deadline: _Deadline) -> Response:
    """Read the response head (skipping informational 1xx ones) and learn how its body is framed."""
    while True:
        try:
            raw = await deadline.run(conn.reader.readuntil(b"\r\n\r\n"), deadline.timeout.read, "waiting for the answer")
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise BadResponse("the connection closed in the middle of the response head") from None
            raise Disconnected("the server closed the connection without answering") from None
        except asyncio.LimitOverrunError:
            raise BadResponse(f"a response head over {STREAM_LIMIT} bytes") from None
        except HttpTimeout:
            raise
        except OSError as exc:
            raise Disconnected(f"the connection failed: {exc}") from None
        status, reason, version, headers = _parse_head(raw)
        if not 100 <= status < 200:
            break
    connection = (headers.get("connection") or "").lower()
    keep_alive = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
    length: int | None = None
    chunked = False
    if method == "HEAD" or status in (204, 304):
        length = 0
    elif "chunked" in (headers.get("transfer-encoding") or "").lower():
        chunked = True
    elif headers.get("content-length") is not None:
        value = headers["content-length"].split(",")[0].strip()
        if not (value.isascii() and value.isdigit()):
            raise BadResponse(f"a malformed Content-Length: {headers['content-length'][:40]!r}")
        length = int(value)
    else:
        keep_alive = False  # the body ends when the server closes
    return Response(pool, conn, status, reason, headers, deadline, length, chunked, keep_alive)


class Response:
    """status, reason, headers; the body read whole (read, text) or in pieces (read_some, async for)."""

    def __init__(self, pool: Pool, conn: _Connection, status: int, reason: str, headers: Headers, deadline: _Deadline,
                 length: int | None, chunked: bool, keep_alive: bool) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self._pool: Pool | None = pool
        self._conn: _Connection | None = conn
        self._deadline = deadline
        self._left = length  # body bytes (with Content-Length) or bytes of the current chunk still to come
        self._chunked = chunked
        self._keep_alive = keep_alive
        self._done = length == 0
        self._body: bytes | None = None
        if self._done:
            self.release()

    def __repr__(self) -> str:
        return f"<Response {self.status} {self.reason}>"

    async def read_some(self) -> bytes:
        """The next bytes of the body as they come; b"" at its end."""
        if self._done:
            return b""
        if self._conn is None:
            raise PayloadError("the response was released before its body was read")
        return await self._deadline.run(self._piece(self._conn.reader), self._deadline.timeout.read, "reading the answer")

    async def _piece(self, reader: asyncio.StreamReader) -> bytes:
        try:
            if self._chunked:
                return await self._chunk_piece(reader)
            data = await reader.read(PIECE if self._left is None else min(self._left, PIECE))
        except OSError as exc:
            raise PayloadError(f"response cut short: {exc}") from None
        if self._left is None:  # until the server closes
            self._done = not data
            return data
        if not data:
            raise PayloadError(f"response cut short: {self._left} bytes of the body never came")
        self._left -= len(data)
        self._done = self._left == 0
        return data

    async def _chunk_piece(self, reader: asyncio.StreamReader) -> bytes:
        try:
            if not self._left:
                size_line = await reader.readuntil(b"\n")
                digits = size_line.split(b";", 1)[0].strip()
                if not digits or digits.strip(b"0123456789abcdefABCDEF"):
                    raise PayloadError(f"a malformed chunk size: {size_line[:40]!r}")
                size = int(digits, 16)
                if size == 0:
                    while (await reader.readuntil(b"\n")).strip():
                        pass  # trailers, unused
                    self._done = True
                    return b""
                self._left = size
            data = await reader.read(min(self._left, PIECE))
            if not data:
                raise PayloadError("response cut short in the middle of a chunk")
            self._left -= len(data)
            if self._left == 0 and await reader.readexactly(2) != b"\r\n":
                raise PayloadError("a chunk that does not end where its size says")
            return data
        except asyncio.IncompleteReadError:
            raise PayloadError("response cut short between chunks") from None
        except asyncio.LimitOverrunError:
            raise PayloadError("a malformed chunk size line") from None

    async def read(self) -> bytes:
        """The whole body (kept: a second call returns it again)."""
        if self._body is None:
            pieces = []
            while piece := await self.read_some():
                pieces.append(piece)
            self._body = b"".join(pieces)
            self.release()
        return self._body

    async def text(self, encoding: str = "utf-8") -> str:
        return (await self.read()).decode(encoding, "replace")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while piece := await self.read_some():
            yield piece

    def release(self) -> None:
        """Done with it: the connection goes back to the pool if its body was read to the end, else it is closed."""
        conn, pool = self._conn, self._pool
        if conn is None or pool is None:
            return
        self._conn = self._pool = None
        if self._done and self._keep_alive:
            pool._put(conn)
        else:
            pool._discard(conn)

    def close(self) -> None:
        """Done with it, and with its connection."""
        self._keep_alive = False
        self.release()

    async def __aenter__(self) -> "Response":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()
