"""Pilot tests: the app against a simulated cluster, driven by keys like a person would."""
from __future__ import annotations

import re
import sys

import pytest
from kubernetes_asyncio.client import CoreV1Api
from kubernetes_asyncio.config import new_client_from_config

from gputui.ui.screens import HelpScreen, NodeDetailsScreen, TextScreen
from tests.ui.test_log_keys import LONG, check_log_keys
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

NODES = ["a100-1", "a100-2", "h100-mig-1", "t4-shared-1", "cpu-1"]


@pytest.fixture(scope="module")
def cluster():
    objects = gpu_cluster()
    yield from start_cluster(objects)


async def started(app, pilot):
    await wait_for(pilot, lambda: app.nodes_table.row_count == len(NODES), what="the nodes")
    await show_all_pods(pilot, 6)


def pod_keys(app) -> list[str]:
    return app.pods_table.shown_keys


async def test_panes_fill_from_the_cluster(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot)
        assert app.nodes_table.shown_keys == NODES  # GPU nodes first, then by name
        assert "ml-training/llm-pretrain-0" in pod_keys(app)
        await wait_for(pilot, lambda: "watches live" in screen_text(app), what="watches live")
        text = screen_text(app)
        assert "server v1.34" in text
        assert "gpu 8/15 (7 free)" in text  # 6 + 2 allocated of 8 + 7 allocatable
        assert "mig-1g.10gb 2/7" in text
        # a100-2: unhealthy and cordoned (and its plugin crash-loops, while the simulated kubelet restarts it)
        # worst first: the plugin leads while it is down and the rest is counted; else the second fits
        assert re.search(r"✗ (plugin not running \+2|unhealthy GPUs, cordoned)", text)
        await wait_for(pilot, lambda: plugin_pod_name("a100-1") in screen_text(app), what="a100-1's plugin pod")


async def test_pod_created_changed_and_deleted_through_the_api(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot)
        app.pods_table.focus()
        app.pods_table.move_cursor(row=pod_keys(app).index("research/notebook-alice-0"))
        # kubernetes_asyncio, not gputui's client: the cluster changed by an independent hand
        async with await new_client_from_config(str(cluster.kubeconfig_path)) as api:
            core = CoreV1Api(api)
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "aaa-new-gpu-job", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
            }
            await core.create_namespaced_pod("default", body)
            await wait_for(pilot, lambda: "default/aaa-new-gpu-job" in pod_keys(app), what="the new pod")
            assert app.pods_table.cursor_key == "research/notebook-alice-0"  # the cursor stayed on its row

            # The simulated scheduler binds it to the only node with 2 free GPUs; the kubelet starts it.
            def row():
                return [cell.plain for cell in app.pods_table.get_row("default/aaa-new-gpu-job")]
            await wait_for(pilot, lambda: row()[1] == "a100-1" and row()[3] == "Running", what="the pod bound and running")
            await wait_for(pilot, lambda: "gpu 10/15 (5 free)" in screen_text(app), what="the totals to follow")

            await core.delete_namespaced_pod("aaa-new-gpu-job", "default", grace_period_seconds=0)
            await wait_for(pilot, lambda: "default/aaa-new-gpu-job" not in pod_keys(app), what="the pod to go")
        assert app.pods_table.cursor_key == "research/notebook-alice-0"
        assert app.scheduler.refreshes < 200  # coalesced: not one refresh per event


async def test_at_start_the_panes_agree_and_selecting_a_node_switches_them(cluster):
    for node in ("a100-1", "h100-mig-1"):
        cluster.call(cluster.sim.logs.append, PLUGIN_NS, plugin_pod_name(node), PLUGIN_CONTAINER, f"hello from the plugin on {node}")
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.nodes_table.row_count == len(NODES), what="the nodes")
        # At start the cursor is on a100-1, and both the pods pane and the plugin pane show a100-1: the work held back
        # first (the pending pod, on no node), then a100-1's own.
        await wait_for(pilot, lambda: pod_keys(app) == ["ml-training/llm-pretrain-0", "ml-training/finetune-a100-0"],
                       what="the pending pod, then a100-1's GPU pods")
        assert app.nodes_table.cursor_key == app.selected_node == "a100-1"
        await wait_for(pilot, lambda: any("plugin on a100-1" in line for line in app.plugin_log.lines), what="a100-1's plugin log")
        assert "GPU pods · node a100-1" in screen_text(app)
        await pilot.press("a")
        await wait_for(pilot, lambda: len(pod_keys(app)) == 6, what="every node's pods")
        assert "GPU pods · all nodes" in screen_text(app)

        await pilot.press("j", "j")  # a100-1 -> a100-2 -> h100-mig-1
        await wait_for(pilot, lambda: app.selected_node == "h100-mig-1", what="selection")
        await pilot.pause(0.2)
        assert app.pods_all_nodes and len(pod_keys(app)) == 6  # the scope stays where the user put it
        await pilot.press("a")
        await wait_for(pilot, lambda: pod_keys(app) == ["ml-training/llm-pretrain-0", "inference/embeddings-5d8f2",
                                                        "inference/whisper-asr-7f9c4"], what="narrowed pods")
        await wait_for(pilot, lambda: any("plugin on h100-mig-1" in line for line in app.plugin_log.lines), what="h100's plugin log")
        assert not any("plugin on a100-1" in line for line in app.plugin_log.lines)  # the old stream was dropped

        await pilot.press("a")  # back to all nodes
        await wait_for(pilot, lambda: len(pod_keys(app)) == 6, what="all pods again")


