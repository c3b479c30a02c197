"""The Health view (`h`) and the GPU pods pane's note for a pod on a bad GPU, on the simulator's `health` scenario."""
from __future__ import annotations

import pytest

from gputui.sim.scenarios import health as health_scenario
from gputui.ui import app as app_module
from gputui.ui.health import HealthScreen
from gputui.ui.screens import NodeDetailsScreen
from tests.ui.ui_helpers import app_on, screen_text, show_all_pods, start_cluster, wait_for


@pytest.fixture(scope="module")
def cluster():
    yield from start_cluster(health_scenario.build(), faults=True)


async def test_the_health_view_lists_bad_gpus_with_their_pods_and_the_pods_pane_marks_them(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await show_all_pods(pilot, 6)
        await app.model.metrics.poll_once()
        await wait_for(pilot, lambda: "on bad GPU: XID 79" in screen_text(app), what="llm-train-0 marked")
        await wait_for(pilot, lambda: "in use" in row_of(app, "ml/eval-0"), what="eval-0's use (the idle figures follow the reads)")
        shown = screen_text(app)
        assert shown.count("on bad GPU: Unhea") == 2 and "on bad GPU: XID 94" in shown  # time-sliced, MIG
        assert "on bad GPU: device" in shown and "in use" in shown  # DRA; eval-0 (a node-level signal): its use
        await pilot.press("h")
        screen = await wait_for(pilot, lambda: isinstance(app.screen, HealthScreen) and app.screen, what="the Health view")
        await wait_for(pilot, lambda: "vllm-0" in screen.text, what="the bad GPUs drawn")
        text = screen.text
        assert "pod ml/llm-train-0 (Job llm-train)  by DCGM attribution" in text
        assert "pod inference/vllm-0 (StatefulSet vllm)  by claim allocation" in text
        assert "device taint gpu.nvidia.com/xid=43:NoSchedule, 20m ago" in text
        assert "cond-1  a GPU, which one unknown" in text and "pods: cannot tell which" in text
        assert text.index("dra-1") < text.index("gpu-1  GPU 1")  # the taint, 20m old, before the XIDs of unknown age
        await pilot.press("h")
        await wait_for(pilot, lambda: not isinstance(app.screen, HealthScreen), what="back")


def row_of(app, key: str) -> str:
    return " ".join(str(cell) for cell in app.pods_table.get_row(key))


async def test_a_new_xid_marks_the_pods_on_that_gpu_and_its_end_clears_the_mark(cluster, monkeypatch):
    """The mark follows the DCGM readings, not the pod's own changes: what else looks at every row again (the
    ages' tick, new idle figures) is put off for the test, and the pod itself does not change."""
    monkeypatch.setattr(app_module, "AGE_INTERVAL", 3600.0)
    app = app_on(cluster)
    monkeypatch.setattr(app.idle, "changed", lambda: None)
    async with app.run_test(size=(120, 40)) as pilot:
        await show_all_pods(pilot, 6)
        await app.model.metrics.poll_once()
        await wait_for(pilot, lambda: "on bad GPU: XID 79" in row_of(app, "ml/llm-train-0"), what="llm-train-0 marked")
        assert "on bad GPU" not in row_of(app, "ml/eval-0")  # on cond-1: a node-level signal, which pod unknown
        try:
            cluster.call(cluster.sim.faults.xid, "gpu-1", 1, 0)  # llm-train-0's GPU 1 no longer reports XID 79
            await app.model.metrics.poll_once()
            await wait_for(pilot, lambda: "on bad GPU" not in row_of(app, "ml/llm-train-0"), what="the mark cleared")
            cluster.call(cluster.sim.faults.xid, "gpu-1", 2, 31)  # and its GPU 2 reports XID 31
            await app.model.metrics.poll_once()
            await wait_for(pilot, lambda: "on bad GPU: XID 31" in row_of(app, "ml/llm-train-0"), what="marked again")
        finally:
            cluster.call(cluster.sim.faults.xid, "gpu-1", 2, 0)
            cluster.call(cluster.sim.faults.xid, "gpu-1", 1, 79)


async def test_node_details_list_each_gpus_health_and_the_pods_on_a_bad_one(cluster):
    """Issue 24: per GPU on the node details, bad with its signal and pods, ok only where DCGM read it, `?` with why."""
    app = app_on(cluster)
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_for(pilot, lambda: app.model is not None and app.model.pods_known, what="the pods listed")

        async def health_lines(node: str) -> dict[str, str]:
            app.row_details.show_node(node)
            await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailsScreen) and "GPU health" in app.screen.text
                           and "DCGM not read yet" not in app.screen.text and "exporter unknown" not in app.screen.text,
                           what=f"{node}'s GPU health")
            section = app.screen.text.split("GPU health\n", 1)[1].split("\n\n", 1)[0]
            await pilot.press("escape")
            return {line.split()[0] + (" " + line.split()[1] if line.split()[0] == "GPU" else ""): line.strip()
                    for line in section.splitlines()}

        gpu_1 = await health_lines("gpu-1")
        assert gpu_1["GPU 1"].startswith("GPU 1") and "✗ XID 79 (GPU has fallen off the bus)" in gpu_1["GPU 1"]
        assert gpu_1["GPU 1"].endswith("pods ml/llm-train-0") and gpu_1["GPU 6"].endswith("no pod holds it")
        assert "✓ ok no XID reported by DCGM, read " in gpu_1["GPU 0"]
        dra_1 = await health_lines("dra-1")
        assert "✗ device taint gpu.nvidia.com/xid=43:NoSchedule" in dra_1["gpu-0"] and dra_1["gpu-0"].endswith("pods inference/vllm-0")
        assert dra_1["gpu-3"].endswith("? no DCGM reading: no DCGM exporter on this node")  # unknown, never ok
        cond_1 = await health_lines("cond-1")
        assert cond_1["GPU 0"].endswith("? the node's signal below names no GPU")
        assert "✗ condition GpuXidError is True" in cond_1["node"] and "(which GPU, and so which pods, cannot be" in cond_1["node"]


async def test_at_80_columns_a_long_line_goes_on_under_its_own_words(cluster):
    """At 80x24 a signal's source and a pod's `by …` went to the next line at the margin; they go on under
    the line's own words, and nothing is left for the screen to wrap."""
    app = app_on(cluster)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.model is not None and app.model.pods_known, what="the pods")
        await app.model.metrics.poll_once()
        await pilot.press("h")
        await wait_for(pilot, lambda: isinstance(app.screen, HealthScreen) and "vllm-0" in app.screen.text, what="the Health view")
        lines = app.screen.text.splitlines()
        room = app.screen.query_one("VerticalScroll").content_region.width
        assert max(len(line) for line in lines) <= room
        assert all(line.startswith(("    ", " " * 6)) or not line.startswith(" ") for line in lines if line.strip())
        continued = [line for line in lines if line.startswith(" " * 6)]
        assert continued and all(not line.strip().startswith(("pod ", "pods:")) for line in continued)
