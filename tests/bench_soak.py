"""Soak benchmark (a script, not a test): the app against a big simulator, churn and faults, for a long time.

    python tests/bench_soak.py                  # 1,000 nodes / 20,000 pods, 30 minutes, a fault a minute, 50 changes/s
    python tests/bench_soak.py --minutes 5      # shorter
    python tests/bench_soak.py --smoke          # 20 nodes / 300 pods, each fault once, back to back (the test suite runs this)

Three processes:
  the simulator   `gputui sim --nodes N --pods M --faults --kubeconfig-out PATH`, as a user would start it;
  the churn       this script again (`--churn-worker`), an API client of its own (aiohttp, the kubeconfig's
                  token) that makes `--churn` changes a second through the API server: nine in ten bump a
                  running GPU pod's restart count (PATCH pods/NAME/status: the pod's row changes), the rest
                  create or delete a pending GPU pod of its own (rows come and go: ghosts would show) or
                  relabel a node. The simulator has no churn option; changes through the API are what gputui
                  sees of a real cluster anyway;
  the app         the real gputui app (`gputui.ui.launch.make_app`), headless under `App.run_test()` in this
                  process, for the whole soak: its model, coalesced refresh and tables, the background DCGM
                  reads included. (Driving the app this long works; the model alone would not show the
                  tables.) Its clock is fixed (a day after the start) so that the age column compares exactly.

Faults, in turn, one every `--fault-every` seconds (the next never before the last one's watches are back):
  drop       every open watch stream ends
  compact    watch history forgotten, then every stream ends: each watch comes back with 410 and lists again
  restart    the API server refuses connections for --downtime (0.5 s), then serves the same state on the same port
             (its watch caches start again: a watch from before gets 410 and lists again)
  500-burst  every pods request answers 500 and every stream ends, for a few seconds; then cleared
  restore    the API server comes back from a backup (the scenario's state) that has taken writes past the
             resourceVersion the app holds: only a fresh list tells it its state is not the server's
  silence    the API server accepts connections and answers nothing, for as long as a burst; then cleared
             (its watches need not be reopened: back is every one live again, on the same streams or new)
Recovery: seconds from the end of the fault (the restart's return, the burst's clear) until every watch has
been opened again since the fault began and is current (the model's `states`: all `live`, not relisting,
or `absent` for kinds the cluster does not serve) and `model.all_running()`, and stays so for a second (--steady)
(a watch is said live when the server answers 200; a 410 comes as the stream's first event).

Measured at the start (synced, tables filled) and at the end (churn stopped, settled): RSS (/proc/self/statm,
not the peak) and the number of asyncio tasks. At the end: the model's nodes and pods against a fresh list
through the API (as tests/model/scenario.py's `matches_fresh_list`), and the Nodes and GPU pods tables' rows
(cells as the screen holds them) against what a fresh model on a new connection computes. Printed, never
asserted: the last line is `final state equals the server's: yes|no`.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
FAULTS = ("drop", "compact", "restart", "500-burst", "restore", "silence")
STEADY = 1.0  # seconds every watch must stay back for a recovery to count (see WatchTracker.wait_back)
SOAK_LABELS = {"soak.gputui/pod": "true"}


# -- the API, raw (an independent client: aiohttp and the kubeconfig's token) ---------------------------------
def read_kubeconfig(path: str) -> tuple[str, str, Any]:
    """(server, bearer token, ssl context or None) of the kubeconfig's current context."""
    import base64
    import ssl

    import yaml

    doc = yaml.safe_load(Path(path).read_text())
    context = next(c["context"] for c in doc["contexts"] if c["name"] == doc["current-context"])
    cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in doc["users"] if u["name"] == context["user"])
    tls = None
    if cluster["server"].startswith("https://"):
        if cluster.get("certificate-authority-data"):
            tls = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        else:
            tls = ssl.create_default_context(cafile=cluster.get("certificate-authority"))
    return cluster["server"], user["token"], tls


async def list_all(http: Any, server: str, path: str, page: int = 500) -> list[dict]:
    """Every object of a collection, paged as kubectl does."""
    import orjson

    items: list[dict] = []
    token = None
    while True:
        params = {"limit": str(page), **({"continue": token} if token else {})}
        async with http.get(server + path, params=params) as resp:
            body = await resp.read()
            if resp.status != 200:
                raise RuntimeError(f"list {path}: HTTP {resp.status}: {body[:200]!r}")
        doc = orjson.loads(body)
        items += doc.get("items") or []
        token = (doc.get("metadata") or {}).get("continue")
        if not token:
            return items


