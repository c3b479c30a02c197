"""Trouble shown in place: a forbidden resource, a plugin container that restarts."""
from __future__ import annotations

import pytest

from ui_helpers import app_on, screen_text, start_cluster, wait_for
from ui_scenario import PLUGIN_CONTAINER, PLUGIN_NS, gpu_cluster, plugin_pod_name


@pytest.fixture(scope="module")
def cluster():
    yield from start_cluster(gpu_cluster(crash_loop=False), faults=True)


async def test_forbidden_pods_degrade_in_place(cluster):
    cluster.call(cluster.sim.faults.fail, "pods", 403)
    try:
        app = app_on(cluster)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.nodes_table.row_count == 5, what="nodes despite the 403")
            await wait_for(pilot, lambda: "forbidden: pods is forbidden" in screen_text(app), what="the 403 in place")
            assert app.pods_table.row_count == 0
            assert "pods forbidden" in screen_text(app).replace("  ", " ") or "forbidden" in screen_text(app)
    finally:
        cluster.call(cluster.sim.faults.clear, "pods")


async def test_plugin_log_follows_a_restarted_container(cluster):
    pod = plugin_pod_name("a100-1")
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.plugin_log.line_count > 0, what="the tail")

        def restart(obj: dict) -> None:
            status = obj["status"]["containerStatuses"][0]
            status["restartCount"] += 1

        cluster.call(cluster.sim.logs.end, PLUGIN_NS, pod, PLUGIN_CONTAINER)  # the container exits...
        cluster.call(cluster.sim.store.mutate, "pods", PLUGIN_NS, pod, restart)  # ...and the kubelet restarts it
        cluster.call(cluster.sim.logs.append, PLUGIN_NS, pod, PLUGIN_CONTAINER, "I am the new instance")
        await wait_for(pilot, lambda: "I am the new instance" in app.plugin_log.lines, what="the new instance's log")
        assert any(line.startswith("── container restarted") for line in app.plugin_log.lines)
