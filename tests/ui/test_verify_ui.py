"""Verification in the TUI, driven by keys against the simulated cluster's kubelets and node faults.

Every test leaves no verification pod behind (checked after each); cancellation tests
slow the simulator down so that esc or q lands while the pod is on its way.
"""
from __future__ import annotations

import dataclasses
import os
import random
import re
import signal

import pytest
from kubernetes_asyncio.client import CoreV1Api
from kubernetes_asyncio.config import new_client_from_config

from gputui.kube import health
from gputui.kube import verify as v
from gputui.kube.config import connect
from gputui.ui import session
from gputui.ui.launch import make_app
from gputui.ui.screens import TextScreen
from gputui.ui.verify import (
    READ_ONLY_MESSAGE,
    ConfirmVerifyScreen,
    LeftoversScreen,
    VerifyManyScreen,
    VerifyScreen,
    VerifySettings,
)
from gputui.ui.verify.confirm import obstacle_line
from gputui.ui.verify.words import known_problems, verdict_text
from gputui.ui.widgets import PluginLog
from tests.ui.test_log_keys import LONG, check_log_keys
from tests.ui.ui_helpers import screen_text, start_cluster, wait_for
from tests.ui.ui_scenario import NOW_TS
from tests.verify import cluster as verify_cluster

FAST = v.VerifyOptions(timeout=20, delete_timeout=10)
GPU_NODES = 8


@pytest.fixture(scope="module")
def cluster():
    yield from start_cluster(verify_cluster.objects(), speed=20, faults=True)


def verification_pods(cluster) -> list[str]:
    pods = cluster.call(cluster.sim.store.objects, "pods")
    return [p["metadata"]["name"] for p in pods if (p["metadata"].get("labels") or {}).get(v.MANAGED_BY_LABEL) == "gputui"]


@pytest.fixture(scope="module")
def created(cluster) -> list[str]:
    """Names of every verification pod ever created in the module's cluster."""
    names: list[str] = []

    def record(event) -> None:
        labels = event.obj["metadata"].get("labels") or {}
        if event.type == "ADDED" and event.resource.key == "pods" and labels.get(v.MANAGED_BY_LABEL) == "gputui":
            names.append(event.obj["metadata"]["name"])

    cluster.call(cluster.sim.store.subscribe, record)
    return names


@pytest.fixture(autouse=True)
def nothing_left_behind(cluster, created):
    yield
    cluster.call(cluster.sim.faults.clear)
    cluster.sim.speed = 20
    assert verification_pods(cluster) == []


def app_for(cluster, *, read_only: bool = False, seed: int = 1, options: v.VerifyOptions = FAST, namespace: str | None = None):
    settings = VerifySettings(dataclasses.replace(options, read_only=read_only), namespace=namespace, rng=random.Random(seed))
    return make_app(str(cluster.kubeconfig_path), clock=lambda: NOW_TS, verify=settings)


async def on_node(app, pilot, node: str) -> None:
    await wait_for(pilot, lambda: app.model is not None, what="the app to connect")
    await wait_for(pilot, lambda: node in app.nodes_table.shown_keys, what="the nodes")
    app.jump_to_node(node)
    await wait_for(pilot, lambda: app.selected_node == node, what=f"{node} selected")


async def confirm(app, pilot) -> ConfirmVerifyScreen:
    await wait_for(pilot, lambda: isinstance(app.screen, ConfirmVerifyScreen), what="the confirmation")
    return app.screen


async def confirmed(app, pilot, node: str) -> None:
    """v on the node, then y on the confirmation: the pod is being created."""
    await on_node(app, pilot, node)
    await pilot.press("v")
    await confirm(app, pilot)
    await pilot.press("y")


async def live_screen(app, pilot, node: str) -> VerifyScreen:
    await confirmed(app, pilot, node)
    await wait_for(pilot, lambda: isinstance(app.screen, VerifyScreen), what="the live screen")
    return app.screen


