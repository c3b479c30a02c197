"""The fleet's rows from Prometheus (kube/fleet_prometheus.py) in the topology users run: a Prometheus per
simulated cluster scraping its kube-state-metrics (sim/exporters/ksm.py) and DCGM exporters with
`external_labels: {cluster: NAME}`, and a global one federating them through /federate (honor_labels,
match[] on the series the queries read; honor_timestamps false, so that a series gone from a cluster, a pod
bound since, is marked stale in the global one too, not counted for the 5 minutes of Prometheus' look-back). Each row from the global Prometheus equals the row a live watch of
the same cluster gives (kube/fleet.py): GPUs per resource and model, GPU nodes, nodes with problems and the
worst's code, pending GPU pods and the longest wait.

alpha: the idle-gpus scenario (GPU Operator, DCGM exporters, MIG), with an XID on gpu-2, mig-1 cordoned and a
GPU pod pending; beta: two nodes of the device plugin alone (no exporter), one NotReady, one with a health
monitor's condition, a taint on neither but a GPU pod pending on each side."""
from __future__ import annotations

import asyncio
import json
import time

import pytest
import pytest_asyncio
import yaml

from gputui.kube import fleet as f
from gputui.kube.config import connect
from gputui.kube.fleet_prometheus import FleetQueries, PrometheusFleet, resource_name
from gputui.kube.prometheus import Prometheus
from gputui.sim import SimCluster
from gputui.sim.scenarios import idle_gpus
from gputui.sim import builders as b
from gputui.sim.cluster import kubeconfig_for, merged_kubeconfig
from gputui.sim.exporters.dcgm import XID_ANNOTATION
from gputui.sim.exporters.ksm import KubeStateMetrics
from tests import prometheus as prom
from tests.model.objects import node, plugin_pod, pod
from tests.model.scenario import until

pytestmark = pytest.mark.asyncio(loop_scope="module")
TICK = "500ms"
FEDERATED = ('{__name__=~"kube_node_.+|kube_pod_info|kube_pod_created|kube_pod_status_phase|kube_pod_container_resource_requests'
             '|DCGM_FI_DEV_XID_ERRORS|gputui:fleet_.+"}')
RULES = json.dumps({"groups": [FleetQueries().rules(interval=TICK)]})  # in each cluster's Prometheus: JSON is YAML
ALLOWLIST = {"nodes": ["nvidia.com/gpu.product", "nvidia.com/gpu.present"]}


def alpha() -> list[dict]:
    objects = idle_gpus.build()
    for o in objects:
        if o["kind"] == "Node" and o["metadata"]["name"] == "gpu-2":
            o["metadata"].setdefault("annotations", {})[XID_ANNOTATION] = "79"
        if o["kind"] == "Node" and o["metadata"]["name"] == "mig-1":
            o["spec"]["unschedulable"] = True
    waiting = b.pod("waiting", "ml", [b.container("main", "img", limits={"nvidia.com/gpu": 2})], age_s=600)
    return [*objects, waiting]


def beta() -> list[dict]:
    product = {"nvidia.com/gpu.product": "NVIDIA-A10", "nvidia.com/gpu.present": "true"}
    sick = node("b-2", capacity={"nvidia.com/gpu": 4}, labels=product)
    sick["status"]["conditions"].append({"type": "GpuHealthy", "status": "True", "reason": "XidSeen", "message": "xid 48"})
    return [node("b-1", capacity={"nvidia.com/gpu": 4}, labels=product, ready="False"), sick, plugin_pod("b-1"), plugin_pod("b-2"),
            pod("ml", "a", node="b-2", gpu={"nvidia.com/gpu": 3}), pod("ml", "wants-two", gpu={"nvidia.com/gpu": 2})]


class Topology:
    def __init__(self, sims: dict[str, SimCluster], server: prom.Prometheus, kubeconfig: str) -> None:
        self.sims, self.server, self.kubeconfig = sims, server, kubeconfig


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def topology(tmp_path_factory):
    if prom.BINARY is None:
        pytest.skip(prom.MISSING)
    tmp = tmp_path_factory.mktemp("fleet-prometheus")
    async with SimCluster(alpha(), run_controllers=False) as a, SimCluster(beta(), run_controllers=False) as b_, \
            KubeStateMetrics(a, ALLOWLIST) as ksm_a, KubeStateMetrics(b_, ALLOWLIST) as ksm_b:
        sims = {"alpha": a, "beta": b_}
        ksms = {"alpha": ksm_a, "beta": ksm_b}
        ports = {name: prom.free_port() for name in sims}
        federation = "".join(f"""  - job_name: federate-{name}
    honor_labels: true
    honor_timestamps: false
    metrics_path: /federate
    params: {{'match[]': ['{FEDERATED}']}}
    static_configs: [{{targets: ["127.0.0.1:{port}"]}}]
""" for name, port in ports.items())
        async with prom.running(tmp / "alpha", prom.exporter_jobs(a, tmp) + prom.ksm_job("ksm", ksm_a.url), interval=TICK,
                                external_labels={"cluster": "alpha"}, port=ports["alpha"], rules=RULES), \
                prom.running(tmp / "beta", prom.ksm_job("ksm", ksms["beta"].url), interval=TICK,
                             external_labels={"cluster": "beta"}, port=ports["beta"], rules=RULES), \
                prom.running(tmp / "global", federation, interval=TICK) as server:
            await server.until(lambda: {s["metric"].get("cluster") for s in server.ask("kube_node_info")} == {"alpha", "beta"}
                               and len(server.ask("DCGM_FI_DEV_XID_ERRORS")) > 0
                               and {s["metric"].get("cluster") for s in server.ask("gputui:fleet_health")} == {"alpha", "beta"},
                               "both clusters federated, with their recorded rows")
            path = tmp / "kubeconfig"
            contexts = {name: kubeconfig_for(sim.url) for name, sim in sims.items()}
            path.write_text(yaml.safe_dump(merged_kubeconfig({**contexts, "ctx-alpha": contexts["alpha"]})))
            yield Topology(sims, server, str(path))


