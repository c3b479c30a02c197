"""The Queues screen (`u`) on the kueue-quota scenario: one row per ClusterQueue with its GPU quota, used, free,
pending and admitted; the chosen queue's LocalQueues and pending GPU Workloads with Kueue's words; the gated pod's
reason in the GPU pods pane and its details; the key, the help and the palette; without Kueue, one line and no
screen; snapshots at 80x24 and 120x40.

Update the snapshots with `python -m pytest tests/ui/test_queues.py --snapshot-update` after a deliberate change.
"""
from __future__ import annotations

import re

import pytest

from gputui.kube import kueue
from gputui.sim.scenarios import fragmented, kueue_quota
from gputui.sim.builders import kueue as k
from gputui.ui.queues import QueuesScreen, details_text, pending_rows, queue_row
from gputui.ui.screens import TextScreen
from tests.ui.ui_helpers import (
    app_on,
    help_text,
    palette_titles,
    screen_text,
    start_cluster,
    wait_for,
)
from tests.ui.ui_scenario import NOW

QUOTA_MESSAGE = kueue_quota.PENDING  # the Workloads' QuotaReserved=False message, as Kueue's scheduler writes it
WORKLOADS = {o["metadata"]["name"].rsplit("-", 1)[0]: o["metadata"]["name"] for o in kueue_quota.build(now=NOW) if o["kind"] == "Workload"}


@pytest.fixture(scope="module")
def cluster():
    yield from start_cluster(kueue_quota.build(now=NOW), speed=50, faults=True)


async def open_queues(pilot) -> QueuesScreen:
    app = pilot.app
    await wait_for(pilot, lambda: app.model is not None and app.model.kueue_state() is None and app.model.pods_known,
                   what="Kueue's kinds and the pods listed")
    await pilot.press("u")
    screen = await wait_for(pilot, lambda: isinstance(app.screen, QueuesScreen) and app.screen, what="the Queues screen")
    await wait_for(pilot, lambda: "Pending GPU Workloads: 2" in screen.text, what="team-a's details")
    await wait_for(pilot, lambda: "team-b" in screen_text(app) and "Back" in screen_text(app), what="the rows drawn")
    await pilot.pause(0.1)
    return screen


def row(screen: QueuesScreen, key: str) -> list[str]:
    return [cell.plain for cell in screen.table.get_row(key)]


async def test_one_row_per_cluster_queue_and_the_chosen_ones_details(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_queues(pilot)
        assert screen.table.shown_keys == ["team-a", "team-b"]
        assert row(screen, "team-a") == ["team-a", "research", "gpu 8", "8", "0", "2", "1"]
        assert row(screen, "team-b") == ["team-b", "research", "gpu 8", "2", "6", "0", "1"]
        text = screen.text
        assert text.startswith("2 ClusterQueues · 2 LocalQueues · 2 GPU Workloads pending")
        assert "gpu: quota 8, borrowing limit 0, used 8, free 0" in text
        assert "LocalQueues: team-a/user-queue (pending 2, admitted 1)" in text
        pending = [line.split() for line in text.splitlines() if line.startswith("  team-a/")]
        assert [p[:4] for p in pending] == [[f"team-a/{WORKLOADS['pod-llm-ft-x7k2']}", "4", "gpu", "20m"],  # oldest first
                                            [f"team-a/{WORKLOADS['job-eval-sweep']}", "4", "gpu", "15m"]]
        assert text.count(QUOTA_MESSAGE) == 2
        assert QUOTA_MESSAGE[:60] in screen_text(app)  # on the terminal, not only in the Text
        await pilot.press("down")
        await wait_for(pilot, lambda: "Pending GPU Workloads: none" in screen.text, what="team-b's details")
        assert "LocalQueues: team-b/user-queue (pending 0, admitted 1)" in screen.text and "no borrowing limit" in screen.text
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, QueuesScreen), what="back to the main screen")


async def test_the_gated_pods_reason_says_why_kueue_holds_it(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.model is not None and app.model.kueue_state() is None and app.model.pods_known,
                       what="Kueue's kinds listed")
        await pilot.press("a")
        key = ("team-a", "llm-ft-x7k2")
        await wait_for(pilot, lambda: (shown := app.pods_pane.view.get(key)) is not None and "Kueue" in (shown[0].reason or ""),
                       what="the Kueue reason")
        reason = app.pods_pane.view[key][0].reason
        assert reason == (f"queued in Kueue ClusterQueue team-a: {QUOTA_MESSAGE} (Workload team-a/{WORKLOADS['pod-llm-ft-x7k2']}) · "
                          "held by scheduling gate kueue.x-k8s.io/admission (owner kueue.x-k8s.io): not scheduled until it is removed")
        await wait_for(pilot, lambda: "queued in Kueue" in screen_text(app), what="the reason in the pane")
        app.pods_table.move_cursor(row=app.pods_table.row_index("team-a/llm-ft-x7k2"))
        app.pods_table.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TextScreen), what="the pod's details")
        assert reason in app.screen.text


async def test_the_key_is_in_the_help_and_the_palette(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.model is not None and app.model.kueue_state() is None, what="Kueue's kinds listed")
        assert re.search(r"\bu\s+Kueue queues: each ClusterQueue's GPU quota", await help_text(app, pilot))
        assert "Queues (Kueue)" in palette_titles(app)


