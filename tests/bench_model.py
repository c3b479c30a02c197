"""Benchmark of the model's initial sync (a script, not a test).

    python tests/bench_model.py              # 20,000 pods, then 5,000 nodes / 150,000 pods
    python tests/bench_model.py --smoke      # a hundred pods, a few seconds
    python tests/bench_model.py --startup-only --repeat 5   # only the one-node start-up figures
    python tests/bench_model.py --sync [--before TREE ...] [--repeat 5]   # the pods' sync beside curl (and TREE's)
    python tests/bench_model.py --sync --smoke   # the same on 10 nodes / 200 pods, once

On a synthetic simulated cluster (its own process), times the initial sync to
a complete GPU summary for:
  gputui          ClusterModel: paged list, raw JSON, slim records (its own process: its own peak RSS)
  kubectl+jq      the seed's recipes (node capacity/allocatable, totals, GPU pods), printed as run
  models          kubernetes_asyncio with its default model deserialisation
  raw             the raw HTTP fetch of the same paged lists, bytes only
Each repeat runs the four side by side, so load on the machine hits them alike;
every timed method starts with its API client already made and lists nodes,
pods and events with the same page size. Also the rate at which the model
applies watch events. Prints each run, medians, ratios and peak RSS.

Start-up, whole process against whole process (interpreter start and imports
included, as a user or a cron job pays them): `gputui --version`, and
`gputui report -o json` against a one-node cluster and against the 20,000-pod
one, beside the seed's kubectl+jq recipes on the same cluster. gputui runs as
installed: `pip install` compiles its modules, so each run loads bytecode; the
one-node report is timed from a checkout that compiles its sources each run too.

--sync: the initial sync of the pods alone (the model's own WatchList stream, then a list from the watch cache)
of 1,000 nodes and 20,000 pods, beside `curl` of the same request (the same gzip: asked for, used where the
server gives it), and beside another source tree's model (`--before`: `git worktree add /tmp/before REV`),
alternating run by run. Each model runs in a process of its own, connected first (not timed); wall time and
CPU time (user and system) from the model's start to its sync; CPU per pod over the pods the server sent.
`--before` may be given more than once (each tree named by its directory). Two floors run beside them, with this
tree's client: `read`, the same request read to its end and nothing done with it (aiohttp, TLS, gzip), and `skip`,
that and msgspec decoding every object to a shape with no field (what a decoder costs that builds nothing): what
any model on this transport and decoder pays before it reads a field.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

from gputui.cli import loop  # noqa: E402
LISTS = ("nodes", "pods", "events")
PAGE_SIZE = 500  # the reflectors' default and kubectl's; gputui and the raw fetch both use it
SEED_RECIPES = [
    "kubectl get nodes -o custom-columns='NODE:.metadata.name,GPU_CAPACITY:.status.capacity.nvidia\\.com/gpu,"
    "GPU_ALLOCATABLE:.status.allocatable.nvidia\\.com/gpu'",
    """kubectl get nodes -o json | jq -r '.items[] | [.metadata.name, (.status.allocatable["nvidia.com/gpu"] // "0")] | @tsv'""",
    """kubectl get pods -A -o json | jq -r '.items[] | select(.spec.containers[].resources.requests["nvidia.com/gpu"] != null)"""
    """ | [.metadata.namespace, .metadata.name] | @tsv'""",
]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- children: each measurement runs in its own process ---------------------------------
async def child_gputui(kubeconfig: str) -> dict:
    from gputui.kube.config import connect
    from gputui.kube.model import EVENTS, NODES, PODS, ClusterModel

    base = peak_rss_mb()
    async with await connect(kubeconfig) as conn:
        start = time.perf_counter()
        model = ClusterModel(conn.api, kinds=(NODES, PODS, EVENTS), page_size=PAGE_SIZE)
        async with model:
            assert await model.wait_synced(600), model.states
            summaries = model.node_summaries()
            totals = model.totals()
            gpu_pods = model.gpu_pods()
            seconds = time.perf_counter() - start
            return {
                "seconds": seconds, "rss_mb": peak_rss_mb(), "rss_after_imports_mb": base,
                "nodes": len(summaries), "kept_pods": len(model.pods.records), "gpu_pods": len(gpu_pods),
                "events": len(model.events.records),
                "totals": {k: v.as_dict() for k, v in totals.items()},
            }


