"""Streaming a plugin pod's log: tail, then follow; errors in one line; followed across restarts (LogFollower)."""
from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio

from gputui.kube.config import connect
from gputui.kube.logs import LogError, LogFollower, LogNote, LogSource, stream_logs
from gputui.sim.cluster import SimCluster
from tests.model.objects import plugin_pod

pytestmark = pytest.mark.asyncio(loop_scope="module")
NS, POD = "nvidia-device-plugin", "plugin-helm-gpu-1"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sim():
    async with SimCluster([plugin_pod(node, "helm") for node in ("gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5")]) as cluster:
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


# -- LogFollower: one container followed across restarts and replaced pods ---------------------------
CTR = "nvidia-device-plugin-ctr"


class Following:
    """A LogFollower on a source the test sets, read line by line."""

    def __init__(self, api, source: LogSource | None, **options) -> None:
        self.source = source
        self.follower = LogFollower(api, lambda: self.source, tail=10, retry=0.01, **options)
        self.lines = self.follower.lines()

    async def next(self) -> bytes | LogNote:
        return await asyncio.wait_for(anext(self.lines), 5)

    def set(self, source: LogSource | None) -> None:
        self.source = source
        self.follower.changed()


async def test_the_follower_goes_on_to_the_restarted_container_and_says_so(sim, api):
    pod = "plugin-helm-gpu-2"
    sim.logs.append(NS, pod, CTR, "first instance\n")
    following = Following(api, LogSource(NS, pod, CTR, uid="u2", restarts=0))
    assert await following.next() == b"first instance"
    sim.logs.end(NS, pod, CTR)  # the container exits; the kubelet starts it again
    sim.logs.append(NS, pod, CTR, "second instance\n")
    following.set(LogSource(NS, pod, CTR, uid="u2", restarts=1))
    note = await following.next()
    assert isinstance(note, LogNote) and note == f"container restarted: {pod}, restarts 1"
    assert await following.next() == b"second instance"
    await following.lines.aclose()


async def test_no_container_is_said_once_then_the_log_follows_when_one_comes(sim, api):
    pod = "plugin-helm-gpu-3"
    sim.logs.append(NS, pod, CTR, "hello\n")
    following = Following(api, None, absent="no device-plugin pod on this node")
    assert await following.next() == LogNote("no device-plugin pod on this node")
    following.set(None)  # a change that changes nothing: not said again
    following.set(LogSource(NS, pod, CTR, uid="u3"))
    assert await following.next() == b"hello"
    await following.lines.aclose()


async def test_a_failed_stream_is_a_note_then_tried_again(sim, api):
    pod = "plugin-helm-gpu-4"
    sim.logs.append(NS, pod, CTR, "after the fix\n")
    following = Following(api, LogSource(NS, pod, None, uid="u4"))  # no container named: the server refuses
    note = await following.next()
    assert isinstance(note, LogNote) and note.startswith("log stream failed: ") and "container name must be specified" in note
    following.source = LogSource(NS, pod, CTR, uid="u4")  # no changed(): the retry finds it
    assert await following.next() == b"after the fix"  # the same refusal in between was not said again
    await following.lines.aclose()


async def test_a_crash_looping_container_shows_its_previous_instance_first(sim, api):
    pod = "plugin-helm-gpu-5"
    sidecar = "nvidia-device-plugin-sidecar"

    def crashed(obj: dict) -> None:  # what the kubelet says of a container that exited and was started again
        status = next(s for s in obj["status"]["containerStatuses"] if s["name"] == sidecar)
        status["restartCount"] = 3
        status["lastState"] = {"terminated": {"exitCode": 2, "reason": "Error"}}

    sim.store.mutate("pods", NS, pod, crashed)
    sim.logs.append(NS, pod, sidecar, "panic: no devices\n")
    sim.logs.end(NS, pod, sidecar)
    sim.logs.append(NS, pod, sidecar, "starting again\n")
    following = Following(api, LogSource(NS, pod, sidecar, uid="u1", restarts=3, crash_looping=True))
    assert await following.next() == LogNote(f"previous instance of {sidecar}")
    assert await following.next() == b"panic: no devices"
    assert await following.next() == LogNote("current instance")
    assert await following.next() == b"starting again"
    await following.lines.aclose()
