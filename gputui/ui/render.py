"""Pure renderers: model records in, rich `Text` cells out.

No widget, no I/O, no markup: every string from the cluster goes through
`sanitize.clean` into a `Text`, so brackets in a pod name stay brackets.
Colour always comes with words or symbols, so NO_COLOR still tells.
"""
from __future__ import annotations

from typing import Callable, Iterable, Mapping, Sequence

from rich.cells import cell_len
from rich.text import Text

from gputui.kube import duration
from gputui.kube.gpu import GPU, GPU_SHARED, MIG_PREFIX, GpuPod, NodeSummary, Problem, Unknown, Usage, allocated_hours
from gputui.kube.metrics import NodeMetrics
from gputui.kube.quantities import format_quantity
from gputui.kube.records import Event, Node, Pod
from gputui.kube.usage import hours_text
from gputui.kube.verdicts import NODE_VERDICTS, PROBLEM, WARNING, Verdict, verdict
from gputui.kube.watch import ABSENT, LIVE, SYNCING, ResourceState

from gputui.sanitize import clean
from gputui.ui.names import Differ, cut_name, safe_parts

DIM_STYLE = "dim"
_BAR_BLOCKS = " ▏▎▍▌▋▊▉█"


class Palette:
    """The verdict and state colours. By default the terminal's own green, yellow and red (ANSI: they
    follow the terminal's colour scheme, as k9s's do); once the user picks a theme (the command
    palette's "Change theme"), that theme's $success, $warning and $error. The app sets them
    (`use_theme`) and redraws; renderers read them as OK_STYLE, WARN_STYLE and BAD_STYLE.
    monochrome (NO_COLOR): warnings are bold too, as problems are, so that they keep the contrast
    of normal text at least (ui/colour.py) and stand out by weight."""

    def __init__(self) -> None:
        self.monochrome = False
        self.use_terminal_colours()

    def use_terminal_colours(self) -> None:
        self.use_theme("green", "yellow", "red")

    def use_theme(self, success: str | None, warning: str | None, error: str | None) -> None:
        self.ok = success or "green"
        self.warn = ("bold " if self.monochrome else "") + (warning or "yellow")
        self.bad = f"bold {error or 'red'}"

    def start(self, monochrome: bool) -> None:
        """An app starts: the terminal's colours; NO_COLOR or not."""
        self.monochrome = monochrome
        self.use_terminal_colours()


PALETTE = Palette()


def __getattr__(name: str) -> str:
    """OK_STYLE, WARN_STYLE, BAD_STYLE: the palette's colours now (read when a renderer runs)."""
    styles = {"OK_STYLE": "ok", "WARN_STYLE": "warn", "BAD_STYLE": "bad"}
    if name in styles:
        return str(getattr(PALETTE, styles[name]))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def severity_style(severity: str) -> str:
    """A verdict's colour: its severity's."""
    return PALETTE.warn if severity == WARNING else PALETTE.bad


def verdict_legend() -> str:
    """`✓ ok · ✗ a problem (not ready, plugin not registered, …) · ! cordoned`, from the verdicts."""
    problems = ", ".join(v.words for v in NODE_VERDICTS if v.severity == PROBLEM)
    warnings = ", ".join(v.words for v in NODE_VERDICTS if v.severity == WARNING)
    return f"✓ ok · ✗ a problem ({problems}) · ! {warnings}"


def unknown_verdict(unknown: Sequence[Unknown], short: bool = False) -> Text:
    """`… XIDs not read yet`, `… device plugin, XIDs`, `? XIDs unknown`: a node that is not `ok` yet."""
    pending = all(u.pending for u in unknown)
    what = ", ".join(u.what for u in unknown)
    if len(unknown) == 1 and not short:
        words = f"{what}: {unknown[0].why}" if pending else f"{what} unknown"
    else:
        words = what if pending else f"{what} unknown"
    return Text(f"{SYNCING_MARK if pending else UNKNOWN_MARK} {clean(words, 80)}", style=PALETTE.warn, end="")


