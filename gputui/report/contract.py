"""The report's data: the cluster listed once, as the JSON contract the README documents.

`collect` connects, syncs the model once (nodes and pods required, the rest
waited for a little), reads each DCGM exporter once, works out the idle
allocated GPUs (kube/idle.py: a Prometheus, else those reads and the history
file's samples) and returns the contract's dict; the formats in
`gputui.report.formats` print it.
"""
from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from typing import Any, Callable, Iterable, Mapping

from gputui.kube import gpu, kueue
from gputui.kube.config import ConnectError, Forbidden, Impersonation, Unreachable, check, connect
from gputui.kube.idle import DEFAULT_PROMETHEUS, HistoryError, IdleSettings, IdleTracker, holders
from gputui.kube.metrics import ReadBudget
from gputui.kube.model import (
    ALL_KINDS, CLUSTERPOLICIES, CLUSTERQUEUES, COMPUTEDOMAINS, DAEMONSETS, GPUCLUSTERS, DEVICECLASSES, EVENTS, LOCALQUEUES, NODES, PODS, RESOURCECLAIMS,
    RESOURCESLICES, WORKLOADS, ClusterModel,
)
from gputui.kube.stack import RUNNING, ClusterPolicyStatus, components_json, policy_problems
from gputui.kube.tables import unreadable_line
from gputui.kube.watch import ABSENT, FORBIDDEN, RETRYING, ResourceState
from gputui.kube.watches import Scope, namespaces_to_try
from gputui.sanitize import printable

SYNC_TIMEOUT = 60.0  # a slow list of a required kind may take this long; one that keeps failing gives up sooner
EXTRA_SYNC_TIMEOUT = 10.0
REQUIRED = (NODES, PODS)  # without these there is no report: exit 2
OPTIONAL = tuple(kind for kind in ALL_KINDS if kind not in REQUIRED)  # these only add detail: named in `missing`
REQUIRED_FAILURES = 4  # failures in a row (with the reflector's back-off, within a few seconds) before giving up
RETRY_WINDOW = 10.0  # or failing for this long
SETTLE_POLL = 0.1
METRICS_PART = "metrics"
CONSEQUENCES = {  # what the report lacks when a part is missing
    PODS: "nodes' allocated and free are unknown: pods of other namespaces may hold GPUs",  # read in some namespaces only
    EVENTS: "pending pods' reasons come from their conditions only",
    DAEMONSETS: "the GPU stack and its components are unknown",
    CLUSTERPOLICIES: "the GPU Operator's ClusterPolicy state is unknown",
    GPUCLUSTERS: "the GPU Operator's GPUCluster state is unknown",
    RESOURCESLICES: "GPUs handed out by Dynamic Resource Allocation are not counted",
    RESOURCECLAIMS: "GPUs held through Dynamic Resource Allocation are not counted as allocated",
    DEVICECLASSES: "GPUs handed out by Dynamic Resource Allocation are not counted",
    WORKLOADS: "why Kueue holds pending pods back is unknown",
    LOCALQUEUES: "Kueue's LocalQueues are unknown",
    CLUSTERQUEUES: "Kueue's ClusterQueues, their GPU quota and usage, are unknown",
    COMPUTEDOMAINS: "NVIDIA's ComputeDomains are unknown",
    METRICS_PART: "those nodes have no DCGM readings",
}
PodTimes = dict[tuple[str, str], float | None]


def has_problems(data: Mapping[str, Any]) -> bool:
    """Exit status 1: the GPU Operator or some node has a problem."""
    return bool(cluster_problems(data)) or any(n["problems"] for n in data["nodes"])


def cluster_problems(data: Mapping[str, Any]) -> list[dict[str, str]]:
    """operator-not-ready, from the contract's stack, and each ComputeDomain's compute-domain-not-ready (the JSON has
    no cluster-level problem list)."""
    policy = data["stack"]["cluster_policy"]
    status = ClusterPolicyStatus(**policy) if policy else None
    problems = [{"code": str(p.code), "message": p.message} for p in policy_problems(status, time.time())]
    return problems + [d["problem"] for d in data.get("compute_domains") or [] if d.get("problem")]