async def test_forbidden_workloads_give_no_count_and_no_kueue_words_on_the_pod(cluster):
    cluster.call(cluster.sim.faults.fail, "workloads.kueue.x-k8s.io", 403)
    try:
        app = app_on(cluster)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.model is not None and app.model.states["workloads"].phase == "forbidden"
                           and app.model.states["clusterqueues"].synced and app.model.pods_known, what="workloads forbidden")
            await pilot.press("u")
            screen = await wait_for(pilot, lambda: isinstance(app.screen, QueuesScreen) and app.screen, what="the Queues screen")
            await wait_for(pilot, lambda: "Pending GPU Workloads: unknown (Workloads not read)" in screen.text, what="the details")
            assert screen.text.startswith("Kueue not fully known: workloads forbidden")
            assert "GPU Workloads pending" not in screen.text  # no count from part of the objects
            assert row(screen, "team-a") == ["team-a", "research", "gpu 8", "8", "0", "2", "1"]  # the ClusterQueue's own status
            entry = app.model.gpu_pod(app.model.pod("team-a", "llm-ft-x7k2"))
            assert entry.reason.startswith("held by scheduling gate")
    finally:
        cluster.call(cluster.sim.faults.clear, "workloads.kueue.x-k8s.io")


@pytest.fixture
def fresh_cluster():
    yield from start_cluster(kueue_quota.build(now=NOW), speed=50)


async def test_the_pods_reason_and_the_queues_follow_kueue(fresh_cluster):
    """Only Kueue's objects change: the Workload is admitted, the ClusterQueue's status counts one pending fewer."""
    app = app_on(fresh_cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_queues(pilot)
        key = ("team-a", "llm-ft-x7k2")
        assert app.pods_pane.view[key][0].reason.startswith("queued in Kueue")
        name = WORKLOADS["pod-llm-ft-x7k2"]

        def admit(w: dict) -> None:
            w["status"] = {"conditions": [k.condition("QuotaReserved", True, "QuotaReserved", "Quota reserved in ClusterQueue team-a", "x"),
                                          k.condition("Admitted", True, "Admitted", "The workload is admitted", "x")],
                           "admission": {"clusterQueue": "team-a", "podSetAssignments": []}}

        def one_pending_fewer(q: dict) -> None:
            q["status"]["pendingWorkloads"] = 1

        fresh_cluster.call(fresh_cluster.sim.store.mutate, "clusterqueues.kueue.x-k8s.io", "", "team-a", one_pending_fewer)
        await wait_for(pilot, lambda: row(screen, "team-a")[5] == "1", what="the Queues screen to follow the ClusterQueue")
        assert app.pods_pane.view[key][0].reason.startswith("queued in Kueue")
        fresh_cluster.call(fresh_cluster.sim.store.mutate, "workloads.kueue.x-k8s.io", "team-a", name, admit)
        await wait_for(pilot, lambda: "Pending GPU Workloads: 1" in screen.text, what="the Queues screen to follow the Workload")
        await wait_for(pilot, lambda: app.pods_pane.view[key][0].reason.startswith("held by scheduling gate"), timeout=3,
                       what="the pod's row to lose the Kueue words (sooner than the ages' tick)")


def test_cluster_text_reaches_the_screen_as_text():
    hostile = "[bold red]boom[/] \x1b[31mred\x07"
    q = kueue.ClusterQueue("team-a", "[i]c[/i]", {"nvidia.com/gpu": 8}, {"nvidia.com/gpu": None}, {"nvidia.com/gpu": 8}, 1, 1, 0,
                           kueue.Condition(False, "Stopped", hostile))
    w = kueue.Workload("team-a", "w", "user-queue", "", (("Pod", "p", "u"),), {"nvidia.com/gpu": 1},
                       kueue.Condition(False, "Pending", hostile), None, None, None)
    view = kueue.Kueue([w], [kueue.LocalQueue("team-a", "user-queue", "team-a", 1, 0)], [q])
    cohort, details, why = queue_row(q, wide=True)[1], details_text(view, "team-a"), pending_rows(view, "team-a", 0.0)[0][3]
    for text in (cohort, details, why):
        assert "\x1b" not in text.plain and "\x07" not in text.plain  # control characters neutralised
    assert cohort.plain == "[i]c[/i]" and "[bold red]boom[/]" in why.plain and "inactive: [bold red]boom[/]" in details.plain  # literal


@pytest.fixture(scope="module")
def without_kueue():
    yield from start_cluster(fragmented.build(now=NOW), speed=50)


async def test_without_kueue_the_key_says_so_in_one_line_and_nothing_shows(without_kueue):
    app = app_on(without_kueue)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.model is not None and app.model.kueue_state() == kueue.NOT_INSTALLED and app.model.pods_known,
                       what="Kueue found absent")
        await pilot.press("u")
        await wait_for(pilot, lambda: [n.message for n in app._notifications] == [kueue.NOT_INSTALLED], what="the one line")
        assert not isinstance(app.screen, QueuesScreen)
        assert "Queues (Kueue)" not in palette_titles(app)
        gated = app.model.gpu_pod(app.model.pod("ml", "queued-job-0"))
        assert gated.reason.startswith("held by scheduling gate kueue.x-k8s.io/admission")  # the gate's words only
        # The absent kinds are not trouble: the header comes to "watches live" (the other kinds may still be syncing
        # on a loaded machine when Kueue is found absent).
        await wait_for(pilot, lambda: "watches live" in screen_text(app), what="every watch live, Kueue's kinds absent")


def test_queues_screen_80x24(cluster, snap_compare):
    assert snap_compare(app_on(cluster), terminal_size=(80, 24), run_before=open_queues)


def test_queues_screen_120x40(cluster, snap_compare):
    assert snap_compare(app_on(cluster), terminal_size=(120, 40), run_before=open_queues)
