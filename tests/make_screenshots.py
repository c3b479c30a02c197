"""Write screenshots/*.svg from the demo cluster: the main screen, the GPU stack, the Health view, node details, the plugin logs,
the Usage screen (with Debian's `prometheus` and `promtool`; skipped, saying so, without them).

    python tests/make_screenshots.py [--out screenshots]

The demo's objects are built for the instant the script starts and the app
reads the real clock, so ages read the same from run to run (as long as a
run lasts less than a minute), while the DCGM readings and the simulated
kubelets' log lines, stamped with the real time, read as fresh ("as of 1s"),
not as from the future (a frozen clock made that "as of <invalid>").

The Usage screen needs days of series: promtool backfills a Prometheus with the demo's kube-state-metrics and
DCGM series (the simulator's own expositions, sim/exporters/ksm.py and sim/exporters/dcgm.py) every USAGE_STEP_S over the last
USAGE_HISTORY_S, each pod from its status.startTime; the app asks that Prometheus.
"""
from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gputui.sim.scenarios import demo
from gputui.ui.demo import BackgroundCluster
from gputui.ui.launch import make_app

START = datetime.now(timezone.utc)  # the demo's "now"
SIZE = (120, 40)
DETAILS_NODE = "h100-mig-1"
LOGS_NODE = "a100-2"  # its plugin crash-loops: the log shows why
STACK_NODE, STACK_COMPONENT = "h100-4", 5  # its DCGM exporter crash-loops (the matrix's fifth component)


async def wait_for(pilot, condition, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit("the demo did not settle in time")
        await pilot.pause(0.05)


async def shoot(kubeconfig: str, out: Path) -> list[Path]:
    app = make_app(kubeconfig)
    written = []
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.model is not None and app.pods_table.row_count > 0 and app.server_version)
        await wait_for(pilot, lambda: app.plugin_log.line_count > 0)
        # every node's verdicts known: the background DCGM reads done (the first seconds read `… XIDs`)
        await wait_for(pilot, lambda: not any(u.pending for s in app.model.node_summaries() for u in s.unknown), timeout=60)
        await pilot.pause(0.5)
        written.append(Path(app.save_screenshot("main.svg", str(out))))

        await pilot.press("s")
        await wait_for(pilot, lambda: getattr(app.screen, "table", None) is not None and app.screen.table.row_count > 0)
        app.screen.table.move_cursor(row=app.screen.table.row_index(STACK_NODE), column=STACK_COMPONENT)
        await pilot.pause(0.5)
        written.append(Path(app.save_screenshot("stack.svg", str(out))))
        await pilot.press("escape")

        await pilot.press("h")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "HealthScreen" and "XID" in getattr(app.screen, "text", ""))
        await pilot.pause(0.5)
        written.append(Path(app.save_screenshot("health.svg", str(out))))
        await pilot.press("escape")

        app.jump_to_node(DETAILS_NODE)
        await pilot.press("enter")
        await wait_for(pilot, lambda: "reading the exporter" not in getattr(app.screen, "text", ""))
        await pilot.pause(0.5)
        written.append(Path(app.save_screenshot("node-details.svg", str(out))))
        await pilot.press("escape")

        app.jump_to_node(LOGS_NODE)
        await wait_for(pilot, lambda: app.selected_node == LOGS_NODE and app.plugin_log.line_count > 0)
        await pilot.pause(0.5)
        await pilot.press("l")
        await pilot.pause(0.3)
        written.append(Path(app.save_screenshot("plugin-logs.svg", str(out))))
        await pilot.press("escape", "q")
    return written


async def shoot_fleet(kubeconfig: str, contexts: list[str], out: Path) -> Path:
    from gputui.ui.fleet import FleetScreen

    app = make_app(kubeconfig, fleet=contexts)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen) and all(
            (row.known and not row.unknown_nodes) or row.state in ("unreachable", "unauthorized") for row in app.fleet.rows()),
            timeout=60)
        await pilot.pause(1.5)
        path = Path(app.save_screenshot("fleet.svg", str(out)))
        await pilot.press("q")
    return path