def session(token: str, tls: Any = None, limit: int = 20) -> Any:
    import aiohttp

    return aiohttp.ClientSession(
        headers={"Authorization": f"Bearer {token}"},
        connector=aiohttp.TCPConnector(limit=limit, ssl=tls if tls is not None else True),
        timeout=aiohttp.ClientTimeout(total=60),
    )


# -- the churn worker (its own process) --------------------------------------------------------------------------
def churn_worker(kubeconfig: str, per_second: float, seed: int) -> None:
    """Its imports first, then a line on stdin (go: the simulator serves; it may start before), then the churn."""
    import aiohttp  # noqa: F401  (imported while the simulator starts)
    import orjson  # noqa: F401
    import yaml  # noqa: F401

    if not sys.stdin.readline():
        return  # whoever started it is gone
    asyncio.run(_churn(kubeconfig, per_second, seed))


async def _churn(kubeconfig: str, per_second: float, seed: int) -> None:
    import aiohttp

    rng = random.Random(seed)
    server, token, tls = read_kubeconfig(kubeconfig)
    stop, woken = asyncio.Event(), asyncio.Event()  # woken: told to pause or stop (the wait for the next tick ends)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: (stop.set(), woken.set()))
    counts = {"restart-count": 0, "pod-create": 0, "pod-delete": 0, "node-label": 0}
    errors: dict[str, int] = {}
    async with session(token, tls) as http:
        pods = await list_all(http, server, "/api/v1/pods")
        nodes = [n["metadata"]["name"] for n in await list_all(http, server, "/api/v1/nodes")]
        running = []
        for p in pods:
            spec, status = p.get("spec") or {}, p.get("status") or {}
            wants_gpu = any("nvidia.com/gpu" in ((c.get("resources") or {}).get("requests") or {}) for c in spec.get("containers") or ())
            if wants_gpu and spec.get("nodeName") and status.get("phase") == "Running" and status.get("containerStatuses"):
                running.append((p["metadata"]["namespace"], p["metadata"]["name"], spec["containers"][0]["name"],
                                int(status["containerStatuses"][0].get("restartCount", 0))))
        del pods
        namespace = running[0][0] if running else "default"
        restarts = {(ns, name): n for ns, name, _, n in running}
        own: list[str] = []  # our pending GPU pods, oldest first
        creating: set[str] = set()
        serial = 0
        pool = max(5, min(40, int(per_second)))

        async def call(kind: str, method: str, path: str, body: dict | None = None, content_type: str = "application/json") -> bool:
            try:
                data = None if body is None else json.dumps(body)
                async with http.request(method, server + path, data=data, headers={"Content-Type": content_type}) as resp:
                    await resp.read()
                    if resp.status >= 300:
                        errors[f"HTTP {resp.status}"] = errors.get(f"HTTP {resp.status}", 0) + 1
                        return False
                counts[kind] += 1
                return True
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                return False

        async def create(name: str, pod: dict) -> None:
            creating.add(name)
            try:
                if await call("pod-create", "POST", f"/api/v1/namespaces/{namespace}/pods", pod):
                    own.append(name)
            finally:
                creating.discard(name)

        async def delete(name: str) -> None:
            if not await call("pod-delete", "DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}?gracePeriodSeconds=0"):
                own.append(name)  # try again later

        def one_change(i: int) -> Any:
            nonlocal serial
            roll = i % 20
            if roll in (5, 15) or not running:  # a pod of our own comes or goes
                if len(own) + len(creating) < pool or not own:
                    serial += 1
                    name = f"soak-{seed}-{serial:06d}"
                    pod = {"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": name, "namespace": namespace, "labels": dict(SOAK_LABELS)},
                           "spec": {"containers": [{"name": "main", "image": "nvcr.io/nvidia/cuda:12.4.0-base-ubuntu22.04",
                                                    "command": ["sleep", "infinity"],
                                                    "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}}
                    return create(name, pod)
                return delete(own.pop(0))
            if roll == 10 and nodes:
                node = rng.choice(nodes)
                return call("node-label", "PATCH", f"/api/v1/nodes/{node}", {"metadata": {"labels": {"soak.gputui/tick": str(i)}}},
                            "application/merge-patch+json")
            ns, name, container, _ = rng.choice(running)
            restarts[(ns, name)] += 1
            patch = {"status": {"containerStatuses": [{"name": container, "restartCount": restarts[(ns, name)]}]}}
            return call("restart-count", "PATCH", f"/api/v1/namespaces/{ns}/pods/{name}/status", patch,
                        "application/strategic-merge-patch+json")

        # SIGUSR1: pause after the changes under way (answers `paused` on stdout); SIGUSR2: go on.
        pause, resume = asyncio.Event(), asyncio.Event()
        loop.add_signal_handler(signal.SIGUSR1, lambda: (resume.clear(), pause.set(), woken.set()))
        loop.add_signal_handler(signal.SIGUSR2, resume.set)
        print(json.dumps({"ready": True, "gpu_pods": len(running)}), flush=True)  # once SIGUSR1 would not kill it
        tick = 0.1
        asked = 0
        started = time.perf_counter()
        next_at = started
        debt = 0.0
        while not stop.is_set():
            if pause.is_set():
                pause.clear()
                print("paused", flush=True)
                await asyncio.wait([asyncio.ensure_future(resume.wait()), asyncio.ensure_future(stop.wait())],
                                   return_when=asyncio.FIRST_COMPLETED)
                next_at = time.perf_counter()
            debt += per_second * tick
            batch = int(debt)
            debt -= batch
            if batch:
                await asyncio.gather(*(one_change(asked + k) for k in range(batch)))
                asked += batch
            next_at += tick
            delay = next_at - time.perf_counter()
            if delay < -5 * tick:
                next_at = time.perf_counter()  # behind (the server was away): do not burst to catch up
            try:  # the next tick, or at once when told to pause or stop
                await asyncio.wait_for(woken.wait(), max(0.0, delay))
            except asyncio.TimeoutError:
                pass
            woken.clear()
        seconds = time.perf_counter() - started
    print(json.dumps({"asked": asked, "done": counts, "errors": errors, "seconds": seconds, "own_pods": len(own)}), flush=True)


# -- the simulator (its own process) -----------------------------------------------------------------------------
class Simulator:
    def __init__(self, nodes: int, pods: int, workdir: str, wait: bool = True) -> None:
        """wait: return once it serves (else call wait_ready: meanwhile the kubeconfig is not there yet)."""
        self.kubeconfig = os.path.join(workdir, "kubeconfig")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gputui", "sim", "--nodes", str(nodes), "--pods", str(pods), "--faults",
             "--kubeconfig-out", self.kubeconfig],
            stdout=subprocess.PIPE, stderr=open(os.path.join(workdir, "sim.stderr"), "w"), text=True, cwd=ROOT, env=ENV,
        )
        self.stderr_path = os.path.join(workdir, "sim.stderr")
        self.faults_url = ""
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("faults "):
                self.faults_url = line.split()[1]
                return
        raise SystemExit(f"bench: the simulator did not start: {Path(self.stderr_path).read_text()[-2000:]}")

    def rss_mb(self) -> float:
        try:
            return int(Path(f"/proc/{self.proc.pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
        except OSError:
            return 0.0

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


class Churn:
    def __init__(self, kubeconfig: str, per_second: float, go: bool = True) -> None:
        """go: start now (the simulator serves). Else the worker starts its process and imports, then waits
        for go() before it reads the kubeconfig: start it with the simulator, its start-up costs no wait."""
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--churn-worker", kubeconfig, str(per_second)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT, env=ENV,
        )
        if go:
            self.go()

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def wait_ready(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("bench: the churn worker did not start")
        return json.loads(line)

    def pause(self) -> None:
        """Stop changing the cluster once the changes under way are done (blocking: run it in a thread)."""
        assert self.proc.stdout is not None
        self.proc.send_signal(signal.SIGUSR1)
        line = self.proc.stdout.readline()
        if line.strip() != "paused":
            raise SystemExit(f"bench: the churn worker did not pause ({line!r})")

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGUSR2)

    def stop(self) -> dict:
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=60)
        lines = [line for line in out.splitlines() if line.strip()]
        return json.loads(lines[-1]) if lines else {}


# -- measuring ---------------------------------------------------------------------------------------------------
def say(line: str) -> None:
    """A progress line while the app runs: Textual captures sys.stdout then (and a flush of its capture
    goes to the app), so write to the real one."""
    out = sys.__stdout__
    out.write(line + "\n")
    out.flush()


def rss_mb() -> float:
    """Resident memory now (not the peak)."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def task_count() -> int:
    return len(asyncio.all_tasks())


def task_names() -> list[str]:
    """What the running tasks are (their coroutines), to say which were added."""
    return sorted(getattr(t.get_coro(), "__qualname__", t.get_name()) for t in asyncio.all_tasks())


def added(before: list[str], after: list[str]) -> list[str]:
    left = list(before)
    extra = []
    for name in after:
        if name in left:
            left.remove(name)
        else:
            extra.append(name)
    return extra


class WatchTracker:
    """When each reflector last said it was live (every watch opened, every list done, says so)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.live_at: dict[str, float] = {}
        self.retrying: dict[str, int] = {}
        self.unsubscribe = model.subscribe(self._changed)

    def _changed(self, change: Any) -> None:
        if change.kind != "state":
            return
        state = self.model.states.get(change.key)
        if state is None:
            return
        if state.phase == "live":
            self.live_at[change.key] = time.monotonic()
        elif state.phase == "retrying":
            self.retrying[change.key] = self.retrying.get(change.key, 0) + 1

    def back_since(self, began: float) -> bool:
        """Every watch opened again since `began` (live again, for a silence: it need not end a stream),
        and none troubled now."""
        model = self.model
        if not model.all_running():
            return False
        for kind, state in model.states.items():
            if state.phase == "absent":
                continue
            if state.phase != "live" or state.relisting or state.stale_since is not None or self.live_at.get(kind, 0.0) < began:
                return False
        return True

    async def wait_back(self, began: float, timeout: float, steady: float = STEADY, reopened: bool = True) -> float | None:
        """When every watch was back (and stayed so for `steady` seconds: a watch is said live as the server
        answers 200, and its 410 may follow as the stream's first event), or None after timeout."""
        deadline = time.monotonic() + timeout
        since = None
        while time.monotonic() < deadline:
            now = time.monotonic()
            if self.back_since(began if reopened else 0.0):
                since = now if since is None else since
                if now - since >= steady:
                    return since
            else:
                since = None
            await asyncio.sleep(0.02)
        return None

    def not_back(self, began: float) -> str:
        model = self.model
        parts = [f"{kind} {state.describe()}" + ("" if self.live_at.get(kind, 0.0) >= began else " (not reopened)")
                 for kind, state in model.states.items()
                 if state.phase != "absent" and (state.phase != "live" or state.relisting or self.live_at.get(kind, 0.0) < began)]
        if not model.all_running():
            parts.append("a reflector task ended")
        return ", ".join(parts) or "?"


async def post_fault(http: Any, url: str, request: dict) -> dict:
    async with http.post(f"{url}/faults", json=request) as resp:
        answer = await resp.json()
        if resp.status != 200 or not answer.get("ok"):
            raise SystemExit(f"bench: fault {request} refused: {answer}")
        return answer


async def apply_fault(control: Any, url: str, kind: str, burst: float, api: Any, server: str, churn: "Churn",
                      downtime: float = 0.5) -> None:
    if kind == "drop":
        await post_fault(control, url, {"action": "drop-watches"})
    elif kind == "compact":
        # Every watch must come back with 410, the pods' too: with churn the pods watch has seen the
        # newest resourceVersion, and a watch from the compaction's own one is still valid. So for a
        # moment the churn pauses, a namespace (no watch of gputui's) is written, then history goes.
        await asyncio.to_thread(churn.pause)
        try:
            async with api.patch(f"{server}/api/v1/namespaces/default", data=json.dumps(
                    {"metadata": {"labels": {"soak.gputui/compacted": str(int(time.time()))}}}),
                    headers={"Content-Type": "application/merge-patch+json"}) as resp:
                await resp.read()
            await post_fault(control, url, {"action": "compact"})
            await post_fault(control, url, {"action": "drop-watches"})
        finally:
            churn.resume()
    elif kind == "restart":
        await post_fault(control, url, {"action": "restart", "downtime": downtime})
    elif kind == "500-burst":
        await post_fault(control, url, {"action": "fail", "resource": "pods", "code": 500})
        await post_fault(control, url, {"action": "drop-watches"})
        await asyncio.sleep(burst)
        await post_fault(control, url, {"action": "clear", "resource": "pods"})
    elif kind == "restore":
        async with control.get(f"{url}/counts") as resp:
            held = (await resp.json())["resourceVersion"]
        await post_fault(control, url, {"action": "restart", "fresh": True, "downtime": downtime, "writes": held + 100})
    elif kind == "silence":
        await post_fault(control, url, {"action": "silence"})
        await asyncio.sleep(burst)
        await post_fault(control, url, {"action": "clear"})


# -- comparing ---------------------------------------------------------------------------------------------------
def diff_records(what: str, ours: dict, theirs: dict, limit: int = 5) -> list[str]:
    out = []
    for key in sorted(set(ours) | set(theirs), key=str):
        a, b = ours.get(key), theirs.get(key)
        if a == b:
            continue
        if b is None:
            out.append(f"{what} {key}: the model has it, the server does not (a ghost)")
        elif a is None:
            out.append(f"{what} {key}: the server has it, the model does not")
        else:
            out.append(f"{what} {key}: differs: model {a!r} != server {b!r}"[:600])
        if len(out) >= limit:
            break
    return out


async def model_vs_server(model: Any, http: Any, server: str) -> tuple[list[str], int, int]:
    """The model's nodes and pods against a fresh list: (differences, nodes, pods kept)."""
    from gputui.kube.records import node_from, object_key

    nodes_raw = await list_all(http, server, "/api/v1/nodes")
    pods_raw = await list_all(http, server, "/api/v1/pods")
    nodes = {o["metadata"]["name"]: node_from(o) for o in nodes_raw}
    pods = {}
    for obj in pods_raw:
        record = model.keep.pod(obj)
        if record is not None:
            pods[object_key(obj)] = record
    differences = diff_records("node", dict(model.nodes.records), nodes) + diff_records("pod", dict(model.pods.records), pods)
    return differences, len(nodes), len(pods)


def table_rows(table: Any) -> list[tuple[str, tuple]]:
    """What a KeyedTable holds for each row, in order: its cells, or those given for it while out of view."""
    deferred = getattr(table, "_deferred", {})
    return [(key, tuple(deferred.get(key) or table.get_row(key))) for key in table.shown_keys]


def fresh_rows(app: Any, fresh: Any) -> tuple[list[tuple[str, tuple]], list[tuple[str, tuple]]]:
    """The Nodes and GPU pods rows the app would show for a fresh model (as ui/refresh.py builds them)."""
    from gputui.ui import render
    from gputui.ui.panes import node_row, pod_row
    from gputui.ui.refresh import waiting

    narrow = bool(app.main_layout.narrow)
    now = app.clock()
    mark, _ = render.allocation_basis(fresh.states, time.monotonic())
    summaries = [s for s in (fresh.summary(name) for name in list(fresh.nodes.records)) if s is not None]
    summaries.sort(key=lambda s: (not s.gpu_node, s.name))
    # the app's column widths, where it has them (cells are cut to fit their column)
    node_widths = (getattr(app, "node_widths", None),) if getattr(app, "node_widths", None) is not None else ()
    pod_widths = (getattr(app, "pod_widths", None),) if getattr(app, "pod_widths", None) is not None else ()
    nodes = [(s.name, app.verify.with_mark(s.name, node_row(s, narrow, mark, *node_widths))) for s in summaries]
    entries = {key: entry for key, pod in fresh.pods.records.items()
               if (not app.namespaces or key[0] in app.namespaces) and (entry := fresh.gpu_pod(pod)) is not None}
    # the work held back first (pending, the longest waiting first, then failing), then by namespace and name
    held = sorted((key for key, entry in entries.items() if waiting(entry)),
                  key=lambda key: (entries[key].pod.node is not None, entries[key].pod.created or 0.0, key))
    order = [*held, *sorted(key for key in entries if key not in set(held))]
    hours = bool(pod_widths) and "hours" in pod_widths[0]  # the GPU-H column, from HOURS_FROM columns
    pods = [(f"{key[0]}/{key[1]}", pod_row(entries[key], render.age(entries[key].pod.created, now), narrow, *pod_widths,
                                           hours=render.gpu_hours(entries[key], now) if hours else ""))
            for key in order]
    return nodes, pods


def diff_rows(what: str, shown: list[tuple[str, tuple]], wanted: list[tuple[str, tuple]], limit: int = 5) -> list[str]:
    out = []
    if [k for k, _ in shown] != [k for k, _ in wanted]:
        a, b = {k for k, _ in shown}, {k for k, _ in wanted}
        for key in sorted(a - b)[:limit]:
            out.append(f"{what} row {key}: on screen, not in a fresh model (a ghost)")
        for key in sorted(b - a)[:limit]:
            out.append(f"{what} row {key}: in a fresh model, not on screen")
        if not out:
            out.append(f"{what}: the same rows in another order")
    cells = dict(wanted)
    for key, row in shown:
        if key in cells and row != cells[key]:
            out.append(f"{what} row {key}: screen {[c.plain for c in row]} != fresh {[c.plain for c in cells[key]]}")
        if len(out) >= limit:
            break
    return out[:limit]


# -- the soak ----------------------------------------------------------------------------------------------------
async def wait_until(condition: Any, timeout: float, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(step)
    return True


def watches_ok(app: Any) -> bool:
    model = app.model
    return bool(model and model.states and model.all_running()
                and all(s.phase in ("live", "absent") for s in model.states.values()))


async def soak(args: argparse.Namespace, sim: Simulator, churn: Churn) -> dict:
    from gputui.kube.config import connect
    from gputui.kube.model import ClusterModel
    from gputui.ui.launch import make_app

    server, token, tls = read_kubeconfig(sim.kubeconfig)
    clock_at = time.time() + 86400  # a day on: the soak's own pods have an age too
    app = make_app(sim.kubeconfig, clock=lambda: clock_at)
    figures: dict[str, Any] = {"recoveries": {kind: [] for kind in FAULTS}, "not_back": [], "relisted": {}}
    async with app.run_test(size=(160, 50)) as pilot, session(token, tls) as http, session("") as control:
        t0 = time.monotonic()
        if not await wait_until(lambda: watches_ok(app), 300):
            raise SystemExit(f"bench: the app did not sync: {app.model.states if app.model else 'no model'}")
        figures["synced_s"] = time.monotonic() - t0
        await wait_until(lambda: app.selected_node is not None, 60)
        await pilot.press("a")  # every node's GPU pods (the pane starts on the cursor node's): the whole table is checked
        await wait_until(lambda: not (app.scheduler.pods_filling or app.scheduler.freeze_pending), 60)
        await pilot.pause(min(1.0, args.settle))
        model = app.model
        tracker = WatchTracker(model)
        figures["rss_start"], figures["tasks_start"], tasks_before = rss_mb(), task_count(), task_names()
        figures["sim_rss_start"] = sim.rss_mb()
        pods_reflector = model.reflectors["pods"]
        lists_start = {kind: r.lists for kind, r in model.reflectors.items()}

        churn.go()  # its process is up already (started with the simulator)
        ready = await asyncio.to_thread(churn.wait_ready)
        events_before = pods_reflector.events
        churn_started = time.monotonic()
        say(f"synced in {figures['synced_s']:.1f} s; {len(model.nodes.records):,} nodes, {len(model.pods.records):,} pods kept, "
              f"{len(app.pods_table.shown_keys):,} GPU pod rows; churning {ready['gpu_pods']:,} running GPU pods")

        soak_end = churn_started + args.minutes * 60
        next_fault = churn_started + args.fault_every
        n = 0
        while True:
            done_kinds = {k for k, v in figures["recoveries"].items() if v} | {k for k, _ in figures["not_back"]}
            if next_fault > soak_end and done_kinds >= set(FAULTS):
                break
            await asyncio.sleep(max(0.0, next_fault - time.monotonic()))
            kind = FAULTS[n % len(FAULTS)]
            n += 1
            began = time.monotonic()
            lists_before = {k: r.lists for k, r in model.reflectors.items()}
            await apply_fault(control, sim.faults_url, kind, args.burst, http, server, churn, args.downtime)
            ended = time.monotonic()
            limit = max(args.fault_every, 60.0)
            back_at = await tracker.wait_back(began, limit, steady=args.steady, reopened=kind != "silence")
            back = back_at is not None
            at = time.monotonic() if back_at is None else max(back_at, ended)
            since = at - churn_started
            relisted = [k for k, r in model.reflectors.items() if r.lists > lists_before[k]]
            figures["relisted"].setdefault(kind, []).append(relisted)
            if back:
                figures["recoveries"][kind].append(at - ended)
                line = (f"  [{since:7.1f} s] {kind:<9}  watches back {at - ended:6.2f} s after the fault ended ({ended - began:.1f} s long)"
                        f"; listed again: {', '.join(relisted) or 'none'}")
            else:
                figures["not_back"].append((kind, tracker.not_back(began)))
                line = f"  [{since:7.1f} s] {kind:<9}  watches NOT back {limit:.0f} s after the fault: {tracker.not_back(began)}"
            say(line)
            next_fault = max(began + args.fault_every, time.monotonic() + min(1.0, args.fault_every))

        churned = await asyncio.to_thread(churn.stop)
        churn_seconds = time.monotonic() - churn_started
        figures["churn"] = churned
        figures["applied_per_s"] = (pods_reflector.events - events_before) / churn_seconds
        figures["soak_s"] = churn_seconds
        figures["relists"] = {kind: r.lists - lists_start[kind] for kind, r in model.reflectors.items()}
        figures["retrying"] = dict(tracker.retrying)

        # settle: churn stopped, watches live, then a while for the coalesced refresh to catch up
        settled = await wait_until(lambda: watches_ok(app), 120)
        await asyncio.sleep(args.settle)
        figures["settled"] = settled
        figures["rss_end"], figures["tasks_end"] = rss_mb(), task_count()
        tasks_after = task_names()
        figures["tasks_added"], figures["tasks_gone"] = added(tasks_before, tasks_after), added(tasks_after, tasks_before)
        figures["sim_rss_end"] = sim.rss_mb()
        figures["same_model"] = app.model is model

        # the model against a fresh list through the API (retried: the cluster moves on its own a little)
        for attempt in range(6):  # noqa: B007  (read after the loop: how many tries it took)
            differences, n_nodes, n_pods = await model_vs_server(app.model, http, server)
            if not differences:
                break
            await asyncio.sleep(2.0)
        figures["model_diff"], figures["model_counts"] = differences, (n_nodes, n_pods, attempt + 1)

        # the tables against a fresh model on a new connection
        async with await connect(sim.kubeconfig) as conn:
            fresh = ClusterModel(conn.api, resources=app.resources)
            async with fresh:
                if not await fresh.wait_synced(300):
                    raise SystemExit(f"bench: a fresh model did not sync: {fresh.states}")
                await asyncio.sleep(min(0.5, args.settle))
                for attempt in range(10):  # noqa: B007  (read after the loop: how many tries it took)
                    wanted_nodes, wanted_pods = fresh_rows(app, fresh)
                    shown_nodes, shown_pods = table_rows(app.nodes_table), table_rows(app.pods_table)
                    table_diff = diff_rows("Nodes", shown_nodes, wanted_nodes) + diff_rows("GPU pods", shown_pods, wanted_pods)
                    if not table_diff:
                        break
                    await asyncio.sleep(1.0)
        figures["table_diff"] = table_diff
        figures["table_counts"] = (len(shown_nodes), len(shown_pods), attempt + 1)
        figures["header_watches"] = "watches live" in app._main("#header").shown.plain
        tracker.unsubscribe()
    return figures


def report(args: argparse.Namespace, figures: dict) -> None:
    print("\n== faults (recovery: seconds from the fault's end until every watch is open and live again) ==")
    print(f"  {'fault':<10} {'count':>5} {'median s':>9} {'max s':>7}  not back")
    for kind in FAULTS:
        times = figures["recoveries"][kind]
        missed = sum(1 for k, _ in figures["not_back"] if k == kind)
        median = f"{statistics.median(times):9.2f}" if times else f"{'-':>9}"
        worst = f"{max(times):7.2f}" if times else f"{'-':>7}"
        print(f"  {kind:<10} {len(times) + missed:>5} {median} {worst}  {missed}")
    for kind, why in figures["not_back"]:
        print(f"  NOT BACK after {kind}: {why}")
    compacts = figures["relisted"].get("compact", [])
    print(f"  compactions after which pods and nodes were listed again (410): "
          f"{sum(1 for kinds in compacts if 'pods' in kinds and 'nodes' in kinds)} of {len(compacts)}")
    during = {}
    for lists in figures["relisted"].values():
        for kinds in lists:
            for kind in kinds:
                during[kind] = during.get(kind, 0) + 1
    unprovoked = {k: v - during.get(k, 0) for k, v in figures["relists"].items() if v - during.get(k, 0) > 0}
    print(f"  listed again with no fault under way: {', '.join(f'{k} {v}' for k, v in unprovoked.items()) or 'none'}")
    relists = ", ".join(f"{k} {v}" for k, v in figures["relists"].items() if v)
    print(f"  relists during the soak: {relists or 'none'}; retrying reported: "
          f"{', '.join(f'{k} {v}' for k, v in figures['retrying'].items()) or 'none'}")

    print("\n== resources (the app's process) ==")
    print(f"  RSS     start {figures['rss_start']:8.1f} MB   end {figures['rss_end']:8.1f} MB   "
          f"({figures['rss_end'] - figures['rss_start']:+.1f} MB over {figures['soak_s'] / 60:.1f} min)")
    print(f"  tasks   start {figures['tasks_start']:8d}      end {figures['tasks_end']:8d}      "
          f"({figures['tasks_end'] - figures['tasks_start']:+d})")
    if figures["tasks_added"] or figures["tasks_gone"]:
        print(f"  tasks added: {', '.join(figures['tasks_added'][:8]) or 'none'}; gone: {', '.join(figures['tasks_gone'][:8]) or 'none'}")
    print(f"  simulator RSS start {figures['sim_rss_start']:.1f} MB, end {figures['sim_rss_end']:.1f} MB")

    churn = figures["churn"]
    done = sum(churn.get("done", {}).values())
    errors = sum(churn.get("errors", {}).values())
    seconds = churn.get("seconds") or figures["soak_s"]
    print("\n== churn ==")
    print(f"  churn achieved: {done / seconds:.1f} changes/s (asked {args.churn:g}); {done:,} changes in {seconds:,.1f} s "
          f"({', '.join(f'{k} {v:,}' for k, v in churn.get('done', {}).items())}); {errors:,} refused during faults "
          f"({', '.join(f'{k} {v:,}' for k, v in churn.get('errors', {}).items()) or 'none'})")
    print(f"  the app's model applied {figures['applied_per_s']:.1f} pod watch events/s")

    print("\n== final state ==")
    n_nodes, n_pods, tries = figures["model_counts"]
    print(f"  model vs a fresh list through the API: {'equal' if not figures['model_diff'] else 'DIFFERENT'} "
          f"({n_nodes:,} nodes, {n_pods:,} pods kept; {tries} look(s))")
    rows_nodes, rows_pods, tries = figures["table_counts"]
    print(f"  Nodes and GPU pods tables vs a fresh model: {'equal' if not figures['table_diff'] else 'DIFFERENT'} "
          f"({rows_nodes:,} node rows, {rows_pods:,} GPU pod rows; {tries} look(s))")
    print(f"  header says watches live: {'yes' if figures['header_watches'] else 'no'}; "
          f"the app kept one model throughout: {'yes' if figures['same_model'] else 'no'}")
    for line in figures["model_diff"] + figures["table_diff"]:
        print(f"    {line}")
    ok = (not figures["model_diff"] and not figures["table_diff"] and figures["settled"] and figures["same_model"]
          and figures["header_watches"])
    print(f"final state equals the server's: {'yes' if ok else 'no'}", flush=True)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--churn-worker":
        churn_worker(sys.argv[2], float(sys.argv[3]), os.getpid())
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="20 nodes / 300 pods, each fault once, back to back")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--fault-every", type=float, default=60.0, help="seconds between faults (default 60)")
    parser.add_argument("--churn", type=float, default=50.0, help="changes a second through the API (default 50)")
    parser.add_argument("--burst", type=float, default=None, help="seconds a 500 burst or a silence lasts (default 5; smoke 0.2)")
    parser.add_argument("--downtime", type=float, default=None,
                        help="seconds the API server is away in a restart or a restore (default 0.5; smoke 0.2)")
    parser.add_argument("--settle", type=float, default=None, help="seconds to settle after the churn (default 15; smoke 0.1)")
    parser.add_argument("--steady", type=float, default=None,
                        help=f"seconds every watch must stay back for a recovery to count (default {STEADY:g}; smoke 0.1)")
    args = parser.parse_args()
    if args.smoke:
        # each fault once, back to back (the next once the last one's watches are back)
        args.nodes, args.pods, args.minutes, args.fault_every, args.churn = 20, 300, 0.0, 0.0, 20.0
    args.burst = args.burst if args.burst is not None else (0.2 if args.smoke else 5.0)
    args.downtime = args.downtime if args.downtime is not None else (0.2 if args.smoke else 0.5)
    args.settle = args.settle if args.settle is not None else (0.1 if args.smoke else 15.0)
    args.steady = args.steady if args.steady is not None else (0.1 if args.smoke else STEADY)
    print(f"soak: {args.nodes:,} nodes, {args.pods:,} pods, {args.minutes:g} min, a fault every {args.fault_every:g} s "
          f"({', '.join(FAULTS)}), {args.churn:g} changes/s asked", flush=True)
    with tempfile.TemporaryDirectory(prefix="gputui-soak-") as workdir:
        # the simulator, the churn worker's process and this one's imports start together
        sim = Simulator(args.nodes, args.pods, workdir, wait=False)
        churn = Churn(sim.kubeconfig, args.churn, go=False)
        try:
            import gputui.ui.app  # noqa: F401  (the app's imports, Textual's among them, while the simulator starts)
            sim.wait_ready()
            figures = asyncio.run(soak(args, sim, churn))
        finally:
            if churn.proc.poll() is None:  # the soak failed before it stopped the churn
                churn.proc.kill()
                churn.proc.wait()
            sim.stop()
            tail = Path(sim.stderr_path).read_text()[-1500:]
            if tail.strip():
                print(f"simulator stderr (tail):\n{tail}", file=sys.stderr)
    report(args, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