_AGED = (Verdict.MIG_STUCK, Verdict.DRIVER_UPGRADE_STUCK, Verdict.LEFT_CORDONED)


def verdict_word(problem: Problem, short: bool = False) -> tuple[str, str]:
    """(words, style) of one verdict in the Nodes pane: a health condition by its type, a taint by its key;
    a code this gputui does not know (a newer fleet member's) as it is."""
    known = verdict(problem.code)
    if known is None:
        return clean(problem.code, 40), PALETTE.bad
    word, style = (known.short if short else known.words), severity_style(known.severity)
    if known is Verdict.HEALTH_CONDITION and problem.subject:
        word = clean(problem.subject, 24)
    elif known is Verdict.TAINTED and problem.subject:
        key = clean(problem.subject, 40)
        word = "taint " + (key.rsplit("/", 1)[-1] if short or len(key) > 18 else key)
    elif known in _AGED and problem.subject:  # stuck plumbing, with how long: `MIG stuck 42m` (short: `>42m` for `over 42m`)
        word = f"{word} {clean(problem.subject.replace('over ', '>') if short else problem.subject, 16)}"
    return word, style


def text(value: str | None, style: str = "", limit: int = 512) -> Text:
    """Untrusted cluster text as a literal Text."""
    return Text(clean(value or "", limit), style=style, end="")


def short_resource(name: str) -> str:
    """`nvidia.com/mig-1g.10gb` -> `mig-1g.10gb`; other vendors keep their domain."""
    return name.removeprefix("nvidia.com/")


def age(created: float | None, now: float) -> str:
    """An age exactly as kubectl prints it (45s, 5m30s, 3h5m, 3d4h, 2y10d; `<unknown>` without a time):
    gputui.kube.duration, the report's too."""
    return duration.age(created, now)


def quantity(value: str | None, limit: int = 13) -> str:
    """A resource quantity as kubectl prints it (`2Ti`, not `2147483648Ki`); `-` when there is none."""
    return clean(format_quantity(value), limit) if value else "-"


def bar(used: int, total: int, width: int = 6) -> Text:
    """A usage bar in eighths of a cell: `▕███▍  ▏`; red when over, dim when empty."""
    if total <= 0:
        return Text("▕" + " " * width + "▏", style=DIM_STYLE, end="")
    fraction = min(1.0, used / total)
    eighths = round(fraction * width * 8)
    if used > 0 and eighths == 0:
        eighths = 1  # something is used: never look empty
    full, part = divmod(eighths, 8)
    body = "█" * full + (_BAR_BLOCKS[part] if part else "")
    body = body.ljust(width)
    style = PALETTE.bad if used > total else (PALETTE.warn if fraction >= 1.0 else PALETTE.ok)
    out = Text("▕", end="")
    out.append(body, style=style)
    out.append("▏")
    return out


SYNCING_MARK = "…"  # a count not known yet: its resource is being listed for the first time
UNKNOWN_MARK = "?"  # a count not known: its resource could not be read (retrying, forbidden)


def mark_style(mark: str) -> str:
    return PALETTE.warn if mark == SYNCING_MARK else PALETTE.bad


def usage_cell(usage: Usage | None, bar_width: int = 6, *, capacity: bool = True, unknown: str | None = None) -> Text:
    """`3/8 ▕███   ▏`: allocated / allocatable, and capacity when some are unhealthy.
    unknown: the allocated count is not known (`…` or `?` stands for it, and the bar stays empty)."""
    if usage is None:
        return Text("-", style=DIM_STYLE, end="")
    if unknown:
        out = Text(unknown, style=mark_style(unknown), end="")
        out.append(f"/{usage.allocatable}")
    else:
        out = Text(f"{usage.allocated}/{usage.allocatable}", end="")
    if capacity and usage.capacity != usage.allocatable:
        out.append(f" of {usage.capacity}", style=PALETTE.warn)
    if bar_width:
        out.append(" ")
        if unknown:
            out.append("▕" + " " * bar_width + "▏", style=DIM_STYLE)
        else:
            out.append_text(bar(usage.allocated, usage.allocatable, bar_width))
    return out


