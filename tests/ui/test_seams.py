"""Seams tested where they break: what a screen loads when it opens is shown whether it arrives before
the screen is mounted (a real terminal: a pod's events come in ~10 ms) or after (a slow connection)."""
from __future__ import annotations

import asyncio
from typing import Any, Callable

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.screen import Screen

from gputui.kube.config import connect
from gputui.kube.nvml import LocalSnapshot
from gputui.ui.app import GpuTuiApp
from gputui.ui.capacity import CapacityScreen
from gputui.ui.health import HealthScreen
from gputui.ui.idle import IdleScreen
from gputui.ui.queues import QueuesScreen
from gputui.ui.screens import TextScreen
from gputui.ui.stack import LocalScreen, StackScreen
from tests.ui.ui_helpers import screen_text, start_cluster, wait_for
from tests.ui.ui_scenario import NOW_TS, gpu_cluster


@pytest.fixture(scope="module")
def cluster():
    yield from start_cluster(gpu_cluster(crash_loop=False))


class Bare(App[None]):
    def compose(self) -> ComposeResult:
        yield from ()


class EventsBetweenComposeAndMount(TextScreen):
    """The popup as a real terminal sees it: composed, not yet mounted, when the events come."""

    def compose(self) -> ComposeResult:
        yield from super().compose()
        assert not self.is_mounted
        self.set_body(Text("FailedScheduling"))


@pytest.mark.parametrize("timing", ["before compose", "between compose and mount", "after mount"])
async def test_the_pod_popup_shows_its_events_whenever_they_come(timing):
    app = Bare()
    async with app.run_test(size=(80, 24)) as pilot:
        popup = (EventsBetweenComposeAndMount if timing == "between compose and mount" else TextScreen)("GPU pod", Text("listing its events…"))
        if timing == "before compose":
            popup.set_body(Text("FailedScheduling"))
        await app.push_screen(popup)
        if timing == "after mount":
            await pilot.pause()
            assert "listing its events…" in screen_text(app)
            popup.set_body(Text("FailedScheduling"))
        await pilot.pause()
        assert popup.text == "FailedScheduling"
        assert "FailedScheduling" in screen_text(app) and "listing its events…" not in screen_text(app)


async def test_the_pending_pods_popup_ends_with_its_events_not_listing(cluster):
    app = GpuTuiApp(lambda context: connect(str(cluster.kubeconfig_path), context), clock=lambda: NOW_TS)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "ml-training/llm-pretrain-0" in app.pods_table.shown_keys, what="the pending pod's row")
        app.pods_table.move_cursor(row=app.pods_table.row_index("ml-training/llm-pretrain-0"))
        app.pods_table.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TextScreen) and "listing its events" not in app.screen.text, what="the events")
        assert "FailedScheduling" in screen_text(app)


class Gate:
    """A connector that waits until opened: the model arrives when the test says."""

    def __init__(self, kubeconfig: str) -> None:
        self.kubeconfig = kubeconfig
        self.open = asyncio.Event()

    async def __call__(self, context: str | None) -> Any:
        await self.open.wait()
        return await connect(self.kubeconfig, context)


MODEL_SCREENS: dict[str, tuple[Callable[[GpuTuiApp], Screen], str]] = {  # the screen as the app makes it, and words it shows once the model is there
    "capacity": (lambda app: CapacityScreen(), "Stranded"),
    "idle GPUs": (lambda app: IdleScreen(app.idle_settings), "no samples yet"),
    "queues": (lambda app: QueuesScreen(), "Kueue is not installed"),
    "stack": (lambda app: StackScreen(app.stack.open_component_logs), "standalone device plugin"),
    "health": (lambda app: HealthScreen(), "device unhealthy (capacity 8, allocatable 7)"),
}


@pytest.mark.parametrize("name", MODEL_SCREENS)
async def test_a_model_screen_shows_the_model_arriving_after_it_opened_and_there_before(cluster, name):
    make_screen, words = MODEL_SCREENS[name]
    gate = Gate(str(cluster.kubeconfig_path))
    app = GpuTuiApp(gate, clock=lambda: NOW_TS)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await app.push_screen(make_screen(app))  # opened while connecting: the model comes after it is mounted
        await pilot.pause()
        assert words not in screen_text(app)
        gate.open.set()
        await wait_for(pilot, lambda: words in screen_text(app), what=f"{name} once the model is there")
        app.pop_screen()
        await app.push_screen(make_screen(app))  # the model there before it is mounted: shown as it opens
        await pilot.pause()
        assert words in screen_text(app)


async def test_the_local_screen_drops_a_sample_that_comes_after_it_closed_and_shows_one_after_it_opened():
    release = asyncio.Event()
    loop: asyncio.AbstractEventLoop | None = None

    def late_snapshot() -> LocalSnapshot:  # NVML answers slowly (in its thread)
        assert loop is not None
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result(5)
        return LocalSnapshot((), None, "NVML is not available on this host (libnvidia-ml.so.1 not found)")

    app = Bare()
    async with app.run_test(size=(80, 24)) as pilot:
        loop = asyncio.get_running_loop()
        await app.push_screen(LocalScreen(late_snapshot, interval=3600))
        assert "reading NVML…" in screen_text(app)
        app.pop_screen()  # closed before its sample comes
        await pilot.pause()
        release.set()
        await pilot.pause(0.1)
        await app.push_screen(LocalScreen(late_snapshot, interval=3600))  # the sample comes after it opened
        await wait_for(pilot, lambda: "NVML is not available" in screen_text(app), what="the sample")
        assert app.is_running and app.return_code is None


async def test_a_theme_change_recolours_a_verdict(cluster):
    """The palette's theme switch reaches the verdicts: the theme's $error, back to the terminal's red."""
    app = GpuTuiApp(lambda context: connect(str(cluster.kubeconfig_path), context), clock=lambda: NOW_TS)

    def verdict_style() -> str:
        cells = app.nodes_table.get_row("a100-2")  # no device plugin: `✗ plugin not running`
        verdict = next((cell for cell in cells if "plugin not running" in cell.plain), None)
        return "" if verdict is None else str(verdict.spans[0].style)  # None: drawn again meanwhile

    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "a100-2" in app.nodes_table.shown_keys and "plugin not running" in str(app.nodes_table.get_row("a100-2")),
                       what="the verdict")
        first = app.theme
        assert verdict_style() == "bold red"
        app.theme = "nord"
        error = app.current_theme.error
        assert error
        await wait_for(pilot, lambda: verdict_style() == f"bold {error}", what="the verdict in the theme's $error")
        app.theme = first
        await wait_for(pilot, lambda: verdict_style() == "bold red", what="the terminal's red again")
