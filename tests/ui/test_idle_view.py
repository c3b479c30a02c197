"""The Idle GPUs screen (`i`): the pods holding GPUs worst first from the exporters' samples, the pod rows
and node details saying the same, `no samples yet` rather than a zero, and snapshots at 80x24 and 120x40.

Update the snapshots with `python -m pytest tests/ui/test_idle_view.py --snapshot-update` after a deliberate change.
"""
from __future__ import annotations

import re

import pytest

from gputui.kube.idle import EXPORTERS, IdleSettings, IdleView, PodIdle
from gputui.ui.idle import IdleScreen, idle_text, idle_words
from gputui.ui.launch import make_app
from gputui.ui.screens import NodeDetailsScreen
from tests.model.test_idle import profiled
from tests.ui.ui_helpers import (
    app_on,
    help_text,
    palette_titles,
    screen_text,
    show_all_pods,
    start_cluster,
    wait_for,
)
from tests.ui.ui_scenario import NOW_TS, gpu_cluster

SETTINGS = IdleSettings(window=30, prometheus=None)


@pytest.fixture(scope="module")
def profiled_cluster():
    objects, _ = profiled(stop_in=3600)  # nothing changes while the tests run
    yield from start_cluster(objects)


@pytest.fixture(scope="module")
def cluster():
    yield from start_cluster(gpu_cluster(crash_loop=False))  # no DCGM exporter: no sample ever


def live_app(cluster):
    return make_app(str(cluster.kubeconfig_path), metrics={"metrics_background_interval": 0.5}, idle=SETTINGS)


async def idle_screen(pilot) -> IdleScreen:
    await pilot.press("i")
    return await wait_for(pilot, lambda: isinstance(pilot.app.screen, IdleScreen) and pilot.app.screen, what="the Idle GPUs screen")


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_the_screen_rows_and_details_agree_with_the_profiles(profiled_cluster, size):
    app = live_app(profiled_cluster)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.idle.view is not None and len(app.idle.view.pods) == 5
                       and all(p.known and p.covered_s > 1 for p in app.idle.view.pods),
                       timeout=20, what="figures for every pod")
        screen = await idle_screen(pilot)
        await wait_for(pilot, lambda: "llm-train-0" in screen.text, what="the figures drawn")
        lines = rows(screen.text)
        assert lines[0][:4] == ["gputui's", "samples", "of", "the"]
        names = [line[0] for line in lines if line and line[0] in {"llm-train-0", "notebook-alice", "batch-eval-0", "sweep-0", "notebook-bob"}]
        assert names[-1] == "llm-train-0" and len(names) == 5  # in use: last
        trainer = next(line for line in lines if line[:1] == ["llm-train-0"])
        assert trainer[3:6] == ["4", "0s", "90%"]
        notebook = next(line for line in lines if line[:1] == ["notebook-alice"])
        assert notebook[3] == "1" and notebook[4].startswith("≥") and notebook[5] == "0%" and notebook[-2:] == ["15.9", "GiB"]
        assert all(len(line) <= size[0] for line in screen_text(app).splitlines())
        await pilot.press("escape")

        await show_all_pods(pilot, 5)
        await wait_for(pilot, lambda: "in use · 90%" in screen_text(app), what="the pod rows")
        assert re.search(r"ml/notebook-alice .* idle ≥\d+s · 0%", screen_text(app))
        reasons = {key: app.pods_pane.view[tuple(key.split("/", 1))][2][-1] for key in app.pods_table.shown_keys}
        assert re.fullmatch(r"idle ≥\d+s · 3%", reasons["research/sweep-0"].plain)
        assert reasons["ml/llm-train-0"].plain == "in use · 90%"
        assert all(cell.cell_len <= app.pod_widths["reason"] for cell in reasons.values())  # the note keeps to its column

        app.jump_to_node("gpu-1")
        await pilot.press("enter")
        details = await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailsScreen) and app.screen, what="gpu-1's details")
        await wait_for(pilot, lambda: "in use, mean 90%" in details.text, what="the pods' use in the details")
        assert re.search(r"ml/notebook-alice .* idle ≥\d+s, mean 0%", details.text)


