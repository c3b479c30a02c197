"""UI test helpers: a simulated cluster in its own thread, waiting, and the screen as text."""
from __future__ import annotations

import io
import time
from typing import Any, Callable, Iterator

import pytest
from rich.color import Color, ColorSystem
from rich.console import Console
from rich.segment import Segment, Segments
from rich.style import Style

from gputui.ui.colour import SIXTEEN
from gputui.ui.commands import GpuCommands
from gputui.ui.demo import BackgroundCluster
from gputui.ui.launch import make_app
from gputui.ui.screens import HelpScreen
from tests.ui.ui_scenario import NOW_TS


def start_cluster(objects: list[dict], **sim_options: Any) -> Iterator[BackgroundCluster]:
    cluster = BackgroundCluster(scenario=objects, **sim_options)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def app_on(cluster: BackgroundCluster, *, clock: Callable[[], float] = lambda: NOW_TS) -> Any:
    return make_app(str(cluster.kubeconfig_path), clock=clock)


async def wait_for(pilot: Any, condition: Callable[[], Any], timeout: float = 8.0, what: str = "") -> Any:
    """Let the app run until condition() is truthy; fail with `what` after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what or condition}")
        await pilot.pause(0.02)


def screen_segments(app: Any) -> list[Segment]:
    """What the terminal is sent now, as segments (the app's line filters applied)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, color_system="truecolor",
                      legacy_windows=False)
    update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    return [segment for segment in console.render(update) if not segment.control]  # not the cursor's moves


def in_sixteen_colours(segments: list[Segment]) -> list[Segment]:
    """The segments as a 16-colour terminal shows them: every colour the nearest of its 16."""
    def downgrade(color: Color | None) -> Color | None:
        return None if color is None else color.downgrade(ColorSystem.STANDARD)

    return [Segment(text, style + Style.from_color(downgrade(style.color), downgrade(style.bgcolor)) if style else style, control)
            for text, style, control in segments]


def sixteen_colour_svg(app: Any, title: str | None = None, simplify: bool = False) -> str:
    """The screen as a 16-colour terminal shows it, as App.export_screenshot's SVG (for snap_compare)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, color_system="truecolor",
                      record=True, legacy_windows=False, safe_box=False)
    console.print(Segments(in_sixteen_colours(screen_segments(app))), end="")
    return console.export_svg(title=title or app.title, theme=SIXTEEN)  # the 16 colours as Rich maps them


def screen_text(app: Any) -> str:
    """What the terminal shows now, as plain text (as App.export_screenshot renders it, minus SVG)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, record=True, legacy_windows=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


async def show_all_pods(pilot: Any, count: int | None) -> None:
    """Press `a` once the first node is selected (the pods pane starts on the selected node's pods),
    and wait for every node's `count` GPU pods (None: as many as the model has GPU pods at each look,
    for a cluster whose pods come and go)."""
    app = pilot.app
    await wait_for(pilot, lambda: app.selected_node and app.model is not None and app.model.pods_known, what="the first node")
    await pilot.press("a")

    def wanted() -> int:
        return len(app.model.gpu_pods()) if count is None else count

    await wait_for(pilot, lambda: app.pods_all_nodes and app.pods_table.row_count == wanted(),
                   what=f"all {'the model' if count is None else count} GPU pods")


async def help_text(app: Any, pilot: Any) -> str:
    """`?` on the current screen: the help's text, then `esc` back."""
    await pilot.press("question_mark")
    await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
    text = screen_text(app)
    await pilot.press("escape")
    return text


def palette_titles(app: Any) -> list[str]:
    """The command palette's commands on the current screen."""
    return [title for title, _, _ in GpuCommands(app.screen)._commands()]
