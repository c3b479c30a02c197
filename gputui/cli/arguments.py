"""Argument types shared by the commands' parsers."""
from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any, Callable, Iterator


def whole_number(minimum: int, maximum: int | None = None, what: str = "") -> Callable[[str], int]:
    """An argparse type: a whole number from minimum (to maximum); `what` names it in the error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}: {text}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"not {what or f'at most {maximum}'}: {text}")
        return value

    return parse


@contextlib.contextmanager
def plugins_end_with_us() -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP end the command as they did (killed by the signal), after
    killing the exec credential plugins running (kube/credentials.py): each runs in a session of its own,
    which nothing else would end. In the main thread only; a signal ignored (nohup) stays ignored."""
    import signal  # noqa: PLC0415
    import threading  # noqa: PLC0415

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from gputui.kube.credentials import kill_plugins  # noqa: PLC0415  (the commands that connect load it anyway)

    def end(sig: int, _frame: Any) -> None:
        kill_plugins()
        signal.signal(sig, signal.SIG_DFL)
        signal.raise_signal(sig)

    previous = {sig: signal.signal(sig, end) for sig in (signal.SIGTERM, signal.SIGHUP) if signal.getsignal(sig) is signal.SIG_DFL}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def add_namespace_arg(parser: argparse.ArgumentParser, *, subcommand: bool = False) -> None:
    """-n/--namespace NS, repeatable, into `namespaces`. A subcommand's copy leaves the main parser's
    value alone when not given (`gputui -n ml report` works too)."""
    parser.add_argument(
        "-n", "--namespace", dest="namespaces", metavar="NAMESPACE", action="append", default=argparse.SUPPRESS if subcommand else [],
        help="show only this namespace's GPU pods (repeatable; node figures still count every pod gputui may read); "
        "where to read pods when they cannot be listed cluster-wide (default: the context's namespace, then the config file's namespaces)",
    )


SUBCOMMAND_DEFAULTS = {"all_contexts": False, "contexts": None, "fleet_prometheus": None, "dump": None}  # of the flags below, for a subcommand's copy


def add_fleet_args(parser: argparse.ArgumentParser, *, subcommand: bool = False) -> None:
    """--all-contexts / --contexts: several clusters at once (the Fleet screen, or a report per cluster).
    subcommand: as kube.config.add_connection_args (`gputui --all-contexts report` reports every context)."""
    parser.add_argument("--all-contexts", action="store_true", default=argparse.SUPPRESS if subcommand else False,
                        help="every context of the kubeconfig, as a fleet")
    parser.add_argument("--contexts", metavar="A,B,...", default=argparse.SUPPRESS if subcommand else None,
                        help="these contexts as a fleet (names or globs such as 'prod-*')")
    parser.add_argument("--fleet-prometheus", metavar="URL", type=_fleet_prometheus_url, default=argparse.SUPPRESS if subcommand else None,
                        help="the fleet's rows from this Prometheus (an http(s):// URL holding every cluster's kube-state-metrics "
                             "and DCGM series, each with its cluster label), not from watches; \"\" for none "
                             "(default: the config file's [fleet] prometheus)")


def _fleet_prometheus_url(text: str) -> str:
    from gputui.config import fleet_prometheus_url  # noqa: PLC0415

    try:
        return fleet_prometheus_url(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def fleet_prometheus(args: argparse.Namespace, configured: str | None) -> str | None:
    """The fleet's Prometheus: --fleet-prometheus where given ("" for none), else the config file's."""
    given = getattr(args, "fleet_prometheus", None)
    return configured if given is None else given or None


def with_subcommand_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """args with the shared flags that neither the main parser nor the subcommand's set (a subcommand's parser
    used alone) at their defaults: the connection's, the fleet's and --from."""
    from gputui.kube.config import with_connection_defaults  # noqa: PLC0415

    for name, value in SUBCOMMAND_DEFAULTS.items():
        if not hasattr(args, name):
            setattr(args, name, value)
    return with_connection_defaults(args)


def fleet_contexts(args: argparse.Namespace, configured: list[str] | tuple[str, ...] = (), prometheus: bool = False) -> list[str] | None:
    """The contexts to open as a fleet, in kubeconfig order: --all-contexts, --contexts, else the
    config file's `fleet` list unless --context picks one cluster; None: one cluster. With a fleet's
    Prometheus (`prometheus`) and no --context, a fleet whatever is given: every context, to open its clusters.
    ConnectError (gputui.kube.config) for an unreadable kubeconfig, a name it lacks or a clash of flags."""
    from gputui.kube.config import ConnectError, context_names  # noqa: PLC0415
    from gputui.kube.fleet import FleetError, choose_contexts  # noqa: PLC0415

    wanted: list[str] | None = None
    if args.all_contexts:
        wanted = ["*"]
    elif args.contexts:
        wanted = [name.strip() for name in args.contexts.split(",") if name.strip()]
    if wanted is not None and args.context:
        raise ConnectError("--context picks one cluster; --contexts and --all-contexts a fleet: give one of them")
    if wanted is None and configured and not args.context:
        wanted = list(configured)
    if wanted is None and prometheus and not args.context:
        return context_names(args.kubeconfig)
    if wanted is None:
        return None
    try:
        return choose_contexts(context_names(args.kubeconfig), wanted)
    except FleetError as error:
        raise ConnectError(str(error)) from None


def add_dump_args(parser: argparse.ArgumentParser, *, subcommand: bool = False) -> None:
    """--from: a dump of a cluster instead of a live one (gputui.sim.scenarios.dump serves it as it was)."""
    parser.add_argument(
        "--from", dest="dump", metavar="PATH", nargs="+", action="extend", default=argparse.SUPPRESS if subcommand else None,
        help="diagnose a dump instead of a cluster, offline and read-only: a YAML or JSON List as `kubectl get ... -A "
             "-o yaml` prints it, several files, or a directory of them such as the GPU Operator's must-gather writes "
             "(repeatable; a dump has no DCGM metrics)",
    )


def _dump_clash(args: argparse.Namespace) -> str | None:
    """Why --from cannot go with the other flags given (a dump is not a live cluster), or None."""
    flags = (("--kubeconfig", "kubeconfig"), ("--context", "context"), ("--contexts", "contexts"),
             ("--all-contexts", "all_contexts"), ("--demo", "demo"), ("--prometheus", "prometheus"), ("--as", "as_user"),
             ("--as-group", "as_groups"), ("--as-uid", "as_uid"))
    given = [flag for flag, name in flags if getattr(args, name, None)]
    if not getattr(args, "dump", None) or not given:
        return None
    return f"--from reads a dump, not a cluster: it does not go with {', '.join(given)}"


def read_dump(args: argparse.Namespace, program: str) -> Any:
    """--from's dump (a gputui.sim.scenarios.dump.Dump); None once one line on stderr has said why not (exit 2):
    flags that do not go with a dump, or a dump that cannot be read."""
    clash = _dump_clash(args)
    if clash:
        print(f"{program}: {clash}", file=sys.stderr)
        return None
    from gputui.sim.scenarios.dump import Dump  # noqa: PLC0415  (the simulator loads only for --from)
    from gputui.sim.scenarios import ScenarioError  # noqa: PLC0415

    try:
        dump = Dump.read(args.dump)
    except ScenarioError as error:
        print(f"{program}: {error}", file=sys.stderr)
        return None
    if not dump.loaded.objects:  # an empty cluster would read as a healthy one
        print(f"{program}: {dump.context}: no Kubernetes object in it ({dump.summary()})", file=sys.stderr)
        return None
    return dump
