"""`gputui report`: list the cluster once, print its GPUs, exit.

Exit status: 0 when no node has a problem, 1 when some do, 2 on usage or
connection errors, or when nodes or pods cannot be listed (one line on stderr,
no traceback). An optional part that cannot be read (events, the GPU stack's
kinds, DCGM metrics) is named by a warning line on stderr and in the JSON's
`missing`; the report prints what it has.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from gputui.cli import loop
from gputui.cli.arguments import (
    add_dump_args,
    add_fleet_args,
    add_namespace_arg,
    fleet_contexts,
    fleet_prometheus,
    plugins_end_with_us,
    read_dump,
    whole_number,
    with_subcommand_defaults,
)
from gputui.cli.output import writing_stdout
from gputui.config import ConfigError, add_idle_args, load_config
from gputui.kube.config import ConnectError, add_connection_args, impersonation_flags


DEFAULT_WAIT = 10  # seconds: an API server's restart, for a report run from cron


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="print the cluster's GPU nodes, allocation and problems once, then exit",
        description="List the cluster once and print its GPUs: the GPU stack, per node capacity, allocatable, "
        "allocated and free, the stack's components, DCGM readings, problems, and the pods holding or waiting for GPUs. "
        "Exit 0: no problem; 1: some node (or the GPU Operator) has one; 2: usage or connection error.",
    )
    parser.add_argument("-o", "--output", choices=("table", "json", "tsv"), default="table", help="output format (default: table)")
    add_connection_args(parser, subcommand=True)
    add_fleet_args(parser, subcommand=True)
    add_dump_args(parser, subcommand=True)
    parser.add_argument("--cluster-timeout", metavar="SECONDS", type=whole_number(1), default=30,
                        help="with --contexts/--all-contexts: give up on a cluster not read within this (default 30)")
    parser.add_argument("--wait", metavar="SECONDS", type=whole_number(0), default=DEFAULT_WAIT,
                        help="go on trying a server that refuses, resets or times out (a restart) for this long, each try "
                             f"said on stderr, before exit 2 (default {DEFAULT_WAIT}; 0: at once)")
    add_namespace_arg(parser, subcommand=True)
    parser.add_argument(
        "--resource", metavar="NAME", action="append", default=[],
        help="count this extended resource as a GPU too (repeatable), e.g. amd.com/gpu",
    )
    parser.add_argument(  # the app's --config (given before `report`, it is kept)
        "--config", metavar="PATH", default=argparse.SUPPRESS,
        help="config file whose [metrics] settings pace the DCGM exporter reads and whose [idle] settings the idle "
        "GPUs follow (default: $GPUTUI_CONFIG, then $XDG_CONFIG_HOME/gputui/config.toml or ~/.config/gputui/config.toml)",
    )
    add_idle_args(parser, subcommand=True)
    usage = parser.add_argument_group("GPU-hours from Prometheus (--usage)")
    usage.add_argument("--usage", action="store_true",
                       help="print GPU-hours per group (allocated, used, idle, peak) over --since from the Prometheus that "
                            "scrapes kube-state-metrics and the DCGM exporters (--prometheus), instead of the cluster's state")
    usage.add_argument("--since", metavar="DURATION", default="7d", help="with --usage: the window, e.g. 30d, 12h (default 7d)")
    usage.add_argument("--by", metavar="GROUP", default="namespace",
                       help="with --usage: namespace, node, model or label:KEY (a pod label kube-state-metrics exports) (default namespace)")
    parser.set_defaults(run=run)


def given_namespaces(args: argparse.Namespace) -> tuple[str, ...]:
    """-n, before or after `report` (absent when the parser is report's alone)."""
    return tuple(getattr(args, "namespaces", None) or ())


def run(args: argparse.Namespace) -> int:
    with plugins_end_with_us():  # SIGTERM, SIGHUP: no exec plugin left running
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    args = with_subcommand_defaults(args)
    for name in args.resource:
        if "/" not in name:
            print(f"gputui report: --resource {name}: expected a domain-prefixed resource name such as amd.com/gpu", file=sys.stderr)
            return 2
    try:
        config = load_config(getattr(args, "config", None))
    except ConfigError as exc:
        print(f"gputui report: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "usage", False):
        return run_usage(args, config)
    if args.dump:
        return run_dump(args, config)
    prometheus = fleet_prometheus(args, config.fleet.prometheus)
    try:
        fleet = fleet_contexts(args, config.fleet.contexts, prometheus=prometheus is not None)
    except ConnectError as exc:
        print(f"gputui report: {exc}", file=sys.stderr)
        return 2
    if fleet is not None and prometheus is not None:
        return run_prometheus_fleet(args, config, prometheus, fleet)
    if fleet is not None:
        return run_fleet(args, config, fleet)
    from gputui.report.contract import collect  # noqa: PLC0415  (the model loads once the flags are good)

    try:
        data, created = loop.run(collect(
            args.kubeconfig, args.context, given_namespaces(args), frozenset(args.resource),
            metrics=config.model_options(), exec_timeout=config.exec_timeout, configured_namespaces=config.namespaces,
            idle=idle_settings(args, config), wait=args.wait, impersonate=impersonation_flags(args),
        ))
    except ConnectError as exc:
        print(f"gputui report: {exc}", file=sys.stderr)
        return 2
    return write_report(args.output, data, created)


def run_usage(args: argparse.Namespace, config: Any) -> int:
    """--usage: GPU-hours per group from Prometheus; one line and exit 2 when it cannot give them."""
    from gputui.kube.usage import UsageError, UsageSettings, parse_by, parse_since  # noqa: PLC0415
    from gputui.report.usage import NO_PROMETHEUS, collect_usage, write_usage  # noqa: PLC0415

    where = idle_settings(args, config).prometheus
    try:
        parse_by(args.by)
        settings = UsageSettings(window=parse_since(args.since), by=args.by, threshold=config.idle.threshold)
    except ValueError as exc:
        print(f"gputui report: {exc}", file=sys.stderr)
        return 2
    if not where:
        print(f"gputui report: {NO_PROMETHEUS}", file=sys.stderr)
        return 2
    try:
        view = loop.run(collect_usage(where, settings, kubeconfig=args.kubeconfig, context=args.context,
                                         exec_timeout=config.exec_timeout, impersonate=impersonation_flags(args)))
    except (ConnectError, UsageError) as exc:
        print(f"gputui report: {exc}", file=sys.stderr)
        return 2
    with writing_stdout():
        write_usage(view, sys.stdout, args.output)
    return 0


def idle_settings(args: argparse.Namespace, config: Any) -> Any:
    """The config file's [idle], with --prometheus and --history (given before or after `report`)."""
    return config.idle.settings(getattr(args, "prometheus", None), getattr(args, "history", None))


def write_report(output: str, data: dict[str, Any], created: Any) -> int:
    """Print the report in the format asked for; its exit status."""
    from gputui.report.contract import has_problems  # noqa: PLC0415
    from gputui.report.formats import write_json, write_table, write_tsv  # noqa: PLC0415

    write = {"json": write_json, "tsv": write_tsv, "table": write_table}[output]
    with writing_stdout():
        write(data, sys.stdout, created)
    return 1 if has_problems(data) else 0


def run_dump(args: argparse.Namespace, config: Any) -> int:
    """--from: the dump served on loopback as it was dumped (nothing runs, no metrics), read through the
    same model and client as a live cluster."""
    dump = read_dump(args, "gputui report")
    if dump is None:
        return 2
    from gputui.kube.quantities import dump_taken  # noqa: PLC0415
    from gputui.report.contract import collect  # noqa: PLC0415
    from gputui.sim.scenarios.dump import NOT_IN_DUMP  # noqa: PLC0415  (the simulator loads only for --from)

    print(f"gputui report: {dump.context}: {dump.summary()}; {dump_taken(dump.loaded.objects)}", file=sys.stderr)

    async def collect_dump() -> Any:
        async with dump.served() as sim:
            return await collect(str(sim.kubeconfig_path), None, given_namespaces(args), frozenset(args.resource),
                                 metrics={**config.model_options(), "metrics_unavailable": NOT_IN_DUMP})

    try:
        data, created = loop.run(collect_dump())
    except (ConnectError, OSError) as exc:
        print(f"gputui report: {dump.context}: {exc}", file=sys.stderr)
        return 2
    return write_report(args.output, data, created)


def run_prometheus_fleet(args: argparse.Namespace, config: Any, url: str, contexts: list[str]) -> int:
    """Every cluster's row from the fleet's Prometheus; exit 2 when it does not answer."""
    from gputui.kube.fleet_prometheus import FleetQueries  # noqa: PLC0415
    from gputui.report.fleet_prometheus import collect_prometheus_fleet, prometheus_fleet_exit, write_prometheus_fleet  # noqa: PLC0415

    queries = FleetQueries(config.fleet.cluster_label, frozenset(args.resource))
    fleet = loop.run(collect_prometheus_fleet(url, queries, contexts, config.fleet.cluster_contexts))
    if fleet["error"]:
        print(f"gputui report: {fleet['error']}", file=sys.stderr)
        return 2
    with writing_stdout():
        write_prometheus_fleet(fleet, sys.stdout, args.output)
    return prometheus_fleet_exit(fleet)


def run_fleet(args: argparse.Namespace, config: Any, contexts: list[str]) -> int:
    """One report per context, read at once; exit status the worst of them."""
    from gputui.report.fleet import collect_fleet, fleet_exit, write_fleet  # noqa: PLC0415

    fleet, created = loop.run(collect_fleet(
        args.kubeconfig, contexts, timeout=args.cluster_timeout, namespaces=given_namespaces(args), extra=frozenset(args.resource),
        metrics=config.model_options(), exec_timeout=config.exec_timeout, configured_namespaces=config.namespaces,
        idle=idle_settings(args, config), impersonate=impersonation_flags(args),
    ))
    with writing_stdout():
        write_fleet(fleet, sys.stdout, created, args.output)
    return fleet_exit(fleet)
