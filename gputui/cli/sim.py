"""`gputui sim`: run the simulated cluster in the foreground until SIGINT/SIGTERM."""
from __future__ import annotations

import argparse
import asyncio
import errno
import signal
import sys
from pathlib import Path

from gputui.cli.arguments import whole_number



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
    source.add_argument("--scenario", metavar="FILE", help='a Kubernetes List (YAML or JSON) of objects, a directory of such files (a dump), "demo" for the built-in GPU cluster, '
                        "or the name of a built-in GPU stack scenario (a wrong name lists them)")
    source.add_argument("--nodes", type=_count, metavar="N", help="generate a synthetic cluster of N nodes (with --pods)")
    parser.add_argument("--pods", type=_count, metavar="M", help="pods of the synthetic cluster (with --nodes)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=0, help="port to listen on; 0 (the default) picks a free one")
    parser.add_argument("--kubeconfig-out", metavar="PATH", type=Path, help="write a kubeconfig for the simulator here")
    parser.add_argument("--all-credentials", action="store_true",
                        help="the kubeconfig gets one context per credential kind: gputui-sim (a token), gputui-sim-cert "
                             "(a client certificate) and gputui-sim-exec (an exec credential plugin)")
    parser.add_argument("--http", action="store_true", help="serve plain HTTP (default: HTTPS, with a throw-away CA of its own)")
    parser.add_argument("--anonymous", action="store_true",
                        help="let requests without credentials in as system:anonymous (kube-apiserver's --anonymous-auth)")
    parser.add_argument("--token-auth-file", metavar="FILE", type=Path,
                        help='more bearer tokens, as kube-apiserver reads them: CSV lines token,user,uid[,"group1,group2"]')
    parser.add_argument("--events-lag", type=int, metavar="N",
                        help="keep events in an etcd of their own, N revisions behind the main one (ahead when negative), "
                             "as kube-apiserver's --etcd-servers-overrides puts them: their resourceVersions compare only among themselves")
    parser.add_argument("--faults", action="store_true",
                        help="enable the fault hooks and serve their control endpoint on loopback (see `gputui sim fault`)")
    parser.set_defaults(run=run, parser=parser)
    _add_fault_parser(parser.add_subparsers(dest="sim_command", metavar="{fault}"))


def _add_fault_parser(subparsers: argparse._SubParsersAction) -> None:
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--kubeconfig", type=Path, default=argparse.SUPPRESS, metavar="PATH",
                       help="the kubeconfig `gputui sim --faults --kubeconfig-out PATH` wrote (its control address is "
                            "recorded next to it, in PATH.faults)")
    where.add_argument("--url", default=argparse.SUPPRESS, help="the control endpoint's address (the `faults` line it printed)")
    fault = subparsers.add_parser(
        "fault", parents=[where], help="drive a running `gputui sim --faults`",
        description="Drive the fault hooks of a running `gputui sim --faults`, found through --kubeconfig or --url.",
    )
    fault.set_defaults(run=run_fault, parser=fault)
    actions = fault.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("drop-watches", parents=[where], help="end every open watch stream")
    actions.add_parser("compact", parents=[where], help="forget watch history: older watches get 410 Expired")
    fail = actions.add_parser("fail", parents=[where], help="answer every request for RESOURCE with CODE (403, 500, or 429/503 with Retry-After: 1)")
    fail.add_argument("resource", metavar="RESOURCE", help="a resource (pods, nodes, daemonsets.apps) or pods/proxy")
    fail.add_argument("code", metavar="CODE", type=int, choices=(403, 429, 500, 503))
    slow = actions.add_parser("slow", parents=[where], help="delay every response for RESOURCE by SECONDS")
    slow.add_argument("resource", metavar="RESOURCE")
    slow.add_argument("seconds", metavar="SECONDS", type=float)
    restart = actions.add_parser("restart", parents=[where], help="stop serving, then serve again on the same port")
    restart.add_argument("--fresh", action="store_true",
                         help="start again from the scenario, resourceVersions low again (as after an etcd restore)")
    restart.add_argument("--downtime", type=float, default=0.5, metavar="SECONDS", help="how long connections are refused")
    restart.add_argument("--writes", type=int, default=0, metavar="N",
                         help="writes made while down (with --fresh: a restored etcd whose resourceVersion passes the clients')")
    actions.add_parser("silence", parents=[where], help="accept connections and answer nothing (a hung API server) until clear")
    corrupt = actions.add_parser("corrupt", parents=[where], help="break the JSON body of the next response")
    corrupt.add_argument("count", metavar="COUNT", type=_count, nargs="?", default=1, help="how many responses (default 1)")
    clear = actions.add_parser("clear", parents=[where], help="clear RESOURCE's faults, or every fault")
    clear.add_argument("resource", metavar="RESOURCE", nargs="?")
    actions.add_parser("status", parents=[where], help="show the active faults")
    xid = actions.add_parser("xid", parents=[where], help="the node's DCGM exporter reports XID CODE on GPU GPU (0 clears it)")
    xid.add_argument("node", metavar="NODE")
    xid.add_argument("gpu", metavar="GPU", type=_count, help="the GPU's index")
    xid.add_argument("code", metavar="CODE", type=_count, help="the XID, e.g. 79 (0: none)")
    health = actions.add_parser("gpu-health", parents=[where],
                                help="the device plugin finds GPU GPU of NODE unhealthy (or healthy again, with --healthy)")
    health.add_argument("node", metavar="NODE")
    health.add_argument("gpu", metavar="GPU", type=_count, help="the GPU's index")
    health.add_argument("--healthy", action="store_true", help="healthy again")
    taint = actions.add_parser("taint-device", parents=[where],
                               help="taint a DRA device of NODE's ResourceSlice (KEY[=VALUE][:EFFECT], effect NoSchedule or None)")
    taint.add_argument("node", metavar="NODE")
    taint.add_argument("device", metavar="DEVICE", help="the device's name in the slice, e.g. gpu-1")
    taint.add_argument("taint", metavar="KEY[=VALUE][:EFFECT]", help="e.g. gpu.nvidia.com/xid=43:NoSchedule")
    untaint = actions.add_parser("untaint-device", parents=[where], help="take a DRA device's taints off (those of --key, or all)")
    untaint.add_argument("node", metavar="NODE")
    untaint.add_argument("device", metavar="DEVICE")
    untaint.add_argument("--key", help="only the taints of this key")
    mig = actions.add_parser("mig-state", parents=[where], help="the MIG manager's nvidia.com/mig.config.state on NODE "
                             "(pending, rebooting: its GPU clients paused; success: given back; failed)")
    mig.add_argument("node", metavar="NODE")
    mig.add_argument("state", metavar="STATE")
    upgrade = actions.add_parser("upgrade-state", parents=[where], help="the GPU driver upgrade controller moves NODE to STATE "
                                 "(nvidia.com/gpu-driver-upgrade-state: drain-required, upgrade-failed, upgrade-done, ...)")
    upgrade.add_argument("node", metavar="NODE")
    upgrade.add_argument("state", metavar="STATE")
    quarantine = actions.add_parser("quarantine", parents=[where], help="NVSentinel: CONDITION True on NODE, which it cordons")
    quarantine.add_argument("node", metavar="NODE")
    quarantine.add_argument("condition", metavar="CONDITION", help="the monitor's condition type, e.g. GpuXidError")
    quarantine.add_argument("--message", default="")
    heal = actions.add_parser("heal", parents=[where], help="NVSentinel: CONDITION False again on NODE, which it uncordons")
    heal.add_argument("node", metavar="NODE")
    heal.add_argument("condition", metavar="CONDITION")
    heal.add_argument("--halted", action="store_true", help="its fault quarantine is halted: the node is left cordoned")
    domain = actions.add_parser("compute-domain", parents=[where],
                                help="NVIDIA's DRA driver: the IMEX daemons of ComputeDomain NAMESPACE/NAME that started "
                                     "(--joined), those not Ready (--not-ready); its status follows")
    domain.add_argument("domain", metavar="NAMESPACE/NAME", type=_namespaced)
    domain.add_argument("--joined", metavar="NODE,...", type=_names, default=[], help="the nodes whose daemon started")
    domain.add_argument("--not-ready", metavar="NODE,...", type=_names, default=[], help="of those, the ones not Ready")