def free_cell(usage: Usage | None, unknown: str | None = None) -> Text:
    if usage is None:
        return Text("-", style=DIM_STYLE, end="")
    if unknown:
        return Text(unknown, style=mark_style(unknown), end="")
    style = PALETTE.bad if usage.free < 0 else (DIM_STYLE if usage.free == 0 else "")
    return Text(str(usage.free), style=style, end="")


def other_resources_cell(usage: dict[str, Usage], unknown: str | None = None) -> Text:
    """MIG slices, shared GPUs and extra resources, plainly: `mig-1g.10gb 2/7 · gpu.shared 3/16`."""
    out = Text(end="")
    for name, u in usage.items():
        if name == GPU:
            continue
        if out:
            out.append(" · ", style=DIM_STYLE)
        out.append(short_resource(name) + " ")
        if unknown:
            out.append(unknown, style=mark_style(unknown))
            out.append(f"/{u.allocatable}")
        else:
            out.append(f"{u.allocated}/{u.allocatable}", style=PALETTE.bad if u.allocated > u.allocatable else "")
    return out


def node_status(node: Node) -> Text:
    """Ready, NotReady or Unknown; a Ready node that is cordoned reads Cordoned."""
    if node.ready is None:
        return Text("Unknown", style=PALETTE.warn, end="")
    if not node.ready:
        return Text("NotReady", style=PALETTE.bad, end="")
    if node.unschedulable:
        return Text("Cordoned", style=PALETTE.warn, end="")
    return Text("Ready", style=PALETTE.ok, end="")


def model_and_memory(summary: NodeSummary) -> Text:
    """`H100-80GB-HBM3 80G`: GFD's product and per-GPU memory."""
    name = summary.facts.product
    mib = summary.facts.memory_mib
    if not name and not mib:
        return Text("-", style=DIM_STYLE, end="")
    out = text((name or "?").removeprefix("NVIDIA-"), limit=32)
    if mib and "GB" not in (name or ""):  # most product names already say it
        out.append(f" {mib / 1024:.0f}G", style=DIM_STYLE)
    return out


def verdicts(problems: list[Problem], *, short: bool = False, width: int = 24, unknown: Sequence[Unknown] = ()) -> Text:
    """Worded and coloured: `✗ plugin not running, cordoned`, `✓ ok` when nothing is wrong and every
    input is known; else `… XIDs not read yet` (known soon) or `? XIDs unknown` (not here).
    The problems come worst first (gpu.SEVERITY_ORDER): the first decides the symbol
    (`✗ not ready +1`, `! cordoned`). What does not fit in `width` is counted (`+2`);
    short uses the short words."""
    if not problems and unknown:
        return unknown_verdict(unknown, short)
    if not problems:
        return Text("✓ ok", style=PALETTE.ok, end="")
    first = verdict(problems[0].code)
    bad = first is None or first.severity == PROBLEM
    out = Text(end="")
    out.append("✗ " if bad else "! ", style=PALETTE.bad if bad else PALETTE.warn)
    for i, problem in enumerate(problems):
        word, style = verdict_word(problem, short)
        rest = len(problems) - i - 1
        room = width - out.cell_len - (2 if i else 0) - (len(f" +{rest}") if rest else 0)
        if i and len(word) > room:
            out.append(f" +{len(problems) - i}", style=DIM_STYLE)
            break
        if i:
            out.append(", ")
        out.append(word, style=style)
    return out


_NO_EXPORTER_YET = ("no DCGM exporter on this node", "exporter unknown")


