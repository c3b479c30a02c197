"""The GPU stack in the app, against the simulator: the Stack screen (matrix, ClusterPolicy,
a component's logs), DCGM metrics in node details (XID, sparkline, reasons in place, polled
only while shown), DRA devices, and the Local screen (no NVML here, or a stand-in)."""
from __future__ import annotations

import pytest

from gputui.kube import nvml
from gputui.kube.nvml import GpuProcess, LocalGpu, LocalSnapshot
from gputui.sim.scenarios import demo, stacks
from gputui.ui.demo import BackgroundCluster
from gputui.ui.screens import NodeDetailsScreen
from gputui.ui.stack import ComponentLogScreen, LocalScreen, StackScreen
from tests.ui.test_log_keys import LONG, check_log_keys
from tests.ui.ui_helpers import app_on, screen_text, start_cluster, wait_for
from tests.ui.ui_scenario import NOW

OPERATOR_NS = "gpu-operator"
METRICS_FAST = {"metrics_interval": 0.1, "metrics_timeout": 2.0}


@pytest.fixture(scope="module")
def demo_cluster():
    # Static (no simulated kubelets): the crash-looping exporter keeps its 23 restarts, the snapshot holds still.
    yield from start_cluster(demo.build(now=NOW), run_controllers=False, faults=True)


@pytest.fixture(autouse=True)
def no_faults_left(request):
    yield
    if "demo_cluster" in request.fixturenames:
        cluster = request.getfixturevalue("demo_cluster")
        cluster.call(cluster.sim.faults.clear)


def fast_metrics_app(cluster):
    app = app_on(cluster)
    app.model_options = dict(METRICS_FAST)
    return app


async def connected(app, pilot) -> None:
    """Every watched kind listed once (the DRA kinds too) and the Nodes pane filled."""
    def synced() -> bool:
        model = app.model
        return model is not None and all(r.settled.is_set() for r in model.reflectors.values()) and app.nodes_table.row_count > 0

    await wait_for(pilot, synced, what="the model")


async def open_stack(app, pilot) -> StackScreen:
    await connected(app, pilot)
    await pilot.press("s")
    await wait_for(pilot, lambda: isinstance(app.screen, StackScreen) and app.screen.table.row_count > 0, what="the matrix")
    return app.screen


async def show_details(app, pilot, node: str) -> NodeDetailsScreen:
    app.row_details.show_node(node)
    await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailsScreen) and app.screen.text, what=f"{node}'s details")
    return app.screen


def row(screen: StackScreen, node: str) -> list[str]:
    return [cell.plain for cell in screen.table.get_row(node)]


async def choose(pilot, screen: StackScreen, node: str, component_column: int) -> None:
    screen.table.move_cursor(row=screen.table.row_index(node), column=component_column)
    await pilot.pause()


async def test_matrix_shows_the_crash_looping_exporter_and_the_policy_message(demo_cluster):
    app = app_on(demo_cluster)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_stack(app, pilot)
        keys = screen.table.shown_keys
        assert "h100-4" in keys and "h100-dra-1" in keys and "cpu-1" not in keys  # GPU nodes only
        assert screen.table.column_keys[1:] == ("driver", "container-toolkit", "device-plugin", "gfd", "dcgm-exporter",
                                                 "mig-manager", "validator", "nfd-worker")
        assert row(screen, "h100-4") == ["h100-4", "✓ ok", "✓ ok", "✓ ok", "✓ ok", "✗CL 23", "✓ ok", "✓ ok", "✓ ok"]
        assert row(screen, "a100-2")[3] == "✗CL 14"  # the standalone plugin crash-looping
        assert row(screen, "t4-shared-1")[1] == "n/a"  # operands switched off by gpu.deploy.operands=false
        text = screen.text
        assert "GPU Operator · namespace gpu-operator" in text
        assert "ClusterPolicy cluster-policy ✗ notReady for 120m: ClusterPolicy is not ready; states not ready: [state-dcgm-exporter]" in text
        assert "2 failing: device-plugin on a100-2, dcgm-exporter on h100-4" in text
        await choose(pilot, screen, "h100-4", 5)
        assert "h100-4 · dcgm-exporter ✗ crash-looping" in screen.text
        assert "23 restarts, last Error (exit 1)" in screen.text
        assert "✗CL n crashing, n restarts" in screen_text(app)  # the legend, at 80 columns