def run_fault(args: argparse.Namespace) -> int:
    from gputui.sim import control  # noqa: PLC0415

    asked: dict[str, object] = {"action": args.action}
    if args.action in ("fail", "slow", "clear"):
        asked["resource"] = args.resource
    if args.action == "fail":
        asked["code"] = args.code
    elif args.action == "slow":
        asked["seconds"] = args.seconds
    elif args.action == "restart":
        asked.update(fresh=args.fresh, downtime=args.downtime, writes=args.writes)
    elif args.action == "corrupt":
        asked["count"] = args.count
    elif args.action == "xid":
        asked.update(node=args.node, gpu=args.gpu, code=args.code)
    elif args.action == "gpu-health":
        asked.update(node=args.node, gpu=args.gpu, healthy=args.healthy)
    elif args.action == "taint-device":
        rest, _, effect = args.taint.partition(":")
        key, _, value = rest.partition("=")
        asked.update(node=args.node, device=args.device, key=key, value=value, effect=effect or "NoSchedule")
    elif args.action == "untaint-device":
        asked.update(node=args.node, device=args.device, key=args.key)
    elif args.action in ("mig-state", "upgrade-state"):
        asked.update(node=args.node, state=args.state)
    elif args.action == "quarantine":
        asked.update(node=args.node, condition=args.condition, message=args.message)
    elif args.action == "heal":
        asked.update(node=args.node, condition=args.condition, halted=args.halted)
    elif args.action == "compute-domain":
        asked.update(namespace=args.domain[0], name=args.domain[1], joined=args.joined, notReady=args.not_ready)
    request = None if args.action == "status" else asked
    try:
        url = control.find_url(getattr(args, "kubeconfig", None), getattr(args, "url", None))
        answer = control.send(url, request)
    except control.ControlError as error:
        return _fail(str(error))
    if answer.get("message"):
        print(answer["message"])
    active = answer.get("faults") or {}
    for resource, fault in active.items():
        parts = ([f"answers {fault['code']}"] if fault.get("code") else []) + (
            [f"waits {fault['delay']:g}s"] if fault.get("delay") else [])
        print(f"{resource}: {', '.join(parts)}")
    if answer.get("corruptNext"):
        print(f"next {answer['corruptNext']} response(s): broken JSON")
    if request is None and not active and not answer.get("corruptNext"):
        print("no faults active")
    return 0


