"""The app's keys, each declared once: its binding (and footer label), its help line and, for a screen,
its command-palette entry come from one `Key`. The help screen is generated from the bindings.

A screen opened from the main screen: a `Key` in MAIN_KEYS with `palette=` its palette title, and
`action_<name>` on the app that pushes it. A binding added to MainScreen.BINDINGS or the app's the
plain Textual way shows in the help too (its tooltip, else its description).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

from textual.binding import Binding, BindingType

from gputui.kube import kueue

if TYPE_CHECKING:
    from textual.app import App

    from gputui.kube.model import ClusterModel


@dataclass(frozen=True)
class Key:
    keys: str  # Textual's key names, comma-separated
    action: str  # e.g. "app.capacity"
    label: str  # the footer's word (shown only with show=True)
    help: str = ""  # the help screen's line; the palette's too for a screen ("" none)
    show: bool = False  # in the footer
    palette: str = ""  # a screen's command-palette title ("" none)
    offered: Callable[[ClusterModel | None], bool] | None = None  # the palette offers it only when this says so

    def binding(self) -> Binding:
        return Binding(self.keys, self.action, self.label, show=self.show, tooltip=self.help)

    def in_palette(self, model: ClusterModel | None) -> bool:
        return bool(self.palette) and (self.offered is None or self.offered(model))


def _kueue_installed(model: ClusterModel | None) -> bool:
    return model is not None and model.kueue_state() != kueue.NOT_INSTALLED


BACK_HELP = "back (in a fleet's cluster: to the Fleet screen)"

# The main screen's keys; they act on the app. Order: the footer's and the help's.
MAIN_KEYS: tuple[Key, ...] = (
    Key("slash", "app.filter", "Filter", "filter the focused table (enter keeps it, esc clears)", show=True),
    Key("a", "app.toggle_all_pods", "Node/all", "GPU pods: all nodes / the selected node", show=True),
    Key("l", "app.logs_full", "Logs", "device-plugin logs full screen (esc back)", show=True),
    Key("escape", "app.back_in_fleet", "Fleet", BACK_HELP, show=True),  # shown (and taken) only in a fleet's cluster
    Key("escape", "app.back", "Back", BACK_HELP),
    Key("v", "app.verify", "Verify", "verify the selected node (or the marked ones): nvidia-smi in a pod, then deleted", show=True),
    Key("V", "app.verify_all", "Verify all", "verify every GPU node"),
    Key("s", "app.stack", "Stack", "GPU stack: components per node (← → a component, l or enter: its logs)", show=True,
        palette="GPU stack"),
    Key("g", "app.local_gpus", "Local GPUs", "this host's GPUs through NVML (one line when it has none)", palette="Local GPUs (NVML)"),
    Key("c", "app.capacity", "Capacity", "capacity: nodes that could take a pod of 1, 2, 4, 8 GPUs now, largest free block, stranded GPUs",
        palette="Capacity"),
    Key("h", "app.health", "Health", "health: bad GPUs (XIDs, unhealthy devices, device taints, conditions), newest first, "
        "with the pods on them", palette="Health (bad GPUs)"),
    Key("i", "app.idle", "Idle GPUs", "idle GPUs: pods holding GPUs, the idle longest first (mean use over the window, memory used)",
        palette="Idle GPUs"),
    Key("U", "app.usage", "Usage", "usage: GPU-hours per namespace, node or model over days from Prometheus (allocated, used, idle, peak)",
        palette="Usage (GPU-hours)"),
    Key("u", "app.queues", "Queues", "Kueue queues: each ClusterQueue's GPU quota, used, free, pending; why its Workloads wait",
        palette="Queues (Kueue)", offered=_kueue_installed),
    Key("space", "app.mark_node", "Mark", "Nodes: mark a node for v"),
)

# Every log view's keys (the device-plugin pane, a component's logs, a verification's): on the focused log.
LOG_KEYS: tuple[Key, ...] = (
    Key("w", "toggle_wrap", "Wrap", "logs: wrap long lines / one row each (w again)", show=True),
    Key("left", "scroll_half(-1)", "Left", "logs: half a screen sideways"),
    Key("right", "scroll_half(1)", "Right", "logs: half a screen sideways"),
    Key("home", "first_line", "First line", "logs: the first line"),
    Key("end", "last_line", "Last line", "logs: the last line, followed again"),
)

QUIT_HELP = "quit (running verification pods are deleted first)"
PALETTE_HELP = "command palette: context, namespace, jump to node, panes, and every screen above"

# The app's own keys, on every screen. ctrl+c is a priority binding: it quits from modals and the
# palette too (Textual's own ctrl+c only says to press ctrl+q); a running verification cancels first.
APP_KEYS: tuple[Key, ...] = (
    Key("q", "quit", "Quit", QUIT_HELP, show=True),
    Key("question_mark", "help", "Help", "this help (↑ ↓ PgUp PgDn scroll it)", show=True),
    Key("ctrl+p", "command_palette", "Palette", PALETTE_HELP),
    Key("colon", "command_palette", "Palette", PALETTE_HELP),
)
CTRL_C = Binding("ctrl+c", "interrupt", "Quit", show=False, priority=True, tooltip=QUIT_HELP)

# Keys of Textual's own widgets (tables, logs, scrolling), which no binding of ours declares.
NAVIGATION: tuple[tuple[str, str], ...] = (
    ("↑ ↓  j k", "move in the focused table"),
    ("← →", "scroll a table sideways · GPU stack: the previous / next component"),
    ("PgUp PgDn", "a page up / down in a table, a log, details or this help"),
    ("tab  shift+tab", "next / previous pane"),
    ("enter", "node details (Nodes) · whole pending reason and events (GPU pods)"),
)


def bindings(keys: Iterable[Key]) -> list[BindingType]:
    return [key.binding() for key in keys]


def help_lines(app: App, bindings: Iterable[BindingType]) -> list[tuple[str, str]]:
    """(keys, what) for the help screen: the navigation keys, then every binding with a tooltip or a
    description, in order, the keys of one line (the same words) together."""
    lines: dict[str, list[str]] = {}
    for item in bindings:
        for binding in Binding.make_bindings([item]):  # "escape,q" is one binding per key
            what = binding.tooltip or binding.description
            if what:
                shown = app.get_key_display(binding)
                keys = lines.setdefault(what, [])
                if shown not in keys:
                    keys.append(shown)
    return [*NAVIGATION, *(("  ".join(keys), what) for what, keys in lines.items())]
