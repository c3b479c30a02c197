"""`gputui serve` without a browser: the access token, the session cap, sessions that end, safe defaults.

The server runs in-process on loopback (aiohttp's test server) with a stand-in app: a
process that speaks textual-serve's first line and waits, so that no test pays for Textual.
"""
from __future__ import annotations

import asyncio
import io
import logging
import signal
import subprocess
import sys

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from gputui.cli import main as cli_main
from gputui.cli import serve as cli_serve
from gputui.sim.apiserver.tls import Authority
from gputui.web.server import AppSession, SessionServer, web_app
from tests.web.browser import serve_demo

TOKEN = "test-token-0123456789"
STAND_IN = [sys.executable, "-c", "import sys; print('__GANGLION__', flush=True); sys.stdin.buffer.read()"]
DEAF = "import pathlib, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); pathlib.Path(sys.argv[1]).touch(); time.sleep(60)"


async def client_for(server: SessionServer) -> TestClient:
    client = TestClient(TestServer(await web_app(server, TOKEN), host="127.0.0.1"))
    await client.start_server()
    return client


async def test_every_request_needs_the_token(caplog):
    client = await client_for(SessionServer(STAND_IN, title="t", max_sessions=2))
    try:
        with caplog.at_level(logging.INFO, logger="gputui.web"):
            for path in ("/", "/favicon.ico", "/wrong-token/", f"/{TOKEN[:-1]}/", f"/{TOKEN}x/", f"/x/{TOKEN}/", f"/{TOKEN[:-1]}/static/js/textual.js"):
                response = await client.get(path, allow_redirects=False)
                assert response.status == 403, path
                assert "access token" in await response.text()
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await client.ws_connect("/wrong-token/ws")
            assert refused.value.status == 403
        refusals = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused")]
        assert len(refusals) == 8 and refusals[0] == "refused GET from 127.0.0.1: the access token is missing or wrong"
        assert not any(TOKEN[:8] in line for line in refusals)  # neither the token nor a guess at it is logged

        page = await client.get(f"/{TOKEN}/")
        assert page.status == 200
        html = await page.text()
        assert f'data-session-websocket-url="ws://127.0.0.1:{client.port}/{TOKEN}/ws"' in html
        assert "http" not in html.replace(f"ws://127.0.0.1:{client.port}", "")  # nothing loaded from elsewhere (no font CDN)
        assert page.headers["Referrer-Policy"] == "no-referrer"
        for asset in ("js/textual.js", "css/xterm.css", "fonts/RobotoMono-VariableFont_wght.ttf"):
            assert f"/{TOKEN}/static/{asset}" in html
            assert (await client.get(f"/{TOKEN}/static/{asset}")).status == 200, asset
        assert (await client.get(f"/{TOKEN}", allow_redirects=False)).headers["Location"] == f"/{TOKEN}/"
    finally:
        await client.close()


async def test_at_most_max_sessions_and_each_ends_with_its_page():
    server = SessionServer(STAND_IN, title="t", max_sessions=1)
    client = await client_for(server)
    try:
        first = await client.ws_connect(f"/{TOKEN}/ws?width=80&height=24")
        for _ in range(100):
            if server.sessions and next(iter(server.sessions))._process is not None:
                break
            await asyncio.sleep(0.02)
        (session,) = server.sessions
        process = session._process
        assert process is not None and process.returncode is None
        assert (await client.get(f"/{TOKEN}/")).status == 503
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await client.ws_connect(f"/{TOKEN}/ws")
        assert refused.value.status == 503

        await first.close()
        await asyncio.wait_for(process.wait(), 10)
        for _ in range(100):
            if not server.sessions:
                break
            await asyncio.sleep(0.02)
        assert not server.sessions
        assert process.returncode == -signal.SIGTERM
        second = await client.ws_connect(f"/{TOKEN}/ws")  # the place is free again
        await second.close()
    finally:
        await client.close()
        await server.end_all()


async def test_the_server_ends_every_session_when_it_stops():
    server = SessionServer(STAND_IN, title="t", max_sessions=4)
    client = await client_for(server)
    try:
        sockets = [await client.ws_connect(f"/{TOKEN}/ws") for _ in range(3)]
        for _ in range(100):
            if len(server.sessions) == 3 and all(s._process is not None for s in server.sessions):
                break
            await asyncio.sleep(0.02)
        processes = [s._process for s in server.sessions]
        assert len(processes) == 3
        await server.end_all()
        assert all(p is not None and p.returncode is not None for p in processes)
        for ws in sockets:
            await ws.close()
    finally:
        await client.close()


