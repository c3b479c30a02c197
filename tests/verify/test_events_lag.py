"""Verification on a cluster whose events live in an etcd of their own, their resourceVersions far behind the
pods': the pod's resourceVersion means nothing to a watch of events (kube-apiserver starts it there, silent
until the events' own sequence passes it), so the events are listed first and watched from that list; a
504 "Too large resource version" or a 410 makes the watch list again, as client-go's reflector does."""
from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import pytest_asyncio

from gputui.kube import verify as v
from gputui.kube.verify import api as verify_api
from gputui.sim.cluster import SimCluster
from tests.verify import cluster

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.usefixtures("nothing_left_behind")]
FAST = v.VerifyOptions(timeout=20, delete_timeout=10)
LAG = 1_000_000
REPO = Path(__file__).resolve().parents[2]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sim():
    async with SimCluster(cluster.objects(), speed=20, faults=True, events_lag=LAG) as s:
        yield s


async def test_verify_passes_with_the_kubelets_events_on_a_cluster_whose_events_lag(api, sim):
    assert sim.store.resource_version - sim.store.resource_version_of("events") > LAG // 2
    updates: list[v.Update] = []
    verdict = await v.verify_node(api, "gpu-ok", FAST, "default", updates.append)
    assert verdict.passed, verdict.reason
    assert verdict.deleted and verdict.leftover is None
    reasons = [e.reason for u in updates for e in u.events]
    assert {"Scheduled", "Pulled", "Created", "Started"} <= set(reasons), reasons


async def test_gputui_verify_passes_on_such_a_cluster(sim):
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gputui", "verify", "gpu-ok", "--yes", "-o", "json", "--kubeconfig", str(sim.kubeconfig_path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, cwd=REPO)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, (out, err)
    [verdict] = orjson.loads(out)["verdicts"]
    assert (verdict["result"], verdict["code"], verdict["deleted"]) == ("PASS", v.PASS, True), verdict


# -- the watch's answers to a resourceVersion it cannot start from, without a cluster --------------------


class _Response:
    def __init__(self, status: int, body: bytes) -> None:
        self.status, self._body = status, body

    async def read(self) -> bytes:
        return self._body

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass

    def __aiter__(self) -> Any:
        async def chunks() -> Any:
            yield self._body
        return chunks()


class _ScriptedApi:
    """Answers each request with the next scripted (status, body), recording the requests."""

    def __init__(self, answers: list[tuple[int, Any]]) -> None:
        self.answers = answers
        self.asked: list[dict[str, Any]] = []

    async def request(self, method: str, url_path: str, params: dict[str, Any] | None = None, body: Any = None) -> _Response:
        self.asked.append(dict(params or {}))
        status, answer = self.answers.pop(0)
        lines = answer if isinstance(answer, list) else [answer]
        return _Response(status, b"".join(orjson.dumps(doc) + b"\n" for doc in lines))


TOO_LARGE = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 504, "reason": "Timeout",
             "message": "Timeout: Too large resource version: 900, current: 40",
             "details": {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1}}


def _event(name: str, rv: str) -> dict[str, Any]:
    return {"kind": "Event", "metadata": {"name": name, "resourceVersion": rv}, "reason": name}


@pytest.mark.parametrize("refusal", [(200, [{"type": "ERROR", "object": TOO_LARGE}]), (504, TOO_LARGE)], ids=["error-event", "http-504"])
async def test_too_large_lists_again_then_watches_from_the_list(refusal):
    listed = {"kind": "EventList", "metadata": {"resourceVersion": "40"}, "items": [_event("Scheduled", "39")]}
    api = _ScriptedApi([refusal, (200, listed), (200, [{"type": "ADDED", "object": _event("Pulled", "41")}])])
    seen = []
    async for kind, obj in verify_api._watch(api, "/api/v1/namespaces/default/events", "involvedObject.uid=u", "900"):  # type: ignore[arg-type]
        seen.append((kind, obj["reason"]))
        if len(seen) == 2:
            break
    assert seen == [("ADDED", "Scheduled"), ("ADDED", "Pulled")]
    assert [q.get("watch") for q in api.asked] == ["true", None, "true"]
    assert (api.asked[0]["resourceVersion"], api.asked[2]["resourceVersion"]) == ("900", "40")


async def test_without_a_resource_version_the_watch_starts_from_a_list():
    listed = {"kind": "EventList", "metadata": {"resourceVersion": "7"}, "items": []}
    api = _ScriptedApi([(200, listed), (200, [{"type": "ADDED", "object": _event("Scheduled", "8")}])])
    async for kind, obj in verify_api._watch(api, "/api/v1/namespaces/default/events", "involvedObject.uid=u", None):  # type: ignore[arg-type]
        assert (kind, obj["reason"]) == ("ADDED", "Scheduled")
        break
    assert api.asked[0] == {"fieldSelector": "involvedObject.uid=u"} and api.asked[1]["resourceVersion"] == "7"
