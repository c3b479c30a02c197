"""GET /counts on the control endpoint: every request the API server answered, by verb, and the simulator's memory.

The load benchmark (tests/bench_load.py) takes each figure as a delta of these counts, so they must count
what was asked: the real kubectl's list and get, a watch as soon as it opens (not when it ends), a write,
the bytes of a get's answer; and the peak memory must start again when told.
"""
from __future__ import annotations

import asyncio

import pytest

from gputui.sim.cluster import SimCluster
from gputui.sim.control import ControlError, ControlServer, send


async def counts(url: str, request: dict | None = None) -> dict:
    return await asyncio.to_thread(send, url, request, 30.0, "/counts")


def grew(after: dict, before: dict) -> dict[str, int]:
    return {verb: n - before["requests"].get(verb, 0) for verb, n in after["requests"].items() if n != before["requests"].get(verb, 0)}


async def test_counts_say_each_verb_as_it_is_asked(make_kubectl):
    async with SimCluster(nodes=3, pods=10) as sim:
        control = await ControlServer(sim).start()
        try:
            kubectl = make_kubectl(sim.kubeconfig_path)
            pod = next(iter(sim.store.objects("pods")))["metadata"]
            start = await counts(control.url)
            await asyncio.to_thread(kubectl, "get", "pods", "-A")
            listed = await counts(control.url)
            made = grew(listed, start)
            assert made.get("list") == 1 and made.get("discovery", 0) >= 1 and "get" not in made, made
            assert listed["bytes_sent"] > start["bytes_sent"]

            await asyncio.to_thread(kubectl, "get", "pod", "-n", pod["namespace"], pod["name"])
            got = await counts(control.url)
            assert grew(got, listed) == {"get": 1}, grew(got, listed)  # discovery is cached now

            async with sim.http_session() as http:
                path = f"{sim.url}/api/v1/namespaces/{pod['namespace']}/pods/{pod['name']}"
                async with http.get(path) as resp:
                    body = await resp.read()
                raw = await counts(control.url)
                assert grew(raw, got) == {"get": 1} and raw["get_bytes"] - got["get_bytes"] == len(body)

                async with http.get(f"{sim.url}/api/v1/pods", params={"watch": "true"}) as stream:
                    await stream.content.readline()  # the stream is open, its first event came
                    watching = await counts(control.url)
                    assert grew(watching, raw) == {"watch": 1}, grew(watching, raw)
                patch = {"metadata": {"labels": {"counted": "yes"}}}
                async with http.patch(path, json=patch, headers={"Content-Type": "application/merge-patch+json"}) as resp:
                    assert resp.status == 200
                patched = await counts(control.url)
                assert grew(patched, watching) == {"patch": 1}
                assert patched["resourceVersion"] > watching["resourceVersion"]
        finally:
            await control.stop()


async def test_the_peak_memory_starts_again_when_told():
    async with SimCluster(nodes=1, pods=0) as sim:
        control = await ControlServer(sim).start()
        try:
            block = bytearray(200 * 2**20)  # in this process, which is the simulator's
            block[:: 4096] = b"x" * len(range(0, len(block), 4096))
            del block
            before = await counts(control.url)
            assert before["peakRssMb"] >= before["rssMb"] + 150, before
            after = await counts(control.url, {"action": "reset-peak"})
            assert after["rssMb"] <= after["peakRssMb"] < before["peakRssMb"] - 150, (before, after)
            with pytest.raises(ControlError, match="reset-peak"):
                await counts(control.url, {"action": "forget"})
        finally:
            await control.stop()
