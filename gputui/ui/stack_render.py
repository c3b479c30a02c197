"""Pure renderers for the GPU stack: the component matrix, a node's component column,
its DCGM metrics with a utilisation sparkline, its DRA devices, and this host's GPUs (NVML).

Model records in, rich `Text` out; every string from the cluster goes through
`render.text`. Each state has a word or symbol as well as a colour, so NO_COLOR
still tells them apart.
"""
from __future__ import annotations

from typing import Callable, Sequence

from rich.console import Console
from rich.text import Text

from gputui.kube import health, stack
from gputui.kube.dcgm import GpuReading, xid_meaning
from gputui.kube.dra import DraDevice
from gputui.kube.gpu import NodeSummary, Problem
from gputui.kube.metrics import NodeMetrics
from gputui.kube.nvml import LocalSnapshot
from gputui.kube.verdicts import PROBLEM, Verdict

from . import render
from gputui.sanitize import clean
from .table import Column

MATRIX_WIDE_AT = 120  # narrower terminals get the short words and the legend
SPARK_BLOCKS = "▁▂▃▄▅▆▇█"
SPARK_SAMPLES = 16
NO_EXPORTER = "no DCGM exporter on this node"  # the poller's words, before its first round

# Component -> (narrow header, wide header); the narrow ones fit 80 columns.
COMPONENT_HEADERS = {
    "driver": ("DRIVER", "DRIVER"),
    "container-toolkit": ("TKIT", "TOOLKIT"),
    "device-plugin": ("PLUGIN", "PLUGIN"),
    "gfd": ("GFD", "GFD"),
    "dcgm-exporter": ("DCGM", "DCGM-EXP"),
    "mig-manager": ("MIGMGR", "MIG-MGR"),
    "validator": ("VALID", "VALIDATOR"),
    "nfd-worker": ("NFD", "NFD"),
}
# State -> (narrow word, wide word, style). Crash-looping adds the restart count.
STATE_WORDS = {
    stack.RUNNING: ("✓ ok", "✓ running", render.OK_STYLE),
    stack.NOT_READY: ("! nrdy", "! not ready", render.WARN_STYLE),
    stack.CRASH_LOOPING: ("✗CL", "✗ crash", render.BAD_STYLE),
    stack.MISSING: ("✗ miss", "✗ missing", render.BAD_STYLE),
    stack.NOT_EXPECTED: ("n/a", "n/a", render.DIM_STYLE),
    stack.SUCCEEDED: ("✓ done", "✓ passed", render.OK_STYLE),
    stack.FAILED: ("✗ fail", "✗ failed", render.BAD_STYLE),
}
# Not expected because of a deploy label: (narrow, wide) words in place of "n/a".
DEPLOY_WORDS = {"pre-installed": ("host", "n/a on host"), "paused": ("paused", "n/a paused")}
LEGEND = "✓ ok running · ! nrdy not ready · ✗CL n crashing, n restarts · ✗ miss missing"
STACK_KINDS = {"gpu-operator": "GPU Operator", "device-plugin": "standalone device plugin", "none": "no NVIDIA GPU stack found"}
FINDINGS_KEY = "f"  # the Stack screen's key for the summary whole, when the screen cannot hold it
INSTALLS = {"static": "static manifest", "helm": "Helm chart", "gke": "GKE manifest", "other": "not one of NVIDIA's installs"}


# -- the matrix ---------------------------------------------------------------


def matrix_columns(wide: bool) -> list[Column]:
    headers = [Column(name, labels[1] if wide else labels[0], 11 if wide else 6) for name, labels in COMPONENT_HEADERS.items()]
    return [Column("node", "NODE", 16 if wide else 11), *headers]


