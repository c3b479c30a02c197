"""Terminals with few colours, or none: NO_COLOR and 16-colour terminals (TERM=xterm).

Under NO_COLOR, Textual turns every colour into a grey of the same luminance: the
red of a problem word (`✗ not ready`) becomes a dark grey that nearly vanishes on
the dark panels, dimmer than the healthy text around it. `ReadableMonochrome`
keeps Textual's greys, but no bold text (the problem words, the status words
that matter) is fainter than normal text: it stands out by weight, with the
contrast of normal text at least; the cursor row and the focused pane are
marked by reverse and bold (see the `:nocolor` rules in styles/gputui.tcss).

On a 16-colour terminal the theme's accent (orange) becomes bright red: the
focused pane's border would read as an alarm. The app then has the class
`-ansi16`, and the stylesheet marks focus in a calm colour. Textual draws the
terminal's own colours (the verdicts' green, yellow, red) in the RGB of its
ANSI theme (Monokai's red is pinkish), which a 16-colour terminal then shows as
the nearest of its 16: magenta. There the ANSI theme is the 16 colours
themselves (`SIXTEEN`), so that red stays red.
"""
from __future__ import annotations

from typing import Sequence

from rich.color import Color as RichColor
from rich.segment import Segment
from rich.style import Style
from rich.terminal_theme import TerminalTheme
from textual.color import Color
from textual.filter import LineFilter, monochrome_style


def _luminance(color: RichColor | None, fallback: float) -> float:
    if color is None:
        return fallback
    return Color.from_rich_color(color).monochrome.brightness


class ReadableMonochrome(LineFilter):
    """Colours to greys (as Textual's Monochrome), no bold text fainter than normal text."""

    def __init__(self, foreground: str = "#e0e0e0", *, enabled: bool = True) -> None:
        super().__init__(enabled=enabled)
        self._normal = Color.parse(foreground).monochrome
        self._normal_rich = self._normal.rich_color

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        out = []
        base = background.monochrome.brightness
        normal = self._normal.brightness
        for text, style, control in segments:
            if style is None:
                out.append(Segment(text, style, control))
                continue
            grey = monochrome_style(style)
            if style.bold and not style.dim and style.color is not None:
                ground = _luminance(grey.bgcolor, base)
                if abs(_luminance(grey.color, normal) - ground) < abs(normal - ground):
                    grey = grey + Style(color=self._normal_rich)  # at least the contrast of normal text
            out.append(Segment(text, grey, control))
        return out


def readable(filters: Sequence[LineFilter], replacement: ReadableMonochrome) -> list[LineFilter]:
    """The app's line filters (App.get_line_filters) with Textual's Monochrome replaced."""
    from textual.filter import Monochrome  # noqa: PLC0415

    return [replacement if isinstance(f, Monochrome) else f for f in filters]


def few_colours(app) -> bool:  # noqa: ANN001
    """A 16-colour (or 8-colour) terminal. A headless app (tests) has no terminal to ask: its
    `colour_system` says, as Rich names them ("standard": 16 colours)."""
    system = app.colour_system or (None if app.is_headless else app.console.color_system)
    return system in ("standard", "windows")


# The 16 colours as a 16-colour terminal is taken to show them (Rich's own palette for that terminal,
# which it maps RGB back from): each ANSI colour comes back to itself.
_VGA = [(0, 0, 0), (170, 0, 0), (0, 170, 0), (170, 85, 0), (0, 0, 170), (170, 0, 170), (0, 170, 170), (170, 170, 170),
        (85, 85, 85), (255, 85, 85), (85, 255, 85), (255, 255, 85), (85, 85, 255), (255, 85, 255), (85, 255, 255), (255, 255, 255)]
SIXTEEN = TerminalTheme((0, 0, 0), (170, 170, 170), _VGA[:8], _VGA[8:])


def use_sixteen_colours(app) -> None:  # noqa: ANN001
    """On a 16-colour terminal: focus in a calm colour, the terminal's colours as themselves."""
    app.add_class("-ansi16")
    app.ansi_theme_dark = app.ansi_theme_light = SIXTEEN
