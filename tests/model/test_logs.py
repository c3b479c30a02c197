"""Streaming a plugin pod's log: tail, then follow; errors in one line."""
from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio

from gputui.kube.config import connect
from gputui.kube.logs import LogError, stream_logs
from gputui.sim.cluster import SimCluster
from tests.model.objects import plugin_pod

pytestmark = pytest.mark.asyncio(loop_scope="module")
NS, POD = "nvidia-device-plugin", "plugin-helm-gpu-1"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sim():
    async with SimCluster([plugin_pod("gpu-1", "helm")]) as cluster:
        yield cluster


@pytest_asyncio.fixture(loop_scope="module")
async def api(sim):
    async with await connect(str(sim.kubeconfig_path)) as conn:
        yield conn.api


async def test_tail_then_follow_until_the_container_ends(sim, api):
    for i in range(5):
        sim.logs.append(NS, POD, "nvidia-device-plugin-ctr", f"line {i}\n")
    lines = stream_logs(api, NS, POD, "nvidia-device-plugin-ctr", tail=2)
    assert [await anext(lines), await anext(lines)] == [b"line 3", b"line 4"]
    sim.logs.append(NS, POD, "nvidia-device-plugin-ctr", "Registered device plugin for 'nvidia.com/gpu' with Kubelet\n")
    sim.logs.append(NS, POD, "nvidia-device-plugin-ctr", b"[red]markup[/red] \xff\xfe stays bytes\n")
    assert await asyncio.wait_for(anext(lines), 2) == b"Registered device plugin for 'nvidia.com/gpu' with Kubelet"
    assert await asyncio.wait_for(anext(lines), 2) == b"[red]markup[/red] \xff\xfe stays bytes"
    sim.logs.end(NS, POD, "nvidia-device-plugin-ctr")
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(lines), 2)


async def test_cancelling_a_follow_releases_it(sim, api):
    sim.logs.append(NS, POD, "nvidia-device-plugin-sidecar", "hello\n")

    async def read_all():
        return [line async for line in stream_logs(api, NS, POD, "nvidia-device-plugin-sidecar", tail=10)]

    task = asyncio.create_task(read_all())
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_long_line_arrives_whole(sim, api):
    sim.logs.append(NS, POD, "nvidia-device-plugin-sidecar", b"x" * 5000 + b"\n")
    pieces = []
    async for line in stream_logs(api, NS, POD, "nvidia-device-plugin-sidecar", tail=1, follow=False, max_line=1024):
        pieces.append(line)
    assert b"".join(pieces) == b"x" * 5000


async def test_missing_container_name_is_one_clear_line(api):
    with pytest.raises(LogError) as err:
        async for _ in stream_logs(api, NS, POD, None):
            pass
    assert "a container name must be specified" in str(err.value) and "\n" not in str(err.value)