def state_cell(state: stack.ComponentState | None, wide: bool) -> Text:
    if state is None:
        return Text("?", style=render.DIM_STYLE, end="")
    narrow_word, wide_word, style = STATE_WORDS.get(state.state, (state.state, state.state, render.BAD_STYLE))
    if state.state == stack.NOT_EXPECTED and state.deploy:
        deploy = "paused" if state.deploy.startswith("paused-for-") else state.deploy
        narrow_word, wide_word = DEPLOY_WORDS.get(deploy, (narrow_word, wide_word))
    word = wide_word if wide else narrow_word
    if state.state == stack.CRASH_LOOPING:
        restarts = state.restarts if state.restarts < 1000 else "1k+"
        word += f" {restarts}" if wide or len(str(restarts)) < 3 else f"{restarts}"
    return Text(word, style=style, end="")


def matrix_row(summary: NodeSummary, wide: bool) -> tuple[Text, ...]:
    name = render.text(summary.name, limit=63)
    return (name, *(state_cell(summary.components.get(c), wide) for c in stack.COMPONENTS))


def state_word(state: str) -> Text:
    """The whole word, for lines that have room: `✗ crash-looping`."""
    symbol = STATE_WORDS.get(state, ("", "", render.BAD_STYLE))
    mark = symbol[1].split(" ", 1)[0] if " " in symbol[1] else ""
    return Text(f"{mark} {state}".strip(), style=symbol[2], end="")


def state_facts(state: stack.ComponentState) -> str:
    """What is known beyond the state: the pod's status, readiness, restarts, last termination;
    or why there is no pod; and any note."""
    if not state.pod:
        return ", ".join(f for f in (state.detail, state.note) if f)
    waiting = state.state in (stack.NOT_READY, stack.CRASH_LOOPING)  # a pod that ran to its end is ready 0/1 anyway
    facts = [] if state.state == stack.RUNNING else [f for f in (state.detail, f"ready {state.ready}" if state.ready and waiting else None) if f]
    if state.restarts:
        facts.append(f"{state.restarts} restart{'s' if state.restarts != 1 else ''}")
    if state.last_termination:
        facts.append(f"last {state.last_termination}")
    if state.note:
        facts.append(state.note)
    return ", ".join(facts)


def component_line(state: stack.ComponentState) -> Text:
    """`dcgm-exporter ✗ crash-looping · gpu-operator/nvidia-dcgm-exporter-x: CrashLoopBackOff, ...`"""
    out = Text(state.component + " ", style="bold", end="")
    out.append_text(state_word(state.state))
    facts = state_facts(state)
    if state.pod or facts:
        out.append(" · ", style=render.DIM_STYLE)
    if state.pod:
        out.append_text(render.text(state.pod, limit=120))
        if facts:
            out.append(": ")
    out.append_text(render.text(facts, limit=300))
    return out


def cell_detail(node: str, state: stack.ComponentState | None) -> Text:
    """The line under the matrix for the cell under the cursor."""
    out = render.text(node, style="bold", limit=63)
    out.append(" · ")
    if state is None:
        out.append("unknown", style=render.DIM_STYLE)
        return out
    out.append_text(component_line(state))
    if state.pod:
        out.append(" · l: logs", style=render.DIM_STYLE)
    return out