async def verified(app, pilot, node: str) -> VerifyScreen:
    """v on the node, y on the confirmation, then the verdict."""
    await live_screen(app, pilot, node)
    screen = app.screen
    await wait_for(pilot, lambda: screen.finished, timeout=20, what="the verdict")
    return screen


async def test_confirm_shows_the_pod_then_pass_on_a_free_node(cluster, created):
    app = app_for(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await on_node(app, pilot, "gpu-ok")
        await pilot.press("v")
        dialog = await confirm(app, pilot)
        spec = dialog.spec_text().plain
        assert spec == dialog.plans[0].to_yaml().rstrip("\n")  # the exact manifest
        for part in ("name: gputui-verify-gpu-ok-", "kubernetes.io/hostname", "nvidia.com/gpu: '1'", f"image: {v.DEFAULT_IMAGE}", "restartPolicy: Never"):
            assert part in spec, part
        assert created == [] or dialog.plans[0].name not in created  # nothing exists before y
        assert screen_text(app).count(f"Cluster {app.context.upper()}") == 1  # the context, in capitals
        await pilot.press("y")

        await wait_for(pilot, lambda: isinstance(app.screen, VerifyScreen), what="the live screen")
        screen = app.screen
        await wait_for(pilot, lambda: screen.finished, timeout=20, what="the verdict")
        verdict = screen.verdict
        assert verdict.passed, verdict.reason
        assert verdict.pod in created
        text = screen.text
        assert "PASS  1 x NVIDIA H100 80GB HBM3 · driver 550.54.15 · CUDA 12.4" in text
        assert "agrees with the node's GPU Feature Discovery labels" in text
        assert f"✓ pod default/{verdict.pod} deleted" in text
        reasons = [e.reason for e in screen.events]
        assert reasons[0] == "Scheduled" and "Started" in reasons
        await wait_for(pilot, lambda: any("NVIDIA-SMI" in line for line in app.screen.query_one("#verify-log").lines), what="the streamed log")
        assert verification_pods(cluster) == []
        log = app.screen.query_one("#verify-log", PluginLog)
        log.add_lines([LONG])  # the keys of the screen's log, on a line longer than it
        await check_log_keys(pilot, log)

        await pilot.press("escape")  # back to the main screen
        assert not isinstance(app.screen, VerifyScreen)


@pytest.mark.parametrize(
    ("node", "headline", "reason"),
    [
        ("gpu-driver-broken", "FAIL  nvidia-smi failed", "nvidia-smi failed (exit 9)"),
        ("gpu-cordoned", "FAIL  unschedulable", "unschedulable: node gpu-cordoned is cordoned"),
        # ErrImagePull, or ImagePullBackOff if the kubelet had moved on when the pod was next seen (a loaded machine)
        ("gpu-image-pull", "FAIL  image pull failed", re.compile(r"image pull failed \((ErrImagePull|ImagePullBackOff)\)")),
    ],
)
async def test_a_failing_node_says_why(cluster, node, headline, reason):
    app = app_for(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await on_node(app, pilot, node)
        await pilot.press("v")
        dialog = await confirm(app, pilot)
        if node == "gpu-cordoned":  # what the plan already knows is said before anything is created
            assert "likely to fail: node gpu-cordoned is cordoned" in screen_text(app)
        assert dialog.plans[0].node == node
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, VerifyScreen), what="the live screen")
        screen = app.screen
        await wait_for(pilot, lambda: screen.finished, timeout=20, what="the verdict")
        assert not screen.verdict.passed
        assert headline in screen.text
        assert reason.search(screen.text) if isinstance(reason, re.Pattern) else reason in screen.text, screen.text
        assert headline in screen_text(app)  # on screen, not only in the model