async def collect(
    kubeconfig: str | None, context: str | None, namespaces: Iterable[str] | None = (), extra: frozenset[str] = frozenset(),
    *, metrics: Mapping[str, Any] | None = None, exec_timeout: float = 60.0, warn: Callable[[str], None] | None = None,
    configured_namespaces: Iterable[str] = (), idle: IdleSettings | None = None, wait: float = 0.0,
    impersonate: Impersonation | None = None,
) -> tuple[dict[str, Any], PodTimes]:
    """Connect, sync once; return the report as the JSON contract's dict, and the pods' creation times.
    namespaces: -n, the GPU pods listed; also where pods are read when they cannot be listed cluster-wide,
    else the context's namespace, then configured_namespaces (the config file's).
    metrics: ClusterModel's options from the config file (`Config.model_options()`: [metrics], see read_exporters; [stuck], [health]).
    warn: where the warnings go (each a line; default: `gputui report: warning: ...` on stderr).
    idle: the idle GPUs' settings (the config file's [idle], --prometheus, --history); None: no Prometheus, no file.
    wait: seconds to go on trying a server that refuses, resets or times out (restarting), each try said.
    impersonate: --as, --as-group, --as-uid (over the kubeconfig user's own)."""
    say = warn or (lambda line: print(f"gputui report: warning: {line}", file=sys.stderr))
    async with await connect(kubeconfig, context, exec_timeout=exec_timeout, impersonate=impersonate) as conn:
        await check_within(conn, wait)
        for notice in conn.warnings:  # insecure-skip-tls-verify: said once
            say(notice)
        namespaces = tuple(namespaces or ())
        tried = namespaces_to_try(namespaces, conn.namespace, configured_namespaces)
        model = ClusterModel(conn.api, resources=gpu.GpuResources(extra), namespaces=tried, **(metrics or {}))
        async with model:
            synced = await settle(model, REQUIRED, SYNC_TIMEOUT)
            for kind in REQUIRED:
                state = model.states[kind]
                if state.phase == FORBIDDEN:
                    raise Forbidden(f"forbidden (403): {state.error}")
                if not state.synced:
                    why = state.error or ("timed out" if not synced else "not listed")
                    raise ConnectError(f"cannot list {kind} from {conn.server}: {why}")
            # The rest (events, the GPU stack's kinds) only adds detail: wait for it a little longer at most.
            # PODS again: the GPU stack's namespaces, found in the DaemonSets just read, have pods watches of their own.
            await settle(model, (*OPTIONAL, PODS), EXTRA_SYNC_TIMEOUT)
            settings = idle or IdleSettings(prometheus=None)
            tracker = IdleTracker(conn.api, settings, scope=conn.server)
            try:
                await tracker.open()
                unhook = tracker.follow(model.metrics)
                await read_exporters(model)
                unhook()
                view = await tracker.refresh(holders(model, namespaces))  # writes the history file
            except HistoryError as exc:
                raise ConnectError(str(exc)) from None
            finally:
                with contextlib.suppress(HistoryError):
                    await tracker.close()
            data = as_contract(model, conn.context, namespaces)
            data["idle"] = view.to_json()
            quiet = settings.prometheus == DEFAULT_PROMETHEUS and tracker.prometheus is not None and tracker.prometheus.absent
            if view.note and not quiet:  # a Prometheus named but not answering; the default one merely absent is no news
                say(printable(view.note))
            data["missing"] = missing_parts(model)
            for part in data["missing"]:
                say(warning(part))
            skipped = model.unreadable()
            data["unreadable"] = [{"kind": kind, "name": name, "reason": why} for kind, name, why in skipped]
            if skipped:
                say(f"{printable(unreadable_line(skipped))} (left out of the figures)")
            created = {(g.pod.namespace, g.pod.name): g.pod.created for g in shown_pods(model, namespaces)}
            return data, created