async def _paged(kubeconfig: str, preload: bool) -> dict:
    from kubernetes_asyncio.client import CoreV1Api
    from kubernetes_asyncio.config import new_client_from_config

    api = await new_client_from_config(kubeconfig)
    core = CoreV1Api(api)
    calls = {"nodes": core.list_node, "pods": core.list_pod_for_all_namespaces, "events": core.list_event_for_all_namespaces}
    start = time.perf_counter()
    counts = {}
    size = 0
    for kind in LISTS:
        token, n = None, 0
        while True:
            params = {"limit": PAGE_SIZE, **({"_continue": token} if token else {})}
            if preload:
                result = await calls[kind](**params)
                n += len(result.items)
                token = result.metadata._continue
            else:
                resp = await calls[kind](_preload_content=False, **params)
                body = await resp.read()
                size += len(body)
                # the continue token is all we look at: find it without parsing the page
                marker = body.rfind(b'"continue":"')
                token = body[marker + 12: body.index(b'"', marker + 12)].decode() if marker >= 0 else None
            if not token:
                break
        counts[kind] = n
    seconds = time.perf_counter() - start
    await api.close()
    return {"seconds": seconds, "rss_mb": peak_rss_mb(), "counts": counts, "bytes": size}


async def child_models(kubeconfig: str) -> dict:
    return await _paged(kubeconfig, preload=True)


async def child_raw(kubeconfig: str) -> dict:
    return await _paged(kubeconfig, preload=False)


async def child_events(kubeconfig: str, count: int = 20_000) -> dict:
    """Watch events applied per second by the model: real pod JSON from the cluster, replayed as `count` MODIFIED lines.
    The pods are listed with gputui's own client, the one the model takes (kubernetes_asyncio's imports cost more than
    the smoke's whole replay; the listing is not timed)."""
    import orjson

    from gputui.kube.config import connect
    from gputui.kube.model import PODS, ClusterModel

    async with await connect(kubeconfig) as conn:
        items = (await conn.api.json("GET", "/api/v1/pods", params={"limit": 2000}))["items"]
        model = ClusterModel(conn.api, kinds=(PODS,))
        applied = [0]
        model.subscribe(lambda change: applied.__setitem__(0, applied[0] + 1))
        reflector = model.reflectors[PODS]
        lines = []
        for i in range(count):
            obj = items[i % len(items)]
            obj["metadata"]["resourceVersion"] = str(10**6 + i)
            lines.append(orjson.dumps({"type": "MODIFIED", "object": obj}))
        start = time.perf_counter()
        for line in lines:
            reflector._apply(*reflector.decoding.event(line))
        seconds = time.perf_counter() - start
    return {"seconds": seconds, "events": len(lines), "per_second": len(lines) / seconds,
            "changes_to_listeners": applied[0], "rss_mb": peak_rss_mb()}


async def child_watch_e2e(_: str) -> dict:
    """End to end through a real watch stream: an in-process simulator (sharing these cores) writes, the model follows."""
    from gputui.kube.config import connect
    from gputui.kube.keep import FINISHED_PHASES
    from gputui.kube.model import PODS, ClusterModel
    from gputui.sim.cluster import SimCluster

    n = 5000
    async with SimCluster(nodes=20, pods=400) as sim:
        async with await connect(str(sim.kubeconfig_path)) as conn:
            model = ClusterModel(conn.api, kinds=(PODS,))
            async with model:
                await model.wait_synced(60)
                await asyncio.sleep(0.2)
                reflector = model.reflectors[PODS]
                # Only the pods the model's watch is sent: it leaves finished ones out (its field selector).
                pods = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in sim.store.objects("pods")
                        if (p.get("status") or {}).get("phase") not in FINISHED_PHASES]
                before = reflector.events
                start = time.perf_counter()
                for i in range(n):
                    ns, name = pods[i % len(pods)]
                    sim.store.mutate("pods", ns, name, lambda p, i=i: p["metadata"].setdefault("annotations", {}).update(bench=str(i)))
                    if i % 200 == 0:
                        await asyncio.sleep(0)
                deadline = time.monotonic() + 120
                while reflector.events - before < n:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"the model saw {reflector.events - before} of the {n} changes within 120 s")
                    await asyncio.sleep(0.005)
                seconds = time.perf_counter() - start
    return {"seconds": seconds, "events": n, "per_second": n / seconds}