async def test_an_app_that_ignores_sigterm_is_killed_after_the_grace(tmp_path):
    deaf = tmp_path / "deaf"
    session = AppSession([sys.executable, "-c", DEAF, str(deaf)], 1, write_bytes=_ignore, write_str=_ignore, close=_nothing, download_manager=None)
    await session.start(80, 24)
    for _ in range(500):
        if deaf.exists():
            break
        await asyncio.sleep(0.02)
    assert deaf.exists()  # SIGTERM is ignored from now on
    assert await session.end(grace=0.2) == -signal.SIGKILL


async def _ignore(_data) -> None:
    pass


async def _nothing() -> None:
    pass


def test_loopback_by_default():
    args = cli_main.build_parser().parse_args(["serve", "--", "--demo"])
    assert args.host == "127.0.0.1" and args.port == 8765 and args.max_sessions == 8
    assert cli_serve.is_loopback("127.0.0.1") and cli_serve.is_loopback("::1") and cli_serve.is_loopback("localhost")
    assert not cli_serve.is_loopback("0.0.0.0") and not cli_serve.is_loopback("gpu-box.example") and not cli_serve.is_loopback("10.0.0.5")


def test_beyond_loopback_without_tls_is_refused(capsys):
    assert cli_main.main(["serve", "--host", "0.0.0.0", "--", "--demo"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gputui serve: --host 0.0.0.0 serves beyond this machine: give --certfile")
    assert "--insecure-http" in err


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_plain_http_warning_is_red_unless_no_color(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert cli_serve.red("plain HTTP", _Tty()) == "\x1b[31mplain HTTP\x1b[0m"
    assert cli_serve.red("plain HTTP", io.StringIO()) == "plain HTTP"
    monkeypatch.setenv("NO_COLOR", "1")
    assert cli_serve.red("plain HTTP", _Tty()) == "plain HTTP"


def test_sessions_are_read_only_unless_verification_is_allowed():
    def parsed(app_args: list[str], allow_verify: bool):
        argv = cli_serve.app_argv(app_args, allow_verify)
        assert argv[:3] == [sys.executable, "-m", "gputui"]
        return cli_main._parse_app_args(argv[3:])

    assert parsed(["--demo"], False).read_only is True
    assert parsed(["--demo", "--no-read-only"], False).read_only is True  # the server's word wins
    assert parsed(["--demo"], True).read_only is None  # the config file decides, as in a terminal
    assert parsed(["--demo", "--read-only"], True).read_only is True


def test_the_apps_flags_without_the_separator():
    parsed = cli_main._parse_all(["serve", "--all-contexts", "--port", "0", "-n", "ml"])
    assert parsed.port == 0 and parsed.app_args == ["--all-contexts", "-n", "ml"]
    parsed = cli_main._parse_all(["serve", "--demo", "--", "--read-only"])
    assert parsed.app_args == ["--demo", "--read-only"]


def test_flags_that_are_not_the_apps_are_one_line(capsys):
    assert cli_main.main(["serve", "--bogus"]) == 2
    assert capsys.readouterr().err == "gputui serve: not the app's own flags: --bogus (`gputui --help` lists them)\n"
    assert cli_main.main(["serve", "--", "--bogus"]) == 2
    assert capsys.readouterr().err == "gputui serve: not the app's own flags: --bogus (`gputui --help` lists them)\n"
    assert cli_main.main(["serve", "--", "--context", "nope", "--kubeconfig", "/nonexistent/kubeconfig"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gputui serve: ") and len(err.splitlines()) == 1


async def test_https_with_a_certificate(tmp_path):
    authority = Authority.create()
    cert, key = authority.issue_server(["127.0.0.1"])
    (tmp_path / "cert.pem").write_bytes(cert)
    (tmp_path / "key.pem").write_bytes(key)
    server, url = serve_demo(subprocess.DEVNULL, flags=("--certfile", str(tmp_path / "cert.pem"), "--keyfile", str(tmp_path / "key.pem")))
    try:
        assert url.startswith("https://127.0.0.1:")
        async with aiohttp.ClientSession() as session:
            async with session.get(url, ssl=authority.client_context()) as page:
                assert page.status == 200
                assert f'data-session-websocket-url="wss://{url.split("/")[2]}/' in await page.text()
            with pytest.raises(aiohttp.ClientError):
                await session.get(url.replace("https:", "http:"))  # no plain HTTP on that port
    finally:
        server.terminate()
        server.wait(30)


def test_a_certificate_that_cannot_be_read_is_one_line(capsys, tmp_path):
    (tmp_path / "cert.pem").write_text("not a certificate")
    assert cli_main.main(["serve", "--certfile", str(tmp_path / "cert.pem"), "--", "--demo"]) == 2
    err = capsys.readouterr().err
    assert err == f"gputui serve: cannot use {tmp_path / 'cert.pem'} for HTTPS: not a PEM certificate and its private key\n"
