"""GPU-hours on a time-sliced GPU with dcgm-exporter's defaults (no --kubernetes-virtual-gpus): the exporter names
one pod per GPU (the last its pod-resources map keeps), so of shared/pair-a and pair-b on ts-1 only one is on the
device's series. Neither may be credited with the GPU's use: kube/usage.py tells such a node by its advertising
more nvidia.com/gpu (kube-state-metrics) than its exporter reports devices, and counts its pods' GPUs as shared,
from the raw series and the recording rules alike, in Debian's real Prometheus."""
from __future__ import annotations

import asyncio
import time

import pytest
import pytest_asyncio

from gputui.kube.usage import RAW, RULES, Prometheus, UsageSettings, rules_file, usage
from gputui.sim import SimCluster
from gputui.sim.scenarios import idle_gpus
from gputui.sim.exporters.ksm import KubeStateMetrics
from tests import prometheus as prom
from tests.model.test_report import report_of
from tests.model.test_usage_prometheus import time_sliced

pytestmark = pytest.mark.asyncio(loop_scope="module")
TICK = 0.5
NOTE = "GPU-h on shared GPUs: their use cannot be split between pods"
WINDOW = 6  # seconds of usage asked for
SAMPLE_SLACK = 0.4


def exporter_defaults(objects: list[dict]) -> list[dict]:
    """The scenario with ts-1's exporter as installed by default: no KUBERNETES_VIRTUAL_GPUS."""
    for o in objects:
        if o["kind"] == "Pod" and o["metadata"]["name"] == "nvidia-dcgm-exporter-ts001":
            for c in o["spec"]["containers"]:
                c["env"] = [e for e in c.get("env", []) if e["name"] != "KUBERNETES_VIRTUAL_GPUS"]
    return objects


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory):
    if prom.BINARY is None:
        pytest.skip(prom.MISSING)
    tmp = tmp_path_factory.mktemp("sliced")
    async with SimCluster(exporter_defaults(time_sliced(idle_gpus.build())), run_controllers=False) as sim, \
            KubeStateMetrics(sim, {"pods": ["app"], "nodes": ["nvidia.com/gpu.product"]}) as ksm:
        config = prom.exporter_jobs(sim, tmp) + prom.ksm_job("kube-state-metrics", ksm.url)
        async with prom.running(tmp / "prometheus", config, interval=f"{int(TICK * 1000)}ms",
                                rules=rules_file(fine=TICK, coarse=2.0), port=prom.free_port()) as running:
            await running.until(lambda: len(running.ask(f"count_over_time(gputui:gpus_allocated:1m[{WINDOW}s]) >= {2 * WINDOW}")) > 0,
                                "the window's rule evaluations after the first scrapes")
            yield running


def shared_row(view):
    rows = {(r.group, r.resource): r for r in view.rows}
    return rows, rows[("shared", "nvidia_com_gpu")]


async def test_the_exporter_names_one_of_the_pods_sharing_the_gpu(server):
    named = {s["metric"].get("pod") for s in server.ask('DCGM_FI_DEV_GPU_UTIL{Hostname="ts-1"}')}
    assert len(named) == 1 and named <= {"pair-a", "pair-b"}


@pytest.mark.parametrize("use_rules", [False, True])
async def test_no_pod_is_credited_with_a_time_sliced_gpus_use(server, use_rules):
    source = Prometheus(server.url)
    try:
        view = await usage(source, UsageSettings(window=WINDOW, min_step=TICK, fine_interval=TICK, use_rules=use_rules), now=time.time())
    finally:
        await source.close()
    assert view.method == (RULES if use_rules else RAW)
    rows, shared = shared_row(view)
    assert shared.allocated_h > 0 and (shared.used_h, shared.measured_h, shared.idle_h, shared.ratio) == (None, 0, None, None)
    # Two series scraped apart hold a sample or two (or, with the rules, one 2-s evaluation) more or less of each
    # other over the window, more on a loaded machine.
    assert shared.shared_h == pytest.approx(shared.allocated_h, rel=SAMPLE_SLACK)
    assert shared.notes[0].endswith(NOTE)
    # The GPUs of the other nodes (whole, MIG) are measured as before.
    for key in (("ml", "nvidia_com_gpu"), ("research", "nvidia_com_mig_1g_10gb")):
        assert rows[key].measured_h == pytest.approx(rows[key].allocated_h, rel=SAMPLE_SLACK) and rows[key].shared_h == 0, key


async def test_the_report_marks_the_figures(server):
    await asyncio.sleep(0)
    rc, out, err = await report_of("--usage", "--since", "3s", "--prometheus", server.url)
    assert (rc, err) == (0, ""), err
    shared = next(line for line in out.splitlines() if line.split()[:2] == ["shared", "nvidia_com_gpu"])
    assert shared.split()[3] in ("…", "?", "-", "—")  # no used figure
    assert any(line.startswith("note: shared nvidia_com_gpu: ") and line.endswith(NOTE) for line in out.splitlines())