CHILDREN = {"gputui": child_gputui, "models": child_models, "raw": child_raw, "events": child_events, "watch-e2e": child_watch_e2e}


# -- the parent --------------------------------------------------------------------------
def run_child(method: str, kubeconfig: str, *extra: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", method, "--kubeconfig", kubeconfig, *extra],
        capture_output=True, text=True, timeout=1800, cwd=ROOT,
    )
    if out.returncode != 0:
        raise SystemExit(f"bench child {method} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def seed_commands(kubeconfig: str, cache: str) -> list[str]:
    """The seed's recipes as the shell runs them: only the kubeconfig and a cache of our own added."""
    return [recipe.replace("kubectl ", f"kubectl --kubeconfig {kubeconfig} --cache-dir {cache} ") for recipe in SEED_RECIPES]


def gputui_command(*argv: str) -> list[str]:
    return [sys.executable, "-m", "gputui", *argv]


def installed_copy(workdir: str) -> str:
    """A copy of gputui with its modules compiled beside them, as `pip install` leaves it in
    site-packages (pip compiles every module, even where PYTHONDONTWRITEBYTECODE is set, as here):
    the directory to run `python -m gputui` in."""
    place = os.path.join(workdir, "installed")
    if not os.path.isdir(place):
        shutil.copytree(ROOT / "gputui", os.path.join(place, "gputui"), ignore=shutil.ignore_patterns("__pycache__"))
        subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(place, "gputui")], check=True)
    return place


def run_whole(command: list[str], cwd: str | Path = ROOT) -> float:
    """Seconds one whole process takes, start to exit (report exits 1 when a node has a problem).
    From ROOT, a checkout run in place: here nothing writes bytecode, so each run compiles gputui's sources."""
    start = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=1800, cwd=cwd)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds


def run_seed(commands: list[str]) -> float:
    start = time.perf_counter()
    for command in commands:
        subprocess.run(command, shell=True, check=True, stdout=subprocess.DEVNULL, timeout=1800)
    return time.perf_counter() - start


class Simulator:
    """`gputui sim --nodes N --pods M` in its own process; with `wait=False`, `ready()` waits for it (meanwhile
    the caller does work of its own that is not timed)."""

    def __init__(self, nodes: int, pods: int, workdir: str, wait: bool = True) -> None:
        self.nodes, self.pods = nodes, pods
        self.kubeconfig = os.path.join(workdir, f"kubeconfig-{nodes}-{pods}")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gputui", "sim", "--nodes", str(nodes), "--pods", str(pods), "--kubeconfig-out", self.kubeconfig],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        )
        self.started = False
        if wait:
            self.ready()

    def ready(self) -> None:
        assert self.proc.stdout is not None
        if self.started:
            return
        for line in self.proc.stdout:
            if line.startswith("kubeconfig "):
                self.started = True
                return
        raise SystemExit(f"simulator did not start: {self.proc.stderr.read() if self.proc.stderr else ''}")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def median(values: list[float]) -> float:
    return statistics.median(values)