async def live_rows(topology: Topology) -> dict[str, f.ClusterRow]:
    fleet = f.Fleet(["alpha", "beta"], lambda context: connect(topology.kubeconfig, context))
    await fleet.start()
    try:
        return await until(lambda: all(r.known and r.unknown_nodes == 0 for r in fleet.rows()) and {r.context: r for r in fleet.rows()},
                           what="every live row known, XIDs read")
    finally:
        await fleet.stop()


async def prometheus_rows(topology: Topology, use_rules: bool = False) -> tuple[dict[str, f.ClusterRow], Prometheus]:
    source = Prometheus(topology.server.url)
    fleet = PrometheusFleet(source, FleetQueries(use_rules=use_rules))
    try:
        return await fleet.refresh(), source
    finally:
        await fleet.close()


@pytest.mark.parametrize("use_rules", [False, True], ids=["raw series", "recording rules"])
async def test_the_rows_from_prometheus_equal_the_live_watches(topology, use_rules):
    live = await live_rows(topology)
    rows, source = await prometheus_rows(topology, use_rules)
    assert set(rows) == {"alpha", "beta"} and source.requests == (1 if use_rules else 2)  # whatever the number of clusters
    for name in ("alpha", "beta"):
        mine, theirs = rows[name], live[name]
        assert {k: v.as_dict() for k, v in mine.totals.items()} == {k: v.as_dict() for k, v in theirs.totals.items()}, name
        assert {k: v.as_dict() for k, v in mine.by_model.items()} == {k: v.as_dict() for k, v in theirs.by_model.items()}, name
        assert (mine.gpu_nodes, mine.problem_nodes, mine.pending) == (theirs.gpu_nodes, theirs.problem_nodes, theirs.pending), name
        assert mine.worst[0] == theirs.worst[0], name
        assert mine.longest_wait == pytest.approx(theirs.longest_wait, abs=5), name
        assert mine.state == f.PROMETHEUS and time.time() - mine.updated < 10
    assert live["alpha"].worst[0] == "xid-errors" and rows["alpha"].worst[1] == "gpu-2"
    assert rows["alpha"].totals["nvidia.com/mig-1g.10gb"].allocatable == 7
    assert rows["beta"].worst == ("not-ready", "b-1") and rows["beta"].problem_nodes == 2
    assert any("XIDs" in words for words in rows["beta"].without) and not any("XIDs" in words for words in rows["alpha"].without)


async def test_a_change_reaches_the_rows_through_the_federation(topology):
    sim = topology.sims["beta"]
    sim.store.mutate("pods", "ml", "wants-two", lambda p: (p["spec"].__setitem__("nodeName", "b-1"), p["status"].__setitem__("phase", "Running")))
    try:
        row = None
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            rows, _ = await prometheus_rows(topology)
            row = rows["beta"]
            if row.pending == 0:
                break
            await asyncio.sleep(0.5)
        assert row is not None and row.pending == 0 and row.longest_wait is None
        assert row.totals["nvidia.com/gpu"].allocated == 5
    finally:
        sim.store.mutate("pods", "ml", "wants-two", lambda p: (p["spec"].pop("nodeName"), p["status"].__setitem__("phase", "Pending")))
        requests = 'kube_pod_container_resource_requests{{cluster="beta", pod="wants-two", node="{}"}}'
        recorded = 'gputui:fleet_health{cluster="beta", gputui_stat="pending"} == 1'
        await topology.server.until(lambda: len(topology.server.ask(requests.format(""))) == 1 and not topology.server.ask(requests.format("b-1"))
                                    and len(topology.server.ask(recorded)) == 1, "pending again, for the tests after this one")


async def test_an_unreachable_prometheus_keeps_the_rows_and_says_why(topology):
    fleet = PrometheusFleet(Prometheus(topology.server.url), FleetQueries())
    try:
        await fleet.refresh()
        before = fleet.rows
        await fleet.source.close()
        fleet.source = Prometheus("http://127.0.0.1:1")
        await fleet.refresh()
        assert fleet.rows == before and fleet.error is not None and "refused" in fleet.error
    finally:
        await fleet.close()


