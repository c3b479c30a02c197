"""`gputui` with no subcommand: open the app on a kubeconfig context, on the demo cluster, or on a dump (--from).

Its flags are the `gputui` command's own (cli/main.py defines them); only
`run` loads the UI. The kubeconfig is read and its context chosen before the
app starts (a bad one is one line on stderr, no screen); connecting, and the
client's import, happen in the app, after its first frame.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

from gputui.cli import loop
from gputui.cli.arguments import fleet_contexts, fleet_prometheus, read_dump
from gputui.config import ConfigError, load_config
from gputui.kube.config import ConnectError, impersonation_flags, resolve


def no_terminal() -> str | None:
    """Why the screen cannot be shown here (stdin or stdout not a terminal: cron, a pipe), or None.
    A web driver (TEXTUAL_DRIVER, as textual-serve sets it) brings its own terminal."""
    if os.environ.get("TEXTUAL_DRIVER"):
        return None
    missing = [name for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout)) if stream is None or not stream.isatty()]
    if not missing:
        return None
    return f"the screen needs a terminal, and {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not one; for scripts, use `gputui report`"


def run(args: argparse.Namespace) -> int:
    from gputui.ui.launch import make_app, verify_settings  # noqa: PLC0415

    try:
        config = load_config(args.config)
    except ConfigError as error:
        print(f"gputui: {error}", file=sys.stderr)
        return 2
    if args.dump:
        return _run_dump(args, config)
    if not args.demo:
        try:
            resolve(args.kubeconfig, args.context, impersonation_flags(args))  # cheap: a bad kubeconfig or context fails here, before any screen
        except ConnectError as error:
            print(f"gputui: {error}", file=sys.stderr)
            return 2
    verify = verify_settings(config, args.read_only)
    if not args.demo:
        prometheus = fleet_prometheus(args, config.fleet.prometheus)
        try:
            fleet = fleet_contexts(args, config.fleet.contexts, prometheus=prometheus is not None)
        except ConnectError as error:
            print(f"gputui: {error}", file=sys.stderr)
            return 2
        return _run_app(make_app(args.kubeconfig, args.context, args.resource, verify=verify, metrics=config.model_options(),
                                 idle=config.idle.settings(args.prometheus, args.history), fleet=fleet, max_live=config.fleet.live,
                                 fleet_prometheus=dataclasses.replace(config.fleet, prometheus=prometheus) if prometheus else None,
                                 namespaces=args.namespaces, fallback_namespaces=config.namespaces,
                                 impersonate=impersonation_flags(args)), args.debug)
    from gputui.ui.demo import BackgroundCluster  # noqa: PLC0415

    # The app draws its first frame, then its connector starts the simulator
    # in a thread of its own and waits for it, off the UI's loop.
    demo = BackgroundCluster(scenario="demo")

    def started_demo() -> Any:
        demo.begin()
        return demo.wait_ready()

    try:
        return _run_app(make_app(None, None, args.resource, kubeconfig_from=started_demo, verify=verify, metrics=config.model_options(),
                                 idle=config.idle.settings(args.prometheus, args.history),
                                 namespaces=args.namespaces, fallback_namespaces=config.namespaces,
                                 impersonate=impersonation_flags(args)), args.debug)
    finally:
        demo.stop()


def _run_dump(args: argparse.Namespace, config: Any) -> int:
    """--from: the app on a dump, served as it was dumped (ui/demo.py's dump_app); an unreadable dump is one
    line before any screen."""
    from gputui.ui.demo import dump_app  # noqa: PLC0415

    dump = read_dump(args, "gputui")
    if dump is None:
        return 2
    app, served = dump_app(dump, config, args.resource, namespaces=args.namespaces)
    try:
        return _run_app(app, args.debug)
    finally:
        served.stop()


def _run_app(app: Any, debug: bool) -> int:
    why = no_terminal()  # after the flags, the config and the kubeconfig were found good: their errors come first
    if why:
        print(f"gputui: {why}", file=sys.stderr)
        return 2
    app.show_tracebacks = debug
    log_path = log_to_file() if debug else None  # the screen is drawn on stderr's terminal: lines there are never readable
    loop.run(app.run_async())
    if app.error:
        print(f"gputui: {app.error}", file=sys.stderr)
    if log_path is not None:
        print(f"gputui: debug log in {log_path}", file=sys.stderr)
    return app.return_code or 0


def debug_log_path() -> Path:
    """$XDG_STATE_HOME/gputui/debug.log (~/.local/state by default), as the XDG base directories say."""
    state = os.environ.get("XDG_STATE_HOME") or ""
    base = Path(state) if os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "gputui" / "debug.log"


def log_to_file() -> Path:
    """`--debug` in the app: the gputui logger writes to debug_log_path() (appended, mode 0600: it may
    name the cluster's objects) instead of stderr."""
    import logging  # noqa: PLC0415

    path = debug_log_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)  # a file left by an older run with a wider mode
    handler = logging.StreamHandler(open(fd, "a", encoding="utf-8", buffering=1))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("gputui")
    for old in [h for h in logger.handlers if isinstance(h, logging.StreamHandler) and h.stream in (sys.stderr, sys.__stderr__)]:
        logger.removeHandler(old)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    return path