async def read_exporters(model: ClusterModel) -> None:
    """Read each GPU node's DCGM exporter once, as the config file's [metrics] allows: at most
    `concurrency` reads at once (the model's poller) and `reads_per_minute` a minute (a token
    bucket holding `concurrency` reads, as the app's background reads). `interval` does not
    apply: the report reads once."""
    poller = model.metrics
    targets = poller.targets()
    readable = sorted(node for node, e in targets.items() if e.unavailable is None and e.pod is not None)
    others = [node for node in targets if node not in set(readable)]
    if others:
        await poller.poll_once(others)  # no request: their state says why there is nothing to read
    budget = ReadBudget(poller.reads_per_minute, poller.concurrency, asyncio.get_running_loop().time)
    reads = []
    for node in readable:
        await budget.acquire()
        reads.append(asyncio.create_task(poller.poll_once([node]), name=f"gputui-report-dcgm-{node}"))
    if reads:
        await asyncio.gather(*reads)


async def check_within(conn: Any, wait: float) -> None:
    """config.check, tried again for `wait` seconds while the server is unreachable for a reason that may
    pass (a restart: refused, reset, timed out); each failed try is a line on stderr."""
    deadline = time.monotonic() + wait
    pause = 0.5
    while True:
        try:
            await check(conn)
            return
        except Unreachable as exc:
            left = deadline - time.monotonic()
            if not exc.transient or left <= 0:
                raise
            pause = min(pause * 2, 2.0, left)
            print(f"gputui report: {exc}; trying again in {pause:.1f} s (--wait: {wait:g} s)", file=sys.stderr)
            await asyncio.sleep(pause)


def gave_up(state: ResourceState, now: float) -> bool:
    """A resource never listed that keeps failing: REQUIRED_FAILURES failures, or failing for RETRY_WINDOW seconds."""
    return not state.synced and state.phase == RETRYING and (state.attempt >= REQUIRED_FAILURES or now - state.since >= RETRY_WINDOW)


async def settle(model: ClusterModel, kinds: tuple[str, ...], timeout: float) -> bool:
    """Wait until each of `kinds` is listed, forbidden or not served, or has failed a few times
    in a row (see gave_up), for `timeout` seconds at most. False on timeout."""
    kinds = tuple(kind for kind in kinds if kind in model.reflectors)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        if await model.wait_synced(min(SETTLE_POLL, max(0.0, deadline - loop.time())), kinds=kinds):
            return True
        now = time.monotonic()
        states = model.states
        if all(model.watches.settled((kind,)) or gave_up(states[kind], now) for kind in kinds):
            return True
        if loop.time() >= deadline:
            return False


def missing_parts(model: ClusterModel) -> list[dict[str, str]]:
    """The optional parts that could not be read, each with why: the contract's `missing`."""
    missing = [partial_part(model, scope) for scope in model.partial_scopes()]
    for kind, state in model.states.items():
        if kind in REQUIRED or state.phase == ABSENT or (state.synced and state.phase != FORBIDDEN):
            continue
        if state.phase == FORBIDDEN:
            reason = f"forbidden (403): {state.error}" if state.error else "forbidden (403)"
        else:
            reason = state.error or f"not listed within {EXTRA_SYNC_TIMEOUT:g} s"
        missing.append({"part": kind, "reason": reason})
    # DCGM metrics: the nodes whose exporter runs (or may run) but could not be read.
    failures: dict[str, int] = {}
    for summary in model.node_summaries():
        if not summary.gpu_node:
            continue
        exporter = summary.components.get("dcgm-exporter")
        if exporter is not None and exporter.state != RUNNING:
            continue  # none expected, or not running: the components say so, there was nothing to read
        metrics = model.node_metrics(summary.name)
        if metrics is not None and metrics.error is not None:
            failures[metrics.error] = failures.get(metrics.error, 0) + 1
    if failures:
        reasons = sorted(failures.items(), key=lambda item: -item[1])
        text = "; ".join(f"{error} ({n} node{'s' if n > 1 else ''})" for error, n in reasons[:3])
        if len(reasons) > 3:
            text += f"; {len(reasons) - 3} other reasons"
        missing.append({"part": METRICS_PART, "reason": text})
    return missing