async def test_wide_terminal_words_the_cells_in_full(demo_cluster):
    app = app_on(demo_cluster)
    async with app.run_test(size=(130, 40)) as pilot:
        screen = await open_stack(app, pilot)
        assert row(screen, "h100-4")[5] == "✗ crash 23"
        assert row(screen, "h100-1")[1] == "✓ running"
        await pilot.resize_terminal(80, 24)
        await wait_for(pilot, lambda: row(screen, "h100-4")[5] == "✗CL 23", what="short words at 80 columns")
        await pilot.resize_terminal(130, 40)
        await wait_for(pilot, lambda: row(screen, "h100-4")[5] == "✗ crash 23", what="whole words again")


async def test_a_components_logs_stream_full_screen(demo_cluster):
    app = app_on(demo_cluster)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_stack(app, pilot)
        state = app.model.components("h100-4")["dcgm-exporter"]
        namespace, pod = state.pod.split("/")
        logs = demo_cluster.sim.logs
        # The crash-looping exporter's last instance said why it died; the current one starts again.
        demo_cluster.call(logs.append, namespace, pod, state.container, "Error: failed to start the DCGM host engine")
        demo_cluster.call(logs.end, namespace, pod, state.container)
        demo_cluster.call(logs.append, namespace, pod, state.container, "Starting dcgm-exporter [bold]v3.3[/bold]")
        await choose(pilot, screen, "h100-4", 5)
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, ComponentLogScreen), what="the log screen")
        log = app.screen.log_view
        await wait_for(pilot, lambda: "Starting dcgm-exporter [bold]v3.3[/bold]" in log.lines, what="the current instance's lines")
        lines = list(log.lines)
        assert lines.index("Error: failed to start the DCGM host engine") < lines.index("── current instance ──")
        demo_cluster.call(logs.append, namespace, pod, state.container, "collecting metrics from 8 GPUs")
        await wait_for(pilot, lambda: "collecting metrics from 8 GPUs" in log.lines, what="a new line, followed")
        assert "container nvidia-dcgm-exporter" in screen_text(app)
        demo_cluster.call(logs.append, namespace, pod, state.container, LONG)
        await wait_for(pilot, lambda: LONG in log.lines, what="a 200-character line")
        await check_log_keys(pilot, log)
        await pilot.press("escape")
        assert app.screen is screen
        # enter on a cell opens its logs too; a component with no pod on the node says so instead.
        await choose(pilot, screen, "t4-shared-1", 1)
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is screen