def _namespaced(text: str) -> tuple[str, str]:
    namespace, _, name = text.partition("/")
    if not namespace or not name:
        raise argparse.ArgumentTypeError(f"expected NAMESPACE/NAME, not {text!r}")
    return namespace, name


def _names(text: str) -> list[str]:
    return [n for n in text.split(",") if n]


_count = whole_number(0)
_port = whole_number(0, 65535, "a port number")


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
    from gputui.sim.cluster import SimCluster  # noqa: PLC0415
    from gputui.sim.scenarios import ScenarioError  # noqa: PLC0415

    tokens = {}
    if args.token_auth_file is not None:
        from gputui.sim.apiserver.auth import parse_token_file  # noqa: PLC0415

        try:
            text = args.token_auth_file.read_text(encoding="utf-8")
            tokens = {t: (u.name, u.groups) for t, u in parse_token_file(text, str(args.token_auth_file)).items()}
        except OSError as error:
            return _fail(f"{args.token_auth_file}: cannot read: {error.strerror or error}")
        except UnicodeDecodeError:
            return _fail(f"{args.token_auth_file}: not UTF-8 text")
        except ValueError as error:
            return _fail(str(error))
    sim = SimCluster(
        scenario=args.scenario,
        host=args.host,
        port=args.port,
        kubeconfig_out=args.kubeconfig_out,
        faults=args.faults,
        nodes=args.nodes,
        pods=args.pods or 0,
        tls=not args.http,
        anonymous=args.anonymous,
        tokens=tokens,
        all_credentials=args.all_credentials,
        events_lag=args.events_lag,
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
    kubeconfig = sim.kubeconfig_path
    assert kubeconfig is not None  # start() wrote it

    control = None
    if args.faults:
        from gputui.sim.control import ControlServer, address_file  # noqa: PLC0415

        try:
            control = await ControlServer(sim, args.host if args.host in ("127.0.0.1", "::1", "localhost") else "127.0.0.1").start()
        except OSError as error:
            await sim.stop()
            return _fail(f"cannot serve the fault control endpoint: {error.strerror or error}")
        recorded = address_file(kubeconfig) if args.kubeconfig_out else None
        if recorded is not None:
            recorded.write_text(control.url + "\n")

    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    try:
        async with sim.http_session() as http, http.get(f"{sim.url}/version") as response:
            response.raise_for_status()
        print(f"serving {sim.url}", flush=True)
        print(f"kubeconfig {sim.kubeconfig_path} (context gputui-sim)", flush=True)
        if control is not None:
            print(f"faults {control.url} (gputui sim fault --url {control.url} ...)", flush=True)
        await stopping.wait()
    finally:
        if control is not None:
            await control.stop()
            if args.kubeconfig_out:
                address_file(kubeconfig).unlink(missing_ok=True)
        await sim.stop()
    return 0
