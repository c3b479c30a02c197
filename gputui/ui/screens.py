"""Screens other than the main one: help, a long text, node details."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Static

from gputui.sanitize import clean

from . import render
from .idle import idle_words
from .nodes_pane import allocation_basis
from .seam import ViewContext, host
from .stack_render import components_section, dra_section, health_section, metrics_section

if TYPE_CHECKING:
    from gputui.kube.dcgm import GpuReading
    from gputui.kube.dra import DraDevice
    from gputui.kube.gpu import NodeSummary
    from gputui.kube.idle import IdleView
    from gputui.kube.metrics import NodeMetrics
    from gputui.kube.health import GpuHealth
    from gputui.kube.model import ClusterModel
    from gputui.kube.records import Event, Pod

class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q,question_mark", "dismiss", "Close"),
        Binding("j", "scroll(1)", show=False),
        Binding("k", "scroll(-1)", show=False),
    ]

    def __init__(self, lines: Sequence[tuple[str, str]]) -> None:
        """lines: (keys, what), made from the bindings (keys.help_lines)."""
        super().__init__()
        self.lines = list(lines)

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        for keys, what in self.lines:
            table.add_row(keys, what)
        with VerticalScroll() as scroll:
            scroll.border_title = "gputui keys"
            yield Static(table)
            yield Static(
                Text(
                    f"\nVerdicts: {render.verdict_legend()}. "
                    "Usage reads allocated/allocatable; 'of N' is the capacity when some GPUs are unhealthy.",
                    style="dim",
                )
            )

    def on_mount(self) -> None:
        self.query_one(VerticalScroll).focus()  # ↑ ↓ PgUp PgDn scroll it on a short terminal

    def action_scroll(self, lines: int) -> None:
        self.query_one(VerticalScroll).scroll_relative(y=lines, animate=False)

    def action_dismiss(self, result: None = None) -> None:  # type: ignore[override]  # Textual's action_dismiss is async; a binding runs either kind
        self.dismiss(result)


class TextScreen(ModalScreen[None]):
    """One long text shown whole (a pending pod's reason)."""

    BINDINGS = [Binding("escape,q,enter", "close", "Close")]

    def __init__(self, title: str, body: Text) -> None:
        super().__init__()
        self._title = title
        self._body = Static(body)  # made now: a body set before the screen is composed or mounted is the one shown

    def compose(self) -> ComposeResult:
        with VerticalScroll() as scroll:
            scroll.border_title = self._title
            yield self._body

    @property
    def text(self) -> str:
        """The text shown, plain."""
        content = self._body.content
        return content.plain if isinstance(content, Text) else str(content)

    def set_body(self, body: Text) -> None:
        """Show new text (a pod's events, once listed), whenever it comes: before the screen is
        composed, between compose and mount (a real terminal: the events come in ~10 ms), or after."""
        self._body.update(body)

    def action_close(self) -> None:
        self.dismiss(None)


class NodeDetailsScreen(Screen[None]):
    """A describe-like view of one node, drawn from the model by show() (a ModelView, seam.py)."""

    BINDINGS = [Binding("escape,q", "back", "Back"), Binding("j", "scroll_down", show=False), Binding("k", "scroll_up", show=False)]

    def __init__(self, node_name: str, on_show: Callable[[], Callable[[], None]] | None = None) -> None:
        super().__init__()
        self.node_name = node_name
        self._while_shown = on_show  # called while shown (DCGM polling); returns the release (not Textual's _on_show)
        self._release: Callable[[], None] | None = None
        self._shown: Text | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="details"):
            yield Static(id="details-body")
        yield Footer()

    def on_mount(self) -> None:
        self.title = f"node {render.text(self.node_name).plain}"
        if self._while_shown is not None:
            self._release = self._while_shown()
        host(self).show_now(self)
        self.query_one("#details", VerticalScroll).focus()

    def on_unmount(self) -> None:
        if self._release is not None:
            self._release()
            self._release = None

    def show(self, model: ClusterModel | None, context: ViewContext) -> None:
        details = node_details(model, self.node_name, context.idle) if model is not None else None
        body = details_text(details, context.now, context.width) if details else Text(f"node {self.node_name} is gone", style=render.BAD_STYLE)
        if body != self._shown:  # no redraw when nothing changed
            self._shown = body
            self.query_one("#details-body", Static).update(body)

    @property
    def text(self) -> str:
        """The page as plain text."""
        return self._shown.plain if self._shown is not None else ""

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_scroll_down(self) -> None:
        self.query_one("#details", VerticalScroll).scroll_down(animate=False)

    def action_scroll_up(self) -> None:
        self.query_one("#details", VerticalScroll).scroll_up(animate=False)


