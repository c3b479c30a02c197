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
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    from .sim import cli as sim_cli  # noqa: PLC0415

    sim_cli.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