async def test_node_details_show_metrics_with_xid_and_a_sparkline_polled_only_while_shown(demo_cluster):
    app = fast_metrics_app(demo_cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await connected(app, pilot)
        poller = app.model.metrics
        assert not poller.wanted  # nothing shows metrics yet: nothing is polled
        await show_details(app, pilot, "h100-1")
        assert poller.wanted

        def gpu_line(index: int) -> str:
            return next((line for line in app.screen.text.splitlines() if line.startswith(f"  {index:<5}")), "")

        await wait_for(pilot, lambda: len(gpu_line(2).split()) > 8 and sum(c in "▁▂▃▄▅▆▇█" for c in gpu_line(2)) >= 3,
                       what="GPU 2's row with three samples of history")
        gpu2 = next(r for r in app.model.node_metrics("h100-1").readings if r.index == 2)
        line = gpu_line(2)
        assert gpu2.uuid.removeprefix("GPU-")[:8] in line
        assert " 48 " in line and line.rstrip().endswith("ml-training/llm-pretrain-worker-0")
        text = app.screen.text
        assert "GPU metrics (DCGM exporter) · H100 80GB HBM3" in text
        assert "XID 48: double-bit ECC error" in text
        assert "✗ XID errors" in text  # the verdict at the top
        await pilot.press("escape")
        assert not poller.wanted  # released with the screen
        scrapes = poller.scrapes
        await pilot.pause(0.4)
        assert poller.scrapes <= scrapes + 1  # at most the round that was under way


async def test_node_details_say_why_there_are_no_metrics(demo_cluster):
    app = fast_metrics_app(demo_cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await connected(app, pilot)
        await show_details(app, pilot, "h100-4")
        await wait_for(pilot, lambda: "exporter not running on this node (dcgm-exporter crash-looping" in app.screen.text,
                       what="the crash-looping exporter as the reason")
        text = app.screen.text
        assert "dcgm-exporter     ✗ crash-looping" in text  # the node's column of the matrix
        await pilot.press("escape")

        demo_cluster.call(demo_cluster.sim.faults.fail, "pods/proxy", 403)
        await show_details(app, pilot, "h100-2")
        await wait_for(pilot, lambda: f"forbidden: cannot get pods/proxy in namespace {OPERATOR_NS}" in app.screen.text,
                       what="the 403 in place")
        await pilot.press("escape")

        await show_details(app, pilot, "t4-shared-1")  # the standalone plugin's node: no exporter at all
        assert "no DCGM exporter on this node" in app.screen.text


async def test_at_80_columns_a_components_reason_wraps_under_itself_not_at_the_margin(demo_cluster):
    app = app_on(demo_cluster)
    async with app.run_test(size=(80, 24)) as pilot:
        await connected(app, pilot)
        await show_details(app, pilot, "a100-1")  # operands switched off: each component says why, at length

        def stack_section() -> list[str] | None:  # once the details are laid out (a loaded machine: later)
            lines = app.screen.text.splitlines()
            if "GPU stack on this node" not in lines or "Resources" not in lines:
                return None
            at = lines.index("GPU stack on this node")
            return lines[at + 1:lines.index("Resources", at) - 1]

        await wait_for(pilot, lambda: stack_section() and app.screen.query_one("#details-body").content_region.width >= 74,
                       what="the details laid out at 80 columns")
        lines, section = app.screen.text.splitlines(), stack_section() or []
        room = app.screen.query_one("#details-body").content_region.width
        assert max(len(line) for line in section) <= room  # nothing left for the screen to wrap at the margin
        assert all(line.startswith(("  driver", "  container-toolkit", "  device-plugin", "  gfd", "  dcgm-exporter",
                                    "  mig-manager", "  validator", "  nfd-worker", "      ")) for line in section)
        driver = lines.index(next(line for line in section if line.startswith("  driver ")))
        reason = " ".join(line.strip() for line in lines[driver:driver + 3])
        assert "not-expected gpu-operator/nvidia-driver-daemonset: the node has nvidia.com/gpu.deploy.operands=false" in " ".join(reason.split())


async def test_node_details_list_dra_devices_and_their_holders(demo_cluster):
    app = app_on(demo_cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await connected(app, pilot)
        await show_details(app, pilot, demo.DRA_NODE)
        await wait_for(pilot, lambda: "DRA devices" in app.screen.text and "held by inference/whisper-dra-0" in app.screen.text,
                       what="the DRA section with its holders")
        lines = app.screen.text.splitlines()
        gpu0 = next(line for line in lines if line.startswith("  gpu-0 "))
        assert "H100 80GB HBM3 80G" in gpu0 and "held by inference/qwen-72b-serving-0" in gpu0
        assert any(line.startswith("  gpu-2 ") and line.rstrip().endswith("free") for line in lines)
        mig = next(line for line in lines if line.startswith("  gpu-7-mig-1g10gb-19-0"))
        assert "MIG 1g.10gb" in mig and "inference/whisper-dra-0" in mig


def test_stack_screen_80x24(demo_cluster, snap_compare):
    async def open_it(pilot) -> None:
        app = pilot.app
        await open_stack(app, pilot)
        await wait_for(pilot, lambda: "failing" in app.screen.text, what="the summary")
        await pilot.pause(0.2)

    assert snap_compare(app_on(demo_cluster), terminal_size=(80, 24), run_before=open_it)


@pytest.mark.parametrize("scenario, node, column, cell, summary", [
    ("exporter-missing", "gpu-2", "dcgm-exporter", "✗ miss", "1 failing: dcgm-exporter on gpu-2"),
    ("operator-driver-crashloop", "gpu-2", "driver", "✗CL", "failing: driver on gpu-2"),
    ("static-plugin", "gpu-1", "device-plugin", "✓ ok", "standalone device plugin · static manifest · namespace kube-system"),
])
async def test_install_styles_and_failures(scenario, node, column, cell, summary):
    with BackgroundCluster(scenario=stacks.SCENARIOS[scenario](), run_controllers=False) as cluster:
        app = app_on(cluster)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await open_stack(app, pilot)
            index = screen.table.column_keys.index(column)
            assert row(screen, node)[index].startswith(cell)
            assert summary in screen.text


async def test_palette_opens_the_stack_and_local_screens(demo_cluster):
    app = app_on(demo_cluster)
    async with app.run_test(size=(100, 30)) as pilot:
        await connected(app, pilot)
        for query, screen_type in (("GPU stack", StackScreen), ("Local GPUs", LocalScreen)):
            await pilot.press("ctrl+p")
            await pilot.press(*query)
            await pilot.pause(0.3)  # the palette searches in the background
            await pilot.press("enter")
            await wait_for(pilot, lambda screen_type=screen_type: isinstance(app.screen, screen_type), what=f"{query} from the palette")
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen.id == "main", what="back")


async def test_local_screen_without_nvml_is_one_line(demo_cluster):
    app = app_on(demo_cluster)
    async with app.run_test(size=(80, 24)) as pilot:
        await connected(app, pilot)
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(app.screen, LocalScreen) and app.screen.text, what="the local screen")
        snapshot = nvml.local_snapshot()
        if snapshot.available:  # a machine with a GPU: the GPUs, not the line
            assert "Local GPUs (NVML)" in app.screen.text
        else:
            assert app.screen.text == f"Local GPUs: {snapshot.reason}"
            assert app.screen.text.count("\n") == 0
        await pilot.press("escape")
        assert app.screen.id == "main"


async def test_local_screen_shows_each_gpu_and_samples_only_while_shown(demo_cluster):
    calls = []

    def fake_snapshot() -> LocalSnapshot:
        calls.append(1)
        gpus = (
            LocalGpu(0, "NVIDIA H100 80GB HBM3", "GPU-1", 87.0, 40960.0, 81559.0, 64.0, 512.5, "disabled",
                     (GpuProcess(4242, 40000.0), GpuProcess(77, None))),
            LocalGpu(1, "NVIDIA A100-SXM4-80GB", "GPU-2", None, 1024.0, 81920.0, 40.0, 90.0, "enabled", ()),
        )
        return LocalSnapshot(gpus, "550.54.15", None)

    app = app_on(demo_cluster)
    async with app.run_test(size=(100, 30)) as pilot:
        await connected(app, pilot)
        app.push_screen(LocalScreen(fake_snapshot, interval=0.05))
        await wait_for(pilot, lambda: isinstance(app.screen, LocalScreen) and len(calls) >= 3, what="a few samples")
        lines = app.screen.text.splitlines()
        assert lines[0] == "Local GPUs (NVML) · driver 550.54.15"
        assert lines[2].split() == ["0", "H100", "80GB", "HBM3", "87%", "40960/81559", "MiB", "64°C", "512", "W", "disabled"]
        assert lines[3].strip() == "processes: 4242 (40000 MiB), 77"
        assert lines[4].split()[-1] == "enabled" and "n/a" in lines[4]  # no utilisation on a MIG-enabled GPU
        assert lines[5].strip() == "processes: none"
        await pilot.press("escape")
        sampled = len(calls)
        await pilot.pause(0.3)
        assert len(calls) <= sampled + 1  # stopped with the screen (one may have been under way)