def bench_sync(sim: Simulator, repeat: int, workdir: str, with_seed: bool = True, with_models: bool = True) -> dict:
    """On `sim` (the caller's, which stops it)."""
    nodes, pods = sim.nodes, sim.pods
    print(f"\n== {nodes} nodes, {pods} pods (median of {repeat}) ==", flush=True)
    installed = installed_copy(workdir)
    results: dict[str, list[dict]] = {"gputui": [], "raw": [], "models": []}
    seed_times: list[float] = []
    commands = seed_commands(sim.kubeconfig, os.path.join(workdir, f"kubectl-cache-{pods}"))
    if with_seed:
        print("  kubectl+jq runs the seed's recipes, one after the other:")
        for command in commands:
            print(f"    $ {command}")
    report_times: list[float] = []
    for run in range(1, repeat + 1):
        report_times.append(run_whole(gputui_command("report", "-o", "json", "--kubeconfig", sim.kubeconfig), installed))
        results["raw"].append(run_child("raw", sim.kubeconfig))
        results["gputui"].append(run_child("gputui", sim.kubeconfig))
        line = (f"  run {run}: raw {results['raw'][-1]['seconds']:.2f} s, gputui {results['gputui'][-1]['seconds']:.2f} s, "
                f"gputui report (whole process) {report_times[-1]:.2f} s")
        if with_models:
            results["models"].append(run_child("models", sim.kubeconfig))
            line += f", kubernetes_asyncio {results['models'][-1]['seconds']:.2f} s"
        if with_seed:
            seed_times.append(run_seed(commands))
            line += f", kubectl+jq {seed_times[-1]:.2f} s"
        print(line, flush=True)
    g = results["gputui"]
    raw = median([r["seconds"] for r in results["raw"]])
    ours = median([r["seconds"] for r in g])
    figures = {
        "gputui_s": ours, "raw_s": raw, "gputui_peak_rss_mb": max(r["rss_mb"] for r in g),
        "gputui_rss_after_imports_mb": g[0]["rss_after_imports_mb"], "kept_pods": g[0]["kept_pods"],
        "gpu_pods": g[0]["gpu_pods"], "list_mb": results["raw"][0]["bytes"] / 1e6,
    }
    print(f"  lists fetched: {figures['list_mb']:.1f} MB in pages of {PAGE_SIZE}; model keeps {g[0]['kept_pods']} pods "
          f"({g[0]['gpu_pods']} GPU pods), {g[0]['events']} events")
    print("  medians:")
    print(f"  raw HTTP fetch          {raw:7.3f} s")
    print(f"  gputui model            {ours:7.3f} s   = {ours / raw:.2f} x raw fetch   peak RSS {figures['gputui_peak_rss_mb']:.0f} MB "
          f"(after imports {figures['gputui_rss_after_imports_mb']:.0f} MB)")
    if with_models:
        models = median([r["seconds"] for r in results["models"]])
        figures["models_s"] = models
        print(f"  kubernetes_asyncio      {models:7.3f} s   gputui is {models / ours:.1f}x faster   "
              f"peak RSS {max(r['rss_mb'] for r in results['models']):.0f} MB")
    report = median(report_times)
    figures["report_s"] = report
    print(f"  gputui report -o json   {report:7.3f} s   whole process")
    if with_seed:
        seed = median(seed_times)
        figures["kubectl_jq_s"] = seed
        print(f"  kubectl+jq (seed)       {seed:7.3f} s   gputui takes 1/{seed / ours:.1f} of it; "
              f"gputui report, whole process, 1/{seed / report:.1f}")
    return figures


def bench_startup(repeat: int, workdir: str) -> dict:
    """Whole-process start-up: --version, and a report of a one-node cluster, alternated run by run;
    as installed (bytecode compiled at install) and from a checkout that compiles its sources each run."""
    print(f"\n== start-up, whole process (median of {repeat}) ==", flush=True)
    sim = Simulator(1, 0, workdir, wait=False)  # starting while the copy compiles
    try:
        installed = installed_copy(workdir)
        sim.ready()
        version: list[float] = []
        report: list[float] = []
        uncompiled: list[float] = []
        for _ in range(repeat):
            version.append(run_whole(gputui_command("--version"), installed))
            report.append(run_whole(gputui_command("report", "-o", "json", "--kubeconfig", sim.kubeconfig), installed))
            uncompiled.append(run_whole(gputui_command("report", "-o", "json", "--kubeconfig", sim.kubeconfig)))
    finally:
        sim.stop()
    figures = {"version_s": median(version), "empty_report_s": median(report), "uncompiled_report_s": median(uncompiled)}
    print(f"  gputui --version                     {figures['version_s']:7.3f} s   as installed")
    print(f"  gputui report -o json, one node      {figures['empty_report_s']:7.3f} s   as installed "
          f"({figures['empty_report_s'] - figures['version_s']:.3f} s more than --version)")
    print(f"  the same from a checkout, no bytecode {figures['uncompiled_report_s']:6.3f} s   "
          f"({figures['uncompiled_report_s'] - figures['empty_report_s']:.3f} s compiling gputui's sources)")
    return figures


