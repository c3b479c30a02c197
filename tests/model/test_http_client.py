"""gputui's own HTTP/1.1 client (kube/http.py) against loopback servers that answer as scripted, and the simulator."""
from __future__ import annotations

import asyncio
import base64
import socket
import ssl
import time
from collections.abc import Awaitable, Callable

import orjson
import pytest
import yaml

from gputui.kube import http
from gputui.kube.config import connect, describe_network_error
from gputui.sim.cluster import SimCluster
from gputui.sim.tls import server_context
from tests.model.objects import node

# (writer, the request's head, which request this is on its connection, from 1) -> keep the connection open?
Answer = Callable[[asyncio.StreamWriter, bytes, int], Awaitable[bool]]


class Scripted:
    """A loopback TCP server that reads each request's head (and Content-Length body) and answers as told."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.requests: list[bytes] = []
        self.handlers: set[asyncio.Task] = set()

    async def __aenter__(self) -> "Scripted":
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        for task in self.handlers:
            task.cancel()
        await asyncio.gather(*self.handlers, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.handlers.add(asyncio.current_task())
        try:
            for n in range(1, 1000):
                head = await reader.readuntil(b"\r\n\r\n")
                self.requests.append(head)
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        await reader.readexactly(int(line.split(b":")[1]))
                if not await self.answer(writer, head, n):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def fixed(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


async def get(pool: http.Pool, target: str = "/", timeout: http.Timeout = http.Timeout(), method: str = "GET") -> http.Response:
    return await pool.request(method, target, {"Accept": "application/json"}, b"{}" if method == "POST" else None, timeout)


async def test_a_chunked_body_is_read_whole_or_in_pieces_and_its_connection_kept():
    async def answer(writer: asyncio.StreamWriter, head: bytes, n: int) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for chunk in (b"5;name=value\r\nhello\r\n", b"1\r\n \r\n", b"5\r\nworld\r\n", b"0\r\nX-Trailer: t\r\n\r\n"):
            writer.write(chunk)
            await writer.drain()
            await asyncio.sleep(0.02)
        return True

    async with Scripted(answer) as server:
        pool = http.Pool(server.url)
        async with await get(pool) as resp:
            assert resp.status == 200 and resp.headers.get("transfer-ENCODING") == "chunked"
            assert await resp.read() == b"hello world"
        async with await get(pool) as resp:
            pieces = [piece async for piece in resp]
        assert pieces == [b"hello", b" ", b"world"]
        assert server.connections == 1 and pool.connections_made == 1
        await pool.close()


async def test_keep_alive_reuses_a_connection_and_one_with_an_unread_body_is_closed():
    async def answer(writer: asyncio.StreamWriter, head: bytes, n: int) -> bool:
        if b" /empty " in head:
            writer.write(b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n")
        else:
            writer.write(fixed(b'{"n": %d}' % n))
        return True

    async with Scripted(answer) as server:
        pool = http.Pool(server.url)
        for n in (1, 2, 3):
            async with await get(pool) as resp:
                assert orjson.loads(await resp.read()) == {"n": n}
        async with await get(pool, "/empty") as resp:
            assert resp.status == 204 and await resp.read() == b""
        assert server.connections == 1
        async with await get(pool) as resp:
            assert resp.status == 200  # its body is left unread: the connection cannot serve another answer
        async with await get(pool) as resp:
            assert orjson.loads(await resp.read()) == {"n": 1}  # the first request on a new connection
        assert server.connections == 2 and pool.connections_made == 2
        head = server.requests[0].decode()
        assert head.startswith("GET / HTTP/1.1\r\n") and f"Host: 127.0.0.1:{server.port}\r\n" in head
        assert "accept-encoding" not in head.lower()  # bodies come uncompressed
        await pool.close()


async def test_a_get_is_sent_again_when_the_server_had_closed_the_pooled_connection_but_a_post_is_not():
    async def answer(writer: asyncio.StreamWriter, head: bytes, n: int) -> bool:
        if n == 2:
            return False  # closes the kept connection on its second request, unanswered
        writer.write(fixed(b"ok"))
        return True

    async with Scripted(answer) as server:
        pool = http.Pool(server.url)
        for _ in range(3):
            async with await get(pool) as resp:
                assert await resp.read() == b"ok"
        # Each connection closes on its second request: the second and third GETs went twice.
        assert server.connections == 3 and len(server.requests) == 5
        with pytest.raises(http.Disconnected) as caught:
            await get(pool, method="POST")
        assert describe_network_error(caught.value) == "server closed the connection"
        await pool.close()


@pytest.mark.parametrize("answer_bytes", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r\nhello",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n",
])
async def test_a_body_cut_short_or_badly_chunked_is_a_payload_error(answer_bytes):
    async def answer(writer: asyncio.StreamWriter, head: bytes, n: int) -> bool:
        writer.write(answer_bytes)
        await writer.drain()
        return False

    async with Scripted(answer) as server:
        pool = http.Pool(server.url)
        resp = await get(pool)
        with pytest.raises(http.PayloadError) as caught:
            await resp.read()
        resp.release()
        assert describe_network_error(caught.value) == "response cut short"
        await pool.close()


async def test_a_body_until_the_server_closes():
    async def answer(writer: asyncio.StreamWriter, head: bytes, n: int) -> bool:
        writer.write(b"HTTP/1.0 200 OK\r\n\r\nuntil ")
        await writer.drain()
        await asyncio.sleep(0.02)
        writer.write(b"the end")
        return False

    async with Scripted(answer) as server:
        pool = http.Pool(server.url)
        for _ in range(2):
            async with await get(pool) as resp:
                assert await resp.text() == "until the end"
        assert server.connections == 2  # such a connection is never reused
        await pool.close()


async def test_inactivity_and_total_timeouts():
    async def answer(writer: asyncio.StreamWriter, head: bytes, n: int) -> bool:
        if b" /silent " in head:
            await asyncio.sleep(5)
            return False
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        pause = 1.0 if b" /pause " in head else 0.05
        for _ in range(100):  # a watch that trickles, or falls silent after its first event
            writer.write(b"6\r\nevent\n\r\n")
            await writer.drain()
            await asyncio.sleep(pause)
        return False

    async with Scripted(answer) as server:
        pool = http.Pool(server.url)
        started = time.monotonic()
        with pytest.raises(http.HttpTimeout) as caught:
            await get(pool, "/silent", http.Timeout(read=0.2))
        assert isinstance(caught.value, TimeoutError) and describe_network_error(caught.value) == "timed out"

        resp = await get(pool, "/pause", http.Timeout(read=0.2))
        assert await resp.read_some() == b"event\n"
        with pytest.raises(http.HttpTimeout):
            await resp.read_some()
        resp.release()

        resp = await get(pool, "/trickle", http.Timeout(read=0.2, total=0.4))
        pieces = 0
        with pytest.raises(http.HttpTimeout):
            while await resp.read_some():
                pieces += 1  # no gap reaches the read timeout: the total ends it
        resp.release()
        assert pieces >= 3 and time.monotonic() - started < 2.5
        await pool.close()


async def test_at_most_limit_connections_at_once():
    async def answer(writer: asyncio.StreamWriter, head: bytes, n: int) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n")
        await asyncio.sleep(5)  # a stream that stays open
        return False

    async with Scripted(answer) as server:
        pool = http.Pool(server.url, limit=2)
        first, second = await get(pool), await get(pool)
        third = asyncio.ensure_future(get(pool))
        await asyncio.sleep(0.2)
        assert not third.done() and server.connections == 2
        first.release()
        resp = await asyncio.wait_for(third, 2)
        assert await resp.read_some() == b"x" and server.connections == 3
        second.release()
        resp.release()
        await pool.close()


async def test_a_plain_http_server_through_a_proxy_and_a_proxy_that_refuses_the_tunnel():
    async def proxy(writer: asyncio.StreamWriter, head: bytes, n: int) -> bool:
        if head.startswith(b"CONNECT "):
            writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
            return False
        writer.write(fixed(b"via the proxy"))
        return True

    async with Scripted(proxy) as server:
        pool = http.Pool("http://kube.example:8080/prefix", proxy=f"http://ops:p%40ss@127.0.0.1:{server.port}")
        async with await get(pool, "/api?x=1") as resp:
            assert await resp.read() == b"via the proxy"
        head = server.requests[0].decode()
        assert head.startswith("GET http://kube.example:8080/prefix/api?x=1 HTTP/1.1\r\n")
        assert "Host: kube.example:8080\r\n" in head
        assert f"Proxy-Authorization: Basic {base64.b64encode(b'ops:p@ss').decode()}\r\n" in head
        await pool.close()

        tunnelled = http.Pool("https://kube.example:6443", tls=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), proxy=server.url)
        with pytest.raises(http.ConnectFailed) as caught:
            await get(tunnelled)
        assert server.requests[-1].startswith(b"CONNECT kube.example:6443 HTTP/1.1\r\n")
        assert describe_network_error(caught.value) == (
            f"proxy 127.0.0.1:{server.port} refused the tunnel to kube.example:6443: 407 Proxy Authentication Required")
        await tunnelled.close()


async def test_a_refused_connection_and_a_bad_address():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    pool = http.Pool(f"http://127.0.0.1:{port}")
    with pytest.raises(http.ConnectFailed) as caught:
        await get(pool)
    assert describe_network_error(caught.value) == "connection refused"
    with pytest.raises(http.ConnectFailed) as caught:
        http.Pool("kube.example:6443")
    assert str(caught.value) == "not an http:// or https:// address: kube.example:6443"


async def test_against_the_simulator_one_tls_connection_serves_calls_one_after_another_and_a_watch_streams():
    async with SimCluster([node("gpu-1"), node("gpu-2")]) as sim:
        async with await connect(str(sim.kubeconfig_path)) as conn:
            for _ in range(5):
                nodes = await conn.api.json("GET", "/api/v1/nodes")
                assert sorted(n["metadata"]["name"] for n in nodes["items"]) == ["gpu-1", "gpu-2"]
            assert conn.api._pool_now().connections_made == 1
            since = nodes["metadata"]["resourceVersion"]
            resp = await conn.api.get("/api/v1/nodes", params={"watch": "true", "resourceVersion": since})
            async with resp:
                assert resp.status == 200
                sim.store.create("nodes", node("gpu-3"))
                line = b""
                while not line.endswith(b"\n"):
                    line += await asyncio.wait_for(resp.read_some(), 5)
                event = orjson.loads(line)
                assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "gpu-3")


async def test_an_https_proxy_tunnels_tls_inside_tls_to_the_simulator(tmp_path):
    tunnels: list[bytes] = []

    async def tunnel(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        tunnels.append(head.split(b"\r\n")[0])
        host, port = head.split(b" ")[1].decode().rsplit(":", 1)
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except ConnectionError:
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    proxy = await asyncio.start_server(tunnel, "127.0.0.1", 0, ssl=server_context())
    try:
        async with SimCluster([node("gpu-1")]) as sim:
            doc = yaml.safe_load(sim.kubeconfig_path.read_text())
            doc["clusters"][0]["cluster"]["proxy-url"] = f"https://127.0.0.1:{proxy.sockets[0].getsockname()[1]}"
            (tmp_path / "kubeconfig").write_text(yaml.safe_dump(doc))
            async with await connect(str(tmp_path / "kubeconfig")) as conn:
                nodes = await conn.api.json("GET", "/api/v1/nodes")
            assert [n["metadata"]["name"] for n in nodes["items"]] == ["gpu-1"]
            assert tunnels == [f"CONNECT 127.0.0.1:{sim.port} HTTP/1.1".encode()]
    finally:
        proxy.close()


async def test_a_model_stopped_while_its_watches_start_stops():
    """Its reflectors are cancelled as their first WatchList bytes arrive; none may lose the cancellation."""
    from gputui.kube.model import ClusterModel

    async with SimCluster([node(f"gpu-{n}") for n in range(3)]) as sim:
        async with await connect(str(sim.kubeconfig_path)) as conn:
            for n in range(30):
                model = ClusterModel(conn.api)
                await model.start()
                await asyncio.sleep(0.003 * n)
                done, _ = await asyncio.wait({asyncio.ensure_future(model.stop())}, timeout=10)
                assert done, f"stop {n} never ended: a reflector lost its cancellation"