async def test_esc_mid_run_cancels_and_deletes_the_pod(cluster, created):
    cluster.sim.speed = 0.25  # an image pull takes about four seconds: esc lands while it runs, on a loaded machine too
    app = app_for(cluster, seed=2)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await live_screen(app, pilot, "gpu-shared")
        await wait_for(pilot, lambda: screen.stage == v.WAITING and verification_pods(cluster), timeout=30, what="the pod created")
        app.switch_context("elsewhere")  # as the palette does: refused, the pod's deletion needs this connection
        await wait_for(pilot, lambda: any("before switching context" in n.message for n in app._notifications), what="the refusal")
        assert app.context == "gputui-sim"
        await pilot.press("escape")
        await wait_for(pilot, lambda: screen.verdict is not None, timeout=15, what="the cancellation")
        assert screen.verdict.code == v.CANCELLED
        assert screen.verdict.deleted and screen.verdict.pod in created
        assert verification_pods(cluster) == []
        await wait_for(pilot, lambda: "✓ pod default/" in screen.text, what="the deletion shown")
        assert "CANCELLED" in screen.text
        await pilot.press("escape")
        assert not isinstance(app.screen, VerifyScreen)


@pytest.mark.parametrize("key", ["q", "ctrl+q"])
async def test_quitting_mid_run_deletes_the_pod_before_exit(cluster, created, key):
    cluster.sim.speed = 1
    app = app_for(cluster, seed=3 if key == "q" else 4)
    async with app.run_test(size=(120, 40)) as pilot:
        await live_screen(app, pilot, "gpu-shared")
        await wait_for(pilot, lambda: verification_pods(cluster), timeout=30, what="the pod created")
        name = verification_pods(cluster)[0]
        await pilot.press(key)
        await pilot.pause()
    assert name in created
    assert verification_pods(cluster) == []  # deleted before the app was gone, not after


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_signal_mid_run_quits_after_deleting_the_pod(cluster, created, sig):
    cluster.sim.speed = 1
    app = app_for(cluster, seed=6)
    async with app.run_test(size=(120, 40)) as pilot:
        await confirmed(app, pilot, "gpu-shared")
        await wait_for(pilot, lambda: verification_pods(cluster), timeout=30, what="the pod created")
        name = verification_pods(cluster)[0]
        assert loop_handles(sig)  # else the signal would end pytest
        os.kill(os.getpid(), sig)
        await wait_for(pilot, lambda: not app.is_running, timeout=15, what="the app to quit")
    assert name in created
    assert verification_pods(cluster) == []
    assert not loop_handles(sig)


def loop_handles(sig: signal.Signals) -> bool:
    """Whether the running loop handles the signal: asyncio and uvloop both put a Python-level handler of
    their own in place, and put back the default when it is removed."""
    return signal.getsignal(sig) not in (signal.SIG_DFL, signal.SIG_IGN, signal.default_int_handler, None)


async def test_a_hangup_cut_short_by_textual_still_deletes_the_pod_before_the_process_ends(cluster, created, monkeypatch):
    """A closed terminal can also fail Textual's input thread, which then ends the app at once (its panic),
    cancelling every worker: the process is ended only once the pod is gone (seen on a loaded machine)."""
    cluster.sim.speed = 1
    pods_when_ending: list[list[str]] = []
    monkeypatch.setattr(session, "_exit_soon", lambda _delay, _status: pods_when_ending.append(verification_pods(cluster)))
    app = app_for(cluster, seed=9)
    async with app.run_test(size=(120, 40)) as pilot:
        await confirmed(app, pilot, "gpu-shared")
        await wait_for(pilot, lambda: verification_pods(cluster), timeout=30, what="the pod created")
        app.terminal.lost()
        app.panic("the input thread failed on the closed terminal")  # leaving the block waits for the app's end
    assert pods_when_ending == [[]]


async def test_a_crash_of_the_view_still_deletes_the_pod(cluster, created, monkeypatch):
    cluster.sim.speed = 1
    draw = VerifyScreen._flush

    def crashing(screen: VerifyScreen) -> None:
        draw(screen)
        if screen.stage == v.WAITING:  # the pod exists
            raise RuntimeError("the view crashed")

    monkeypatch.setattr(VerifyScreen, "_flush", crashing)
    before = len(created)
    app = app_for(cluster, seed=8)
    with pytest.raises(RuntimeError, match="the view crashed"):
        async with app.run_test(size=(120, 40)) as pilot:
            await confirmed(app, pilot, "gpu-shared")
            await wait_for(pilot, lambda: not app.is_running, timeout=15, what="the crash")
    assert len(created) == before + 1  # it was created, and then deleted
    assert verification_pods(cluster) == []
    assert app.error == "unexpected RuntimeError: the view crashed; run with --debug for the traceback"  # the line printed, not a traceback


