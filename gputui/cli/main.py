"""The `gputui` command: the app by default, and subcommands for scripts."""
from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

from gputui import __version__
from gputui.last_resort import DEBUG_FLAG, last_resort_line
from gputui.cli.output import OutputError

SUBCOMMANDS = ("sim", "report", "verify", "serve")  # the modules below register them


def _top_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gputui",
        description="Where are my GPUs? A live terminal view of a Kubernetes cluster's NVIDIA GPUs.",
    )
    parser.add_argument("--version", action="version", version=f"gputui {__version__}")
    _add_app_args(parser)
    return parser


def _add_app_args(parser: argparse.ArgumentParser) -> None:
    """The app's flags (cli/app.py runs it); here, so that a subcommand's parser does not import the app's module."""
    from gputui.config import add_config_args, add_idle_args  # noqa: PLC0415  (`gputui --version` needs neither)
    from gputui.kube.config import add_connection_args  # noqa: PLC0415

    from gputui.cli.arguments import add_dump_args, add_fleet_args, add_namespace_arg  # noqa: PLC0415

    add_connection_args(parser)
    add_fleet_args(parser)
    add_dump_args(parser)
    add_namespace_arg(parser)
    add_config_args(parser)
    add_idle_args(parser)
    parser.add_argument("--demo", action="store_true", help="start the simulated demo cluster on loopback and open the app on it")
    parser.add_argument(
        "--resource", metavar="NAME", action="append", default=[],
        help="also count this extended resource as a GPU (e.g. amd.com/gpu); repeatable",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _top_parser()
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    from . import sim  # noqa: PLC0415

    sim.add_parser(sub)

    from . import report  # noqa: PLC0415

    report.add_parser(sub)

    from . import verify  # noqa: PLC0415

    verify.add_parser(sub)

    from . import rules  # noqa: PLC0415

    rules.add_parser(sub)

    from . import serve  # noqa: PLC0415

    serve.add_parser(sub, _parse_app_args)
    return parser


class _NotJustTheApp(Exception):
    pass


def _parse_app_args(argv: list[str]) -> argparse.Namespace | None:
    """The app's flags, parsed without importing the subcommands' modules (the simulator,
    the report...): they would delay the app's first frame. None when argv may name a
    subcommand or ask for help, or does not parse: then the full parser decides and words any error."""
    if any(arg in SUBCOMMANDS or arg in ("-h", "--help") for arg in argv):
        return None
    parser = _top_parser()

    def refuse(message: str) -> NoReturn:
        raise _NotJustTheApp(message)

    parser.error = refuse  # type: ignore[method-assign]  # argparse has no hook for this: its own error() exits
    try:
        args, rest = parser.parse_known_args(argv)
    except _NotJustTheApp:
        return None
    if rest:
        return None
    args.command = None
    return args


def _parse_all(argv: list[str]) -> argparse.Namespace:
    """The full parser. Arguments nobody knows after a subcommand are that subcommand's usage
    error (`gputui report --bogus` shows report's usage, as `gputui report -o yaml` does)."""
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest and args.command == "serve":  # `gputui serve --demo`: the app's flags, without the `--`
        after = args.app_args[1:] if args.app_args[:1] == ["--"] else args.app_args
        args.app_args, rest = [*rest, *after], []
    if rest:
        sub = None
        if args.command is not None:
            after = argv[argv.index(args.command) + 1:] if args.command in argv else []
            if all(arg in after for arg in rest):
                sub = next((a.choices.get(args.command) for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        (sub or parser).error(f"unrecognized arguments: {' '.join(rest)}")
    return args


def launch_app(args: argparse.Namespace) -> int:
    from . import app  # noqa: PLC0415

    return app.run(args)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv == ["--version"]:
        print(f"gputui {__version__}")  # before any parser: those import the connection and config modules
        return 0
    debug = DEBUG_FLAG in argv  # anywhere on the line, for every command
    argv = [arg for arg in argv if arg != DEBUG_FLAG]
    if debug:
        _log_to_stderr()
    args = _parse_app_args(argv) or _parse_all(argv)
    args.debug = debug
    run = args.run if args.command is not None else launch_app
    command = f"gputui {args.command}" if args.command else "gputui"
    try:
        return int(run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _quiet_stdout()  # the reader went away (`| head`): stop without a word
        return 128 + 13  # as a process killed by SIGPIPE
    except OutputError as exc:
        _quiet_stdout()
        print(f"{command}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        if debug:
            raise
        print(f"{command}: {last_resort_line(exc)}", file=sys.stderr)
        return 2


def _log_to_stderr() -> None:
    import logging  # noqa: PLC0415

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("gputui")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
