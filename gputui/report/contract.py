"""The report's data: the cluster listed once, as the JSON contract the README documents.

`collect` connects, syncs the model once (nodes and pods required, the rest
waited for a little), reads each DCGM exporter once and returns the contract's
dict; the formats in `gputui.report.formats` print it.
"""
from __future__ import annotations

import sys
from typing import Any

from gputui.kube import gpu
from gputui.kube.config import ConnectError, Forbidden, check, connect
from gputui.kube.model import DAEMONSETS, EVENTS, NODES, PODS, ClusterModel
from gputui.kube.stack import ClusterPolicyStatus, components_json, policy_problems
from gputui.kube.watch import FORBIDDEN

SYNC_TIMEOUT = 60.0
EXTRA_SYNC_TIMEOUT = 10.0
PodTimes = dict[tuple[str, str], float | None]


def has_problems(data: dict[str, Any]) -> bool:
    """Exit status 1: the GPU Operator or some node has a problem."""
    return bool(cluster_problems(data)) or any(n["problems"] for n in data["nodes"])


def cluster_problems(data: dict[str, Any]) -> list[dict[str, str]]:
    """operator-not-ready, from the contract's stack (the JSON has no cluster-level problem list)."""
    policy = data["stack"]["cluster_policy"]
    return [{"code": p.code, "message": p.message} for p in policy_problems(ClusterPolicyStatus(**policy) if policy else None)]


async def collect(
    kubeconfig: str | None, context: str | None, namespace: str | None, extra: frozenset[str] = frozenset()
) -> tuple[dict[str, Any], PodTimes]:
    """Connect, sync once; return the report as the JSON contract's dict, and the pods' creation times."""
    async with await connect(kubeconfig, context) as conn:
        await check(conn)
        model = ClusterModel(conn.api, resources=gpu.GpuResources(extra))
        async with model:
            synced = await model.wait_synced(SYNC_TIMEOUT, kinds=(NODES, PODS))
            for kind in (NODES, PODS):
                state = model.states[kind]
                if state.phase == FORBIDDEN:
                    raise Forbidden(f"forbidden (403): {state.error}")
                if not state.synced:
                    why = state.error or ("timed out" if not synced else "not listed")
                    raise ConnectError(f"cannot list {kind} from {conn.server}: {why}")
            # The rest (events, the GPU stack's kinds) only adds detail: wait for it a little longer at most.
            await model.wait_synced(EXTRA_SYNC_TIMEOUT)
            if model.states[EVENTS].phase == FORBIDDEN:
                print("gputui report: warning: events are forbidden; pending pods' reasons come from their conditions only", file=sys.stderr)
            if model.states[DAEMONSETS].phase == FORBIDDEN:
                print("gputui report: warning: daemonsets are forbidden; the GPU stack and its components are unknown", file=sys.stderr)
            await model.metrics.poll_once()
            data = as_contract(model, conn.context, namespace)
            created = {(g.pod.namespace, g.pod.name): g.pod.created for g in model.gpu_pods(namespace=namespace)}
            return data, created


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
