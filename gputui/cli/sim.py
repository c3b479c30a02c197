"""`gputui sim`: run the simulated cluster in the foreground until SIGINT/SIGTERM."""
from __future__ import annotations

import argparse
import asyncio
import errno
import signal
import sys
from pathlib import Path



def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sim",
        help="run a simulated GPU cluster that speaks the Kubernetes API on loopback",
        description=(
            "Run a simulated Kubernetes cluster with NVIDIA GPUs on loopback until SIGINT/SIGTERM. "
            "kubectl, the Python clients and gputui use it through the kubeconfig it writes (context gputui-sim)."
        ),
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--scenario", metavar="FILE", help='a Kubernetes List (YAML or JSON) of objects, "demo" for the built-in GPU cluster, '
                        "or the name of a built-in GPU stack scenario (a wrong name lists them)")
    source.add_argument("--nodes", type=_count, metavar="N", help="generate a synthetic cluster of N nodes (with --pods)")
    parser.add_argument("--pods", type=_count, metavar="M", help="pods of the synthetic cluster (with --nodes)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=0, help="port to listen on; 0 (the default) picks a free one")
    parser.add_argument("--kubeconfig-out", metavar="PATH", type=Path, help="write a kubeconfig for the simulator here")
    parser.add_argument("--faults", action="store_true", help="enable the test-only fault hooks")
    parser.set_defaults(run=run, parser=parser)


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text}")
    return value


def _port(text: str) -> int:
    value = _count(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"not a port number: {text}")
    return value


def _fail(message: str) -> int:
    print(f"gputui sim: {message}", file=sys.stderr, flush=True)
    return 2


def run(args: argparse.Namespace) -> int:
    if args.pods is not None and args.nodes is None:
        args.parser.error("--pods needs --nodes")
    try:
        return asyncio.run(_serve(args))
    except KeyboardInterrupt:
        return 0


async def _serve(args: argparse.Namespace) -> int:
    import aiohttp  # noqa: PLC0415  (the simulator loads only for this command)

    from gputui.sim.cluster import SimCluster  # noqa: PLC0415
    from gputui.sim.scenarios import ScenarioError  # noqa: PLC0415

    sim = SimCluster(
        scenario=args.scenario,
        host=args.host,
        port=args.port,
        kubeconfig_out=args.kubeconfig_out,
        faults=args.faults,
        nodes=args.nodes,
        pods=args.pods or 0,
    )
    try:
        await sim.start()
    except ScenarioError as error:
        await sim.stop()
        return _fail(str(error))
    except OSError as error:
        await sim.stop()
        if error.errno == errno.EADDRINUSE:
            return _fail(f"port {args.port} on {args.host} is already in use (choose another with --port, or --port 0)")
        where = f" {error.filename}" if error.filename else ""
        return _fail(f"cannot start:{where} {error.strerror or error}")

    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    try:
        async with aiohttp.ClientSession() as http, http.get(f"{sim.url}/version") as response:
            response.raise_for_status()
        print(f"serving {sim.url}", flush=True)
        print(f"kubeconfig {sim.kubeconfig_path} (context gputui-sim)", flush=True)
        await stopping.wait()
    finally:
        await sim.stop()
    return 0
