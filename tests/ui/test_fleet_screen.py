"""The Fleet screen: every cluster of a kubeconfig on one screen; drilling into one and back."""
from __future__ import annotations

import socket

import pytest
import yaml

from gputui.sim import scenarios
from gputui.sim.cluster import kubeconfig_for, merged_kubeconfig
from gputui.ui.fleet import FleetScreen
from gputui.ui.launch import make_app
from tests.ui.ui_helpers import screen_text, start_cluster, wait_for
from tests.ui.ui_scenario import NOW_TS, gpu_cluster


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def training():
    yield from start_cluster(gpu_cluster(crash_loop=False))


@pytest.fixture(scope="module")
def inference():
    yield from start_cluster(scenarios.load("operator-driver-crashloop"))


def fleet_app(tmp_path, contexts: dict[str, dict], **options):
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(merged_kubeconfig(contexts)))
    return make_app(str(path), fleet=list(contexts), clock=lambda: NOW_TS, **options)


def fleet_rows(app) -> dict[str, str]:
    table = app.screen.table
    return {key: " ".join(cell.plain for cell in table.get_row(key)) for key in table.shown_keys}


async def test_fleet_rows_drill_in_and_back(tmp_path, training, inference):
    app = fleet_app(tmp_path, {
        "training": kubeconfig_for(training.sim.url),
        "inference": kubeconfig_for(inference.sim.url),
        "lab": kubeconfig_for(f"https://127.0.0.1:{closed_port()}"),
        "staging": kubeconfig_for(training.sim.url, token="expired-token"),
    })
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen), what="the Fleet screen")
        await wait_for(pilot, lambda: "live" in fleet_rows(app).get("training", "") and "live" in fleet_rows(app).get("inference", ""),
                       timeout=15, what="two live rows")
        rows = fleet_rows(app)
        assert app.screen.table.shown_keys == ["training", "inference", "lab", "staging"]  # kubeconfig order
        assert "8/15" in rows["training"] and "✓ none" not in rows["training"]  # a100-2 is unhealthy and cordoned
        assert rows["training"].split()[:4] == ["training", "live", "v1.34.1", "8/15"]
        assert "✗ 1/4 plugin down a100-2" in rows["training"]  # its plugin crash-loops, and it is cordoned
        await wait_for(pilot, lambda: "unreachable, retry " in fleet_rows(app)["lab"], what="lab unreachable")
        await wait_for(pilot, lambda: "unauthorized, retry " in fleet_rows(app)["staging"], what="staging unauthorized")
        assert fleet_rows(app)["lab"].split()[-6:] == ["-", "?", "?", "?", "?", "…"]  # unknown, not 0
        text = screen_text(app)
        assert "fleet · 4 clusters (2 not counted" in text
        app.screen.table.move_cursor(row=2)
        await wait_for(pilot, lambda: "lab: unreachable: cannot reach https://127.0.0.1:" in screen_text(app)
                       and "connection refused, retry in " in screen_text(app), what="why, under the table")
        assert "expired-token" not in text

        # enter opens the cluster's main screen, on the fleet's own watches
        app.screen.table.move_cursor(row=0)
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, FleetScreen) and app.nodes_table.row_count == 5, what="training's nodes")
        assert app.context == "training" and app.model is app.fleet.members["training"].model
        await wait_for(pilot, lambda: "esc Fleet" in screen_text(app).splitlines()[-1], what="the way back in the footer")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen), what="back to the fleet")
        assert app.fleet.members["training"].model is not None  # still watched

        app.screen.table.move_cursor(row=app.screen.table.row_index("inference"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.context == "inference" and app.nodes_table.row_count > 0
                       and "a100-1" not in app.nodes_table.shown_keys, what="inference's nodes")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen), what="back again")

        # `o` orders by free GPUs; `/` filters
        assert "↓" not in screen_text(app)  # kubeconfig order: no column marked
        await pilot.press("o")
        assert app.screen.sort == "free"
        await wait_for(pilot, lambda: " FREE↓ " in screen_text(app), what="the ordering column marked")
        await pilot.press("o")
        await wait_for(pilot, lambda: " PROBLEMS↓ " in screen_text(app) and "FREE↓" not in screen_text(app), what="the mark moved")
        await pilot.press("o", "o")
        assert app.screen.sort == "context"
        await pilot.press("slash", *"infer", "enter")
        await wait_for(pilot, lambda: app.screen.table.shown_keys == ["inference"], what="the filter")
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(app.screen.table.shown_keys) == 4, what="the filter cleared")

        # ctrl+p jumps to any cluster by name
        await pilot.press("ctrl+p")
        await pilot.press(*"open cluster: training")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, FleetScreen) and app.context == "training"
                       and app.nodes_table.row_count == 5, what="training from the palette")


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
def test_fleet_screen_snapshot(tmp_path, training, inference, snap_compare, size):
    app = fleet_app(tmp_path, {
        "training": kubeconfig_for(training.sim.url),
        "inference-eu": kubeconfig_for(inference.sim.url),
    })

    async def settled(pilot) -> None:
        await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen), what="the Fleet screen")
        await wait_for(pilot, lambda: all("live" in row for row in fleet_rows(app).values()) and len(fleet_rows(app)) == 2,
                       timeout=15, what="live rows")
        await pilot.pause(1.2)

    assert snap_compare(app, terminal_size=size, run_before=settled)


def test_the_fleet_line_says_when_it_leaves_figures_out():
    from gputui.kube.fleet import ClusterRow
    from gputui.kube.gpu import Usage
    from gputui.ui.fleet import fleet_line

    models = {f"GPU-MODEL-{i}-80GB": Usage(capacity=8, allocatable=8, allocated=i % 8) for i in range(12)}
    row = ClusterRow("prod", "live", totals={"nvidia.com/gpu": Usage(capacity=96, allocatable=96, allocated=66)}, by_model=models)
    lines = fleet_line([row], 80).plain.splitlines()
    assert len(lines) == 3 and all(len(line) <= 80 for line in lines)
    assert lines[2].endswith(" …")  # not every model fitted: said, not silently dropped
    assert "GPU-MODEL-11" not in fleet_line([row], 80).plain and "GPU-MODEL-11-80GB 3/8" in fleet_line([row], 400).plain


def test_a_retry_whose_time_has_come_says_it_is_under_way_not_retry_0_s():
    """A cluster whose connection hangs read `unreachable, retry 0 s` for as long as the try took (issue 22)."""
    from gputui.kube import fleet as f
    from gputui.ui.fleet import retry

    now = 1000.0
    assert retry(f.ClusterRow("lab", f.UNREACHABLE, retry_at=now + 8.2), now) == ", retry in 8 s"
    assert retry(f.ClusterRow("lab", f.UNREACHABLE, retry_at=now - 4.0), now) == ", trying again now"