UNFINISHED_PODS = "status.phase!=Succeeded,status.phase!=Failed"  # the model's pods watch (kube/model.py)
SYNC_CHILD = """
import asyncio, json, sys, time
from gputui.kube.config import connect
from gputui.kube.model import PODS, ClusterModel

async def main(kubeconfig, mode):
    async with await connect(kubeconfig) as conn:
        await conn.api.json("GET", "/version")  # connected, the transport imported: not timed
        cpu, start = time.process_time(), time.perf_counter()
        model = ClusterModel(conn.api, kinds=(PODS,), list_modes=(mode,))
        async with model:
            assert await model.wait_synced(600), model.states
            return {"seconds": time.perf_counter() - start, "cpu": time.process_time() - cpu, "kept": len(model.pods.records)}

try:
    from gputui.cli.loop import run  # the loop gputui's commands run on
except ImportError:  # a tree from before it
    run = asyncio.run
print(json.dumps(run(main(sys.argv[1], sys.argv[2]))))
"""


FLOOR_CHILD = """
import json, sys, time
import msgspec
from gputui.cli.loop import run
from gputui.kube.client import Timeout
from gputui.kube.config import connect

class Nothing(msgspec.Struct):
    pass

class Event(msgspec.Struct):
    type: str
    object: Nothing

class Page(msgspec.Struct):
    items: list[Nothing]

async def main(kubeconfig, mode, floor, params):
    async with await connect(kubeconfig) as conn:
        await conn.api.json("GET", "/version")
        cpu, start = time.process_time(), time.perf_counter()
        skip = floor == "skip"
        resp = await conn.api.get("/api/v1/pods", params=json.loads(params), timeout=Timeout(connect=10, read=60))
        async with resp:
            if mode != "watchlist":
                body = await resp.read()
                if skip:
                    msgspec.json.decode(body, type=Page)
            else:
                events, pending, ended = msgspec.json.Decoder(Event), b"", False
                while not ended and (chunk := await resp.read_some()):
                    end = chunk.rfind(b"\\n") + 1
                    lines, pending = pending + chunk[:end], chunk[end:]
                    ended = b"k8s.io/initial-events-end" in lines[-400:]
                    if skip:
                        events.decode_lines(lines)
                if not ended:
                    raise SystemExit("the stream ended before its initial-events-end bookmark")
        return {"seconds": time.perf_counter() - start, "cpu": time.process_time() - cpu}

print(json.dumps(run(main(*sys.argv[1:]))))
"""