async def test_ctrl_c_cancels_a_running_verification(cluster):
    cluster.sim.speed = 1
    app = app_for(cluster, seed=5)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await live_screen(app, pilot, "gpu-shared")
        await wait_for(pilot, lambda: verification_pods(cluster), timeout=30, what="the pod created")
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: screen.verdict is not None, timeout=15, what="the cancellation")
        assert screen.verdict.code == v.CANCELLED and screen.verdict.deleted
        assert isinstance(app.screen, VerifyScreen)  # the result stays on screen


async def test_ctrl_c_on_the_confirmation_quits_and_creates_nothing(cluster, created):
    before = list(created)
    app = app_for(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await on_node(app, pilot, "gpu-ok")
        await pilot.press("v")
        await confirm(app, pilot)
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: not app.is_running, what="the app to quit")
    assert app.return_code == 0 and created == before


async def test_ctrl_c_on_a_finished_verification_quits(cluster):
    app = app_for(cluster, seed=6)
    async with app.run_test(size=(120, 40)) as pilot:
        await verified(app, pilot, "gpu-ok")
        await pilot.press("ctrl+c")  # not Textual's `Press ctrl+q to quit the app`
        await wait_for(pilot, lambda: not app.is_running, what="the app to quit")
    assert app.return_code == 0


async def test_cancel_at_the_confirmation_creates_nothing(cluster, created):
    before = list(created)
    app = app_for(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await on_node(app, pilot, "gpu-ok")
        await pilot.press("V")  # every GPU node
        dialog = await confirm(app, pilot)
        assert len(dialog.plans) == GPU_NODES and "cpu-only" not in [p.node for p in dialog.plans]
        assert "and the same on:" in screen_text(app)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmVerifyScreen), what="the dialog closed")
        await pilot.pause(0.3)
    assert created == before


async def test_read_only_disables_the_keys_and_creates_nothing(cluster, created):
    before = list(created)
    app = app_for(cluster, read_only=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await on_node(app, pilot, "gpu-ok")
        for key in ("v", "V"):
            await pilot.press(key)
            await wait_for(pilot, lambda: [n.message for n in app._notifications] == [READ_ONLY_MESSAGE], what="the read-only notice")
            assert not isinstance(app.screen, (ConfirmVerifyScreen, VerifyScreen))
            app.clear_notifications()
            await pilot.pause(0.2)
        assert [n.message for n in app._notifications] == []
    assert created == before


async def test_forbidden_create_names_the_permission(cluster, created):
    app = app_for(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await on_node(app, pilot, "gpu-ok")
        cluster.call(cluster.sim.faults.fail, "pods", 403)
        await pilot.press("v")
        await confirm(app, pilot)
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, VerifyScreen), what="the live screen")
        screen = app.screen
        await wait_for(pilot, lambda: screen.finished, what="the refusal")
        assert screen.verdict.code == v.FORBIDDEN
        assert "NOT CHECKED  not allowed" in screen.text
        assert "create pods in namespace default" in screen.text


async def test_a_refused_create_quotes_the_server_in_one_line(cluster, created):
    before = len(created)
    app = app_for(cluster, namespace="no-such-namespace")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await verified(app, pilot, "gpu-ok")
        assert screen.verdict.code == v.REFUSED
        assert "NOT CHECKED  refused by the API server" in screen.text
        assert 'the API server refused the pod: namespaces "no-such-namespace" not found' in screen.text
        assert "no pod was created" in screen.text
    assert len(created) == before


async def node_condition(cluster, node: str, status: str) -> None:
    """A health monitor's condition on the node (node-problem-detector style: True is the problem), through the API."""
    condition = {"type": "GpuXidError", "status": status, "reason": "XidCriticalError", "message": "XID 119 on a GPU"}
    async with await new_client_from_config(str(cluster.kubeconfig_path)) as api:
        await CoreV1Api(api).patch_node_status(node, {"status": {"conditions": [condition]}})