def health_parts(summaries: Iterable[NodeSummary], metrics_of: Callable[[str], NodeMetrics | None],
                 now: float) -> tuple[list[Text], list[Text]]:
    """The header's health: its alarms (`✗ XID: 1 node`, `✗ health: 2 nodes`), and how current the
    readings are (`DCGM 4/5 read · oldest 52s`; nothing where no GPU node has an exporter to read)."""
    exporters = current = 0
    oldest: float | None = None
    xid = health = 0
    for s in summaries:
        codes = {p.code for p in s.problems}
        xid += Verdict.XID_ERRORS in codes
        health += Verdict.HEALTH_CONDITION in codes
        if not s.gpu_node:
            continue
        m = metrics_of(s.name)
        if m is None or (m.at is None and (m.error or "").startswith(_NO_EXPORTER_YET)):
            continue
        exporters += 1
        current += m.current
        if m.at is not None and (oldest is None or m.at < oldest):
            oldest = m.at
    alarms = [
        Text(f"✗ {word}: {count} node{'s' if count > 1 else ''}", style=PALETTE.bad, end="")
        for count, word in ((xid, "XID"), (health, "health")) if count
    ]
    parts = []
    if exporters:
        part = Text(end="")
        part.append("DCGM ", style=DIM_STYLE)
        part.append(f"{current}/{exporters} read", style=PALETTE.ok if current == exporters else PALETTE.warn)
        if oldest is not None:
            part.append(f" · oldest {age(oldest, now)}", style=DIM_STYLE)
        parts.append(part)
    return alarms, parts


def labelled(label: str, value: Text) -> Text:
    """`context prod`: a dim label, its value as it is."""
    out = Text(end="")  # no style of its own: it would reach the value
    out.append(label, style=DIM_STYLE)
    out.append_text(value)
    return out


def gpu_counts(gpu: dict[str, int]) -> Text:
    """`2 gpu`, `1 mig-1g.10gb`, `1 gpu + 2 gpu.shared`."""
    return Text(" + ".join(f"{n} {short_resource(name).removeprefix('nvidia.com/')}" for name, n in gpu.items()), end="")


def _gpu_hours(hours: float) -> str:
    return "<0.01" if 0 < hours < 0.01 else hours_text(hours)


def gpu_hours(entry: GpuPod, now: float) -> str:
    """The pods pane's GPU-H cell: the pod's allocated GPU-hours so far (kube/gpu.allocated_hours), each resource's
    in the GPUS cell's order and unit (`6.0`, `6.0+1.5`); `-` for a pod not bound, `?` when its start is not known."""
    hours = allocated_hours(entry, now)
    if hours is None:
        return "?"
    return "+".join(_gpu_hours(h) for h in hours.values()) or "-"


def gpu_hours_words(entry: GpuPod, now: float) -> Text:
    """The pod details' line: `allocated so far: 6.0 gpu-h (held 3h, since status.startTime) · allocated, not used: …`."""
    hours = allocated_hours(entry, now)
    if hours == {}:
        return Text("allocated so far: nothing, not bound to a node", style=DIM_STYLE, end="")
    if hours is None and entry.pod.started is not None:
        return Text("allocated so far: ? GPU-hours (its status.startTime is later than this machine's clock)", style=DIM_STYLE, end="")
    if hours is None:
        return Text("allocated so far: ? GPU-hours (its start, status.startTime, is not known yet)", style=DIM_STYLE, end="")
    units = " + ".join(f"{_gpu_hours(h)} {short_resource(name).removeprefix('nvidia.com/')}-h" for name, h in hours.items())
    out = Text(f"allocated so far: {units}", end="")
    out.append(f" (held {age(entry.pod.started, now)}, since status.startTime) · allocated, not used: see Idle GPUs (i), Usage (U)", style=DIM_STYLE)
    if any(name.startswith(MIG_PREFIX) or name == "mig.nvidia.com" for name in hours):
        out.append("\na MIG slice counts as its profile, not as a whole GPU", style=DIM_STYLE)
    if GPU_SHARED in hours:
        out.append("\na shared GPU's replica counts as one replica, not as a whole GPU", style=DIM_STYLE)
    return out


