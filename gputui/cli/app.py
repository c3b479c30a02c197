"""`gputui` with no subcommand: open the app on a kubeconfig context, or on the demo cluster.

Kept free of Textual and of the Kubernetes client at import time: the parser
reads the flags from here, and only `run` loads the UI. The kubeconfig is read
and its context chosen before the app starts (a bad one is one line on stderr,
no screen); connecting, and the client's import, happen in the app, after its
first frame.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from gputui.config import ConfigError, add_config_args, load_config
from gputui.kube.config import ConnectError, add_connection_args, resolve


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


def run(args: argparse.Namespace) -> int:
    from gputui.ui.launch import make_app, verify_settings  # noqa: PLC0415

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
    verify = verify_settings(config, args.read_only)
    if not args.demo:
        return _run_app(make_app(args.kubeconfig, args.context, args.resource, verify=verify, metrics=config.metrics.model_options()))
    from gputui.ui.demo import BackgroundCluster  # noqa: PLC0415

    # The app draws its first frame, then its connector starts the simulator
    # in a thread of its own and waits for it, off the UI's loop.
    demo = BackgroundCluster(scenario="demo")

    def started_demo() -> Any:
        demo.begin()
        return demo.wait_ready()

    try:
        return _run_app(make_app(None, None, args.resource, kubeconfig_from=started_demo, verify=verify, metrics=config.metrics.model_options()))
    finally:
        demo.stop()


def _run_app(app: Any) -> int:
    app.run()
    if app.error:
        print(f"gputui: {app.error}", file=sys.stderr)
    return app.return_code or 0
