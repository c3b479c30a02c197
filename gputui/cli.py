"""The `gputui` command: the app by default, and subcommands for scripts."""
from __future__ import annotations

import argparse
import sys

from . import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gputui",
        description="Where are my GPUs? A live terminal view of a Kubernetes cluster's NVIDIA GPUs.",
    )
    parser.add_argument("--version", action="version", version=f"gputui {__version__}")
    from .ui import launch  # noqa: PLC0415  (argument definitions only; Textual loads when the app starts)

    launch.add_app_args(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    from .sim import cli as sim_cli  # noqa: PLC0415

    sim_cli.add_parser(sub)

    from . import report  # noqa: PLC0415

    report.add_parser(sub)

    from . import verify_cli  # noqa: PLC0415

    verify_cli.add_parser(sub)
    return parser


def launch_app(args: argparse.Namespace) -> int:
    from .ui import launch  # noqa: PLC0415

    return launch.run(args)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run = args.run if args.command is not None else launch_app
    try:
        return int(run(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