class NodeDetails:
    """What the details screen shows, gathered by the app from the model."""

    __slots__ = ("summary", "pods", "events", "metrics", "series", "unknown", "idle", "gpu_health")

    def __init__(
        self, summary: "NodeSummary", pods: "list[tuple[Pod, dict[str, int]]]", events: "list[Event]",
        metrics: "NodeMetrics | None" = None, series: "Callable[[GpuReading], list[float]]" = lambda reading: [],
        unknown: str | None = None, idle: "IdleView | None" = None, gpu_health: "Sequence[GpuHealth]" = (),
    ) -> None:
        self.summary = summary
        self.pods = pods
        self.events = events
        self.metrics = metrics  # DCGM readings or why there are none; None before the first poll
        self.series = series  # a GPU's utilisation history
        self.unknown = unknown  # allocated and free not known (`…` listing, `?` unreadable): render.allocation_basis
        self.idle = idle  # the pods' GPU use (ui/idle.py); None before the first figures
        self.gpu_health = gpu_health  # each GPU's health (kube/health.py's node_gpu_health)


def node_details(model: ClusterModel, name: str, idle: IdleView | None) -> NodeDetails | None:
    """What the details screen shows of a node, from the model; None when the node is gone."""
    summary = model.summary(name)
    if summary is None:
        return None
    # each pod's GPUs as the pods pane counts them: requests, and DRA devices by DeviceClass
    pods = [(pod, entry.gpu if (entry := model.gpu_pod(pod, ())) else {}) for pod in model.pods_on_node(name) if not pod.finished]
    unknown, _ = allocation_basis(model)  # as the Nodes pane: `…` or `?` until pods are listed, or some namespaces only
    return NodeDetails(summary, pods, model.events_for("Node", "", name)[:20], model.node_metrics(name), model.metrics.series, unknown, idle,
                       model.gpu_health(name))


def _section(out: Text, title: str) -> None:
    if out:
        out.append("\n\n")
    out.append(title, style="bold underline")
    out.append("\n")