def pod_status(pod: Pod) -> Text:
    status = pod.status
    if status in ("Running", "Completed", "Succeeded") and pod.deleted is None:
        style = PALETTE.ok if pod.ready >= pod.total or status != "Running" else PALETTE.warn
    elif status in ("Pending", "SchedulingGated", "ContainerCreating", "PodInitializing", "Terminating") or status.startswith("Init:"):
        style = PALETTE.warn
    else:
        style = PALETTE.bad
    return text(status, style=style, limit=40)


def reason(gpu_pod: GpuPod, limit: int = 60) -> Text:
    """The pending reason, shortened to fit (the whole text is one key away)."""
    if not gpu_pod.reason:
        return Text("", end="")
    return text(gpu_pod.reason, style=PALETTE.warn, limit=limit)


def pod_name(pod: Pod, width: int | None = None, differ: Differ | None = None, keep: int = 0) -> Text:
    """`namespace/name`; when wider than `width`, the middle gives way (ui/names.py: a name's ends tell
    pods apart, and `differ` keeps where it differs from a name that would read the same, or the
    `keep` characters a filter matched)."""
    namespace, rest = cut_name(*safe_parts(pod.namespace, pod.name), width or 1 << 20, differ, keep)
    out = Text(namespace, style=DIM_STYLE, end="")
    out.append(rest)
    return out


def totals_parts(
    totals: dict[str, Usage], *, compact: bool = False, unknown: str | None = None, basis: Text | None = None
) -> list[Text]:
    """Cluster totals per GPU resource, one part each: `gpu 21/40 (19 free)` (allocated/allocatable);
    compact: `gpu 21/40 (19)`. unknown: the allocated counts are not known, `gpu …/40 (… free)`;
    basis: what the figures rest on when that is not a live watch, a part of its own before them."""
    parts = [basis] if basis is not None else []
    if not totals:
        if unknown:  # the nodes may not be listed yet either
            return parts + [Text("GPU totals " + unknown, style=mark_style(unknown), end="")]
        return parts + [Text("no GPU resources advertised", style=DIM_STYLE, end="")]
    for name, u in totals.items():
        part = Text(short_resource(name), style="bold", end="")
        if unknown:
            part.append(" ")
            part.append(unknown, style=mark_style(unknown))
            part.append(f"/{u.allocatable} (")
            part.append(unknown if compact else f"{unknown} free", style=mark_style(unknown))
        else:
            part.append(f" {u.allocated}/{u.allocatable} (")
            part.append(str(u.free) if compact else f"{u.free} free", style=PALETTE.bad if u.free < 0 else (PALETTE.warn if u.free == 0 else PALETTE.ok))
        part.append(")")
        parts.append(part)
    return parts


ALLOCATION_KINDS = ("nodes", "pods")  # what allocated and free are computed from
LISTING_SAYS_SECONDS = 5.0  # a first list taking longer says for how long


