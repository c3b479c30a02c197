"""Load benchmark (a script, not a test): many clients at once against one big simulated cluster under churn.

    python tests/bench_load.py                                  # 5,000 nodes / 150,000 pods, 50 of each, 3 min steady
    python tests/bench_load.py --sizes 1000x20000,5000x150000   # the same at two sizes, side by side
    python tests/bench_load.py --smoke                          # tiny and short, its two sizes at once (the test suite runs this)

One simulator (`gputui sim --nodes N --pods M --faults`, its own process) serves three groups of clients,
one group after the other:
  gputui     --instances ClusterModels (every kind, as the app watches them; the model without the UI), each
             with its own connection (its own HTTP connection pool), --per-process of them in
             each process (this script again, `--child-models`)
  kubectl-w  --watchers `kubectl get pods -A -w` processes, each with a cache directory of its own (cold, as
             a new user's)
  seed       the seed's recipes (bench_model.SEED_RECIPES: kubectl and jq), one round every --seed-every
             seconds, by --pollers pollers (one, unless told)
For each group: the initial sync with the churn paused (the models until every watch is live, the watchers
until each has opened its watch, the seed's first round), then --minutes of steady phase under churn
(bench_soak's churn worker, an API client of its own: --churn changes a second, mostly a running GPU pod's
restart count, some pods created and deleted, node labels).

Every figure is a delta of the simulator's own counts (GET /counts on its control endpoint, sim/control.py):
  requests     reads answered (every verb but the churn's writes: create, update, patch, delete)
  bytes        the bodies of those answers: list pages, watch event lines (the initial events included),
               gets and discovery; not the watches' bookmarks, which the simulator does not count (about
               150 bytes a watch every 10 s), nor HTTP headers and TLS
  etcd lists   list pages that kube-apiserver of the release played (1.34) would read from etcd, not from its
               watch cache (the load that hurts a control plane)
  peak RSS     the simulator's peak resident memory during the initial sync (VmHWM, reset as the group starts)
               and its rise over the resident memory then (freed memory stays with the process: a later
               group starts higher)
  writes       the churn's requests a minute
  changes      how far the store's resourceVersion moved a minute (every write: the churn's, and what the
               scheduler and kubelets do about it)
  B/change/client   steady bytes a minute / changes a minute / clients: what one client pays for one change
  lists        list requests a minute in the steady phase (a client that lists again pays for the cluster's size)
The last line is every figure as JSON.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from anywhere (its own folder is on the path: bench_model, bench_soak)

from bench_model import seed_commands  # noqa: E402
from bench_soak import ENV, Churn, Simulator, wait_until  # noqa: E402

WRITES = ("create", "update", "patch", "delete", "deletecollection")
GROUPS = ("gputui", "kubectl-w", "seed")


# -- the gputui models' processes ----------------------------------------------------------------------------
def live(model: Any) -> bool:
    return model.all_running() and all(s.phase in ("live", "absent") and not s.relisting for s in model.states.values())


async def child_models(kubeconfig: str, count: int, timeout: float) -> None:
    """`count` models, each on its own connection; says `live` when every watch of each is, then runs until SIGTERM."""
    from contextlib import AsyncExitStack

    from gputui.kube.config import connect
    from gputui.kube.model import ClusterModel

    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with AsyncExitStack() as stack:
        models = []
        for _ in range(count):
            conn = await stack.enter_async_context(await connect(kubeconfig))
            models.append(await stack.enter_async_context(ClusterModel(conn.api)))
        deadline = time.monotonic() + timeout
        while not await wait_until(lambda: all(live(m) for m in models), min(30.0, timeout)):
            states = {f"{i}/{k}": f"{s.phase}{' relisting' if s.relisting else ''}: {s.describe()}"
                      for i, m in enumerate(models) for k, s in m.states.items() if s.phase != "absent"}
            states = {k: v for k, v in states.items() if not v.startswith("live:")} or {"tasks": "a reflector task ended"}
            if time.monotonic() > deadline:
                print(json.dumps({"live": False, "states": states}), flush=True)
                return
            print(f"bench: models not live yet: {states}", file=sys.stderr, flush=True)
        lists = sum(r.lists for m in models for r in m.reflectors.values())
        events = sum(r.events for m in models for r in m.reflectors.values())
        print(json.dumps({"live": True}), flush=True)
        await stop.wait()
        print(json.dumps({"relists": sum(r.lists for m in models for r in m.reflectors.values()) - lists,
                          "events": sum(r.events for m in models for r in m.reflectors.values()) - events,
                          "not_live": sum(not live(m) for m in models)}), flush=True)


# -- the groups: start() returns once the initial sync is done; steady(until) runs the steady phase ----------
class Models:
    name = "gputui"

    def __init__(self, sim: Simulator, count: int, per_process: int, timeout: float) -> None:
        self.sim, self.count, self.per_process, self.timeout = sim, count, per_process, timeout
        self.procs: list[subprocess.Popen] = []

    def describe(self) -> str:
        processes = -(-self.count // self.per_process)
        return f"{self.count} gputui models in {processes} process{'es' if processes > 1 else ''} (each model its own connection)"

    def start(self) -> None:
        left = self.count
        while left > 0:
            these = min(left, self.per_process)
            left -= these
            self.procs.append(subprocess.Popen(
                [sys.executable, __file__, "--child-models", str(these), self.sim.kubeconfig, str(self.timeout)],
                stdout=subprocess.PIPE, text=True, cwd=ROOT, env=ENV))
        for proc in self.procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            answer = json.loads(line) if line.strip() else {}
            if not answer.get("live"):
                for other in self.procs:
                    other.kill()
                raise SystemExit(f"bench: gputui models did not sync: {answer.get('states') or 'the process ended'}")

    def steady(self, until: float) -> None:
        time.sleep(max(0.0, until - time.monotonic()))

    def stop(self) -> dict:
        notes = {"relists": 0, "events": 0, "not_live": 0}
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            out, _ = proc.communicate(timeout=120)
            lines = [line for line in out.splitlines() if line.strip()]
            for key, value in (json.loads(lines[-1]) if lines else {"not_live": -1}).items():
                notes[key] += value
        return notes


class Watchers:
    name = "kubectl-w"

    def __init__(self, sim: Simulator, count: int, workdir: str, counts: Any, timeout: float) -> None:
        self.sim, self.count, self.workdir, self.counts, self.timeout = sim, count, workdir, counts, timeout
        self.procs: list[subprocess.Popen] = []

    def describe(self) -> str:
        return f"{self.count} `kubectl get pods -A -w`"

    def start(self) -> None:
        before = self.counts()["requests"].get("watch", 0)
        for i in range(self.count):
            with open(os.path.join(self.workdir, f"kubectl-w-{i}.stderr"), "w") as err:
                self.procs.append(subprocess.Popen(
                    ["kubectl", "--kubeconfig", self.sim.kubeconfig, "--cache-dir", os.path.join(self.workdir, f"kubectl-w-{i}"),
                     "get", "pods", "-A", "-w"], stdout=subprocess.DEVNULL, stderr=err))
        deadline = time.monotonic() + self.timeout
        while self.counts()["requests"].get("watch", 0) - before < self.count:
            ended = [p for p in self.procs if p.poll() is not None]
            if ended or time.monotonic() > deadline:
                tail = Path(self.workdir, f"kubectl-w-{self.procs.index(ended[0])}.stderr").read_text()[-500:] if ended else ""
                for proc in self.procs:
                    proc.kill()
                raise SystemExit(f"bench: the kubectl watchers did not all open their watch: {tail or 'timed out'}")
            time.sleep(0.05)

    def steady(self, until: float) -> None:
        time.sleep(max(0.0, until - time.monotonic()))

    def stop(self) -> dict:
        running = sum(p.poll() is None for p in self.procs)
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.wait(30)
        return {"still_watching": running}


class Seed:
    name = "seed"

    def __init__(self, sim: Simulator, pollers: int, every: float, workdir: str) -> None:
        self.every = every
        self.commands = [seed_commands(sim.kubeconfig, os.path.join(workdir, f"seed-cache-{i}")) for i in range(pollers)]
        self.rounds = 0
        self.overran = 0  # rounds that took longer than --seed-every (the next one began late)

    def describe(self) -> str:
        return f"{len(self.commands)} poller(s) of the seed's recipes, a round every {self.every:g} s"

    @staticmethod
    def round(commands: list[str]) -> None:
        for command in commands:
            subprocess.run(command, shell=True, check=True, stdout=subprocess.DEVNULL, timeout=1800)

    def start(self) -> None:
        self._each(lambda commands: self.round(commands))

    def steady(self, until: float) -> None:
        def poll(commands: list[str]) -> None:
            next_at = time.monotonic() + self.every
            while True:
                time.sleep(max(0.0, next_at - time.monotonic()))
                if time.monotonic() >= until:
                    return
                self.round(commands)
                self.rounds += 1
                next_at += self.every
                if time.monotonic() > next_at:
                    self.overran += 1
                    next_at = time.monotonic()

        self._each(poll)

    def _each(self, work: Any) -> None:
        threads = [threading.Thread(target=work, args=(commands,)) for commands in self.commands]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def stop(self) -> dict:
        return {"steady_rounds": self.rounds, "rounds_longer_than_the_interval": self.overran}


# -- measuring -----------------------------------------------------------------------------------------------
def control(url: str):
    from gputui.sim.control import ControlError, send

    def ask(request: dict | None) -> dict:
        try:
            return send(url, request, path="/counts")
        except ControlError as exc:
            raise SystemExit(f"bench: the simulator's counts: {exc}") from None

    def counts() -> dict:
        return ask(None)

    def reset_peak() -> dict:
        return ask({"action": "reset-peak"})

    return counts, reset_peak


def delta(after: dict, before: dict) -> dict:
    """Reads, their bytes and etcd-served lists, the churn's writes and the store's changes, from two snapshots."""
    verbs = {v: after["requests"].get(v, 0) - before["requests"].get(v, 0) for v in after["requests"]}
    return {
        "requests": sum(n for v, n in verbs.items() if v not in WRITES),
        "bytes": after["bytes_sent"] + after["get_bytes"] - before["bytes_sent"] - before["get_bytes"],
        "etcd": after["lists_from_etcd"] - before["lists_from_etcd"],
        "lists": verbs.get("list", 0),
        "writes": sum(n for v, n in verbs.items() if v in WRITES),
        "changes": after["resourceVersion"] - before["resourceVersion"],
        "verbs": {v: n for v, n in verbs.items() if n},
    }


def measure(group: Any, clients: int, churn: Churn, counts: Any, reset_peak: Any, minutes: float) -> dict:
    started = reset_peak()
    t0 = time.monotonic()
    group.start()
    synced = counts()
    sync_s = time.monotonic() - t0
    churn.resume()
    t1 = time.monotonic()
    steady_from = counts()
    group.steady(t1 + minutes * 60)
    steady_to = counts()
    per_minute = 60 / (time.monotonic() - t1)
    churn.pause()
    notes = group.stop()
    steady = delta(steady_to, steady_from)
    return {
        "group": group.name, "clients": clients, "describe": group.describe(), "sync_s": sync_s, "notes": notes,
        "initial": delta(synced, started),
        "peak_rss_mb": synced["peakRssMb"],  # None where /proc cannot say
        "rss_rise_mb": None if synced["peakRssMb"] is None or started["rssMb"] is None else synced["peakRssMb"] - started["rssMb"],
        "steady": {k: (v * per_minute if isinstance(v, (int, float)) else v) for k, v in steady.items()},
        "steady_minutes": 1 / per_minute,
    }


def say(line: str) -> None:
    print(line, flush=True)


def run_size(args: argparse.Namespace, nodes: int, pods: int, names: list[str], rate: float, workdir: str,
             out: Any = say) -> list[dict]:
    out(f"\n== {nodes:,} nodes, {pods:,} pods: starting the simulator ==")
    sim = Simulator(nodes, pods, workdir, wait=False)
    churn = Churn(sim.kubeconfig, rate, go=False)  # its process starts with the simulator's
    results = []
    try:
        sim.wait_ready()
        counts, reset_peak = control(sim.faults_url)
        churn.go()
        ready = churn.wait_ready()
        churn.pause()
        out(f"  churn: {rate:g} changes/s asked over {ready['gpu_pods']:,} running GPU pods, during each steady phase")
        groups = {
            "gputui": (Models(sim, args.instances, args.per_process, args.sync_timeout), args.instances),
            "kubectl-w": (Watchers(sim, args.watchers, workdir, counts, args.sync_timeout), args.watchers),
            "seed": (Seed(sim, args.pollers, args.seed_every, workdir), args.pollers),
        }
        for name in names:
            group, clients = groups[name]
            figures = measure(group, clients, churn, counts, reset_peak, args.minutes)
            notes = ", ".join(f"{k} {v}" for k, v in figures["notes"].items())
            out(f"  {figures['describe']}: initial sync {figures['sync_s']:.1f} s, requests by verb: "
                + ", ".join(f"{v} {n}" for v, n in sorted(figures["initial"]["verbs"].items()))
                + f"; steady {figures['steady_minutes']:.2f} min ({notes}), requests/min by verb: "
                + ", ".join(f"{v} {n:.1f}" for v, n in sorted(figures["steady"]["verbs"].items())))
            results.append(figures)
    finally:
        churned = churn.stop()
        sim.stop()
    errors = sum(churned.get("errors", {}).values())
    out(f"  churn worker: {sum(churned.get('done', {}).values()):,} changes made "
        f"({', '.join(f'{k} {v:,}' for k, v in churned.get('done', {}).items())}), {errors:,} refused")
    return results


def n(value: float | None, form: str = ",.0f") -> str:
    """A figure as printed; "?" where it is not known."""
    return "?" if value is None else format(value, form)


def per_change(r: dict) -> float | None:
    s = r["steady"]
    return s["bytes"] / s["changes"] / r["clients"] if s["changes"] else None


def table(nodes: int, pods: int, results: list[dict]) -> None:
    print(f"\n== {nodes:,} nodes, {pods:,} pods ==")
    print(f"{'':<19}|{'initial sync':^57}|{'steady phase, per minute':^77}")
    print(f"{'group':<10} {'clients':>7} |{'requests':>9} {'bytes':>15} {'etcd-lists':>10} {'peak-RSS-MB':>11} {'rise-MB':>7}"
          f" |{'requests':>9} {'bytes':>13} {'etcd-lists':>10} {'writes':>8} {'changes':>8} {'B/change/client':>15}"
          f" {'lists':>8}")
    for r in results:
        i, s = r["initial"], r["steady"]
        print(f"{r['group']:<10} {r['clients']:>7} |{n(i['requests']):>9} {n(i['bytes']):>15} {n(i['etcd']):>10}"
              f" {n(r['peak_rss_mb']):>11} {n(r['rss_rise_mb'], '+.0f'):>7} |{n(s['requests'], ',.1f'):>9} {n(s['bytes']):>13}"
              f" {n(s['etcd'], ',.1f'):>10} {n(s['writes']):>8} {n(s['changes']):>8} {n(per_change(r)):>15} {n(s['lists'], ',.1f'):>8}")


def compare(sizes: list[tuple[int, int]], every: dict[tuple[int, int], list[dict]]) -> None:
    print("\n== by cluster size: the steady phase's bytes per change per client (changes a minute; the initial sync's MB per client) ==")
    print(f"{'group':<10} " + " ".join(f"{f'{a}x{b}':>36}" for a, b in sizes))
    for name in GROUPS:
        cells = []
        for size in sizes:
            r = next((r for r in every[size] if r["group"] == name), None)
            if r is None:
                cells.append(f"{'-':>36}")
                continue
            cells.append(f"{n(per_change(r)):>9} B ({n(r['steady']['changes']):>7}/min, "
                         f"{n(r['initial']['bytes'] / r['clients'] / 1e6, ',.1f'):>6} MB)")
        print(f"{name:<10} " + " ".join(cells))


def sizes_arg(text: str) -> list[tuple[int, int]]:
    try:
        out = [tuple(int(x) for x in part.lower().split("x")) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError("sizes are NODESxPODS, comma-separated: 1000x20000,5000x150000") from None
    if any(len(size) != 2 or min(size) < 1 for size in out):
        raise argparse.ArgumentTypeError("sizes are NODESxPODS, comma-separated: 1000x20000,5000x150000")
    return out  # type: ignore[return-value]


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child-models":
        asyncio.run(child_models(sys.argv[3], int(sys.argv[2]), float(sys.argv[4])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="20 nodes / 300 pods, 3 of each client, 0.3 s steady, 40 changes/s; "
                        "and at once the gputui models alone at 100 nodes / 3,000 pods, 80 changes/s")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--sizes", type=sizes_arg, help="NODESxPODS,... : the whole benchmark at each size (instead of --nodes/--pods)")
    parser.add_argument("--instances", type=int, default=50, help="gputui models (default 50)")
    parser.add_argument("--per-process", type=int, default=5, help="gputui models in each process (default 5)")
    parser.add_argument("--watchers", type=int, default=50, help="`kubectl get pods -A -w` processes (default 50)")
    parser.add_argument("--pollers", type=int, default=1, help="pollers of the seed's recipes (default 1)")
    parser.add_argument("--minutes", type=float, default=3.0, help="the steady phase of each group (default 3)")
    parser.add_argument("--churn", type=float, default=20.0, help="changes a second in the steady phases (default 20)")
    parser.add_argument("--seed-every", type=float, default=10.0, help="seconds between the seed's rounds (default 10)")
    parser.add_argument("--sync-timeout", type=float, help="seconds an initial sync may take (default 1800; smoke 60)")
    parser.add_argument("--groups", default=",".join(GROUPS), help=f"which client groups, comma-separated (default {','.join(GROUPS)})")
    args = parser.parse_args()
    groups = [g.strip() for g in args.groups.split(",") if g.strip()]
    if not groups or any(g not in GROUPS for g in groups):
        parser.error(f"--groups: one or more of {', '.join(GROUPS)}")
    plan = [(size, groups, args.churn) for size in args.sizes or [(args.nodes, args.pods)]]
    if args.smoke:  # every group at the small size; gputui again at one ten times bigger under twice the churn
        args.instances, args.per_process, args.watchers, args.minutes, args.seed_every = 3, 3, 3, 0.3 / 60, 0.05
        plan = [((20, 300), list(GROUPS), 40.0), ((100, 3000), ["gputui"], 80.0)]
    args.sync_timeout = args.sync_timeout or (60.0 if args.smoke else 1800.0)
    sizes = [size for size, _, _ in plan]
    every: dict[tuple[int, int], list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="gputui-load-") as workdir:
        places = []
        for (nodes, pods), _, _ in plan:
            places.append(os.path.join(workdir, f"{nodes}x{pods}"))
            os.mkdir(places[-1])
        if args.smoke:
            # The sizes at once, each with its own simulator and churn (every figure but the seconds is a
            # simulator's own count or memory: the other size does not move it); each size's lines once it is done.
            lines: list[list[str]] = [[] for _ in plan]
            with ThreadPoolExecutor(len(plan)) as pool:
                runs = [pool.submit(run_size, args, nodes, pods, names, rate, where, said.append)
                        for ((nodes, pods), names, rate), where, said in zip(plan, places, lines, strict=True)]
                for ((nodes, pods), _, _), run, said in zip(plan, runs, lines, strict=True):
                    every[(nodes, pods)] = run.result()
                    for line in said:
                        say(line)
        else:
            for ((nodes, pods), names, rate), where in zip(plan, places, strict=True):
                every[(nodes, pods)] = run_size(args, nodes, pods, names, rate, where)
    for (nodes, pods), results in every.items():
        table(nodes, pods, results)
    if len(sizes) > 1:
        compare(sizes, every)
    print("\n== goals ==")
    for (nodes, pods), results in every.items():
        ours = next((r for r in results if r["group"] == "gputui"), None)
        if ours is not None:
            etcd = ours["initial"]["etcd"] + ours["steady"]["etcd"]
            print(f"  {'PASS' if etcd == 0 else 'MISS'}  {nodes}x{pods}: gputui: no list page served from etcd ({etcd:g})")
    print(json.dumps({f"{a}x{b}": results for (a, b), results in every.items()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
