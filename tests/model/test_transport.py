"""The transport (aiohttp behind kube/client.py) asks what kubectl asks: gzip, answered by the simulator as
kube-apiserver answers it (a serialized answer over 128 KiB, never a watch); proxies from the kubeconfig
(http, socks5) and from the environment with kubectl's rules (loopback and NO_PROXY go direct), each
checked beside the real kubectl going through the same proxy."""
from __future__ import annotations

import asyncio
import gzip
import ipaddress
import struct

import aiohttp
import orjson
import pytest
import pytest_asyncio

from gputui.kube.client import path
from gputui.kube.config import ConnectError, check, connect
from gputui.kube.proxy import environment_proxy
from gputui.sim.cluster import SimCluster
from tests.model.objects import node, plugin_pod, pod
from tests.model.test_impersonation import capture, write_kubeconfig  # noqa: F401  (capture: a fixture)

pytestmark = pytest.mark.asyncio(loop_scope="module")
TOKEN = "transport-t0ken"
ELSEWHERE = "kube.example"  # a server name that is not loopback: only the test's proxies know where it is


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sim():
    pods = [pod("ml", f"p-{i:03}", node="gpu-1", gpu={"nvidia.com/gpu": 1}) for i in range(400)]  # a list of ~230 KB
    async with SimCluster([node("gpu-1", capacity={"nvidia.com/gpu": 200}), plugin_pod("gpu-1"), *pods], tokens={TOKEN: ("t", ["system:masters"])},
                          cert_hosts=("127.0.0.1", "localhost", ELSEWHERE), run_controllers=False) as cluster:
        yield cluster


async def raw_get(sim: SimCluster, url_path: str, accept_encoding: str | None) -> tuple[dict[str, str], bytes]:
    headers = {"Authorization": f"Bearer {TOKEN}"} | ({"Accept-Encoding": accept_encoding} if accept_encoding is not None else {})
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=sim.client_ssl()), auto_decompress=False,
                                     skip_auto_headers=("Accept-Encoding",)) as http:
        async with http.get(sim.url + url_path, headers=headers) as resp:
            assert resp.status == 200
            return dict(resp.headers), await resp.content.read(1 << 16) if "watch" in url_path else await resp.read()


@pytest.mark.parametrize(("url_path", "accept_encoding", "compressed"), [
    ("/api/v1/namespaces/ml/pods", "gzip", True),
    ("/api/v1/namespaces/ml/pods", "deflate, gzip", True),
    ("/api/v1/namespaces/ml/pods", None, False),
    ("/api/v1/namespaces/ml/pods", "gzip;q=1.0", False),  # kube-apiserver takes only the bare token
    ("/api/v1/namespaces/ml/pods?limit=10", "gzip", False),  # under 128 KiB
    ("/api/v1/pods?watch=1&resourceVersion=0&timeoutSeconds=1", "gzip", False),  # a watch is never compressed
])
async def test_the_simulator_gzips_as_kube_apiserver_does(sim, url_path, accept_encoding, compressed):
    headers, body = await raw_get(sim, url_path, accept_encoding)
    assert (headers.get("Content-Encoding") == "gzip") is compressed
    if compressed:
        assert headers.get("Vary") == "Accept-Encoding"
        plain = gzip.decompress(body)
        assert len(plain) > 128 * 1024 and len(body) < len(plain) / 4
        assert len(orjson.loads(plain)["items"]) == 400


async def test_gputui_asks_for_gzip_as_kubectl_does_and_reads_it(sim, capture, make_kubectl, tmp_path):  # noqa: F811
    url, seen = capture
    kubeconfig = write_kubeconfig(tmp_path, url, {"token": "tok"})
    await asyncio.to_thread(make_kubectl(kubeconfig).run, "get", "--raw", "/version")
    kubectls = [v for k, v in seen[-1] if k.lower() == "accept-encoding"]
    async with await connect(str(kubeconfig)) as conn:
        with pytest.raises(ConnectError):
            await check(conn)
    assert [v for k, v in seen[-1] if k.lower() == "accept-encoding"] == kubectls == ["gzip"]
    # and a compressed list reads as the whole list
    async with await connect(str(write_kubeconfig(tmp_path, sim.url, {"token": TOKEN}, "sim"))) as conn:
        resp = await conn.api.get(path("v1", "pods", namespace="ml"))
        async with resp:
            assert resp.headers.get("Content-Encoding") == "gzip"
            assert len(orjson.loads(await resp.read())["items"]) == 400


