"""The DCGM metrics poller: reads through pods/proxy, only while wanted, one request per node at a
time, timeouts, 403 and unreadable text shown in place of the readings."""
from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator

import pytest
import pytest_asyncio
import yaml
from aiohttp import web

from gputui.kube.config import connect
from gputui.kube.metrics import Exporter, MetricsPoller
from gputui.kube.model import ClusterModel
from gputui.sim import SimCluster
from gputui.sim.scenarios import stacks
from gputui.sim.cluster import kubeconfig_for
from tests.model.scenario import FAST, until

pytestmark = pytest.mark.asyncio(loop_scope="module")
OPERATOR_NS = "gpu-operator"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def operator():
    """The healthy operator cluster (exporters on gpu-1 and gpu-2), static, with fault hooks."""
    async with SimCluster(stacks.gpu_operator_healthy(), faults=True, run_controllers=False) as sim:
        async with await connect(str(sim.kubeconfig_path)) as conn:
            model = ClusterModel(conn.api, metrics_interval=0.05, metrics_timeout=0.5, **FAST)
            async with model:
                assert await model.wait_synced(10)
                yield sim, model


@pytest_asyncio.fixture(autouse=True, loop_scope="module")
async def no_faults_or_rounds_left(operator):
    """Each test starts with no fault set and no round of an earlier test's demand still in flight
    (such a round holds its node, so a test counting requests would see one fewer)."""
    yield
    sim, model = operator
    sim.faults.clear()
    await model.metrics.stop()


async def test_one_poll_reads_every_exporter_whatever_its_hostname_label(operator):
    _, model = operator
    await model.metrics.poll_once()
    for node in ("gpu-1", "gpu-2"):  # gpu-2's exporter labels its host `hostname`, gpu-1's `Hostname`
        metrics = model.node_metrics(node)
        assert metrics.current and len(metrics.readings) == 8
        assert {r.host for r in metrics.readings} == {node}
    assert model.node_metrics("cpu-1") is None  # not a GPU node: nothing to read
    attributed = [r.pod for r in model.node_metrics("gpu-1").readings if r.pod]
    assert attributed == ["ml/llm-train-0"] * 4


async def test_polls_only_while_wanted(operator):
    _, model = operator
    poller = model.metrics
    start = poller.scrapes
    release = poller.want()
    await until(lambda: poller.scrapes >= start + 6, what="three rounds")
    release()
    release()  # releasing twice is harmless
    await asyncio.sleep(0.15)  # a round may have been under way
    stopped_at = poller.scrapes
    await asyncio.sleep(0.3)
    assert poller.scrapes == stopped_at and not poller.wanted
    reading = model.node_metrics("gpu-1").readings[0]
    assert len(poller.series(reading)) >= 3


async def test_wanting_some_nodes_reads_only_those(operator):
    _, model = operator
    before = model.node_metrics("gpu-2").at
    release = model.metrics.want(["gpu-1"])
    first = model.node_metrics("gpu-1").at
    await until(lambda: model.node_metrics("gpu-1").at != first, what="gpu-1 read")
    release()
    assert model.node_metrics("gpu-2").at == before


async def test_one_request_in_flight_per_node(operator):
    sim, model = operator
    sim.faults.slow("pods/proxy", 0.3)
    start = model.metrics.scrapes
    await asyncio.gather(model.metrics.poll_once(), model.metrics.poll_once(), model.metrics.poll_once())
    assert model.metrics.scrapes == start + 2  # one per exporter, not three each


async def test_timeout_keeps_the_last_readings_and_says_why(operator):
    sim, model = operator
    await model.metrics.poll_once()
    good = model.node_metrics("gpu-1")
    sim.faults.slow("pods/proxy", 1.0)
    await model.metrics.poll_once()
    slow = model.node_metrics("gpu-1")
    assert not slow.current and slow.readings == good.readings and slow.at == good.at
    assert slow.error.startswith(f"exporter {OPERATOR_NS}/nvidia-dcgm-exporter-") and slow.error.endswith("did not answer within 0.5 s")


