"""Crash loops as the kubelet runs them (kuberuntime's doBackOff): a container's first exit is started again at
once (restartCount 1, no CrashLoopBackOff); from the second exit on it waits in CrashLoopBackOff, `back-off 10s
restarting failed container=...`, the back-off doubling (10s, 20s, 40s, ... 5m0s at most). The scenario
builder's crash-looping pods say the same: restartCount 1 or more, the back-off of that count, the last exit
within it; the real kubectl reads them."""
from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any

import pytest

from gputui.sim import builders as b
from gputui.sim import scenarios
from gputui.sim.cluster import SimCluster
from gputui.sim.scenarios.cluster_builder import ClusterBuilder

Obj = dict[str, Any]


def _seen(status: Obj) -> tuple[int, str, str, int | None]:
    cs = (status.get("containerStatuses") or [{}])[0]
    state = cs.get("state") or {}
    kind = next(iter(state), "")
    waiting = state.get("waiting") or {}
    last = (cs.get("lastState") or {}).get("terminated") or {}
    return cs.get("restartCount", 0), waiting.get("reason") or kind, waiting.get("message", ""), last.get("exitCode")


async def test_first_exit_restarts_at_once_then_the_back_off_doubles() -> None:
    node = b.node("cpu-1", 1)
    crashy = b.pod("crashy", "default", [b.container("main", "busybox", command=["sh", "-c", "exit 2"])],
                   annotations={"sim.gputui.io/run-seconds": "1", "sim.gputui.io/exit-code": "2"})
    async with SimCluster([node], speed=100) as sim:
        statuses: list[tuple[int, str, str, int | None]] = []
        backoff_events: list[int] = []  # the restartCount when each BackOff event came

        def record(event: Any) -> None:
            obj = event.obj
            if event.resource.key == "pods" and obj["metadata"]["name"] == "crashy" and obj.get("status", {}).get("containerStatuses"):
                statuses.append(_seen(obj["status"]))
            if event.resource.key == "events" and obj.get("reason") == "BackOff" and event.type == "ADDED":
                backoff_events.append(statuses[-1][0] if statuses else -1)

        sim.store.subscribe(record)
        created = sim.store.create("pods", crashy)
        uid = created["metadata"]["uid"]
        async with asyncio.timeout(20):
            while not statuses or statuses[-1][0] < 3:  # noqa: ASYNC110  (the store's writes have no event to wait on)
                await asyncio.sleep(0.01)
        looping = [s for s in statuses if s[1] == "CrashLoopBackOff"]
        assert looping, statuses
        assert all(restarts >= 1 for restarts, *_ in looping), statuses
        # Before any back-off: the first exit, then at once running again with restartCount 1.
        first_loop = statuses.index(looping[0])
        assert (1, "running", "", 2) in statuses[:first_loop], statuses
        messages = {restarts: message for restarts, reason, message, _ in looping}
        tail = f"restarting failed container=main pod=crashy_default({uid})"
        assert messages[1] == f"back-off 10s {tail}"
        assert messages[2] == f"back-off 20s {tail}"
        assert backoff_events and backoff_events[0] >= 1, (backoff_events, statuses)


def test_a_builders_crash_loop_is_one_the_kubelet_could_show() -> None:
    now = datetime.now(timezone.utc)
    for restarts, backoff in ((1, "10s"), (2, "20s"), (3, "40s"), (5, "2m40s"), (6, "5m0s"), (14, "5m0s")):
        c = ClusterBuilder(now=now)
        c.add_node("gpu-1")
        pod = c.place(b.pod("trainer", "ml", [b.container("main", "busybox")], now=now), "gpu-1", 3600)
        c.crash_loop(pod, restarts=restarts)
        cs = pod["status"]["containerStatuses"][0]
        meta = pod["metadata"]
        assert cs["restartCount"] == restarts
        assert cs["state"]["waiting"] == {"reason": "CrashLoopBackOff", "message": (
            f"back-off {backoff} restarting failed container={cs['name']} pod={meta['name']}_{meta['namespace']}({meta['uid']})")}
        finished = datetime.strptime(cs["lastState"]["terminated"]["finishedAt"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        assert 0 < (now - finished).total_seconds() < b.crash_loop_backoff(restarts)  # still waiting it out
        assert cs["lastState"]["terminated"]["containerID"] == cs["containerID"]
    with pytest.raises(ValueError, match="restartCount 1 or more"):
        ClusterBuilder(now=now).crash_loop(pod, restarts=0)


def test_the_built_in_crash_loops_read_right_in_kubectl(make_kubectl) -> None:
    async def run() -> list[list[str]]:
        async with SimCluster(scenario="operator-driver-crashloop", run_controllers=False) as sim:
            kubectl = make_kubectl(sim.kubeconfig_path)
            out = await asyncio.to_thread(kubectl, "get", "pods", "-A", "--no-headers")
            return [line.split() for line in out.splitlines() if "CrashLoopBackOff" in line]

    rows = asyncio.run(run())
    assert rows and all(int(row[4]) >= 1 for row in rows), rows  # RESTARTS
    loaded = scenarios.load("operator-driver-crashloop")
    for pod in (o for o in loaded if o["kind"] == "Pod"):
        for cs in pod["status"].get("containerStatuses") or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") == "CrashLoopBackOff":
                seconds = b.crash_loop_backoff(cs["restartCount"])
                assert cs["restartCount"] >= 1 and waiting["message"].startswith(f"back-off {b.go_duration(seconds)} ")