def fleet_kubeconfig(clusters: dict[str, BackgroundCluster], out: Path) -> str:
    """The demo and the GPU stack scenarios as a fleet, with one context whose server is down."""
    import yaml

    from gputui.sim.cluster import kubeconfig_for, merged_kubeconfig

    docs = {name: kubeconfig_for(c.sim.url) for name, c in clusters.items()}
    docs["lab-eu"] = kubeconfig_for("https://127.0.0.1:9")  # discard port: refused
    path = out / "kubeconfig"
    path.write_text(yaml.safe_dump(merged_kubeconfig(docs)))
    return str(path)


USAGE_HISTORY_S, USAGE_STEP_S = 2 * 86400, 300
USAGE_FAMILIES = ("kube_pod_container_resource_requests", "kube_pod_status_phase", "kube_pod_labels", "kube_node_labels",
                  "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
USAGE_LABELS = {"pods": ["team"], "nodes": ["nvidia.com/gpu.product"]}


def usage_history(objects: list[dict], now: float) -> str:
    """OpenMetrics for `promtool tsdb create-blocks-from openmetrics`: the series the Usage screen reads, as
    scraped every USAGE_STEP_S over the last USAGE_HISTORY_S; a pod only from its start on."""
    from gputui.sim.exporters import dcgm, ksm

    nodes = [o for o in objects if o["kind"] == "Node"]
    pods = [o for o in objects if o["kind"] == "Pod"]
    started = {id(p): datetime.fromisoformat(p["status"].get("startTime", START.isoformat()).replace("Z", "+00:00")).timestamp() for p in pods}
    families: dict[str, list[str]] = {name: [] for name in USAGE_FAMILIES}
    end = int(now)
    for at in range(end - USAGE_HISTORY_S, end + 1, USAGE_STEP_S):
        alive = [p for p in pods if started[id(p)] <= at]
        text = ksm.exposition(nodes, alive, USAGE_LABELS) + "".join(dcgm.exposition(node, alive, at) for node in nodes)
        for line in text.splitlines():
            name = line.split("{", 1)[0].split(" ", 1)[0]
            if name in families:
                families[name].append(f"{line} {at}")
    return "".join(f"# TYPE {name} gauge\n" + "\n".join(lines) + "\n" for name, lines in families.items() if lines) + "# EOF\n"


def backfill(workdir: Path) -> bool:
    """A Prometheus data directory holding the demo's last USAGE_HISTORY_S; False (said) without Debian's prometheus."""
    from tests import prometheus as prom

    if prom.BINARY is None or prom.PROMTOOL is None:
        print(f"usage.svg skipped: {prom.MISSING}", file=sys.stderr)
        return False
    (workdir / "history.om").write_text(usage_history(demo.build(now=START), time.time()))
    subprocess.run([prom.PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(workdir / "history.om"), str(workdir / "prometheus" / "data")],
                   check=True, stdout=subprocess.DEVNULL)
    return True


async def shoot_usage(kubeconfig: str, out: Path, workdir: Path) -> Path:
    from tests import prometheus as prom

    from gputui.kube.idle import IdleSettings
    from gputui.ui.usage import UsageScreen

    async with prom.running(workdir / "prometheus", "") as server:  # no scrapes: the backfilled days only
        app = make_app(kubeconfig, idle=IdleSettings(prometheus=server.url))
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.model is not None)
            await pilot.press("U")
            await wait_for(pilot, lambda: isinstance(app.screen, UsageScreen) and not app.usage_feed.asking, timeout=60)
            await pilot.pause(0.5)
            path = Path(app.save_screenshot("usage.svg", str(out)))
            await pilot.press("escape", "q")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "screenshots"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with BackgroundCluster(scenario=demo.build(now=START)) as cluster:
        for path in asyncio.run(shoot(str(cluster.kubeconfig_path), out)):
            print(path)
        with tempfile.TemporaryDirectory() as tmp:
            if backfill(Path(tmp)):
                print(asyncio.run(shoot_usage(str(cluster.kubeconfig_path), out, Path(tmp))))
        with BackgroundCluster(scenario="gpu-operator-healthy") as inference, \
                BackgroundCluster(scenario="operator-driver-crashloop") as staging, tempfile.TemporaryDirectory() as tmp:
            clusters = {"training-us": cluster, "inference-us": inference, "staging": staging}
            print(asyncio.run(shoot_fleet(fleet_kubeconfig(clusters, Path(tmp)), [*clusters, "lab-eu"], out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