def allocation_basis(states: Mapping[str, ResourceState], now: float) -> tuple[str | None, Text | None]:
    """What the allocated and free counts rest on, from the nodes and pods watches' states
    (now: time.monotonic()): (None, None) when both are live; (`…` or `?`, why) while one was
    never listed, the counts unknown; (None, `as of 2m ago: pods retrying`) when both were
    listed once but one is not current now (its watch failed, or it is being listed again)."""
    unlisted = [(kind, s) for kind in ALLOCATION_KINDS if (s := states.get(kind)) is not None and not s.synced and s.phase != ABSENT]
    if unlisted:
        failing = [(kind, s) for kind, s in unlisted if s.phase != SYNCING]
        if not failing:
            waited = now - min(s.since for _, s in unlisted)  # a slow server: say how long, never "live"
            took = f" {waited:.0f} s" if waited >= LISTING_SAYS_SECONDS else ""
            return SYNCING_MARK, Text(f"allocation: {' and '.join(k for k, _ in unlisted)} listing…{took}", style=PALETTE.warn, end="")
        return UNKNOWN_MARK, Text("allocation unknown: " + ", ".join(f"{k} {s.phase}" for k, s in failing), style=PALETTE.bad, end="")
    stale = [(kind, s) for kind in ALLOCATION_KINDS if (s := states.get(kind)) is not None and s.synced and s.phase != ABSENT
             and (s.phase != LIVE or s.stale_since is not None)]
    if not stale:
        return None, None
    since = min(s.stale_since if s.stale_since is not None else s.since for _, s in stale)
    why = ", ".join(f"{kind} {'relisting' if s.phase == LIVE else s.phase}" for kind, s in stale)
    return None, Text(f"as of {age(since, now)} ago: {why}", style=PALETTE.warn, end="")


def pack(parts: list[Text], width: int, sep: str = " · ") -> list[Text]:
    """Lay parts out on as few lines as fit `width`, breaking only between parts."""
    lines: list[Text] = []
    line = Text(end="")
    for part in parts:
        if line and line.cell_len + len(sep) + part.cell_len > width:
            lines.append(line)
            line = Text(end="")
        if line:
            line.append(sep, style=DIM_STYLE)
        line.append_text(part)
    lines.append(line)
    return lines


def at_most(lines: list[Text], count: int, width: int) -> list[Text]:
    """The first `count` lines; when some are left out, the last one kept ends with ` …` (within `width`)."""
    if len(lines) <= count:
        return lines
    kept = lines[:count]
    last = kept[-1].copy()
    if last.cell_len + 2 > width:
        last.truncate(max(0, width - 2))
    last.append(" …", style=DIM_STYLE)
    return [*kept[:-1], last]


def event_line(event: Event, now: float) -> Text:
    out = Text(end="")  # no style of its own: it would dim the whole line
    out.append(f"{age(event.last, now):>6} ", style=DIM_STYLE)
    out.append_text(text(event.type or "-", style=PALETTE.warn if event.type == "Warning" else "", limit=10))
    out.append(" ")
    out.append_text(text(event.reason, style="bold", limit=40))
    if event.count > 1:
        out.append(f" ×{event.count}", style=DIM_STYLE)
    out.append(" ")
    out.append_text(text(event.message, limit=1000))
    return out


def joined(parts: Iterable[Text], sep: str = " · ") -> Text:
    return Text(sep, style=DIM_STYLE, end="").join(parts)


PAGE_MARGIN = 4  # a page's padding (1 + 1) and its scrollbar (2): a line any longer wraps at the margin


def append_hanging(out: Text, tail: Text, used: int, width: int, indent: int = 6) -> None:
    """`tail` after `used` cells of the line, wrapped at spaces within `width`, the lines after the first
    indented by `indent` (a screen's own wrap would start them at the margin)."""
    plain, start, room = tail.plain, 0, width - used
    while cell_len(plain[start:]) > room:
        cut = plain.rfind(" ", start, start + room + 1)
        if cut <= start:
            word = plain.find(" ", start)
            if room < width - indent and cell_len(plain[start:word if word >= 0 else None]) <= width - indent:
                out.rstrip()
                out.append("\n" + " " * indent)  # a long name (a pod's) goes whole to the next line
                room = width - indent
                continue
            cut = start + max(1, room)  # longer than any line: cut it there
        out.append_text(tail[start:cut])
        out.append("\n" + " " * indent)
        start = cut + 1 if plain[cut:cut + 1] == " " else cut
        room = width - indent
    out.append_text(tail[start:])