def stack_summary(summary: stack.Stack, policy_state: str, problems: Sequence[Problem], failing: Sequence[tuple[str, str]],
                  stuck: Sequence[tuple[str, Problem]] = (), now: float | None = None) -> Text:
    """The lines above the matrix: which stack, the ClusterPolicy, cluster verdicts, failing components, stuck plumbing.
    failing: (node, component) pairs; stuck: (node, problem) pairs, each problem's message ending with its age (all of them:
    fit_summary counts what the screen cannot hold); now: the app's clock, for how long a ClusterPolicy (GPUCluster) has been notReady."""
    out = Text(STACK_KINDS.get(summary.kind, summary.kind), style="bold", end="")
    if summary.install in INSTALLS:
        out.append(" · ", style=render.DIM_STYLE)
        out.append(INSTALLS[summary.install])
    if summary.namespace:
        out.append(" · namespace ", style=render.DIM_STYLE)
        out.append_text(render.text(summary.namespace, limit=63))
    plugins = summary.plugins
    if any(p.install == "other" for p in plugins):  # NVIDIA's own are named by the verdicts and the matrix
        out.append("\ndevice plugins: ", style=render.DIM_STYLE)
        out.append_text(render.text(", ".join(f"{p.ref} ({plugin_words(p)})" for p in plugins), limit=600))
    if summary.kind == "gpu-operator" or summary.cluster_policy is not None:
        policy = summary.cluster_policy
        out.append(f"\n{policy.kind if policy else 'ClusterPolicy'} ", style=render.DIM_STYLE)  # or the DRA-based GPUCluster
        if policy is None:
            out.append_text(render.text(policy_state, style=render.WARN_STYLE, limit=200))
        else:
            out.append_text(render.text(policy.name, limit=63))
            out.append(" ")
            ready = policy.state == "ready"
            out.append(("✓ " if ready else "✗ ") + policy.state, style=render.OK_STYLE if ready else render.BAD_STYLE)
            if not ready and policy.since is not None and now is not None:
                out.append(f" for {render.age(policy.since, now)}", style=render.BAD_STYLE)
            if policy.message:
                out.append(": ")
                out.append_text(render.text(policy.message, limit=300))
    for problem in problems:
        if problem.code == Verdict.OPERATOR_NOT_READY:
            continue  # the ClusterPolicy (GPUCluster) line says it
        out.append("\n✗ ", style=render.BAD_STYLE)
        out.append_text(render.text(problem.message, limit=300))
    if failing:
        out.append(f"\n✗ {len(failing)} failing: ", style=render.BAD_STYLE)
        out.append_text(render.text(", ".join(f"{component} on {node}" for node, component in failing[:6]), limit=300))
        if len(failing) > 6:
            out.append(f" and {len(failing) - 6} more", style=render.DIM_STYLE)
    else:
        out.append("\n✓ no component failing", style=render.OK_STYLE)
    for node, problem in stuck:
        severity = Verdict(problem.code).severity
        out.append("\n✗ " if severity == PROBLEM else "\n! ", style=render.severity_style(severity))
        out.append_text(render.text(node, style="bold", limit=63))
        out.append(": ")
        out.append_text(render.text(problem.message, limit=300))
    return out


def fit_summary(text: Text, width: int, height: int) -> Text:
    """The summary wrapped to `width` cells and cut to `height` rows at whole lines, its last row then saying how many
    lines are not shown and the key that shows them all: never cut without a word."""
    console = Console(width=width)
    items = [item.wrap(console, width) for item in text.split("\n")]
    for rows in items:
        for row in rows:
            row.rstrip()
    if sum(len(rows) for rows in items) <= height:
        return Text("\n").join(row for rows in items for row in rows)
    shown: list[Text] = []
    kept = 0
    for rows in items:
        if len(shown) + len(rows) > height - 1:
            break
        shown += rows
        kept += 1
    if not shown:  # the first line alone is taller than the room: its first rows
        shown, kept = list(items[0])[:height - 1], 1
    more = Text(f"… {len(items) - kept} more not shown · {FINDINGS_KEY}: every finding", style=render.DIM_STYLE)
    return Text("\n").join([*shown, more])


def plugin_words(plugin: stack.StackDaemonSet) -> str:
    """`Helm chart`, `other: nvidia.com/gpu`, `other: rdma/hca_shared_devices_a, not a GPU`, `other: resource not named`."""
    if plugin.install != "other":
        return INSTALLS.get(plugin.install, plugin.install)
    if not plugin.resources:
        return "other: resource not named"
    return "other: " + ", ".join(plugin.resources) + ("" if plugin.gpu else ", not a GPU")


# -- node details ----------------------------------------------------------------


def _section(out: Text, title: str) -> None:
    if out:
        out.append("\n\n")
    out.append(title, style="bold underline")
    out.append("\n")