async def test_no_samples_is_said_not_shown_as_zero(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        # Until the DaemonSets are read, every exporter is unknown; then the figures say there is none
        await wait_for(pilot, lambda: app.idle.view is not None and len(app.idle.view.pods) == 5
                       and {pod.why for pod in app.idle.view.pods} == {"no exporter on this node"}, what="the first figures")
        screen = await idle_screen(pilot)
        await wait_for(pilot, lambda: "finetune-a100-0" in screen.text, what="the pods")
        pods = [line for line in screen.text.splitlines()[1:] if "no exporter on this node" in line]
        assert len(pods) == len(app.idle.view.pods) == 5  # every bound GPU pod, none with a figure, and why (issue 22)
        assert "· no samples yet · window 60m ·" in screen.text.splitlines()[0]
        assert not re.search(r"\b0%|\b0s\b", screen.text)
        await pilot.press("escape")
        await show_all_pods(pilot, 6)
        # No exporter here: the bound pods' rows say nothing of their use (no `…` waiting for what never comes).
        assert "no samples" not in screen_text(app)
        assert [cells[-1].plain for entry, _, cells in app.pods_pane.view.values() if entry.pod.node] == [""] * 5


async def test_the_key_is_in_the_help_and_the_palette(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.model is not None, what="the app to connect")
        assert re.search(r"\bi\s+idle GPUs: pods holding GPUs, the idle longest", await help_text(app, pilot))
        assert "Idle GPUs" in palette_titles(app)


def test_a_pod_on_a_shared_gpu_says_its_use_is_not_split():
    shared = PodIdle("shared", "pair-a", "ts-1", 1, None, False, None, None, None, 0.0, shared=True)
    view = IdleView(EXPORTERS, 3600.0, 600.0, (shared,), NOW_TS)
    lines = idle_text(view, IdleSettings(), width=120).plain.splitlines()
    row = next(i for i, line in enumerate(lines) if "pair-a" in line)
    said = " ".join(line.strip() for line in lines[row:])
    assert said.endswith(" 1 shared GPU: use not split among its pods") and "%" not in said
    assert (idle_words(shared).plain, idle_words(shared, compact=True).plain) == ("shared GPU: use not split among its pods", "shared GPU")


def test_why_a_pod_has_no_figures_goes_on_under_itself_at_80_columns():
    """At 80 columns the words for a shared GPU, or a long why, do not fit the row: they go on under the
    IDLE FOR column, not at the margin under POD (the screen's own wrap)."""
    shared = PodIdle("shared", "pair-a", "ts-1", 1, None, False, None, None, None, 0.0, shared=True)
    why = PodIdle("ml", "train-0", "gpu-1", 1, None, False, None, None, None, 0.0,
                  why="exporter answered 503 Service Unavailable from 10.0.0.7:9400 after 3 tries")
    view = IdleView(EXPORTERS, 3600.0, 600.0, (shared, why), NOW_TS)
    width = 78  # the screen's text at 80 columns
    lines = idle_text(view, IdleSettings(), width=width).plain.splitlines()
    table = lines[lines.index(next(line for line in lines if line.startswith("POD"))):]
    column = table[0].index("IDLE FOR") - 1  # where the why starts: after GPUS, the right-aligned IDLE FOR's cell
    assert all(len(line) <= width - 4 for line in table), table
    shared_at = next(i for i, line in enumerate(table) if "pair-a" in line)
    assert table[shared_at][column:] + " " + table[shared_at + 1].strip() == "shared GPU: use not split among its pods", table
    assert table[shared_at + 1][:column].strip() == ""  # under itself
    said = " ".join(line[column:].strip() for line in table[shared_at + 2:])
    assert said == why.why and "train-0" in table[shared_at + 2], table


def test_replicas_cut_alike_read_apart_at_80_columns():
    replicas = tuple(PodIdle("inference", f"whisper-asr-6b9c4d7f8-{tail}", "mig-1", 1, 0.0, False, 50.0, 60.0, 512.0, 600.0)
                     for tail in ("x2kfp", "x2kqz"))
    view = IdleView(EXPORTERS, 3600.0, 600.0, replicas, NOW_TS)
    rows = [line.split()[0] for line in idle_text(view, IdleSettings(), width=78).plain.splitlines() if "mig-1" in line]
    assert len(rows) == 2 and rows[0] != rows[1] and all("…" in row for row in rows), rows
    assert rows[0].endswith("x2kfp") and rows[1].endswith("x2kqz")


# -- snapshots: fixed figures for the cluster's pods (nothing here depends on when it runs) --------------

FIXED = IdleView(EXPORTERS, 3600.0, 2520.0, tuple(sorted([
    PodIdle("ml-training", "finetune-a100-0", "a100-1", 6, 2520.0, True, 0.4, 3.0, 6 * 61440.0, 2520.0),
    PodIdle("research", "notebook-alice-0", "a100-2", 2, 1830.0, False, 12.5, 88.0, 2 * 20480.0, 2520.0),
    PodIdle("inference", "whisper-asr-7f9c4", "h100-mig-1", 2, 0.0, False, 61.7, 97.0, 2 * 4200.0, 2520.0),
    PodIdle("inference", "stable-diffusion-x8cgq", "t4-shared-1", 3, None, False, None, None, None, 0.0),
    PodIdle("inference", "embeddings-5d8f2", "h100-mig-1", 1, 0.0, False, 35.0, 60.0, 512.0, 900.0),
], key=lambda p: (p.idle_s is None, -(p.gpus * (p.idle_s or 0)), p.name))), NOW_TS)


async def fixed_figures(pilot) -> None:
    app = pilot.app
    await wait_for(pilot, lambda: app.model is not None and app.idle.view is not None, what="the app to connect")
    app.workers.cancel_group(app, "idle")  # the live figures stop: the fixed ones stay
    await pilot.pause()
    app.idle.view = FIXED
    await idle_screen(pilot)
    await wait_for(pilot, lambda: "finetune-a100-0" in screen_text(app), what="the fixed figures drawn")
    await pilot.pause(0.1)


def test_idle_screen_80x24(cluster, snap_compare):
    assert snap_compare(app_on(cluster), terminal_size=(80, 24), run_before=fixed_figures)


def test_idle_screen_120x40(cluster, snap_compare):
    assert snap_compare(app_on(cluster), terminal_size=(120, 40), run_before=fixed_figures)
