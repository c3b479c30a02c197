"""The `gputui` command: the app by default, and subcommands for scripts."""
from __future__ import annotations

import argparse
import sys

from gputui import __version__


SUBCOMMANDS = ("sim", "report", "verify")  # the modules below register them


def _top_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gputui",
        description="Where are my GPUs? A live terminal view of a Kubernetes cluster's NVIDIA GPUs.",
    )
    parser.add_argument("--version", action="version", version=f"gputui {__version__}")
    from . import app  # noqa: PLC0415  (argument definitions only; Textual loads when the app starts)

    app.add_app_args(parser)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = _top_parser()
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    from . import sim  # noqa: PLC0415

    sim.add_parser(sub)

    from . import report  # noqa: PLC0415

    report.add_parser(sub)

    from . import verify  # noqa: PLC0415

    verify.add_parser(sub)
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

    def refuse(message: str) -> None:
        raise _NotJustTheApp(message)

    parser.error = refuse  # type: ignore[method-assign]
    try:
        args, rest = parser.parse_known_args(argv)
    except _NotJustTheApp:
        return None
    if rest:
        return None
    args.command = None
    return args


def launch_app(args: argparse.Namespace) -> int:
    from . import app  # noqa: PLC0415

    return app.run(args)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parse_app_args(argv) or build_parser().parse_args(argv)
    run = args.run if args.command is not None else launch_app
    try:
        return int(run(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