def components_section(out: Text, summary: NodeSummary, width: int = 120) -> None:
    """The node's column of the matrix: component, state, pod and what is wrong (wrapped under itself,
    indented, when the line would not fit `width`)."""
    if not summary.components:
        return
    _section(out, "GPU stack on this node")
    for name in stack.COMPONENTS:
        state = summary.components.get(name)
        if state is None:
            continue
        out.append(f"  {name:<18}")
        word = state_word(state.state)
        word.pad_right(16 - word.cell_len)
        out.append_text(word)
        tail = render.text(state.pod or "", limit=120)
        facts = render.text(state_facts(state), style=render.DIM_STYLE, limit=300)
        if state.pod and facts:
            tail.append("  ")
        tail.append_text(facts)
        render.append_hanging(out, tail, 2 + 18 + 16, width - render.PAGE_MARGIN)
        out.append("\n")
    for plugin in summary.plugins:
        if plugin.nvidia:
            continue  # the device-plugin line above
        out.append(f"  {'other plugin':<18}")
        word = state_word(plugin.state.state)
        word.pad_right(16 - word.cell_len)
        out.append_text(word)
        render.append_hanging(out, render.text(f"{plugin.daemonset.ref} ({plugin_words(plugin.daemonset)})", limit=200), 2 + 18 + 16, width - render.PAGE_MARGIN)
        out.append("\n")
    out.rstrip()


def sparkline(values: Sequence[float], width: int = SPARK_SAMPLES, top: float = 100.0) -> str:
    """The last `width` values as block characters, scaled 0..top."""
    blocks = []
    for value in list(values)[-width:]:
        level = int(max(0.0, min(value, top)) / top * (len(SPARK_BLOCKS) - 1) + 0.5)
        blocks.append(SPARK_BLOCKS[level])
    return "".join(blocks)


def _number(value: float | None, unit: str = "", digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}{unit}"


def _cut_middle(value: str, width: int) -> str:
    """A name cut in the middle when too long: its tail tells replicas apart."""
    if len(value) <= width:
        return value
    head = (width - 1) // 2
    return value[:head] + "…" + value[len(value) - (width - 1 - head):]


def _fb(reading: GpuReading) -> str:
    if reading.fb_used_mib is None:
        return "-"
    free = "?" if reading.fb_free_mib is None else f"{reading.fb_free_mib / 1024:.1f}"
    return f"{reading.fb_used_mib / 1024:.1f}/{free}G"