@pytest.mark.parametrize(("server", "environment", "expected"), [
    ("https://10.0.0.1:6443", {"HTTPS_PROXY": "proxy:3128"}, "http://proxy:3128"),
    ("https://10.0.0.1:6443", {"https_proxy": "http://low:1"}, "http://low:1"),
    ("https://10.0.0.1:6443", {"HTTPS_PROXY": "http://up:1", "https_proxy": "http://low:1"}, "http://up:1"),  # Go: upper case first
    ("https://10.0.0.1:6443", {"HTTP_PROXY": "http://p:1"}, None),  # HTTP_PROXY is for http:// servers
    ("http://10.0.0.1:8080", {"HTTP_PROXY": "http://p:1"}, "http://p:1"),
    ("https://127.0.0.1:6443", {"HTTPS_PROXY": "http://p:1"}, None),  # loopback is never proxied
    ("https://localhost:6443", {"HTTPS_PROXY": "http://p:1"}, None),
    ("https://[::1]:6443", {"HTTPS_PROXY": "http://p:1"}, None),
    ("https://10.0.0.1:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.0.0.0/8"}, None),
    ("https://10.0.0.1:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.0.0.1:443"}, "http://p:1"),  # another port
    ("https://10.0.0.1:6443", {"HTTPS_PROXY": "http://p:1", "no_proxy": "10.0.0.1:6443"}, None),
    ("https://api.corp.example:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "corp.example"}, None),
    ("https://corp.example:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": ".corp.example"}, "http://p:1"),  # subdomains only
    ("https://corp.example:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "*.corp.example"}, "http://p:1"),
    ("https://api.corp.example:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "*.corp.example"}, None),
    ("https://notcorp.example:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "corp.example"}, "http://p:1"),
    ("https://10.0.0.1:6443", {"HTTPS_PROXY": "socks5://p:1080", "NO_PROXY": "a, b ,"}, "socks5://p:1080"),
    ("https://10.0.0.1:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "*"}, None),
])
async def test_the_environment_proxy_is_chosen_by_gos_rules(monkeypatch, server, environment, expected):
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert environment_proxy(server) == expected


class Tunnels:
    """An HTTP CONNECT proxy and a SOCKS5 proxy on loopback; both know ELSEWHERE as 127.0.0.1 and note each tunnel."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def start(self) -> "Tunnels":
        self.http = await asyncio.start_server(self._connect, "127.0.0.1", 0)
        self.socks = await asyncio.start_server(self._socks, "127.0.0.1", 0)
        self.http_url = f"http://127.0.0.1:{self.http.sockets[0].getsockname()[1]}"
        self.socks_url = f"socks5://127.0.0.1:{self.socks.sockets[0].getsockname()[1]}"
        return self

    async def _pipe(self, host: str, port: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, ok: bytes) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1" if host == ELSEWHERE else host, port)
        self.seen.append(f"{host}:{port}")
        writer.write(ok)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True)

    async def _connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            method, target, _ = (await reader.readuntil(b"\r\n\r\n")).split(b"\r\n")[0].decode().split(" ", 2)
            host, port = target.rsplit(":", 1)
            await self._pipe(host, int(port), reader, writer, b"HTTP/1.1 200 Connection Established\r\n\r\n")
        except (OSError, ValueError, asyncio.IncompleteReadError):
            writer.close()

    async def _socks(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            _, count = await reader.readexactly(2)
            await reader.readexactly(count)  # the methods offered: no authentication is taken
            writer.write(b"\x05\x00")
            _, command, _, kind = await reader.readexactly(4)
            if kind == 3:
                host = (await reader.readexactly((await reader.readexactly(1))[0])).decode()
            else:
                host = str(ipaddress.ip_address(await reader.readexactly(4 if kind == 1 else 16)))
            (port,) = struct.unpack("!H", await reader.readexactly(2))
            await self._pipe(host, port, reader, writer, b"\x05\x00\x00\x01\x7f\x00\x00\x01" + struct.pack("!H", port))
        except (OSError, ValueError, asyncio.IncompleteReadError):
            writer.close()

    async def stop(self) -> None:
        self.http.close()
        self.socks.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def tunnels():
    proxies = await Tunnels().start()
    yield proxies
    await proxies.stop()


def set_proxy_environment(monkeypatch, **values: str) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in values.items():
        monkeypatch.setenv(name, value)


async def nodes_through(kubeconfig, make_kubectl) -> tuple[list[str], str]:
    """The node names gputui reads, and kubectl's stderr (empty when it read them too)."""
    async with await connect(str(kubeconfig)) as conn:
        try:
            names = [n["metadata"]["name"] for n in (await conn.api.json("GET", path("v1", "nodes")))["items"]]
        except OSError:
            names = []
        except Exception as error:  # noqa: BLE001  (the transport's failure, whatever its class)
            names = [f"failed: {error}"]
    done = await asyncio.to_thread(make_kubectl(kubeconfig).run, "get", "--raw", "/api/v1/nodes", timeout=20)
    return names, "" if done.returncode == 0 else done.stderr.strip().splitlines()[-1]


async def test_the_environment_proxy_is_used_as_kubectl_uses_it(sim, tunnels, tmp_path, make_kubectl, monkeypatch):
    kubeconfig = write_kubeconfig(tmp_path, f"https://{ELSEWHERE}:{sim.port}", {"token": TOKEN})
    set_proxy_environment(monkeypatch, HTTPS_PROXY=tunnels.http_url)
    before = len(tunnels.seen)
    assert await nodes_through(kubeconfig, make_kubectl) == (["gpu-1"], "")
    assert tunnels.seen[before:] and set(tunnels.seen[before:]) == {f"{ELSEWHERE}:{sim.port}"}  # both went through it
    # NO_PROXY names the server: both go direct, where kube.example does not resolve
    set_proxy_environment(monkeypatch, HTTPS_PROXY=tunnels.http_url, NO_PROXY=f"localhost,.svc,{ELSEWHERE}")
    before = len(tunnels.seen)
    names, kubectl_error = await nodes_through(kubeconfig, make_kubectl)
    assert names != ["gpu-1"] and kubectl_error and len(tunnels.seen) == before
    # a loopback server is never proxied, by either
    set_proxy_environment(monkeypatch, HTTPS_PROXY=tunnels.http_url)
    assert await nodes_through(write_kubeconfig(tmp_path, sim.url, {"token": TOKEN}, "loopback"), make_kubectl) == (["gpu-1"], "")
    assert len(tunnels.seen) == before


async def test_a_socks5_proxy_url_is_used_as_kubectl_uses_it(sim, tunnels, tmp_path, make_kubectl, monkeypatch):
    set_proxy_environment(monkeypatch)
    kubeconfig = write_kubeconfig(tmp_path, f"https://{ELSEWHERE}:{sim.port}", {"token": TOKEN}, cluster={"proxy-url": tunnels.socks_url})
    before = len(tunnels.seen)
    assert await nodes_through(kubeconfig, make_kubectl) == (["gpu-1"], "")
    # the server's name went to the proxy (it resolves it), from both
    assert tunnels.seen[before:] and set(tunnels.seen[before:]) == {f"{ELSEWHERE}:{sim.port}"}


async def test_aiohttp_is_imported_without_loading_authorities_it_never_uses():
    """aiohttp's default TLS contexts are built without the system's authorities (gputui never uses them), SSL_CERT_FILE
    is left as it was, and a context of gputui's own still trusts the system's authorities."""
    import subprocess
    import sys

    probe = (
        "import os, ssl\nos.environ['SSL_CERT_FILE'] = ssl.get_default_verify_paths().openssl_cafile\n"
        "from gputui.kube.client import Client, _import_aiohttp\naiohttp = _import_aiohttp()\n"
        "print(os.environ['SSL_CERT_FILE'] == ssl.get_default_verify_paths().openssl_cafile,"
        " aiohttp.connector._SSL_CONTEXT_VERIFIED.cert_store_stats()['x509'],"
        " Client('https://10.0.0.1')._tls().cert_store_stats()['x509'] == ssl.create_default_context().cert_store_stats()['x509'])"
    )
    done = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["True", "0", "True"], done.stderr
