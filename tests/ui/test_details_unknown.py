"""Node details: unknown allocation reads unknown (as the Nodes pane does), quantities as kubectl
prints them, and the DCGM readings' age in the metrics title."""
from __future__ import annotations

import re

import pytest

from gputui.kube import gpu
from gputui.kube.dcgm import GpuReading
from gputui.kube.metrics import NodeMetrics
from gputui.kube.records import node_from
from gputui.ui.screens import NodeDetails, NodeDetailsScreen, details_text
from tests.ui.test_unknown import full_cluster
from tests.ui.ui_helpers import app_on, start_cluster, wait_for

NOW = 1_750_000_000.0


def _summary(memory: str = "2147483648Ki") -> gpu.NodeSummary:
    node = node_from({
        "metadata": {"name": "g1", "labels": {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-L4"}},
        "status": {"capacity": {"nvidia.com/gpu": "8", "memory": memory, "ephemeral-storage": "1073741824Ki", "cpu": "96"},
                   "allocatable": {"nvidia.com/gpu": "8", "memory": "1072693248Ki", "ephemeral-storage": "1000000000000", "cpu": "95500m"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    })
    return gpu.summarize_node(node, [], gpu.GpuResources())


def _resource_line(text: str, name: str) -> list[str]:
    return next(line for line in text.splitlines() if line.strip().startswith(name + " ")).split()


def test_allocated_and_free_read_unknown_while_the_pods_are_not_known():
    summary = _summary()
    known = details_text(NodeDetails(summary, [], []), NOW).plain
    assert _resource_line(known, "nvidia.com/gpu") == ["nvidia.com/gpu", "8", "8", "0", "8"]
    for mark in ("…", "?"):
        text = details_text(NodeDetails(summary, [], [], unknown=mark), NOW).plain
        assert _resource_line(text, "nvidia.com/gpu") == ["nvidia.com/gpu", "8", "8", mark, mark], text


def test_memory_and_ephemeral_storage_as_kubectl_prints_them():
    text = details_text(NodeDetails(_summary(), [], []), NOW).plain
    assert _resource_line(text, "memory") == ["memory", "2Ti", "1023Gi"]
    assert _resource_line(text, "ephemeral-storage") == ["ephemeral-storage", "1Ti", "1T"]
    assert _resource_line(text, "cpu") == ["cpu", "96", "95500m"]
    assert "2147483648Ki" not in text


def _reading(index: int) -> GpuReading:
    return GpuReading(f"GPU-{index}", index, "NVIDIA L4", "g1", None, None, 10.0, 100.0, 22000.0, 40.0, 70.0, None, (), "550")


def test_the_metrics_title_says_how_old_the_readings_are():
    metrics = NodeMetrics((_reading(0),), None, NOW - 40)
    text = details_text(NodeDetails(_summary(), [], [], metrics), NOW).plain
    title = next(line for line in text.splitlines() if line.startswith("GPU metrics"))
    assert "as of 40s" in title, title
    old = details_text(NodeDetails(_summary(), [], [], NodeMetrics((_reading(0),), None, NOW - 330)), NOW).plain
    assert "as of 5m30s" in old
    never = details_text(NodeDetails(_summary(), [], [], NodeMetrics((), "no DCGM exporter on this node", None)), NOW).plain
    assert "as of" not in never  # no reading, no age


@pytest.fixture(scope="module")
def cluster():
    yield from start_cluster(full_cluster(), faults=True)


async def test_details_on_a_cluster_whose_pods_are_forbidden(cluster):
    """The app hands details the Nodes pane's mark: full-1's 8 GPUs are all held, never `0` allocated / `8` free."""
    cluster.call(cluster.sim.faults.fail, "pods", 403)
    try:
        app = app_on(cluster)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.model is not None and app.nodes_table.row_count == 1, what="the node row")
            await wait_for(pilot, lambda: app.model.states["pods"].phase == "forbidden", what="pods forbidden")
            app.row_details.show_node("full-1")
            await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailsScreen) and "nvidia.com/gpu" in app.screen.text,
                           what="node details")
            row = _resource_line(app.screen.text, "nvidia.com/gpu")
            assert row[3:] == ["?", "?"], app.screen.text
            assert re.search(r"memory\s+1Ti\s+1023Gi", app.screen.text), app.screen.text
    finally:
        cluster.call(cluster.sim.faults.clear, "pods")


async def test_a_refresh_between_pushing_details_and_its_mount_waits_for_the_mount(cluster):
    """The model's refresh can come after `show_node` pushed the screen and before Textual composed it;
    it used to look for the unmounted body and end the app with a traceback (seen on a loaded machine)."""
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.model is not None and app.nodes_table.row_count == 1, what="the node row")
        app.row_details.show_node("full-1")
        assert isinstance(app.screen, NodeDetailsScreen) and not app.screen.is_mounted
        app.scheduler.draw({"pods", "plugin"})  # as the coalesced refresh does, before the screen's mount
        await wait_for(pilot, lambda: "nvidia.com/gpu" in app.screen.text, what="node details")
        assert app.is_running