def details_text(details: NodeDetails, now: float, width: int = 120) -> Text:
    """The whole details page as one Text (pure: tested without a screen); width: the terminal's."""
    summary = details.summary
    node = summary.node
    facts = summary.facts
    out = Text(end="")

    out.append_text(render.text(node.name, style="bold"))
    out.append("  ")
    out.append_text(render.node_status(node))
    out.append("  ")
    out.append_text(render.verdicts(summary.problems, width=200, unknown=summary.unknown))
    out.append(f"  age {render.age(node.created, now)}", style="dim")
    if node.kubelet_version:
        out.append("  kubelet ")
        out.append_text(render.text(node.kubelet_version, limit=40))
    for problem in summary.problems:
        out.append("\n  • ")
        out.append_text(render.text(problem.message, limit=1000))
    for waiting in summary.unknown:
        out.append(f"\n  {render.SYNCING_MARK if waiting.pending else render.UNKNOWN_MARK} ", style=render.WARN_STYLE)
        out.append_text(render.text(f"{waiting.what}: {'not known yet' if waiting.pending else 'unknown'}: {waiting.why}", limit=1000))

    _section(out, "GPU (from GPU Feature Discovery labels)")
    fact_rows = [
        ("product", facts.product),
        ("memory", f"{facts.memory_mib} MiB" if facts.memory_mib else None),
        ("count", str(facts.count) if facts.count is not None else None),
        ("family", facts.family),
        ("driver", facts.driver),
        ("CUDA", facts.cuda),
        ("MIG strategy", facts.mig_strategy),
        ("MIG config", facts.mig_config + (f" ({facts.mig_config_state})" if facts.mig_config_state else "") if facts.mig_config else None),
        ("sharing", facts.sharing),
        ("replicas", str(facts.replicas) if facts.replicas is not None else None),
    ]
    for label, value in fact_rows:
        if value:
            out.append(f"  {label:<13}", style="dim")
            out.append_text(render.text(value, limit=200))
            out.append("\n")
    out.rstrip()

    metrics_section(out, summary, details.metrics, details.series, now, width)
    components_section(out, summary, width)
    dra_section(out, summary.dra_devices)

    _section(out, "Resources")
    names = sorted(set(node.capacity) | set(node.allocatable))
    capacity = {name: render.quantity(node.capacity.get(name)) for name in names}
    allocatable = {name: render.quantity(node.allocatable.get(name)) for name in names}
    # Each column as wide as its content: at 80 columns no header word goes to a line of its own.
    name_width = min(60, max((len(clean(name, 60)) for name in names), default=8)) + 2
    quantity_width = max((len(q) for q in [*capacity.values(), *allocatable.values()]), default=0) + 1
    columns = (("CAPACITY", quantity_width), ("ALLOCATABLE", quantity_width), ("ALLOCATED", 11), ("FREE", 6))
    out.append("  " + "RESOURCE".ljust(name_width) + "".join(title.rjust(max(len(title) + 1, w)) for title, w in columns) + "\n", style="dim")
    widths = [max(len(title) + 1, w) for title, w in columns]
    unknown = details.unknown  # the pods are not listed: allocated and free are not known, as in the Nodes pane
    for name in names:
        usage = summary.usage.get(name)
        out.append("  ")
        out.append_text(render.text(clean(name, 60).ljust(name_width), style="bold" if usage else "", limit=name_width))
        out.append(f"{capacity[name]:>{widths[0]}}{allocatable[name]:>{widths[1]}}")
        if usage is not None and unknown:
            out.append(f"{unknown:>{widths[2]}}", style=render.mark_style(unknown))
            out.append(f"{unknown:>{widths[3]}}", style=render.mark_style(unknown))
        elif usage is not None:
            out.append(f"{usage.allocated:>{widths[2]}}")
            out.append_text(Text(f"{usage.free:>{widths[3]}}", style=render.BAD_STYLE if usage.free < 0 else ""))
        out.append("\n")
    out.rstrip()

    _section(out, "Conditions")
    if not node.conditions:
        out.append("  none reported", style="dim")
    room = width - 4  # the page's padding and scrollbar
    for condition in node.conditions:
        good = (condition.status == "True") == (condition.type == "Ready")
        out.append("  ")
        out.append_text(render.text(f"{condition.type:<20}", limit=40))
        out.append(f"{condition.status:<8}", style=render.OK_STYLE if good else render.BAD_STYLE)
        reason = render.text(condition.reason, limit=60)
        out.append_text(reason)
        if condition.message:
            message = render.text(condition.message, style="dim", limit=300)
            fits = 2 + max(20, len(condition.type)) + 8 + reason.cell_len + 2 + message.cell_len <= room
            out.append("  " if fits else "\n" + " " * 30)  # else under the reason, on a line of its own
            out.append_text(message)
        out.append("\n")
    out.rstrip()

    _section(out, "Taints")
    if not node.taints:
        out.append("  none", style="dim")
    for taint in node.taints:
        out.append("  ")
        out.append_text(render.text(taint.key + (f"={taint.value}" if taint.value else "") + f":{taint.effect}", limit=300))
        out.append("\n")
    out.rstrip()

    health_section(out, details.gpu_health, width)

    _section(out, "Pods on this node holding GPUs or running the GPU stack")
    if not details.pods:
        out.append("  no GPU pods on this node", style="dim")
    claimed: dict[str, list[DraDevice]] = {}  # "namespace/name" -> the DRA devices its claims hold here
    for device in summary.dra_devices:
        for holder in device.pods:
            claimed.setdefault(holder, []).append(device)
    for pod, gpu in details.pods:
        out.append("  ")
        out.append_text(render.pod_name(pod))
        out.append("  ")
        held = claimed.get(f"{pod.namespace}/{pod.name}", [])
        if gpu:
            out.append_text(render.gpu_counts(gpu))
        elif held:
            gpus = sum(1 for d in held if d.type in (None, "gpu"))
            out.append(f"{gpus} gpu" if gpus and gpus == len(held) else f"{len(held)} DRA device(s)")
        else:
            out.append_text(Text("GPU stack", style="dim"))
        for claim in sorted({d.claim for d in held if d.claim}):
            out.append("  claim ", style="dim")
            out.append_text(render.text(claim, limit=200))
            out.append(" ")
            out.append_text(render.text(",".join(d.name for d in held if d.claim == claim), limit=200))
        out.append("  ")
        out.append_text(render.pod_status(pod))
        out.append(f"  {render.age(pod.created, now)}", style="dim")
        figures = details.idle.pod(pod.namespace, pod.name) if details.idle and (gpu or held) else None
        if (figures is not None and figures.known) or ((gpu or held) and details.metrics is not None and details.metrics.current):
            out.append("  ")  # its use, where known or on its way (the node's exporter is read)
            out.append_text(idle_words(figures))
        out.append("\n")
    host_plugin = summary.components.get("device-plugin")
    if summary.plugin is not None:
        out.append("  device plugin: ", style="dim")
        out.append_text(render.pod_name(summary.plugin))
    elif host_plugin is not None and host_plugin.outside:
        out.append("\n  device plugin: " if not details.pods else "  device plugin: ", style="dim")
        out.append(host_plugin.detail or "")
    out.rstrip()

    _section(out, "Recent events")
    if not details.events:
        out.append("  no events", style="dim")
    for event in details.events:
        out.append("  ")
        out.append_text(render.event_line(event, now))
        out.append("\n")
    out.rstrip()

    _section(out, "GPU labels")
    gpu_labels = sorted((k, v) for k, v in node.labels.items() if k.startswith("nvidia.com/") or "pci-10de" in k)
    if gpu_labels:
        for key, value in gpu_labels:
            out.append("    ")
            out.append_text(render.text(key, limit=200))
            out.append("=")
            out.append_text(render.text(value, limit=200))
            out.append("\n")
    else:
        out.append("  none\n", style="dim")
    out.rstrip()
    return out