async def test_several_marked_nodes_in_a_results_table(cluster, created):
    app = app_for(cluster)
    await node_condition(cluster, "gpu-ok", "True")  # a known problem: said beside its verdict, as on the one-node screen
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.model is not None and app.model.bad_gpus("gpu-ok"), what="the node's condition known")
            for node in ("gpu-ok", "gpu-driver-broken"):
                await on_node(app, pilot, node)
                await pilot.press("space")
            await wait_for(pilot, lambda: app.nodes_table.get_row("gpu-ok")[0].plain == "● gpu-ok", what="the mark shown")
            await on_node(app, pilot, "gpu-mig")
            await pilot.press("space", "space")  # marked, then unmarked
            assert app.verify.marked == {"gpu-ok", "gpu-driver-broken"}

            await pilot.press("v")
            dialog = await confirm(app, pilot)
            assert [p.node for p in dialog.plans] == ["gpu-driver-broken", "gpu-ok"]
            await pilot.press("y")
            await wait_for(pilot, lambda: isinstance(app.screen, VerifyManyScreen), what="the results screen")
            screen = app.screen
            await wait_for(pilot, lambda: screen.finished and len(screen.verdicts) == 2, timeout=30, what="both verdicts")
            assert screen.verdicts["gpu-ok"].passed
            assert screen.verdicts["gpu-driver-broken"].code == v.NVIDIA_SMI
            await wait_for(pilot, lambda: "every verification pod was deleted" in screen_text(app), what="the summary")
            rows = {key: [cell.plain for cell in screen.table.get_row(key)] for key in screen.table.shown_keys}
            assert rows["gpu-ok"][1:4:2] == ["pod deleted", "PASS"]
            assert screen.known["gpu-ok"].plain == "known: condition GpuXidError is True (XidCriticalError: XID 119 on a GPU)"
            assert rows["gpu-ok"][4].startswith("known: condition GpuXidError")  # first: the column cuts the rest
            assert rows["gpu-driver-broken"][3] == "FAIL" and rows["gpu-driver-broken"][4].startswith("nvidia-smi failed (exit 9)")
            assert "known" not in rows["gpu-driver-broken"][4]
            assert app.verify.marked == set()  # the marks were used up
            assert verification_pods(cluster) == []

            screen.table.move_cursor(row=screen.table.row_index("gpu-ok"))
            await pilot.press("enter")
            assert isinstance(app.screen, TextScreen)
            assert app.screen.text.startswith("PASS  1 x NVIDIA H100 80GB HBM3")
            assert app.screen.text.splitlines()[1].startswith("known on this node: condition GpuXidError is True")
            await pilot.press("escape", "escape")
            assert not isinstance(app.screen, (TextScreen, VerifyManyScreen))
    finally:
        await node_condition(cluster, "gpu-ok", "False")


async def make_leftovers(cluster, nodes: list[str]) -> list[str]:
    """Verification pods as a killed gputui leaves them: created, never deleted."""
    async with await new_client_from_config(str(cluster.kubeconfig_path)) as api:  # an independent client
        core = CoreV1Api(api)
        names = []
        for i, node in enumerate(nodes):
            manifest = v.build_pod(node, "default", "nvidia.com/gpu", FAST, name=v.pod_name(node, random.Random(100 + i)))
            await core.create_namespaced_pod("default", manifest)
            names.append(manifest["metadata"]["name"])
    return names


async def delete_all_leftovers(cluster) -> None:
    conn = await connect(str(cluster.kubeconfig_path))
    async with conn:
        assert await v.delete_leftovers(conn.api, await v.find_leftovers(conn.api)) == []


