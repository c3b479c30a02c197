"""`gputui report`: list the cluster once, print its GPUs, exit.

Exit status: 0 when no node has a problem, 1 when some do, 2 on usage or
connection errors, or when nodes or pods cannot be listed (one line on stderr,
no traceback). An optional part that cannot be read (events, the GPU stack's
kinds, DCGM metrics) is named by a warning line on stderr and in the JSON's
`missing`; the report prints what it has.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from gputui.config import ConfigError, load_config
from gputui.kube.config import ConnectError, add_connection_args


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="print the cluster's GPU nodes, allocation and problems once, then exit",
        description="List the cluster once and print its GPUs: the GPU stack, per node capacity, allocatable, "
        "allocated and free, the stack's components, DCGM readings, problems, and the pods holding or waiting for GPUs. "
        "Exit 0: no problem; 1: some node (or the GPU Operator) has one; 2: usage or connection error.",
    )
    parser.add_argument("-o", "--output", choices=("table", "json", "tsv"), default="table", help="output format (default: table)")
    add_connection_args(parser)
    parser.add_argument("-n", "--namespace", metavar="NAMESPACE", help="list only the GPU pods of this namespace")
    parser.add_argument(
        "--resource", metavar="NAME", action="append", default=[],
        help="count this extended resource as a GPU too (repeatable), e.g. amd.com/gpu",
    )
    parser.add_argument(  # the app's --config (given before `report`, it is kept)
        "--config", metavar="PATH", default=argparse.SUPPRESS,
        help="config file whose [metrics] settings pace the DCGM exporter reads (default: $GPUTUI_CONFIG, "
        "then $XDG_CONFIG_HOME/gputui/config.toml or ~/.config/gputui/config.toml)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    for name in args.resource:
        if "/" not in name:
            print(f"gputui report: --resource {name}: expected a domain-prefixed resource name such as amd.com/gpu", file=sys.stderr)
            return 2
    try:
        config = load_config(getattr(args, "config", None))
    except ConfigError as exc:
        print(f"gputui report: {exc}", file=sys.stderr)
        return 2
    from gputui.report.contract import collect, has_problems  # noqa: PLC0415  (the model loads once the flags are good)
    from gputui.report.formats import write_json, write_table, write_tsv  # noqa: PLC0415

    try:
        data, created = asyncio.run(collect(
            args.kubeconfig, args.context, args.namespace, frozenset(args.resource),
            metrics=config.metrics.model_options(), exec_timeout=config.exec_timeout,
        ))
    except ConnectError as exc:
        print(f"gputui report: {exc}", file=sys.stderr)
        return 2
    write = {"json": write_json, "tsv": write_tsv, "table": write_table}[args.output]
    write(data, sys.stdout, created)
    return 1 if has_problems(data) else 0
