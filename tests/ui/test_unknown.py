"""Unknown is not zero: while the pods are not listed, no node's allocation reads 0 and no full node reads free.

The simulator's fault hooks slow the pods list down, forbid it, or fail the watch after a sync;
the screen is read as text all along.
"""
from __future__ import annotations

import re

import pytest

from gputui.sim import builders as b
from tests.ui.ui_helpers import app_on, screen_text, start_cluster, wait_for
from tests.ui.ui_scenario import (
    NOW,
    PLUGIN_CONTAINER,
    PLUGIN_IMAGE,
    PLUGIN_LABELS,
    PLUGIN_NS,
    _gpu_pod,
    _node,
    plugin_pod_name,
)

# `full-1  Ready  8/8 ▕████▏  0  ✓ ok`: the allocated count, then the free one after the bar
ROW = re.compile(r"full-1\s+\S+\s+(\S+)/8 ▕[^▏]*▏\s+(\S+)")
HEADER = re.compile(r"gpu (\S+)/8 \((\S+) free\)")


def full_cluster() -> list[dict]:
    """One node with 8 GPUs, all 8 held by one pod; its device plugin running."""
    full = _node("full-1", 0, b.gfd_labels("NVIDIA-A100-SXM4-80GB", 8, operator=False), {"nvidia.com/gpu": (8, 8)})
    plugin = b.pod(plugin_pod_name("full-1"), PLUGIN_NS, [b.container(PLUGIN_CONTAINER, PLUGIN_IMAGE)], node_name="full-1",
                   labels=dict(PLUGIN_LABELS), owner=("apps/v1", "DaemonSet", "nvidia-device-plugin-daemonset"), age_s=3600, now=NOW)
    b.set_running(plugin, full, 0, 0, started_s=3600, now=NOW)
    return [full, plugin, _gpu_pod("train-0", "ml", full, 0, 1, {"nvidia.com/gpu": 8}, 600)]


@pytest.fixture(scope="module")
def cluster():
    yield from start_cluster(full_cluster(), faults=True)


def readings(app) -> tuple[tuple[str, str] | None, tuple[str, str] | None, str]:
    """(allocated, free) of full-1's row and of the header's gpu total, as on screen (None: not shown)."""
    text = screen_text(app)
    row, header = ROW.search(text), HEADER.search(text)
    return (row.groups() if row else None), (header.groups() if header else None), text


def assert_never_free(seen: list[tuple]) -> None:
    for row, header, text in seen:
        if row is not None:
            assert row[0] in ("…", "?", "8") and row[1] in ("…", "?", "0"), text
        if header is not None:
            assert header[0] in ("…", "?", "8") and header[1] in ("…", "?", "0"), text


async def test_slow_pods_list_reads_syncing_never_free(cluster):
    cluster.call(cluster.sim.faults.slow, "pods", 2.0)
    try:
        app = app_on(cluster)
        async with app.run_test(size=(120, 40)) as pilot:
            seen = []

            def settled() -> bool:
                seen.append(readings(app))
                return seen[-1][0] == ("8", "0")

            await wait_for(pilot, settled, timeout=15, what="the full node's 8/8 once the pods are listed")
            assert_never_free(seen)
            syncing = [(row, text) for row, _, text in seen if row is not None and row[0] == "…"]
            assert syncing, "the node row never read as syncing while the pods were being listed"
            assert any("allocation: pods listing…" in text for _, text in syncing)
            assert any(header == ("…", "…") for _, header, _ in seen)
            assert seen[-1][1] == ("8", "0")  # the header, once listed
    finally:
        cluster.call(cluster.sim.faults.clear, "pods")


async def test_forbidden_pods_read_unknown_with_the_reason(cluster):
    cluster.call(cluster.sim.faults.fail, "pods", 403)
    try:
        app = app_on(cluster)
        async with app.run_test(size=(120, 40)) as pilot:
            seen = []

            def unknown() -> bool:
                seen.append(readings(app))
                row, header, text = seen[-1]
                return row == ("?", "?") and header == ("?", "?") and "pods forbidden" in text.replace("  ", " ")

            await wait_for(pilot, unknown, timeout=10, what="?/8 and the 403 on screen")
            await pilot.pause(0.5)
            seen.append(readings(app))
            assert_never_free(seen)
            assert seen[-1][0] == ("?", "?"), seen[-1][2]
            assert "allocation unknown: pods forbidden" in seen[-1][2]
    finally:
        cluster.call(cluster.sim.faults.clear, "pods")


async def test_pods_failing_after_a_sync_say_as_of_when(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: readings(app)[0] == ("8", "0"), what="the full node, listed")
        assert "as of" not in screen_text(app)
        cluster.call(cluster.sim.faults.fail, "pods", 500)
        try:
            cluster.call(cluster.sim.faults.drop_watches)
            await wait_for(pilot, lambda: "as of " in screen_text(app), what="`as of … ago` once the pods watch fails")
            row, header, text = readings(app)
            assert row == ("8", "0") and header == ("8", "0"), text  # once complete: the figures, said to be old
            assert re.search(r"as of \d+s ago: pods retrying", text), text
        finally:
            cluster.call(cluster.sim.faults.clear, "pods")
        await wait_for(pilot, lambda: "as of " not in screen_text(app), timeout=15, what="live again")