def metrics_section(out: Text, summary: NodeSummary, metrics: NodeMetrics | None,
                    series: Callable[[GpuReading], list[float]], now: float, width: int = 120) -> None:
    """Per GPU (or MIG instance): utilisation with its history, framebuffer used/free, temperature,
    power, last XID and the pod it is attributed to; or why there are no readings. One line per
    GPU at `width` columns: narrower terminals get a shorter history and shorter pod names."""
    if not summary.gpu_node:
        return
    readings = metrics.readings if metrics is not None else ()
    models = sorted({(r.model or "?").removeprefix("NVIDIA ") for r in readings})
    as_of = f" · as of {render.age(metrics.at, now)}" if metrics is not None and metrics.at is not None else ""
    _section(out, "GPU metrics (DCGM exporter)" + (f" · {', '.join(models)}" if models else "") + as_of)
    if metrics is None:
        exporter = summary.components.get("dcgm-exporter")
        if exporter is not None and exporter.state == stack.NOT_EXPECTED:
            out.append(f"  {NO_EXPORTER}", style=render.DIM_STYLE)
        else:
            out.append("  reading the exporter…", style=render.DIM_STYLE)
        return
    if metrics.error:
        out.append("  ")
        out.append_text(render.text(metrics.error, style=render.DIM_STYLE if metrics.error == NO_EXPORTER else render.BAD_STYLE, limit=300))
        if readings and metrics.at is not None:
            out.append(f"\n  last readings, {render.age(metrics.at, now)} old:", style=render.DIM_STYLE)
        out.append("\n")
    if not readings:
        out.rstrip()
        return
    mig = any(r.mig_profile for r in readings)
    history = SPARK_SAMPLES if width >= 100 else 8
    fixed = 2 + 5 + 9 + (8 if mig else 0) + 5 + 1 + history + 1 + 12 + 5 + 7 + 1 + 4
    pod_width = max(12, min(80, width - fixed - 6))  # the page's padding and scrollbar
    header = f"  {'GPU':<5}{'UUID':<9}" + (f"{'PROFILE':<8}" if mig else "")
    header += f"{'UTIL':>5} {'HISTORY':<{history}} {'FB USED/FREE':<12}{'TEMP':>5}{'POWER':>7} {'XID':<4}POD\n"
    out.append(header, style=render.DIM_STYLE)
    stale = metrics.error is not None
    for reading in readings:
        where = "-" if reading.index is None else str(reading.index)
        if reading.mig_instance:
            where += f"/{reading.mig_instance}"
        row = Text(end="", style=render.DIM_STYLE if stale else "")
        row.append(f"  {clean(where, 4):<5}")
        row.append_text(render.text(f"{reading.uuid.removeprefix('GPU-')[:8]:<9}", limit=9))
        if mig:
            row.append_text(render.text(f"{(reading.mig_profile or '-'):<8}", limit=8))
        util = reading.util
        row.append(f"{_number(util, '%'):>5}", style=render.WARN_STYLE if util is not None and util >= 95 else "")
        row.append(" ")
        row.append(f"{sparkline(series(reading), history):<{history}}", style=render.OK_STYLE)
        row.append(f" {_fb(reading):<12}")
        row.append(f"{_number(reading.temp_c, '°C'):>5}", style=render.WARN_STYLE if (reading.temp_c or 0) >= 85 else "")
        row.append(f"{_number(reading.power_w, ' W'):>7} ")
        if reading.xid:
            row.append(f"{reading.xid:<4}", style=render.BAD_STYLE)
        else:
            row.append(f"{'-':<4}", style=render.DIM_STYLE)
        more = f" +{len(reading.pods) - 1}" if len(reading.pods) > 1 else ""
        row.append_text(render.text(_cut_middle(clean(reading.pod or "-", 253), pod_width - len(more)), limit=pod_width))
        row.append(more, style=render.DIM_STYLE)
        out.append_text(row)
        out.append("\n")
    for xid in sorted({r.xid for r in readings if r.xid}):
        meaning = xid_meaning(xid)
        out.append(f"  XID {xid}", style=render.BAD_STYLE)
        out.append(f": {meaning}\n" if meaning else "\n", style=render.DIM_STYLE)
    out.rstrip()


def dra_section(out: Text, devices: Sequence[DraDevice]) -> None:
    """Dynamic Resource Allocation devices on the node and the claims and pods holding them."""
    if not devices:
        return
    _section(out, "DRA devices (resource.k8s.io)")
    for device in devices:
        out.append("  ")
        name = render.text(device.name, limit=40)
        name.pad_right(24 - name.cell_len)
        out.append_text(name)
        what = (device.product or device.type or "?").removeprefix("NVIDIA ")
        if device.mig_profile:
            what += f" MIG {device.mig_profile}"
        if device.memory_mib:
            what += f" {device.memory_mib / 1024:.0f}G"
        kind = render.text(what, limit=33)
        kind.pad_right(34 - kind.cell_len)
        out.append_text(kind)
        if device.claim:
            out.append("held by ", style=render.DIM_STYLE)
            out.append_text(render.text(", ".join(device.pods) or "no pod yet", limit=200))
            out.append("  claim ", style=render.DIM_STYLE)
            out.append_text(render.text(device.claim, limit=200))
        else:
            out.append("free", style=render.OK_STYLE)
        out.append("\n")
    out.rstrip()


