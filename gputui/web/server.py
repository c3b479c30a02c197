"""`gputui serve`'s server: textual-serve's page and app sessions, behind an access token.

textual-serve brings the page's terminal renderer and fonts, and one app process per
websocket. What a server that others can reach needs on top, and textual-serve lacks
(ARCHITECTURE.md says why each is here):

- every request's path starts with the access token (textual-serve's routes are a
  sub-application under /TOKEN/); any other request is refused, 403 and a log line;
- at most `max_sessions` app processes at once;
- an app process ends with its page, whatever state it is in (SIGTERM: the app's own way
  out, which deletes its verification pods; after a grace, SIGKILL to its process group),
  and every one of them ends with the server;
- the page's addresses are the one the browser used (textual-serve writes a single public
  URL into its page), and the page loads nothing from elsewhere (textual-serve's asks a
  font CDN for the font it ships).

This process imports no Textual: the app runs in the child processes.
"""
from __future__ import annotations

import asyncio
import contextlib
import hmac
import itertools
import logging
import os
import shlex
import signal
from pathlib import Path
from typing import Any, Callable

import aiohttp_jinja2
from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

from gputui.last_resort import last_resort_line

log = logging.getLogger("gputui.web")

HERE = Path(__file__).resolve().parent
PAGE = "page.html"
END_GRACE = 5.0  # seconds an app has to end by itself after SIGTERM
REFUSED = "gputui serve: this address needs the access token that `gputui serve` printed\n"


class AppSession(AppService):
    """One page's app process: started without a shell, in a process group of its own."""

    def __init__(self, argv: list[str], number: int, **kwargs: Any) -> None:
        super().__init__(shlex.join(argv), **kwargs)
        self.argv = argv
        self.number = number

    async def _open_app_process(self, width: int = 80, height: int = 24) -> asyncio.subprocess.Process:
        pipe = asyncio.subprocess.PIPE
        self._process = process = await asyncio.create_subprocess_exec(
            *self.argv, stdin=pipe, stdout=pipe, stderr=pipe, env=self._build_environment(width, height), start_new_session=True,
        )
        assert process.stdin is not None
        self._stdin = process.stdin
        return process

    async def end(self, grace: float = END_GRACE) -> int | None:
        """End the app however far it got: SIGTERM, then SIGKILL to its process group. Its exit status."""
        process = self._process
        if process is None:
            return None
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            try:
                async with asyncio.timeout(grace):
                    await process.wait()
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                with contextlib.suppress(TimeoutError):  # asyncio waits for the pipes too, which a leftover child may hold
                    async with asyncio.timeout(grace):
                        await process.wait()
        if self._task is not None:
            with contextlib.suppress(TimeoutError):  # its output, to the pipe's end (a leftover child may hold it)
                async with asyncio.timeout(grace):
                    await self._task
        return process.returncode


class SessionServer(Server):
    """textual-serve's server with a cap on sessions, sessions that end with their page, and our page."""

    def __init__(self, argv: list[str], *, title: str, max_sessions: int, end_grace: float = END_GRACE) -> None:
        super().__init__(shlex.join(argv), title=title, templates_path=HERE)
        self.argv = argv
        self.max_sessions = max_sessions
        self.end_grace = end_grace
        self.sessions: set[AppSession] = set()
        self._endings: set[asyncio.Task[None]] = set()
        self._numbers = itertools.count(1)

    def _full(self, request: web.Request) -> bool:
        if len(self.sessions) < self.max_sessions:
            return False
        log.warning("refused a session for %s: all %d in use (--max-sessions)", request.remote, self.max_sessions)
        return True

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        if self._full(request):
            raise web.HTTPServiceUnavailable(text=f"gputui serve: all {self.max_sessions} sessions are in use; try again later\n")
        router = request.app.router
        scheme = "wss" if request.secure else "ws"
        context = {
            "title": self.title,
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "static_url": str(router["static"].url_for(filename="/")).rstrip("/") + "/",
            "websocket_url": f"{scheme}://{request.host}{router['websocket'].url_for()}",
        }
        response = aiohttp_jinja2.render_template(PAGE, request, context)
        response.headers["Cache-Control"] = "no-store"
        return response

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        if self._full(request):
            raise web.HTTPServiceUnavailable(text="all sessions are in use\n")
        websocket = web.WebSocketResponse(heartbeat=15)
        session = AppSession(
            self.argv, next(self._numbers), write_bytes=websocket.send_bytes, write_str=websocket.send_str,
            close=websocket.close, download_manager=self.download_manager,
        )
        self.sessions.add(session)  # before any await: the cap counts it at once
        log.info("session %d: opened from %s (%d of at most %d)", session.number, request.remote, len(self.sessions), self.max_sessions)
        try:
            await websocket.prepare(request)
            await session.start(to_int(request.query.get("width", "80"), 80), to_int(request.query.get("height", "24"), 24))
            await self._process_messages(websocket, session)
        except Exception as error:  # noqa: BLE001  (a broken session is one log line; the server goes on)
            log.warning("session %d: %s", session.number, last_resort_line(error))
        finally:
            ending = asyncio.create_task(self._end(session))  # a task of its own: a cancelled handler does not stop it
            self._endings.add(ending)
            ending.add_done_callback(self._endings.discard)
            await asyncio.shield(ending)
            await websocket.close()
        return websocket

    async def _end(self, session: AppSession) -> None:
        status = await session.end(self.end_grace)
        self.sessions.discard(session)
        log.info("session %d: closed, %s", session.number, _how_it_ended(status))

    async def end_all(self) -> None:
        await asyncio.gather(*(session.end(self.end_grace) for session in list(self.sessions)), *list(self._endings))

    def initialize_logging(self) -> None:
        """The command's logging stays as `gputui serve` set it (textual-serve's would be Rich's)."""

    async def on_startup(self, app: web.Application) -> None:
        """No banner: `gputui serve` prints the address."""


def _how_it_ended(status: int | None) -> str:
    if status is None:
        return "no app was started"
    if status < 0:
        return f"its app ended by {signal.Signals(-status).name}"
    return f"its app ended (exit status {status})"


async def web_app(server: SessionServer, token: str) -> web.Application:
    """textual-serve's routes under /TOKEN/, and every request's token checked."""

    @web.middleware
    async def require_token(request: web.Request, handler: Any) -> web.StreamResponse:
        path = request.rel_url.raw_path
        if not hmac.compare_digest(path.split("/")[1].encode(), token.encode()):
            log.warning("refused %s from %s: the access token is missing or wrong", request.method, request.remote)
            raise web.HTTPForbidden(text=REFUSED)
        if path == f"/{token}":
            raise web.HTTPFound(f"/{token}/")
        return await handler(request)

    root = web.Application(middlewares=[require_token])
    root.add_subapp(f"/{token}", await server._make_app())
    root.on_response_prepare.append(_cautious_headers)
    return root


async def _cautious_headers(_request: web.Request, response: web.StreamResponse) -> None:
    response.headers.setdefault("Referrer-Policy", "no-referrer")  # the token is in the address
    response.headers.setdefault("X-Frame-Options", "DENY")  # no other site's page types keys into ours


async def serve(server: SessionServer, token: str, host: str, port: int, ssl_context: Any, announce: Callable[[int], None]) -> None:
    """Serve until SIGINT, SIGTERM or SIGHUP; then end every session. OSError when the port cannot be had."""
    runner = web.AppRunner(await web_app(server, token), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
        await site.start()
        announce(runner.addresses[0][1])
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is not signal.SIG_IGN:  # under nohup, a hangup stays ignored
                loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        await server.end_all()
        await runner.cleanup()
