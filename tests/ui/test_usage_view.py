"""The Usage screen (`U`, and the palette): GPU-hours per group from Prometheus, what they rest on, and
without a Prometheus one line saying what it needs. The figures themselves are checked against a real
Prometheus in tests/model/test_usage_prometheus.py; here, the screen's words and widths."""
from __future__ import annotations

import pytest

from gputui.kube.idle import IdleSettings
from gputui.kube.usage import RAW, UsageRow, UsageSettings, UsageView
from gputui.ui.launch import make_app
from gputui.ui.usage import NEEDS, UsageScreen, usage_text
from tests.ui.ui_helpers import palette_titles, start_cluster, wait_for
from tests.ui.ui_scenario import gpu_cluster

VIEW = UsageView("http://prometheus:9090", "namespace", 7 * 86400, 840, RAW, "raw series, subqueries every 840 s",
                 {"": 2 * 86400}, ("DCGM_FI_DEV_GPU_UTIL (the DCGM exporters): no used or idle figures",),
                 (UsageRow("", "ml", "nvidia_com_gpu", 120.5, 80.25, 110.0, 20.0, 0.0, 7),
                  UsageRow("", "research\x1b[31m", "nvidia_com_gpu_shared", 10.0, None, 0.0, None, 10.0, 2)), 0.0)


@pytest.fixture(scope="module")
def cluster():
    yield from start_cluster(gpu_cluster(crash_loop=False))


@pytest.mark.parametrize("width", [78, 118])
def test_the_figures_what_they_rest_on_and_unknowns_as_question_marks(width):
    text = usage_text(VIEW, UsageSettings(), width=width).plain
    lines = text.splitlines()
    assert lines[0].startswith("Prometheus http://prometheus:9090 · by namespace · last 7d")
    assert lines[1] == "covered: 2d · raw series, subqueries every 840 s · GPU-hours"
    assert lines[2] == "missing: DCGM_FI_DEV_GPU_UTIL (the DCGM exporters): no used or idle figures"
    ml = next(line.split() for line in lines if line.startswith("ml "))
    assert ml == ["ml", "gpu", "120", "80.2", "73%", "20.0", "0", "7"]  # ratio: used over measured
    shared = next(line.split() for line in lines if line.startswith("research"))
    assert shared[-7:] == ["gpu_shared", "10.0", "?", "?", "?", "10.0", "2"]  # shared GPUs: use not split, never a 0
    assert "\x1b" not in text and all(len(line) <= width for line in lines)
    assert lines[-2] == "ml gpu: 10.5 GPU-h without DCGM readings"
    assert lines[-1].startswith("research gpu_shared: 10.0 GPU-h on shared GPUs: their use cannot be split")


async def test_the_key_and_the_palette_open_it_and_without_prometheus_it_says_what_it_needs(cluster):
    app = make_app(str(cluster.kubeconfig_path), idle=IdleSettings(prometheus=None))
    async with app.run_test(size=(80, 24)) as pilot:
        assert "Usage (GPU-hours)" in palette_titles(app)
        await pilot.press("U")
        screen = await wait_for(pilot, lambda: isinstance(app.screen, UsageScreen) and app.screen, what="the Usage screen")
        assert NEEDS.split(":")[0] in screen.text
        await pilot.press("U")
        assert not isinstance(app.screen, UsageScreen)


async def test_a_prometheus_that_does_not_answer_is_one_line(cluster):
    app = make_app(str(cluster.kubeconfig_path), idle=IdleSettings(prometheus="http://127.0.0.1:1", threshold=12.0))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("U")
        screen = await wait_for(pilot, lambda: isinstance(app.screen, UsageScreen) and "refused" in app.screen.text and app.screen,
                                what="the error")
        said = " ".join(screen.text.split())
        assert "Prometheus http://127.0.0.1:1: connection refused; the Usage screen reads GPU-hours from a Prometheus" in said
        await pilot.press("b")  # group by node: asked again
        await wait_for(pilot, lambda: "by node" in screen.text and "refused" in screen.text, what="asked again")
        assert app.usage_feed.settings.threshold == 12.0  # idle as the config's [idle] threshold says, as in the report


def test_a_scrapes_sliver_without_readings_is_no_note():
    """A pod that started between two scrapes leaves a sliver of allocation no reading covers (9.3e-07 GPU-h seen
    in a run): no note for it, while a real gap is said."""
    assert UsageRow("", "ml", "nvidia_com_gpu", 0.0065, 0.004, 0.0065 - 9.3e-07, 0.002, 0.0, 7).notes == ()
    assert UsageRow("", "ml", "nvidia_com_gpu", 0.0065, 0.004, 0.0050, 0.002, 0.0, 7).notes == ("0.0015 GPU-h without DCGM readings",)


def test_b_and_w_keep_the_settings_they_do_not_change():
    """`b` and `w` change the grouping and the window; the threshold, the cluster label and the rest stay."""
    from gputui.kube.usage import UsageFeed, UsageSettings
    from gputui.ui.usage import UsageScreen

    feed = UsageFeed(None, settings=UsageSettings(threshold=12.0, cluster_label="k8s_cluster", use_rules=False))
    screen = UsageScreen(feed)
    screen.action_group_by()
    screen.action_window()
    kept = feed.settings
    assert (kept.threshold, kept.cluster_label, kept.use_rules) == (12.0, "k8s_cluster", False)
    assert kept.by != "namespace" and kept.window != UsageSettings().window