async def test_leftovers_are_offered_at_start_and_deleted(cluster):
    names = await make_leftovers(cluster, ["gpu-ok", "gpu-driver-broken"])
    try:
        app = app_for(cluster)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, LeftoversScreen), what="the leftovers offer")
            await wait_for(pilot, lambda: all(f"default/{name}" in screen_text(app) for name in names), what="the leftovers listed")
            await pilot.press("d")
            await wait_for(pilot, lambda: not isinstance(app.screen, LeftoversScreen), timeout=15, what="the deletion")
            assert verification_pods(cluster) == []
            assert [n.message for n in app._notifications] == ["deleted 2 leftover verification pod(s)"]
    finally:
        await delete_all_leftovers(cluster)


async def test_leftovers_are_shown_but_kept_in_read_only_mode(cluster):
    names = await make_leftovers(cluster, ["gpu-ok"])
    try:
        app = app_for(cluster, read_only=True)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, LeftoversScreen), what="the leftovers shown")
            await wait_for(pilot, lambda: "read-only mode: not deleting them" in screen_text(app), what="the read-only note")
            await pilot.press("d")
            await pilot.pause(0.3)
            assert verification_pods(cluster) == names
            assert [n.message for n in app._notifications] == [READ_ONLY_MESSAGE]
            await pilot.press("escape")
            assert not isinstance(app.screen, LeftoversScreen)
    finally:
        await delete_all_leftovers(cluster)


SMI_DATE = re.compile(r"^\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}")


def test_verdict_screen_snapshot(cluster, snap_compare):
    """PASS on the MIG node (only this test verifies it, so its image pull shows the same events every run)."""

    async def run_to_verdict(pilot) -> None:
        app = pilot.app
        screen = await verified(app, pilot, "gpu-mig")
        assert screen.verdict.passed
        # nvidia-smi's first line is the simulated kubelet's clock: show a fixed one.
        log = screen.query_one("#verify-log")
        lines = [SMI_DATE.sub("Sun Jun  1 12:00:00 2025", line) for line in log.lines]
        log.clear()
        log.write_lines(lines)
        await pilot.pause(0.3)

    assert snap_compare(app_for(cluster, seed=7), terminal_size=(120, 40), run_before=run_to_verdict)


def test_every_warning_of_the_confirmation_names_its_node():
    cordoned, taint = v.node_obstacles(
        {"metadata": {"name": "h100-2"}, "spec": {"unschedulable": True, "taints": [{"key": "maint", "effect": "NoSchedule"}]},
         "status": {"conditions": [{"type": "Ready", "status": "True"}]}}, "nvidia.com/gpu", 1, {"nvidia.com/gpu": 1}, ())
    assert obstacle_line("h100-2", cordoned).plain == "likely to fail: node h100-2 is cordoned"  # named once
    assert obstacle_line("h100-2", taint).plain == "likely to fail on node h100-2: untolerated taint maint (NoSchedule; add --tolerate maint)"
    assert obstacle_line("h1[b]", "only 0 nvidia.com/gpu free on the node").plain.startswith("likely to fail on node h1[b]: ")  # text, not markup


def test_a_verdict_on_a_node_with_known_xids_or_conditions_says_so_under_its_verdict():
    gpus = [health.BadGpu("h100-1", "GPU 1", "GPU-1", [health.Signal("DCGM", "XID 79 (GPU has fallen off the bus)", 1000.0)]),
            health.BadGpu("h100-1", None, None, [health.Signal("CONDITION", "GpuHealthy=False [b]", None)])]
    known = known_problems(gpus, now=1180.0)
    passed = verdict_text(v.Verdict("h100-1", True, v.PASS, "ok", resource="nvidia.com/gpu", deleted=True), known=known).plain
    assert passed.splitlines()[1] == "known on this node: GPU 1 XID 79 (GPU has fallen off the bus), 3m ago; GpuHealthy=False [b]"
    failed = verdict_text(v.Verdict("h100-1", False, v.NVIDIA_SMI, "nvidia-smi failed (exit 9)", deleted=True), known=known).plain
    assert failed.splitlines()[:3] == ["FAIL  nvidia-smi failed", known.plain, "nvidia-smi failed (exit 9)"]
    assert known_problems([], now=0.0) is None  # nothing known: nothing said
    assert "known on" not in verdict_text(v.Verdict("h100-1", True, v.PASS, "ok", deleted=True)).plain
