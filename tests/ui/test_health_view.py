"""The Health view (`h`) and the GPU pods pane's note for a pod on a bad GPU, on the simulator's `health` scenario."""
from __future__ import annotations

import pytest

from gputui.sim import health as health_scenario
from gputui.ui import app as app_module
from gputui.ui.health import HealthScreen
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
    app.idle_changed = lambda: None
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
