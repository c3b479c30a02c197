"""A small GPU cluster for the model tests, and helpers to run a model against it."""
from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, AsyncIterator, Callable

from gputui.kube.config import connect
from gputui.kube.model import ClusterModel
from gputui.kube.records import node_from, object_key
from tests.model.objects import container, event, node, plugin_pod, pod

FAST = dict(backoff_initial=0.05, backoff_max=0.2, forbidden_retry=0.3)


@contextlib.asynccontextmanager
async def model_on(cluster: Any, sync: bool = True) -> AsyncIterator[ClusterModel]:
    """A ClusterModel of a SimCluster, over its own connection; synced first unless told."""
    conn = await connect(str(cluster.kubeconfig_path))
    try:
        async with ClusterModel(conn.api, **FAST) as model:
            if sync:
                assert await model.wait_synced(20)
            yield model
    finally:
        await conn.close()


async def synced(sim: Any, kinds: tuple[str, ...], **options: Any) -> tuple[Any, ClusterModel]:
    """(connection, started model of these kinds, synced); end it with stop()."""
    conn = await connect(str(sim.kubeconfig_path))
    model = ClusterModel(conn.api, kinds=kinds, **FAST, **options)
    await model.start()
    assert await model.wait_synced(10), model.states
    return conn, model


async def stop(conn: Any, model: ClusterModel) -> None:
    await model.stop()
    await conn.close()


CRDS = "customresourcedefinitions.apiextensions.k8s.io"  # discovery's watch of the CRDs' names (kube/discovery.py)


def model_watches(sim: Any) -> int:
    """Watches the simulator opened for the model's kinds: all but discovery's of the CRDs' names, which
    opens beside the sync, sooner or later."""
    return sum(1 for verb, resource, _ in sim.api_counts.recent if verb == "watch" and resource != CRDS)


def reads(sim: Any, resource: str) -> list[tuple[str, dict[str, str]]]:
    """The simulator's recent requests for a resource: (verb, query)."""
    return [(verb, query) for verb, res, query in sim.api_counts.recent if res == resource]


def small_cluster() -> list[dict[str, Any]]:
    return [
        node("gpu-1", capacity={"nvidia.com/gpu": 8}, labels={"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
        node("gpu-2", capacity={"nvidia.com/gpu": 4}, allocatable={"nvidia.com/gpu": 3}),
        node("mig-1", capacity={"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 7}),
        node("cpu-1"),
        plugin_pod("gpu-1"),
        plugin_pod("gpu-2", "helm"),
        plugin_pod("mig-1", "operator", waiting_reason="CrashLoopBackOff", restarts=3),
        pod("ml", "train-0", node="gpu-1", gpu={"nvidia.com/gpu": 4}),
        pod("ml", "two-containers", node="gpu-1", containers=[container("a", {"nvidia.com/gpu": 1}), container("b", {"nvidia.com/gpu": 1})]),
        pod("ml", "with-init", node="gpu-2", containers=[container("a", {"nvidia.com/gpu": 1})], init_containers=[container("warmup", {"nvidia.com/gpu": 3})]),
        pod("ml", "init-only", node="gpu-1", containers=[container("a")], init_containers=[container("warmup", {"nvidia.com/gpu": 1})]),
        pod("ml", "finished", node="gpu-2", gpu={"nvidia.com/gpu": 2}, phase="Succeeded"),
        pod("ml", "waiting", gpu={"nvidia.com/gpu": 16}, unschedulable_message="0/4 nodes are available: 4 Insufficient nvidia.com/gpu."),
        pod("ml", "slice", node="mig-1", gpu={"nvidia.com/mig-1g.10gb": 2}),
        pod("web", "frontend", node="cpu-1"),
        pod("web", "backend", node="gpu-1"),
        event("ml", "waiting.1", kind="Pod", object_name="waiting", reason="FailedScheduling", message="0/4 nodes are available"),
        event("web", "frontend.1", kind="Pod", object_name="frontend", reason="Pulled", message="pulled", type_="Normal"),
        event("default", "gpu-2.1", kind="Node", object_name="gpu-2", object_namespace="", reason="NodeReady", message="ready", type_="Normal"),
    ]


async def until(condition: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Wait until condition() is true; its value."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)
    return value


def expected_pods(model: ClusterModel, store) -> dict:
    """What a fresh list gives: the store's pods through the model's own filter."""
    out = {}
    for obj in store.objects("pods"):
        record = model.keep.pod(obj)
        if record is not None:
            out[object_key(obj)] = record
    return out


def matches_fresh_list(model: ClusterModel, store) -> bool:
    nodes = {o["metadata"]["name"]: node_from(o) for o in store.objects("nodes")}
    return model.nodes.records == nodes and model.pods.records == expected_pods(model, store)
