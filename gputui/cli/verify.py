"""`gputui verify NODE...`: run nvidia-smi in a pod on each node, judge it, delete it.

Exit status: 0 every node passed, 1 some node failed, 2 usage or connection
errors (including --read-only, a refused confirmation and a 403 on create).
Progress goes to stderr, verdicts to stdout. Ctrl+C (or SIGTERM) deletes the
pods before exiting with 130.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from gputui.cli import loop
from gputui.cli.arguments import plugins_end_with_us, whole_number
from gputui.config import DEFAULT_VERIFY_IMAGE, ConfigError, add_config_args, load_config
from gputui.kube.config import (
    ConnectError,
    Connection,
    add_connection_args,
    check,
    connect,
    describe_network_error,
    impersonation_flags,
    with_connection_defaults,
)
from gputui.sanitize import clean, log_line

if TYPE_CHECKING:
    from gputui.kube import verify as v

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # SIGHUP: the terminal closed
DEFAULT_CONCURRENCY = 4


class UsageError(Exception):
    """Stops the command with exit status 2 and this one-line message."""


_positive_int = whole_number(1)


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= 86_400:
        raise argparse.ArgumentTypeError(f"must be between 0 and 86400 seconds: {text}")
    return value


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "verify",
        help="check nodes against their real GPUs: run nvidia-smi in a pod on each, judge it, delete it",
        description=(
            "Create a pod pinned to each NODE that asks for one GPU and runs nvidia-smi; "
            "report PASS (the GPUs it saw) or FAIL with the reason. The pod is always deleted. "
            "Exit status: 0 all passed, 1 some failed, 2 usage or connection errors."
        ),
    )
    p.add_argument("nodes", nargs="*", metavar="NODE", help="node to verify")
    p.add_argument("--all", action="store_true", help="verify every GPU node")
    p.add_argument("-y", "--yes", action="store_true", help="create the pods without asking")
    p.add_argument("--image", help=f"container image with nvidia-smi (default: the config file's, else {DEFAULT_VERIFY_IMAGE})")
    p.add_argument("-n", "--namespace", help="namespace of the pods (default: the config file's, else the context's namespace)")
    p.add_argument("--resource", help="GPU resource to ask for (default: nvidia.com/gpu, else nvidia.com/gpu.shared, else the smallest free MIG slice)")
    p.add_argument("--count", type=_positive_int, default=1, help="units of the resource (default: 1)")
    p.add_argument("--runtime-class", metavar="NAME", help="runtimeClassName for the pod (e.g. nvidia)")
    p.add_argument("--tolerate", action="append", default=[], metavar="TAINT_KEY", help="also tolerate this taint key (repeatable)")
    p.add_argument("--timeout", type=_positive_seconds, metavar="SECONDS", help="give up on a pod after this long (default: the config file's, else 120)")
    p.add_argument("--concurrency", type=_positive_int, default=DEFAULT_CONCURRENCY, help=f"nodes verified at once (default: {DEFAULT_CONCURRENCY})")
    p.add_argument("--clean-leftovers", action="store_true", help="delete verification pods left over from earlier runs without asking")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text", help="verdict format (default: text)")
    add_connection_args(p, subcommand=True)
    add_config_args(p, subcommand=True)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    args = with_connection_defaults(args)
    err = sys.stderr
    try:
        try:
            config = load_config(getattr(args, "config", None))
        except ConfigError as e:
            raise UsageError(str(e)) from None
        options = config.verify_options(
            read_only=getattr(args, "read_only", None), image=args.image, resource=args.resource, count=args.count,
            runtime_class=args.runtime_class, timeout=args.timeout, tolerate=tuple(args.tolerate),
        )
        args.namespace = args.namespace or config.verify.namespace
        args.exec_timeout = config.exec_timeout
        if options.read_only:
            raise UsageError("read-only mode: verification creates a pod on each node, so nothing was done")
        if args.all and args.nodes:
            raise UsageError("name nodes or pass --all, not both")
        if not args.all and not args.nodes:
            raise UsageError("name at least one NODE, or pass --all")
        interactive = sys.stdin.isatty() and err.isatty()
        if not args.yes and not interactive:
            raise UsageError("refusing to create pods without confirmation: no terminal to ask on, pass --yes")
        with plugins_end_with_us(), loop.runner() as runner:  # SIGTERM, SIGHUP: no exec plugin left running
            return _Command(args, options, interactive, runner).run()
    except UsageError as e:
        print(f"gputui verify: {e}", file=err)
        return EXIT_USAGE


class _Command:
    """The steps of one `gputui verify`; asking the user happens between event-loop runs."""

    def __init__(self, args: argparse.Namespace, options: v.VerifyOptions, interactive: bool, runner: asyncio.Runner) -> None:
        self.args = args
        self.options = options
        self.interactive = interactive
        self.runner = runner
        self.err: TextIO = sys.stderr
        self.out: TextIO = sys.stdout
        self.conn: Connection | None = None

    def say(self, text: str) -> None:
        try:
            print(text, file=self.err, flush=True)
        except OSError:  # the terminal is gone (SIGHUP): deleting the pods matters more than telling
            pass

    def run(self) -> int:
        from gputui.kube import verify as v  # noqa: PLC0415  (with the connection: building the parser does not load it)
        from gputui.kube.client import HttpError  # noqa: PLC0415

        try:
            self.conn = self.runner.run(self._connect())
            return self._run_connected()
        except ConnectError as e:
            self.say(f"gputui verify: {e}")
            return EXIT_USAGE
        except v.VerifyError as e:
            self.say(f"gputui verify: {clean(str(e))}")
            return EXIT_USAGE
        except (OSError, HttpError) as e:
            self.say(f"gputui verify: lost the connection to the cluster: {describe_network_error(e)}")
            return EXIT_USAGE
        except KeyboardInterrupt:
            self.say("gputui verify: interrupted before any pod was created")
            return EXIT_INTERRUPTED
        finally:
            if self.conn is not None:
                self.runner.run(self.conn.close())

    async def _connect(self) -> Connection:
        conn = await connect(self.args.kubeconfig, self.args.context, exec_timeout=self.args.exec_timeout,
                             impersonate=impersonation_flags(self.args))
        try:
            await check(conn)
        except ConnectError:
            await conn.close()
            raise
        return conn

    def _run_connected(self) -> int:
        from gputui.kube import verify as v  # noqa: PLC0415

        assert self.conn is not None
        namespace = self.args.namespace or self.conn.namespace
        leftovers = self.runner.run(self._leftovers(namespace))
        plans = self.runner.run(self._plans(namespace))
        if not plans:
            raise UsageError("no GPU nodes to verify")
        if not self.args.yes and not self._confirm(plans):
            self.say("gputui verify: nothing created")
            return EXIT_USAGE
        verdicts, interrupted = self.runner.run(self._execute(plans))
        if interrupted:
            left = [vd.leftover for vd in verdicts if vd.leftover]
            if left:
                self.say(f"gputui verify: interrupted; could not confirm deletion of: {', '.join(left)}")
            else:
                self.say("gputui verify: interrupted; every verification pod was deleted")
            return EXIT_INTERRUPTED
        self._print_verdicts(verdicts, leftovers)
        if any(vd.code in v.CHECK_NOT_MADE for vd in verdicts):
            return EXIT_USAGE
        return EXIT_OK if all(vd.passed for vd in verdicts) else EXIT_FAILED

    # -- before creating anything -------------------------------------------

    async def _leftovers(self, namespace: str) -> list[v.Leftover]:
        from gputui.kube import verify as v  # noqa: PLC0415
        from gputui.kube.client import HttpError  # noqa: PLC0415
        from gputui.kube.quantities import parse_time  # noqa: PLC0415

        assert self.conn is not None
        try:
            found = await v.find_leftovers(self.conn.api, namespace)
        except (v.ApiError, OSError, HttpError) as e:
            self.say(f"gputui verify: could not look for leftover verification pods: {clean(str(e) or type(e).__name__)}")
            return []
        if not found:
            return []
        self.say(f"Found {len(found)} verification pod(s) left over from an earlier run:")
        now = time.time()
        for lo in found:
            created = parse_time(lo.created)
            age = f"{_age(now - created)} old" if created else "age unknown"
            self.say(f"  {clean(lo.namespace)}/{clean(lo.name)}  node {clean(lo.node) or '?'}  {clean(lo.status)}  {age}")
        if self.args.clean_leftovers or (self.interactive and _ask("Delete them now? [y/N] ")):
            not_gone = await v.delete_leftovers(self.conn.api, found, self.options.delete_timeout)
            for lo in not_gone:
                self.say(f"  could not confirm deletion of {clean(lo.namespace)}/{clean(lo.name)}")
            self.say(f"Deleted {len(found) - len(not_gone)} leftover pod(s).")
            return not_gone
        self.say("  (delete them with --clean-leftovers)")
        return found

    async def _plans(self, namespace: str) -> list[v.Plan]:
        from gputui.kube import verify as v  # noqa: PLC0415
        from gputui.kube.quantities import InvalidQuantity  # noqa: PLC0415

        assert self.conn is not None
        api = self.conn.api
        try:
            names = self.args.nodes or await v.gpu_node_names(api)
        except InvalidQuantity as e:  # a node kube-apiserver would refuse (a restored dump): no figure is made up of it
            raise UsageError(f"a node is unreadable: {clean(str(e))}") from None

        async def plan(node: str) -> v.Plan:
            try:
                return await v.plan_verification(api, node, self.options, namespace)
            except InvalidQuantity as e:
                raise UsageError(f"node {clean(node)}, or a pod on it, is unreadable: {clean(str(e))}") from None

        # Unknown nodes are a usage error, found before anything is created.
        return list(await asyncio.gather(*(plan(n) for n in dict.fromkeys(names))))

    def _confirm(self, plans: Sequence[v.Plan]) -> bool:
        self.say(f"gputui verify will create {len(plans)} pod(s) and delete each when done:")
        self.say("")
        self.say(plans[0].to_yaml().rstrip())
        if len(plans) > 1:
            self.say("")
            self.say("and the same on:")
            for plan in plans[1:]:
                self.say(f"  {plan.node}: {plan.namespace}/{plan.name} asking for {plan.count} {plan.resource}")
        self.say("")
        return _ask("Create? [y/N] ")

    # -- running -------------------------------------------------------------

    async def _execute(self, plans: Sequence[v.Plan]) -> tuple[list[v.Verdict], bool]:
        """Run every plan; the first SIGINT/SIGTERM cancels them (their pods get deleted), later ones only remind."""
        from gputui.kube import verify as v  # noqa: PLC0415

        assert self.conn is not None
        finals: dict[str, v.Verdict] = {}
        show_logs = len(plans) == 1 and self.args.output == "text"
        node_width = max(len(clean(plan.node)) for plan in plans)  # the progress lines' columns line up

        def on_update(update: v.Update) -> None:
            if update.verdict is not None:
                finals[update.node] = update.verdict
            self._print_update(update, show_logs, node_width)

        work = asyncio.ensure_future(v.run_plans(self.conn.api, plans, self.options, on_update, self.args.concurrency))
        interrupted = False

        def on_signal() -> None:
            nonlocal interrupted
            if not interrupted:
                interrupted = True
                self.say("gputui verify: interrupted: deleting the verification pods...")
                work.cancel()
            else:
                self.say("gputui verify: still deleting the verification pods, please wait")

        loop = asyncio.get_running_loop()
        before = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, on_signal)
        try:
            verdicts = await work
        except asyncio.CancelledError:
            if not interrupted:
                raise
            verdicts = list(finals.values())
        finally:
            for sig in STOP_SIGNALS:
                loop.remove_signal_handler(sig)
                if callable(before[sig]):  # the handler before (plugins_end_with_us'), not the default the loop leaves
                    signal.signal(sig, before[sig])
        return verdicts, interrupted

    def _print_update(self, update: v.Update, show_logs: bool, node_width: int = 0) -> None:
        from gputui.kube import verify as v  # noqa: PLC0415

        head = f"{clean(update.node):<{node_width}} {update.elapsed:6.1f}s"
        if update.stage == v.CREATING:
            self.say(f"{head}  creating pod {clean(update.pod or '')}")
        elif update.stage == v.DELETING:
            self.say(f"{head}  deleting pod {clean(update.pod or '')}")
        elif update.stage == v.DONE and update.verdict is not None:
            vd = update.verdict
            fate = f"could not confirm deletion of {vd.leftover}" if vd.leftover else "pod deleted"
            self.say(f"{head}  {fate}")
        for event in update.events:
            self.say(f"{head}  {clean(event.type)} {clean(event.reason)}: {clean(event.message)}")
        if show_logs:
            for line in update.log_lines:
                self.say(f"{head}  | {log_line(line)}")

    def _print_verdicts(self, verdicts: Sequence[v.Verdict], leftovers: Sequence[v.Leftover]) -> None:
        if self.args.output == "json":
            doc = {
                "verdicts": [vd.to_json() for vd in verdicts],
                "passed": sum(vd.passed for vd in verdicts),
                "failed": sum(not vd.passed for vd in verdicts),
                "leftovers_from_earlier_runs": [f"{lo.namespace}/{lo.name}" for lo in leftovers],
            }
            print(json.dumps(doc, indent=2), file=self.out)
            return
        rows = [
            (clean(vd.node), "PASS" if vd.passed else "FAIL", f"{vd.resource} x{vd.count}" if vd.resource else "-", f"{vd.elapsed:.1f}s", clean(vd.reason, 2000))
            for vd in verdicts
        ]
        header = ("NODE", "RESULT", "RESOURCE", "TIME", "DETAIL")
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(4)]
        for row in [header, *rows]:
            cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1]), row[2].ljust(widths[2]), row[3].rjust(widths[3]), row[4]]
            print("  ".join(cells), file=self.out)


def _ask(prompt: str) -> bool:
    """A yes/no question on the terminal (stderr, so stdout keeps only verdicts)."""
    print(prompt, end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