async def test_new_plugin_log_lines_appear(cluster):
    pod = plugin_pod_name("a100-1")
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot)
        await wait_for(pilot, lambda: app.plugin_log.line_count > 0, what="the tail")
        for i in range(3):
            cluster.call(cluster.sim.logs.append, PLUGIN_NS, pod, PLUGIN_CONTAINER, f"Registered device plugin #{i} [not markup]")
        await wait_for(pilot, lambda: "Registered device plugin #2 [not markup]" in app.plugin_log.lines, what="followed lines")
        cluster.call(cluster.sim.logs.append, PLUGIN_NS, pod, PLUGIN_CONTAINER, LONG)
        await wait_for(pilot, lambda: LONG in app.plugin_log.lines, what="a 200-character line")
        await check_log_keys(pilot, app.plugin_log)
        await pilot.press("l")
        assert app.screen.maximized is not None
        await pilot.press("escape")
        assert app.screen.maximized is None


async def test_filter_help_details_and_quit(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot)
        await pilot.press("slash", *"h100")
        await wait_for(pilot, lambda: app.nodes_table.shown_keys == ["h100-mig-1"], what="filtered nodes")
        await pilot.press("enter")  # keep the filter
        assert app.focused is app.nodes_table
        assert "filter: h100" in screen_text(app)
        await pilot.press("escape")  # clears it
        await wait_for(pilot, lambda: app.nodes_table.row_count == len(NODES), what="unfiltered")

        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert "command palette" in screen_text(app)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)

        app.jump_to_node("a100-2")  # as the palette's "Jump to node" does
        await pilot.press("enter")
        assert isinstance(app.screen, NodeDetailsScreen)
        text = app.screen.text
        for heading in ("Resources", "Conditions", "Taints", "Recent events", "NodeNotSchedulable", "notebook-alice-0", "2 gpu"):
            assert heading in text, heading
        assert "device plugin: kube-system/nvidia-device-plugin-daemonset-" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, NodeDetailsScreen)

        assert app.pods_all_nodes  # choosing a100-2 left the pods' scope as the user put it (`a`: all nodes)
        await wait_for(pilot, lambda: "ml-training/llm-pretrain-0" in pod_keys(app), what="all pods")
        app.pods_table.focus()
        app.pods_table.move_cursor(row=pod_keys(app).index("ml-training/llm-pretrain-0"))
        await pilot.press("enter")  # the whole pending reason
        assert isinstance(app.screen, TextScreen)
        # the scheduler's whole message (the simulated scheduler rewrites it as it retries)
        assert app.screen.text.rstrip().endswith("No preemption victims found for incoming pod.")
        assert "FailedScheduling" in app.screen.text
        assert "allocated so far: nothing, not bound to a node" in app.screen.text  # its GPU-hours: none held yet
        await pilot.press("escape")

        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_narrow_terminal_and_no_color(cluster, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = app_on(cluster)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "plugin down" not in text or "✗" in text
        assert "✗ plugin down +2" in text or "✗ unhealthy +1" in text  # worded, not only coloured; worst first
        assert "Cordoned" in text
        assert max(len(line) for line in text.splitlines()) <= 80
        assert app.nodes_table.column_keys == ("node", "status", "gpu", "free", "verdict", "other")


async def test_pending_reason_in_pods_pane_is_shortened(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot)
        cell = app.pods_table.get_row("ml-training/llm-pretrain-0")[-1].plain
        whole = app.model.gpu_pods(namespace="ml-training")[-1].reason
        width = app.pod_widths["reason"]  # cut to its column, every column on screen
        assert len(whole) > width and cell == whole[: width - 1] + "…"


async def test_printing_while_the_app_runs_reaches_textual_not_our_refresh(cluster):
    """Textual sends print() output inside the app through App._flush(stderr=...): no method of ours may shadow it."""
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.nodes_table.row_count > 0, what="nodes")
        refreshes = app.scheduler.refreshes
        print("a line printed while the app runs", flush=True)
        print("and one on stderr", file=sys.stderr, flush=True)
        await pilot.pause()
        assert app.scheduler.refreshes >= refreshes  # nothing raised; the refresh machinery ran as before, untouched


async def test_the_palette_hides_a_pane_and_shows_it_again(cluster):
    """The palette's "Toggle pane: Device plugin" (ui/main_layout.py): the pane hidden, then shown again."""
    from textual.command import CommandList, CommandPalette

    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.nodes_table.row_count == len(NODES), what="the nodes")
        plugin = app._main("#plugin")
        for hidden in (True, False):
            await pilot.press("ctrl+p")
            await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), what="the palette")
            await pilot.press(*"toggle pane: device plugin")
            results = app.screen.query_one(CommandList)
            await wait_for(pilot, lambda results=results: results.option_count == 1 and results.highlighted == 0
                           and str(results.get_option_at_index(0).prompt).startswith("Toggle pane: Device plugin"), what="the command")
            await pilot.press("enter")
            await wait_for(pilot, lambda hidden=hidden: app.screen.id == "main" and plugin.display is not hidden, what="the pane toggled")
            assert ("Device plugin" in screen_text(app)) is not hidden
            assert app._main("#nodes").display and app._main("#pods").display