def partial_part(model: ClusterModel, scope: Scope) -> dict[str, str]:
    """A kind forbidden cluster-wide and read in some namespaces: missing too, in part."""
    error = model.reflectors[scope.kind].state.error
    reason = f"forbidden (403) cluster-wide{': ' + error if error else ''}; read in {', '.join(scope.readable)} only"
    if scope.forbidden:
        reason += f" (forbidden in {', '.join(scope.forbidden)} too)"
    return {"part": scope.kind, "reason": reason}


def warning(part: dict[str, str]) -> str:
    """One line for stderr: what could not be read, why, and what the report lacks for it."""
    name, reason = part["part"], part["reason"]
    if reason.startswith("forbidden (403)"):
        line = f"{name} are forbidden{reason[len('forbidden'):]}"
    else:
        line = f"{name} could not be read: {reason}"
    consequence = CONSEQUENCES.get(name)
    return f"{line}; {consequence}" if consequence else line


def shown_pods(model: ClusterModel, namespaces: Iterable[str] | None) -> list[gpu.GpuPod]:
    """The GPU pods listed: those of `namespaces` (-n), else all."""
    wanted = set(namespaces or ())
    return [g for g in model.gpu_pods() if not wanted or g.pod.namespace in wanted]


def usage_json(u: gpu.Usage, partial: bool) -> dict[str, int | None]:
    """capacity, allocatable, allocated, free; the last two null when pods are read in some namespaces only."""
    out: dict[str, int | None] = dict(u.as_dict())
    if partial:
        out["allocated"] = out["free"] = None
    return out


def as_contract(model: ClusterModel, context: str | None, namespaces: Iterable[str] | None) -> dict[str, Any]:
    """The stable JSON contract (documented in the README)."""
    summaries = model.node_summaries()
    partial = model.scope(PODS).partial
    return {
        "context": context,
        "scope": {kind: model.scope(kind).to_json() for kind in (PODS, EVENTS, DAEMONSETS) if kind in model.reflectors},
        "stack": model.stack().to_json(),
        "compute_domains": [v.to_json() for v in model.domain_views()],
        "nodes": [node_contract(model, s, partial) for s in summaries],
        "pods": [
            {
                "namespace": g.pod.namespace,
                "name": g.pod.name,
                "node": g.pod.node,
                "phase": g.pod.phase,
                "gpu": dict(g.gpu),
                "reason": g.reason,
                "claims": [{"claim": h.claim, "devices": list(h.devices)} for h in g.claims],
                "asks": list(g.asks),
            }
            for g in shown_pods(model, namespaces)
        ],
        "totals": {name: usage_json(u, partial) for name, u in gpu.totals(summaries).items()},
        "fit": None if (fits := model.fit()) is None else {name: f.as_json() for name, f in fits.items()},
        "dra_pools": [pool.as_json() for pool in model.dra_view().classes.pools],
        "queues": queues_contract(model),
        "bad_gpus": [bad.to_json(model.clock()) for bad in model.bad_gpus()],
    }


def queues_contract(model: ClusterModel) -> dict[str, Any] | None:
    """Kueue's ClusterQueues, LocalQueues and pending GPU Workloads (each list None when its kind could not be
    read); None where Kueue is not installed."""
    return None if model.kueue_state() == kueue.NOT_INSTALLED else model.kueue().to_json()


def node_contract(model: ClusterModel, s: gpu.NodeSummary, partial: bool = False) -> dict[str, Any]:
    node: dict[str, Any] = {
        "name": s.name,
        "ready": s.node.ready is True,
        "schedulable": not s.node.unschedulable,
        "product": s.facts.product,
        "gpu": {name: usage_json(u, partial) for name, u in s.usage.items()},
        "problems": [{"code": p.code, "message": p.message} for p in s.problems],
        # verdicts not given: their input is not known here (a dump holds no DCGM readings, a failed read)
        "unknown": [{"verdict": u.what, "reason": u.why} for u in s.unknown],
        "components": components_json(s.components),
        "plugins": [plugin.to_json() for plugin in s.plugins],
    }
    metrics = model.node_metrics(s.name)
    if metrics is not None and metrics.current:
        node["gpus"] = [reading.to_json() for reading in metrics.readings]
    return node
