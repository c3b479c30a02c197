"""`gputui` with no subcommand: open the app on a kubeconfig context, or on the demo cluster.

Kept free of Textual and of the Kubernetes client at import time: the CLI reads
the flags from here, and only `run` loads the UI. The kubeconfig is read and
its context chosen before the app starts (a bad one is one line on stderr, no
screen); connecting, and the client's import, happen in the app, after its
first frame.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any, Callable

from gputui.config import ConfigError, add_config_args, load_config
from gputui.kube.config import ConnectError, add_connection_args, context_names, resolve


def add_app_args(parser: argparse.ArgumentParser) -> None:
    add_connection_args(parser)
    add_config_args(parser)
    parser.add_argument(
        "--demo",
        action="store_true",
        help="start the simulated demo cluster on loopback and open the app on it",
    )
    parser.add_argument(
        "--resource",
        metavar="NAME",
        action="append",
        default=[],
        help="also count this extended resource as a GPU (e.g. amd.com/gpu); repeatable",
    )


def kubeconfig_contexts(kubeconfig: str | None) -> list[str]:
    """Context names for the palette; empty when the kubeconfig cannot be read (the app says why elsewhere)."""
    try:
        return context_names(kubeconfig)
    except ConnectError:
        return []


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as error:
        print(f"gputui: {error}", file=sys.stderr)
        return 2
    if not args.demo:
        try:
            resolve(args.kubeconfig, args.context)  # cheap: a bad kubeconfig or context fails here, before any screen
        except ConnectError as error:
            print(f"gputui: {error}", file=sys.stderr)
            return 2
        return _run_app(make_app(args.kubeconfig, args.context, args.resource, verify=verify_settings(config, args.read_only)))
    verify = verify_settings(config, args.read_only)
    from .demo import BackgroundCluster  # noqa: PLC0415

    # The app draws its first frame, then its connector starts the simulator
    # in a thread of its own and waits for it, off the UI's loop.
    demo = BackgroundCluster(scenario="demo")

    def started_demo() -> Any:
        demo.begin()
        return demo.wait_ready()

    try:
        return _run_app(make_app(None, None, args.resource, kubeconfig_from=started_demo, verify=verify))
    finally:
        demo.stop()


def verify_settings(config: Any, read_only: bool | None) -> Any:
    """What `v` creates, from the config file and the --read-only/--no-read-only flag."""
    from .verify import VerifySettings  # noqa: PLC0415

    return VerifySettings(config.verify_options(read_only=read_only), namespace=config.verify.namespace)


def _run_app(app: Any) -> int:
    app.run()
    if app.error:
        print(f"gputui: {app.error}", file=sys.stderr)
    return app.return_code or 0


def make_app(
    kubeconfig: str | None,
    context: str | None = None,
    extra_resources: list[str] | tuple[str, ...] = (),
    *,
    clock: Callable[[], float] | None = None,
    kubeconfig_from: Callable[[], Any] | None = None,
    verify: Any = None,
) -> Any:
    """The app on a kubeconfig context (also used by tests, screenshots and the benchmark).
    kubeconfig_from: a blocking call that returns the kubeconfig path (the demo's simulator).
    verify: the verification pods' settings (`verify_settings`); None: the defaults."""
    from gputui.kube.config import connect  # noqa: PLC0415
    from gputui.kube.gpu import GpuResources  # noqa: PLC0415

    from .app import GpuTuiApp  # noqa: PLC0415

    path = kubeconfig

    async def connector(chosen: str | None) -> Any:
        nonlocal path
        if path is None and kubeconfig_from is not None:
            try:
                path = str(await asyncio.to_thread(kubeconfig_from))
            except RuntimeError as error:
                raise ConnectError(str(error)) from None
        return await connect(path, chosen)

    options: dict[str, Any] = {} if clock is None else {"clock": clock}
    if verify is not None:
        options["verify"] = verify
    return GpuTuiApp(
        connector,
        context=context,
        contexts=lambda: kubeconfig_contexts(path) if path or kubeconfig_from is None else [],
        resources=GpuResources(frozenset(extra_resources)),
        **options,
    )