async def test_the_fleet_rows_from_prometheus_and_a_cluster_opened_live(topology):
    source = PrometheusFleet(Prometheus(topology.server.url), FleetQueries(), interval=0.5)
    fleet = f.Fleet(["ctx-alpha", "beta"], lambda context: connect(topology.kubeconfig, context), prometheus=source,
                    cluster_contexts={"alpha": "ctx-alpha"})
    await fleet.start()
    try:
        rows = await until(lambda: len(fleet.rows()) == 2 and fleet.rows(), what="Prometheus' rows")
        assert [(r.context, r.state) for r in rows] == [("alpha", f.PROMETHEUS), ("beta", f.PROMETHEUS)] and not fleet.members
        assert (fleet.context_for("alpha"), fleet.context_for("beta"), fleet.context_for("gamma")) == ("ctx-alpha", "beta", None)
        viewed = await fleet.view("ctx-alpha", timeout=10)
        assert viewed is not None and list(fleet.members) == ["ctx-alpha"]
        alpha = await until(lambda: fleet.row("alpha").state == f.LIVE and fleet.row("alpha"), what="alpha from its watch")
        assert alpha.totals == rows[0].totals and fleet.row("beta").state == f.PROMETHEUS
    finally:
        await fleet.stop()


async def test_the_report_from_prometheus(topology, tmp_path):
    from tests.model.test_report import report_of

    rc, out, err = await report_of("--kubeconfig", topology.kubeconfig, "--all-contexts", "--fleet-prometheus", topology.server.url, "-o", "json")
    assert rc == 1, err  # both have a problem
    data = json.loads(out)
    assert [(c["cluster"], c["context"], c["worst"]["code"]) for c in data["clusters"]] == [("alpha", "alpha", "xid-errors"), ("beta", "beta", "not-ready")]
    gpus = [c["gpu"]["nvidia.com/gpu"] for c in data["clusters"]]
    assert data["totals"]["gpu"]["nvidia.com/gpu"] == {k: gpus[0][k] + gpus[1][k] for k in gpus[0]} and gpus[1]["capacity"] == 8
    assert data["clusters"][1]["pending"] == 1 and data["clusters"][1]["longest_wait_s"] > 0
    rc, out, err = await report_of("--kubeconfig", topology.kubeconfig, "--fleet-prometheus", topology.server.url)
    assert rc == 1 and out.startswith(f"fleet: 2 clusters from Prometheus {topology.server.url} (label cluster)"), out + err
    assert "not known from Prometheus' series: device plugin pods" in out
    rc, out, err = await report_of("--kubeconfig", topology.kubeconfig, "--fleet-prometheus", "http://127.0.0.1:1")
    assert (rc, out) == (2, "") and err.startswith("gputui report: Prometheus http://127.0.0.1:1: ") and "refused" in err
    rc, out, err = await report_of("--kubeconfig", topology.kubeconfig, "--fleet-prometheus", "thanos:9090")
    assert rc == 2 and err.strip().splitlines()[-1].endswith("--fleet-prometheus: expected an http(s):// URL (or \"\" for none), not 'thanos:9090'")


async def test_the_fleet_screen_from_prometheus(topology, tmp_path):
    from gputui.config import FleetConfig
    from gputui.ui.fleet import FleetScreen
    from gputui.ui.launch import make_app
    from tests.ui.ui_helpers import screen_text, wait_for

    app = make_app(topology.kubeconfig, fleet=["alpha", "beta"], fleet_prometheus=FleetConfig(prometheus=topology.server.url))
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen) and len(app.screen.table.shown_keys) == 2, timeout=20, what="two rows")
        text = screen_text(app)
        assert f"from Prometheus {topology.server.url} every 30 s" in text
        row = " ".join(cell.plain for cell in app.screen.table.get_row("beta"))
        assert row.startswith("beta") and "from Prometheus, " in row and " old" in row and "4/8" not in row and "3/8" in row
        assert "✗ 2/2 not ready b-1" in row
        app.screen.table.move_cursor(row=app.screen.table.row_index("beta"))
        await wait_for(pilot, lambda: "beta: from Prometheus, " in screen_text(app) and "not known from there: device plugin pods" in screen_text(app),
                       what="what the row lacks, under the table")
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, FleetScreen) and app.context == "beta" and app.nodes_table.row_count == 2,
                       what="beta's nodes, live")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen) and " live " in " ".join(
            cell.plain for cell in app.screen.table.get_row("beta")), what="beta's row from its watch")


async def test_resource_names_back_from_kube_state_metrics():
    assert [resource_name(n) for n in ("nvidia_com_gpu", "nvidia_com_gpu_shared", "nvidia_com_mig_1g_10gb", "nvidia_com_mig_1c_3g_20gb",
                                       "nvidia_com_mig_1g_5gb_me")] == [
        "nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-1c.3g.20gb", "nvidia.com/mig-1g.5gb+me"]
    assert resource_name("example_com_gpu", {"example_com_gpu": "example.com/gpu"}) == "example.com/gpu"
