"""Write screenshots/*.svg from the demo cluster: the main screen, the GPU stack, node details, the plugin logs.

    python tests/make_screenshots.py [--out screenshots]

The demo's objects are built for the instant the script starts and the app
reads the real clock, so ages read the same from run to run (as long as a
run lasts less than a minute), while the DCGM readings and the simulated
kubelets' log lines, stamped with the real time, read as fresh ("as of 1s"),
not as from the future (a frozen clock made that "as of <invalid>").
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gputui.sim import demo
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "screenshots"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with BackgroundCluster(scenario=demo.build(now=START)) as cluster:
        for path in asyncio.run(shoot(str(cluster.kubeconfig_path), out)):
            print(path)
        with BackgroundCluster(scenario="gpu-operator-healthy") as inference, \
                BackgroundCluster(scenario="operator-driver-crashloop") as staging, tempfile.TemporaryDirectory() as tmp:
            clusters = {"training-us": cluster, "inference-us": inference, "staging": staging}
            print(asyncio.run(shoot_fleet(fleet_kubeconfig(clusters, Path(tmp)), [*clusters, "lab-eu"], out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
