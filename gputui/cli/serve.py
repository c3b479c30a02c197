"""`gputui serve`: the app's screens in a browser (gputui/web/), safe by default.

It listens on loopback unless --host says otherwise; the printed address holds a random
access token that every request needs; beyond loopback, plain HTTP needs --insecure-http;
the browser's sessions are read-only unless --allow-verify. Each page runs `gputui APP ARGS`
in a process of its own, as the server's user: the kubeconfig and credentials stay on this
machine, and the browser gets the screen.
"""
from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import secrets
import shlex
import socket
import ssl
import sys
from pathlib import Path
from typing import Callable, TextIO

from gputui.cli import loop
from gputui.cli.arguments import whole_number

DEFAULT_PORT = 8765


def add_parser(subparsers: argparse._SubParsersAction, parse_app: Callable[[list[str]], argparse.Namespace | None]) -> None:
    """parse_app: the app's own parser (cli/main.py's), for the flags after `--`; None when they are not the app's."""
    parser = subparsers.add_parser(
        "serve", help="show the app in web browsers: one app process per page, behind an access token",
        description=(
            "Serve the app to web browsers: each page runs `gputui APP ARGS` on this machine, as your user, and shows its screen. "
            "The printed address carries a random access token that every request needs. "
            "Sessions are read-only (no verification pods) unless --allow-verify."
        ),
        epilog="examples: gputui serve --demo;  gputui serve --port 9000 -- --context prod -n ml  (the app's flags that take a value go after --)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    parser.add_argument("--port", type=whole_number(0, 65535, "a port number"), default=DEFAULT_PORT,
                        help=f"port to listen on (default: {DEFAULT_PORT}; 0 picks a free one)")
    parser.add_argument("--max-sessions", type=whole_number(1), default=8, metavar="N", help="at most N pages, each an app process, at once (default: 8)")
    parser.add_argument("--certfile", type=Path, metavar="PEM", help="serve HTTPS with this certificate (chain)")
    parser.add_argument("--keyfile", type=Path, metavar="PEM", help="the certificate's private key, when not in --certfile")
    parser.add_argument("--insecure-http", action="store_true",
                        help="serve plain HTTP beyond loopback (the access token and every screen cross the network readable)")
    parser.add_argument("--allow-verify", action="store_true", help="let the browser's sessions create verification pods (default: read-only)")
    parser.add_argument("app_args", nargs=argparse.REMAINDER, metavar="-- APP ARGS",
                        help="the app's own flags: --context, --all-contexts, --demo, --from DUMP, -n...")
    parser.set_defaults(run=run, parser=parser, parse_app=parse_app)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve beyond this machine


def app_argv(app_args: list[str], allow_verify: bool) -> list[str]:
    """Each session's command line; read-only unless verification is allowed (last, so that it wins)."""
    return [sys.executable, "-m", "gputui", *app_args, *([] if allow_verify else ["--read-only"])]


def red(text: str, stream: TextIO) -> str:
    if os.environ.get("NO_COLOR") or not stream.isatty():
        return text
    return f"\x1b[31m{text}\x1b[0m"


def run(args: argparse.Namespace) -> int:
    app_args = args.app_args[1:] if args.app_args[:1] == ["--"] else args.app_args
    argv = app_argv(app_args, args.allow_verify)
    app = args.parse_app(argv[3:])
    if app is None:
        return _fail(f"not the app's own flags: {shlex.join(app_args)} (`gputui --help` lists them)")
    if not (app.demo or app.dump):
        from gputui.kube.config import ConnectError, resolve  # noqa: PLC0415

        try:
            resolve(app.kubeconfig, app.context)  # a bad kubeconfig or context is one line now, not a blank page per browser
        except ConnectError as error:
            return _fail(str(error))
    if args.keyfile and not args.certfile:
        args.parser.error("--keyfile needs --certfile")
    loopback = is_loopback(args.host)
    if not loopback and not args.certfile and not args.insecure_http:
        return _fail(f"--host {args.host} serves beyond this machine: give --certfile (HTTPS), or --insecure-http to send the "
                     "access token and every screen in clear")
    ssl_context = None
    if args.certfile:
        ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        files = f"{args.certfile} and {args.keyfile}" if args.keyfile else str(args.certfile)
        try:
            ssl_context.load_cert_chain(args.certfile, args.keyfile)
        except ssl.SSLError:  # before OSError, its base: the files were read
            return _fail(f"cannot use {files} for HTTPS: not a PEM certificate and its private key")
        except OSError as error:
            return _fail(f"cannot use {files} for HTTPS: {error.strerror or error}")

    if not loopback and not ssl_context:
        warning = f"gputui serve: plain HTTP on {args.host} (--insecure-http): the access token and every screen cross the network readable"
        print(red(warning, sys.stderr), file=sys.stderr, flush=True)

    from gputui.web.server import SessionServer, serve  # noqa: PLC0415

    _log_to_stderr()
    token = secrets.token_urlsafe(32)
    shown = shlex.join(["gputui", *app_args])
    server = SessionServer(argv, title=shown, max_sessions=args.max_sessions)

    def announce(port: int) -> None:
        url = f"{'https' if ssl_context else 'http'}://{_url_host(args.host)}:{port}/{token}/"
        print(f"gputui serve: `{shown}` in a browser, at most {args.max_sessions} at once, at\n{url}", flush=True)
        if not args.allow_verify:
            print("Sessions are read-only: no verification pods (--allow-verify allows them).", flush=True)
        print("Ctrl+C stops the server and every session.", flush=True)

    try:
        loop.run(serve(server, token, args.host, args.port, ssl_context, announce))
    except OSError as error:
        return _fail(f"cannot listen on {args.host} port {args.port}: {error.strerror or error}")
    return 0


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", "::", ""):  # noqa: S104  (every address: the URL names this machine)
        return socket.getfqdn()
    return f"[{host}]" if ":" in host else host


def _log_to_stderr() -> None:
    """The server's log (sessions opened and closed, refusals) on stderr, and the app processes' own errors."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    logger = logging.getLogger("gputui.web")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # not twice under --debug
    quiet = logging.getLogger("textual-serve")  # its one word, "failed to start", is wrong for a page closed early;
    quiet.addHandler(logging.NullHandler())  # a failing app's own stderr still reaches ours, and our log says how it ended
    quiet.propagate = False


def _fail(message: str) -> int:
    print(f"gputui serve: {message}", file=sys.stderr)
    return 2