def floor_child(tree: str, kubeconfig: str, mode: str, floor: str, workdir: str) -> dict:
    done = subprocess.run([sys.executable, "-c", FLOOR_CHILD, kubeconfig, mode, floor, json.dumps(sync_params(mode))],
                          env={**os.environ, "PYTHONPATH": tree}, cwd=workdir, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"bench: the {floor} floor failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def sync_child(tree: str, kubeconfig: str, mode: str, workdir: str) -> dict:
    done = subprocess.run([sys.executable, "-c", SYNC_CHILD, kubeconfig, mode], env={**os.environ, "PYTHONPATH": tree},
                          cwd=workdir, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"bench: the sync from {tree} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def curl_command(kubeconfig: str, mode: str) -> str:
    """curl of the request the reflector makes: the WatchList read up to its initial-events-end bookmark, or the
    list from the watch cache read whole; --compressed asks for gzip and undoes it, as gputui does."""
    import yaml

    config = yaml.safe_load(Path(kubeconfig).read_text())
    server, token = config["clusters"][0]["cluster"]["server"], config["users"][0]["user"]["token"]
    return f"curl -sSk -N --compressed -H 'Authorization: Bearer {token}' '{server}/api/v1/pods?{urlencode(sync_params(mode))}'"


def sync_params(mode: str) -> dict[str, str]:
    if mode == "watchlist":
        return {"watch": "true", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan", "allowWatchBookmarks": "true",
                "resourceVersion": "", "fieldSelector": UNFINISHED_PODS, "timeoutSeconds": "300"}
    return {"resourceVersion": "0", "fieldSelector": UNFINISHED_PODS}


def curl_seconds(command: str, mode: str) -> float:
    """Until curl has written the list, or the WatchList's initial-events-end bookmark (grep stops there: the
    stream itself stays open)."""
    start = time.perf_counter()
    if mode != "watchlist":
        subprocess.run(command + " -o /dev/null", shell=True, check=True)
        return time.perf_counter() - start
    curl = subprocess.Popen(command, shell=True, stdout=subprocess.PIPE, start_new_session=True)
    found = subprocess.run(["grep", "-m1", "-q", "k8s.io/initial-events-end"], stdin=curl.stdout, check=False)
    seconds = time.perf_counter() - start
    os.killpg(curl.pid, 15)
    curl.wait()
    if found.returncode != 0:
        raise SystemExit("bench: curl's WatchList ended without its initial-events-end bookmark")
    return seconds


FLOORS = ("read", "skip")


def bench_pods_sync(repeat: int, before: list[str], workdir: str, nodes: int = 1000, pods: int = 20_000) -> None:
    from tests.bench_connection import installed

    after = installed(ROOT, os.path.join(workdir, "after-tree"))
    names = [Path(tree).resolve().name if len(before) > 1 else "before" for tree in before]
    if len(set(names)) != len(names):
        raise SystemExit("bench: give each --before tree a directory of its own name")
    trees = {name: installed(tree, os.path.join(workdir, f"before-{name}")) for name, tree in zip(names, before, strict=True)}
    trees["after"] = after
    sim = Simulator(nodes, pods, workdir)
    try:
        import orjson

        listed = subprocess.run(curl_command(sim.kubeconfig, "cache"), shell=True, capture_output=True, check=True)
        served = len(orjson.loads(listed.stdout)["items"])
        print(f"\n== the pods' initial sync, {nodes:,} nodes / {pods:,} pods: {served} unfinished pods, "
              f"{len(listed.stdout) / 1e6:.1f} MB (median of {repeat}; load average {os.getloadavg()[0]:.1f} at the start) ==", flush=True)
        for mode in ("watchlist", "cache"):
            curl = curl_command(sim.kubeconfig, mode)
            for tree in trees.values():  # caches warm, bytecode read: not measured
                sync_child(tree, sim.kubeconfig, mode, workdir)
            times: dict[str, list[dict]] = {name: [] for name in (*trees, *FLOORS, "curl")}
            for run in range(repeat):
                order = [*trees, *FLOORS, "curl"] if run % 2 == 0 else ["curl", *reversed(FLOORS), *reversed(trees)]
                for name in order:
                    if name == "curl":
                        times["curl"].append({"seconds": curl_seconds(curl, mode)})
                    elif name in FLOORS:
                        times[name].append(floor_child(after, sim.kubeconfig, mode, name, workdir))
                    else:
                        times[name].append(sync_child(trees[name], sim.kubeconfig, mode, workdir))
                print(f"  {mode} run {run + 1}: " + ", ".join(f"{name} {times[name][-1]['seconds']:.3f} s" for name in times)
                      + f"  (load {os.getloadavg()[0]:.1f})", flush=True)
            curl_s = median([t["seconds"] for t in times["curl"]])
            print(f"  {mode}: curl {curl_s:.3f} s")
            for name in (*trees, *FLOORS):
                wall = median([t["seconds"] for t in times[name]])
                cpu = median([t["cpu"] for t in times[name]])
                kept = f"keeps {times[name][0]['kept']} pods" if name in trees else "floor: " + (
                    "the request read, nothing done" if name == "read" else "read, every object decoded to no field")
                print(f"  {mode}: {name:6} {wall:.3f} s = {wall / curl_s:.2f} x curl; CPU {cpu:.3f} s = {cpu / served * 1e6:.1f} us a pod; "
                      + kept)
    finally:
        sim.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny run (a hundred pods) for the test suite")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-big", action="store_true", help="skip the 5,000 nodes / 150,000 pods run")
    parser.add_argument("--only-big", action="store_true", help="only the 5,000 nodes / 150,000 pods run")
    parser.add_argument("--startup-only", action="store_true", help="only the start-up figures (--version, a one-node report)")
    parser.add_argument("--sync", action="store_true", help="only the pods' initial sync beside curl (and --before's)")
    parser.add_argument("--before", metavar="TREE", action="append", default=[],
                        help="with --sync: a source tree (holding gputui/) to compare with; may be given more than once")
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    parser.add_argument("--events", type=int, default=20_000, help=argparse.SUPPRESS)  # the events child's count
    args = parser.parse_args()
    if args.child == "events":  # on the loop gputui's commands run on, as every timed child
        print(json.dumps(loop.run(child_events(args.kubeconfig, args.events))))
        return 0
    if args.child:
        print(json.dumps(loop.run(CHILDREN[args.child](args.kubeconfig))))
        return 0

    with tempfile.TemporaryDirectory(prefix="gputui-bench-") as workdir:
        if args.sync:
            bench_pods_sync(1 if args.smoke else args.repeat, args.before, workdir, *((10, 200) if args.smoke else (1000, 20_000)))
            return 0
        if args.only_big:
            big_sim = Simulator(5000, 150_000, workdir)
            try:
                bench_sync(big_sim, 1, workdir, with_seed=False, with_models=False)
            finally:
                big_sim.stop()
            return 0
        # The smoke times nothing (its figures are there, that is all): its small cluster starts beside the start-up part.
        sim = Simulator(10, 100, workdir, wait=False) if args.smoke and not args.startup_only else None
        try:
            startup = bench_startup(1 if args.smoke else 2 * args.repeat + 1, workdir)
            if args.startup_only:
                ok = startup["empty_report_s"] < 0.3
                print(f"\n== goals ==\n  {'PASS' if ok else 'MISS'}  one-node report < 0.3 s, whole process")
                return 0
            sim = sim or Simulator(1000, 20_000, workdir)
            sim.ready()
            small = bench_sync(sim, 1 if args.smoke else args.repeat, workdir)
            # the apply rate, on this cluster's pod JSON (fewer events in the smoke: a rate all the same)
            events = run_child("events", sim.kubeconfig, "--events", "2000" if args.smoke else "20000")
        finally:
            if sim:
                sim.stop()
        big: dict | None = None
        if not args.smoke and not args.skip_big:
            big_sim = Simulator(5000, 150_000, workdir)
            try:
                big = bench_sync(big_sim, 1, workdir, with_seed=False, with_models=False)
            finally:
                big_sim.stop()
        e2e = run_child("watch-e2e", "") if not args.smoke else None

    print("\n== watch events ==")
    print(f"  model applies {events['per_second']:,.0f} events/s ({events['events']} MODIFIED pod events of real pod JSON)")
    if e2e:
        print(f"  end to end through the simulator's watch (same cores): {e2e['per_second']:,.0f} events/s")

    print("\n== goals ==")
    checks = [
        ("model applies >= 5,000 watch events/s", events["per_second"] >= 5000),
        ("one-node report < 0.3 s, whole process", startup["empty_report_s"] < 0.3),
    ]
    if not args.smoke:
        checks += [
            ("20k pods: gputui report, whole process, <= 1/25 of kubectl+jq", small["report_s"] <= small["kubectl_jq_s"] / 25),
            ("20k pods: gputui <= 1/20 of kubectl+jq", small["gputui_s"] <= small["kubectl_jq_s"] / 20),
            ("20k pods: gputui <= 3x raw fetch", small["gputui_s"] <= 3 * small["raw_s"]),
            ("20k pods: peak RSS <= 150 MB", small["gputui_peak_rss_mb"] <= 150),
        ]
        if big:
            checks.append(("150k pods: peak RSS <= 400 MB", big["gputui_peak_rss_mb"] <= 400))
    for text, ok in checks:
        print(f"  {'PASS' if ok else 'MISS'}  {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
