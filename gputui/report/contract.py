"""The report's data: the cluster listed once, as the JSON contract the README documents.

`collect` connects, syncs the model once (nodes and pods required, the rest
waited for a little), reads each DCGM exporter once and returns the contract's
dict; the formats in `gputui.report.formats` print it.
"""
from __future__ import annotations

import asyncio
import sys
import time
from typing import Any, Mapping

from gputui.kube import gpu
from gputui.kube.config import ConnectError, Forbidden, check, connect
from gputui.kube.model import (
    ALL_KINDS, CLUSTERPOLICIES, DAEMONSETS, DEVICECLASSES, EVENTS, NODES, PODS, RESOURCECLAIMS, RESOURCESLICES, ClusterModel,
)
from gputui.kube.stack import RUNNING, ClusterPolicyStatus, components_json, policy_problems
from gputui.kube.tables import unreadable_line
from gputui.kube.watch import ABSENT, FORBIDDEN, RETRYING, ResourceState
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
    EVENTS: "pending pods' reasons come from their conditions only",
    DAEMONSETS: "the GPU stack and its components are unknown",
    CLUSTERPOLICIES: "the GPU Operator's ClusterPolicy state is unknown",
    RESOURCESLICES: "GPUs handed out by Dynamic Resource Allocation are not counted",
    RESOURCECLAIMS: "GPUs held through Dynamic Resource Allocation are not counted as allocated",
    DEVICECLASSES: "GPUs handed out by Dynamic Resource Allocation are not counted",
    METRICS_PART: "those nodes have no DCGM readings",
}
PodTimes = dict[tuple[str, str], float | None]


def has_problems(data: dict[str, Any]) -> bool:
    """Exit status 1: the GPU Operator or some node has a problem."""
    return bool(cluster_problems(data)) or any(n["problems"] for n in data["nodes"])


def cluster_problems(data: dict[str, Any]) -> list[dict[str, str]]:
    """operator-not-ready, from the contract's stack (the JSON has no cluster-level problem list)."""
    policy = data["stack"]["cluster_policy"]
    return [{"code": p.code, "message": p.message} for p in policy_problems(ClusterPolicyStatus(**policy) if policy else None)]


async def collect(
    kubeconfig: str | None, context: str | None, namespace: str | None, extra: frozenset[str] = frozenset(),
    *, metrics: Mapping[str, Any] | None = None, exec_timeout: float = 60.0,
) -> tuple[dict[str, Any], PodTimes]:
    """Connect, sync once; return the report as the JSON contract's dict, and the pods' creation times.
    metrics: ClusterModel's metrics_* options (the config file's [metrics]: see read_exporters)."""
    async with await connect(kubeconfig, context, exec_timeout=exec_timeout) as conn:
        await check(conn)
        for notice in conn.warnings:  # insecure-skip-tls-verify: said once
            print(f"gputui report: warning: {notice}", file=sys.stderr)
        model = ClusterModel(conn.api, resources=gpu.GpuResources(extra), **(metrics or {}))
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
            await settle(model, OPTIONAL, EXTRA_SYNC_TIMEOUT)
            await read_exporters(model)
            data = as_contract(model, conn.context, namespace)
            data["missing"] = missing_parts(model)
            for part in data["missing"]:
                print(f"gputui report: warning: {warning(part)}", file=sys.stderr)
            skipped = model.unreadable()
            data["unreadable"] = [{"kind": kind, "name": name, "reason": why} for kind, name, why in skipped]
            if skipped:
                print(f"gputui report: warning: {printable(unreadable_line(skipped))} (left out of the figures)", file=sys.stderr)
            created = {(g.pod.namespace, g.pod.name): g.pod.created for g in model.gpu_pods(namespace=namespace)}
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
    loop = asyncio.get_running_loop()
    rate = poller.reads_per_minute / 60.0
    capacity = float(max(1, min(poller.concurrency, poller.reads_per_minute)))
    tokens, filled_at = capacity, loop.time()
    reads = []
    for node in readable:
        while True:
            now = loop.time()
            tokens, filled_at = min(capacity, tokens + (now - filled_at) * rate), now
            if tokens >= 1.0:
                break
            await asyncio.sleep((1.0 - tokens) / rate)
        tokens -= 1.0
        reads.append(asyncio.create_task(poller.poll_once([node]), name=f"gputui-report-dcgm-{node}"))
    if reads:
        await asyncio.gather(*reads)


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
        if all(model.reflectors[kind].settled.is_set() or gave_up(states[kind], now) for kind in kinds):
            return True
        if loop.time() >= deadline:
            return False


def missing_parts(model: ClusterModel) -> list[dict[str, str]]:
    """The optional parts that could not be read, each with why: the contract's `missing`."""
    missing = []
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


def warning(part: dict[str, str]) -> str:
    """One line for stderr: what could not be read, why, and what the report lacks for it."""
    name, reason = part["part"], part["reason"]
    if reason.startswith("forbidden (403)"):
        line = f"{name} are forbidden{reason[len('forbidden'):]}"
    else:
        line = f"{name} could not be read: {reason}"
    consequence = CONSEQUENCES.get(name)
    return f"{line}; {consequence}" if consequence else line


def as_contract(model: ClusterModel, context: str | None, namespace: str | None) -> dict[str, Any]:
    """The stable JSON contract (documented in the README)."""
    summaries = model.node_summaries()
    return {
        "context": context,
        "stack": model.stack().to_json(),
        "nodes": [node_contract(model, s) for s in summaries],
        "pods": [
            {
                "namespace": g.pod.namespace,
                "name": g.pod.name,
                "node": g.pod.node,
                "phase": g.pod.phase,
                "gpu": dict(g.gpu),
                "reason": g.reason,
                "claims": [{"claim": h.claim, "devices": list(h.devices)} for h in g.claims],
            }
            for g in model.gpu_pods(namespace=namespace)
        ],
        "totals": {name: u.as_dict() for name, u in gpu.totals(summaries).items()},
    }


def node_contract(model: ClusterModel, s: gpu.NodeSummary) -> dict[str, Any]:
    node: dict[str, Any] = {
        "name": s.name,
        "ready": s.node.ready is True,
        "schedulable": not s.node.unschedulable,
        "product": s.facts.product,
        "gpu": {name: u.as_dict() for name, u in s.usage.items()},
        "problems": [{"code": p.code, "message": p.message} for p in s.problems],
        "components": components_json(s.components),
    }
    metrics = model.node_metrics(s.name)
    if metrics is not None and metrics.current:
        node["gpus"] = [reading.to_json() for reading in metrics.readings]
    return node
