"""The fleet model: a cluster per context, each on its own; the live-connection cap; drilling in."""
from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio

from gputui.kube import fleet as f
from gputui.kube.config import connect
from tests.model.scenario import until
from tests.model.test_report_fleet import clusters, fleet_kubeconfig  # noqa: F401  (fixtures: the same five contexts)

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module")
async def make_fleet(fleet_kubeconfig):  # noqa: F811
    made = []

    def make(contexts, **options) -> f.Fleet:
        fleet = f.Fleet(contexts, lambda context: connect(fleet_kubeconfig, context), **options)
        made.append(fleet)
        return fleet

    yield make
    for fleet in made:
        await fleet.stop()


async def test_each_cluster_has_its_own_state_and_the_good_ones_are_not_held_back(make_fleet, clusters):  # noqa: F811
    clusters["slow"].faults.slow("pods", 30)
    try:
        fleet = make_fleet(["healthy", "broken", "down", "bad-token", "slow"])
        await fleet.start()
        # live, and the figures taken (their own task does it, in turns, just after each change)
        await until(lambda: all(fleet.row(c).state == f.LIVE and fleet.row(c).known for c in ("healthy", "broken")),
                    what="two live rows")
        assert fleet.row("slow").state == f.SYNCING, "a slow cluster held nothing back, and is itself still listing"
    finally:
        clusters["slow"].faults.clear()
    healthy, broken = fleet.row("healthy"), fleet.row("broken")
    assert healthy.server_version.startswith("v1.")
    assert healthy.totals["nvidia.com/gpu"].as_dict() == {"capacity": 4, "allocatable": 4, "allocated": 1, "free": 3}
    assert healthy.gpu_nodes == 1 and healthy.problem_nodes == 0 and healthy.worst is None and healthy.pending == 0
    # the driver's crash loop is a problem once the GPU stack's DaemonSets are listed too
    broken = await until(lambda: fleet.row("broken").problem_nodes and fleet.row("broken"), what="broken's problem")
    assert broken.worst[1] in {n.name for n in fleet.members["broken"].model.node_summaries()}
    assert broken.stack and broken.stack.startswith("gpu-operator")
    down = await until(lambda: fleet.row("down").state == f.UNREACHABLE and fleet.row("down"), what="down unreachable")
    assert "connection refused" in down.detail and down.retry_at is not None and down.totals is None
    bad = await until(lambda: fleet.row("bad-token").state == f.UNAUTHORIZED and fleet.row("bad-token"), what="unauthorized")
    assert "401" in bad.detail and bad.totals is None and "not-a-token" not in bad.detail
    # changes are coalesced per cluster: a set of contexts, not one message per event
    fleet.take_dirty()
    clusters["healthy"].store.mutate("nodes", "", "gpu-1", lambda n: n["metadata"]["labels"].update(touched="1"))
    await until(lambda: "healthy" in fleet.take_dirty(), what="the change marks its cluster's row")


async def test_unknown_figures_stay_unknown_while_pods_cannot_be_listed(make_fleet, clusters):  # noqa: F811
    clusters["slow"].faults.slow("pods", 30)
    try:
        fleet = make_fleet(["slow"])
        await fleet.start()
        await until(lambda: fleet.row("slow").state == f.SYNCING and fleet.row("slow").server_version, what="connected")
        await asyncio.sleep(0.5)
        row = fleet.row("slow")
        assert row.totals is None and row.gpu_nodes is None and row.pending is None and not row.known
    finally:
        clusters["slow"].faults.clear()


async def test_the_cap_on_live_connections_and_viewing_a_summarised_cluster(make_fleet):
    fleet = make_fleet(["healthy", "broken", "slow"], max_live=2, summary_interval=60)
    await fleet.start()
    assert [m.live for m in fleet.members.values()] == [True, True, False]
    summary = await until(lambda: fleet.row("slow").state == f.SUMMARY and fleet.row("slow"), what="a summary row")
    assert summary.totals is not None and summary.updated is not None  # figures from one fresh list
    assert fleet.members["slow"].model is None  # nothing kept open between summaries
    await fleet.view("broken")
    viewed = await fleet.view("slow", timeout=10)  # the least recently viewed live one (healthy) gives way
    assert viewed is not None
    conn, model = viewed
    assert model.states["nodes"] is not None and conn.context == "slow"
    assert fleet.live_count() == 2
    assert [name for name, m in fleet.members.items() if m.live] == ["broken", "slow"]
    await until(lambda: fleet.row("healthy").state == f.SUMMARY, what="healthy summarised")


async def test_a_watched_row_counts_xids_as_the_clusters_own_screen_does():
    """A fleet row read `✗ 4/9 not ready h100-3` for 11 minutes while the demo had 5 problem nodes (issue 22):
    its member never read the exporters. It does now, in the background, as the single-cluster screen."""
    from gputui.sim.scenarios import demo
    from gputui.sim.cluster import SimCluster

    async with SimCluster(demo.build()) as sim:
        fleet = f.Fleet(["gputui-sim"], lambda context: connect(str(sim.kubeconfig_path), context))
        try:
            await fleet.start()
            row = await until(lambda: fleet.row("gputui-sim").known and not fleet.row("gputui-sim").unknown_nodes
                              and fleet.row("gputui-sim"), timeout=30, what="every node's XIDs read")
            model = fleet.members["gputui-sim"].model
            own_screen = [s.name for s in model.node_summaries() if s.gpu_node and s.problems]
            assert "h100-1" in own_screen and row.problem_nodes == len(own_screen), (row, own_screen)
            assert "xid-errors" in [p.code for p in model.summary("h100-1").problems]
        finally:
            await fleet.stop()


async def test_a_summarised_row_says_the_xids_are_not_known():
    from gputui.sim.scenarios import demo
    from gputui.sim.cluster import SimCluster
    from gputui.ui.fleet import detail_line

    async with SimCluster(demo.build()) as sim:
        fleet = f.Fleet(["gputui-sim"], lambda context: connect(str(sim.kubeconfig_path), context), max_live=0)
        fleet.members["gputui-sim"].live = False  # summarised from a fresh list: no exporter is read
        try:
            await fleet.start()
            row = await until(lambda: fleet.row("gputui-sim").state == f.SUMMARY and fleet.row("gputui-sim"), timeout=30,
                              what="the summary")
            assert row.lacks == ("XIDs",) and row.unknown_nodes, row
            assert "XIDs not known on every node (summarised: no DCGM reads)" in detail_line(row, 0.0).plain
        finally:
            await fleet.stop()
