"""Trouble shown in place: a forbidden resource, a plugin container that restarts."""
from __future__ import annotations

import pytest

from tests.ui.ui_helpers import (
    app_on,
    screen_text,
    show_all_pods,
    start_cluster,
    wait_for,
)
from tests.ui.ui_scenario import (
    PLUGIN_CONTAINER,
    PLUGIN_NS,
    gpu_cluster,
    plugin_pod_name,
)


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


async def test_an_unreadable_object_is_said_in_the_header_and_the_watch_goes_on(cluster):
    """A pod whose record cannot be built: counted and named in the header; later changes still show."""
    def break_conditions(obj: dict) -> None:
        obj["status"]["conditions"] = {"type": "Ready"}  # not a list

    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "watches live" in screen_text(app), what="watches live")
        await show_all_pods(pilot, 6)
        victim = next(key for key in app.pods_table.shown_keys if not key.startswith("kube-system/"))
        namespace, name = victim.split("/")
        original = cluster.call(cluster.sim.store.get, "pods", namespace, name)
        cluster.call(cluster.sim.store.mutate, "pods", namespace, name, break_conditions)
        try:
            await wait_for(pilot, lambda: f"1 pod unreadable: {victim}" in screen_text(app), what="the unreadable pod in the header")
            assert "watches live" in screen_text(app)
            cluster.call(cluster.sim.store.mutate, "nodes", "", "a100-1", lambda n: n["spec"].update(unschedulable=True))
            await wait_for(pilot, lambda: "cordoned" in " ".join(c.plain for c in app.nodes_table.get_row("a100-1")), what="a later cordon")
        finally:
            cluster.call(cluster.sim.store.mutate, "pods", namespace, name, lambda obj: obj["status"].update(conditions=original["status"]["conditions"]))
            cluster.call(cluster.sim.store.mutate, "nodes", "", "a100-1", lambda n: n["spec"].pop("unschedulable", None))
        await wait_for(pilot, lambda: "unreadable" not in screen_text(app), what="mended, no longer said")


async def test_insecure_skip_tls_verify_is_said_once_in_the_app(cluster, tmp_path):
    import yaml

    from gputui.ui.launch import make_app

    doc = yaml.safe_load(cluster.kubeconfig_path.read_text())
    entry = doc["clusters"][0]["cluster"]
    entry.pop("certificate-authority-data", None)
    entry["insecure-skip-tls-verify"] = True
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    app = make_app(str(path))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "watches live" in screen_text(app), what="connected without checking the certificate")
        said = [n.message for n in app._notifications if "not checked" in n.message]
        assert said == ["the server's TLS certificate is not checked (insecure-skip-tls-verify in context \"gputui-sim\")"]