async def test_forbidden_proxy_is_said_in_place_and_the_rest_is_fine(operator):
    sim, model = operator
    problems_before = {n: model.summary(n).problems for n in ("gpu-1", "gpu-2")}
    sim.faults.fail("pods/proxy", 403)
    await model.metrics.poll_once()
    for node in ("gpu-1", "gpu-2"):
        assert model.node_metrics(node).error == f"forbidden: cannot get pods/proxy in namespace {OPERATOR_NS}"
        assert model.summary(node).problems == problems_before[node]
    # the watches are untouched (Kueue's kinds are not installed in this cluster: absent)
    assert {s.phase for kind, s in model.states.items() if kind not in ("workloads", "localqueues", "clusterqueues", "computedomains", "gpuclusters")} == {"live"}
    sim.faults.clear()
    await model.metrics.poll_once()
    assert model.node_metrics("gpu-1").current


async def test_exporter_not_running_is_said_without_asking(operator):
    sim, model = operator
    exporter = model.components("gpu-2")["dcgm-exporter"].pod.split("/", 1)[1]
    original = sim.store.get("pods", OPERATOR_NS, exporter)
    sim.store.delete("pods", OPERATOR_NS, exporter)
    await until(lambda: model.components("gpu-2")["dcgm-exporter"].state == "missing", what="exporter gone")
    start = model.metrics.scrapes
    await model.metrics.poll_once()
    assert model.metrics.scrapes == start + 1  # gpu-1 only
    assert model.node_metrics("gpu-2").error.startswith("exporter not running on this node (dcgm-exporter missing")
    original["metadata"].pop("resourceVersion", None)
    sim.store.create("pods", original)
    await until(lambda: model.components("gpu-2")["dcgm-exporter"].state == "running", what="exporter back")


# -- a stand-in API server, for answers the simulator does not give ------------------------

VALID = """# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-0",device="nvidia0",modelName="NVIDIA L4",Hostname="n1"} 42
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-0",device="nvidia0",modelName="NVIDIA L4",Hostname="n1"} 1000
"""


@contextlib.asynccontextmanager
async def stand_in(bodies: dict[str, tuple[int, str]], tmp_path) -> AsyncIterator[MetricsPoller]:
    """A poller whose API server answers each pod's proxy with the given (status, text)."""

    async def proxy(request: web.Request) -> web.Response:
        status, text = bodies[request.match_info["pod"].split(":")[0]]
        return web.Response(status=status, text=text)

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/{ns}/pods/{pod}/proxy/{path:.*}", proxy)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig_for(f"http://127.0.0.1:{port}")))
    try:
        async with await connect(str(path)) as conn:
            yield MetricsPoller(conn.api, lambda: {pod: Exporter("ns", pod) for pod in bodies})
    finally:
        await runner.cleanup()


async def test_unreadable_text_and_big_scrapes(tmp_path):
    padding = "# " + "x" * 100 + "\n"
    bodies = {
        "garbage": (200, "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\" 42\n"),
        "empty": (200, "# nothing yet\n"),
        "big": (200, padding * 400 + VALID),  # > 32 KiB: parsed in a worker thread
        "gone": (404, '{"kind":"Status","status":"Failure","message":"pods \\"gone\\" not found","code":404}'),
    }
    async with stand_in(bodies, tmp_path) as poller:
        await poller.poll_once()
        assert poller.node("garbage").error.startswith("exporter ns/garbage: not Prometheus text: ")
        assert poller.node("empty").error == "exporter ns/empty reports no GPU"
        big = poller.node("big")
        assert big.current and [(r.util, r.fb_used_mib, r.model) for r in big.readings] == [(42, 1000, "NVIDIA L4")]
        assert poller.node("gone").error == 'exporter ns/gone unreachable: pods "gone" not found (404)'


async def test_a_cancelled_round_leaves_no_node_marked_in_flight(operator):
    sim, model = operator
    sim.faults.slow("pods/proxy", 1.0)
    round_ = asyncio.ensure_future(model.metrics.poll_once())
    await asyncio.sleep(0.05)
    round_.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await round_
    sim.faults.clear()
    start = model.metrics.scrapes
    await model.metrics.poll_once()
    assert model.metrics.scrapes == start + 2