def health_section(out: Text, gpus: Sequence[health.GpuHealth], width: int = 120) -> None:
    """Each GPU's health (health.node_gpu_health): `✓ ok` only where DCGM read it and nothing says otherwise,
    `✗` with its signals and the pods on it, `?` with why; a long line wraps under itself within `width`."""
    if not gpus:
        return
    _section(out, "GPU health")
    for gpu in gpus:
        name = render.text(gpu.device or "node", limit=24)
        name.pad_right(16 - name.cell_len)
        mark, style = {health.OK: ("✓ ok", render.OK_STYLE), health.BAD: ("✗", render.BAD_STYLE)}.get(gpu.state, (render.UNKNOWN_MARK, render.WARN_STYLE))
        tail = Text(mark, style=style, end="") + Text(" ", end="")
        tail.append_text(render.text(gpu.why, style=render.DIM_STYLE if gpu.state == health.OK else "", limit=400))
        bad = gpu.bad
        if bad is not None and not bad.holders_known:
            tail.append("  (which GPU, and so which pods, cannot be told)", style=render.DIM_STYLE)
        elif bad is not None and not bad.holders:
            tail.append("  no pod holds it", style=render.DIM_STYLE)
        elif bad is not None:
            tail.append("  pods ", style=render.DIM_STYLE)
            tail.append_text(render.text(", ".join(f"{h.namespace}/{h.name}" for h in bad.holders), style="bold", limit=300))
        out.append("  ")
        out.append_text(name)
        render.append_hanging(out, tail, 2 + name.cell_len, width - 4, indent=2 + name.cell_len)  # the page's padding and scrollbar
        out.append("\n")
    out.rstrip()


# -- this host's GPUs ------------------------------------------------------------


def local_text(snapshot: LocalSnapshot) -> Text:
    """This host's GPUs through NVML, or the one line saying why there are none."""
    if not snapshot.available:
        return render.text(f"Local GPUs: {snapshot.reason}", style=render.DIM_STYLE, limit=300)
    out = Text("Local GPUs (NVML)", style="bold", end="")
    if snapshot.driver_version:
        out.append_text(render.text(f" · driver {snapshot.driver_version}", style=render.DIM_STYLE, limit=60))
    out.append("\n")
    out.append(f"  {'GPU':<4}{'NAME':<26}{'UTIL':>5}  {'MEMORY USED/TOTAL':<20}{'TEMP':>5}{'POWER':>8}  MIG\n", style=render.DIM_STYLE)
    for gpu in snapshot.gpus:
        out.append(f"  {gpu.index:<4}")
        if gpu.error:
            out.append_text(render.text(gpu.error, style=render.BAD_STYLE, limit=200))
            out.append("\n")
            continue
        name = render.text((gpu.name or "?").removeprefix("NVIDIA "), limit=25)
        name.pad_right(26 - name.cell_len)
        out.append_text(name)
        util = "n/a" if gpu.util_percent is None and gpu.mig_mode == "enabled" else _number(gpu.util_percent, "%")
        out.append(f"{util:>5}  ")
        memory = "-" if gpu.mem_used_mib is None else f"{gpu.mem_used_mib:.0f}/{_number(gpu.mem_total_mib)} MiB"
        out.append(f"{memory:<20}{_number(gpu.temp_c, '°C'):>5}{_number(gpu.power_w, ' W'):>8}  ")
        out.append(gpu.mig_mode or "-", style="" if gpu.mig_mode else render.DIM_STYLE)
        out.append("\n      processes: ", style=render.DIM_STYLE)
        if gpu.processes:
            out.append(", ".join(f"{p.pid}" + (f" ({p.used_mib:.0f} MiB)" if p.used_mib is not None else "") for p in gpu.processes))
        else:
            out.append("none", style=render.DIM_STYLE)
        out.append("\n")
    out.rstrip()
    return out
