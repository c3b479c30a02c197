"""What a row reads decides when it is redrawn: a column added to a row builder, reading a field no
one listed, follows that field's changes (ui/table.py's RowCache compares the builder's inputs)."""
from __future__ import annotations

import pytest
from rich.text import Text

from gputui.kube.gpu import GpuPod, NodeSummary
from gputui.ui import nodes_pane, panes, pods_pane
from gputui.ui.table import Column
from tests.ui.ui_helpers import app_on, show_all_pods, start_cluster, wait_for
from tests.ui.ui_scenario import gpu_cluster


def with_column(columns, builder, title: str, read):
    def more_columns(narrow: bool, width: int | None = None) -> list[Column]:
        return [*columns(narrow, width), Column("extra", title, 12)]

    def more_cells(record, *rest) -> tuple[Text, ...]:
        return (*builder(record, *rest), Text(read(record)))

    return more_columns, more_cells


@pytest.fixture(scope="module")
def cluster():
    yield from start_cluster(gpu_cluster(crash_loop=False))


async def test_a_new_column_reading_a_new_field_follows_it(monkeypatch, cluster):
    node_columns, node_row = with_column(panes.node_columns, panes.node_row, "RACK",
                                         lambda s: s.node.labels.get("rack", "-") if isinstance(s, NodeSummary) else "")
    pod_columns, pod_row = with_column(panes.pod_columns, panes.pod_row, "TEAM",
                                       lambda e: e.pod.labels.get("team", "-") if isinstance(e, GpuPod) else "")
    monkeypatch.setattr(nodes_pane, "node_columns", node_columns)
    monkeypatch.setattr(pods_pane, "pod_columns", pod_columns)
    monkeypatch.setattr(nodes_pane, "node_row", node_row)
    monkeypatch.setattr(pods_pane, "pod_row", pod_row)
    app = app_on(cluster)
    async with app.run_test(size=(160, 40)) as pilot:
        await show_all_pods(pilot, 6)
        pod, node = "ml-training/finetune-a100-0", "a100-1"
        assert app.pods_table.get_row(pod)[-1].plain == "nlp" and app.nodes_table.get_row(node)[-1].plain == "-"
        cluster.call(cluster.sim.store.mutate, "pods", "ml-training", "finetune-a100-0",
                     lambda obj: obj["metadata"]["labels"].update(team="vision"))
        cluster.call(cluster.sim.store.mutate, "nodes", "", node, lambda obj: obj["metadata"]["labels"].update(rack="r12"))
        await wait_for(pilot, lambda: app.pods_table.get_row(pod)[-1].plain == "vision", what="the pod's new label")
        await wait_for(pilot, lambda: app.nodes_table.get_row(node)[-1].plain == "r12", what="the node's new label")
