"""Bad GPUs and the work on them (kube/health.py) against the simulator's `health` scenario and its GPU faults:
each signal seen to appear and clear, the pods named on whole, time-sliced, MIG and DRA GPUs, an XID that stays
the same read as old, never new, and the report's `bad_gpus`."""
from __future__ import annotations

import asyncio
import json

import pytest
import pytest_asyncio

from gputui.kube import health
from gputui.kube.config import connect
from gputui.kube.model import ClusterModel
from gputui.sim import SimCluster
from tests.model.scenario import FAST, until
from tests.model.test_report import report_of

pytestmark = pytest.mark.asyncio(loop_scope="module")
OLD_AFTER = 3600.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sim():
    async with SimCluster("health", faults=True) as cluster:
        yield cluster


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def watched(sim):
    clock = Clock()
    async with await connect(str(sim.kubeconfig_path)) as conn:
        async with ClusterModel(conn.api, xid_old_after=OLD_AFTER, clock=clock, **FAST) as model:
            assert await model.wait_synced(10)
            for _ in range(100):  # the exporters' pods run from the start: read as soon as the stack is known
                await model.metrics.poll_once()
                if all((m := model.node_metrics(n)) is not None and m.current for n in ("gpu-1", "mig-1")):
                    break
                await asyncio.sleep(0.05)
            yield model, clock


async def read(model: ClusterModel) -> list[health.BadGpu]:
    await model.metrics.poll_once()
    return model.bad_gpus()


def find(gpus: list[health.BadGpu], node: str, device: str | None) -> health.BadGpu | None:
    return next((g for g in gpus if g.node == node and g.device == device), None)


def pods(bad: health.BadGpu) -> dict[str, tuple[str | None, tuple[str, ...]]]:
    return {f"{h.namespace}/{h.name}": (h.owner, h.how) for h in bad.holders}


async def test_the_pods_on_each_kind_of_bad_gpu_are_named_with_how_it_is_known(watched):
    model, _ = watched
    gpus = await until(lambda: model.bad_gpus() if find(model.bad_gpus(), "ts-1", "GPU 0") else None, what="pod health")
    whole = find(gpus, "gpu-1", "GPU 1")
    assert whole is not None and whole.signals[0].text.startswith("XID 79")
    assert pods(whole) == {"ml/llm-train-0": ("Job llm-train", (health.BY_DCGM,))}
    shared = find(gpus, "ts-1", "GPU 0")
    assert shared is not None and [s.source for s in shared.signals] == [health.POD_STATUS]
    assert set(pods(shared)) == {"research/notebook-a", "research/notebook-b"}
    assert all(health.BY_POD_STATUS in how for _, how in pods(shared).values())
    mig = find(gpus, "mig-1", "GPU 0 (MIG)")
    assert mig is not None and mig.signals[0].text.startswith("XID 94")
    assert set(pods(mig)) == {"research/notebook-bob"}
    dra = find(gpus, "dra-1", "gpu-0")
    assert dra is not None and dra.signals[0].text == "device taint gpu.nvidia.com/xid=43:NoSchedule"
    assert dra.signals[0].exact and dra.signals[0].since is not None  # the taint's timeAdded
    assert pods(dra) == {"inference/vllm-0": ("StatefulSet vllm", (health.BY_CLAIM,))}
    unheld = find(gpus, "gpu-1", "GPU 6")
    assert unheld is not None and unheld.holders == [] and unheld.holders_known
    node_level = find(gpus, "cond-1", None)
    assert node_level is not None and not node_level.holders_known and node_level.signals[0].source == health.CONDITION


async def test_an_xid_appears_with_its_age_reads_old_later_and_clears(sim, watched):
    model, clock = watched
    assert find(await read(model), "gpu-1", "GPU 5") is None
    sim.faults.xid("gpu-1", 5, 13)
    clock.now += 10
    bad = find(await read(model), "gpu-1", "GPU 5")
    assert bad is not None and pods(bad) == {}
    signal = bad.signals[0]
    assert signal.exact and not signal.old and health.signal_words(signal, clock.now).endswith(", 0s ago")
    clock.now += 90
    assert health.signal_words(find(model.bad_gpus(), "gpu-1", "GPU 5").signals[0], clock.now).endswith(", 90s ago")
    clock.now += OLD_AFTER + 1
    old = find(model.bad_gpus(), "gpu-1", "GPU 5").signals[0]
    assert old.old and "last change" in health.signal_words(old, clock.now)
    assert model.bad_gpus()[-1].old  # newest first: the old ones last
    sim.faults.xid("gpu-1", 5, 0)
    assert find(await read(model), "gpu-1", "GPU 5") is None


async def test_an_xid_there_at_the_first_read_is_never_new(watched):
    model, clock = watched
    first = find(model.bad_gpus(), "gpu-1", "GPU 6").signals[0]  # XID 48 since the scenario began
    assert not first.exact and first.since is not None
    assert health.signal_words(first, first.since + 120) == "XID 48 (double-bit ECC error), unchanged for 2m or more"
    assert first.old == (clock.now - first.since > OLD_AFTER)
    clock.now = first.since + OLD_AFTER + 1
    assert find(model.bad_gpus(), "gpu-1", "GPU 6").signals[0].old


async def test_a_gpu_the_plugin_finds_unhealthy_names_its_pod_then_clears(sim, watched):
    model, _ = watched
    sim.faults.gpu_health("gpu-1", 2, healthy=False)  # llm-train-0 holds GPUs 0-3
    bad = await until(lambda: find(model.bad_gpus(), "gpu-1", "GPU 2"), what="GPU 2 unhealthy")
    assert pods(bad) == {"ml/llm-train-0": ("Job llm-train", (health.BY_POD_STATUS, health.BY_DCGM))}
    assert model.node("gpu-1").allocatable["nvidia.com/gpu"] == "7"
    sim.faults.gpu_health("gpu-1", 2, healthy=True)
    await until(lambda: find(model.bad_gpus(), "gpu-1", "GPU 2") is None or None, what="GPU 2 healthy again")
    assert find(model.bad_gpus(), "gpu-1", None) is None  # allocatable back: no node-level shortfall either


async def test_a_device_taint_appears_and_clears(sim, watched):
    model, _ = watched
    sim.faults.taint_device("dra-1", "gpu-3", "gpu.nvidia.com/xid", "79")
    bad = await until(lambda: find(model.bad_gpus(), "dra-1", "gpu-3"), what="tainted gpu-3")
    assert bad.signals[0].exact and bad.holders == []
    sim.faults.untaint_device("dra-1", "gpu-3")
    await until(lambda: find(model.bad_gpus(), "dra-1", "gpu-3") is None or None, what="taint gone")


async def test_a_tainted_device_is_not_allocated_unless_tolerated():
    from gputui.sim.behaviour.dra import _untainted

    taint = {"key": "gpu.nvidia.com/xid", "value": "43", "effect": "NoSchedule"}
    assert not _untainted({"taints": [taint]}, [])
    assert _untainted({"taints": [taint]}, [{"key": "gpu.nvidia.com/xid", "operator": "Exists"}])
    assert _untainted({"taints": [{**taint, "effect": "None"}]}, [])


async def test_the_fault_commands_refuse_what_they_cannot_do(sim):
    with pytest.raises(ValueError, match="not found"):
        sim.faults.xid("nope", 0, 79)
    with pytest.raises(ValueError, match="GPUs 0 to 7"):
        sim.faults.xid("gpu-1", 8, 79)
    with pytest.raises(ValueError, match="does not evict"):
        sim.faults.taint_device("dra-1", "gpu-1", "gpu.nvidia.com/xid", "43", "NoExecute")
    with pytest.raises(ValueError, match="no ResourceSlice"):
        sim.faults.taint_device("gpu-1", "gpu-1", "gpu.nvidia.com/xid")


async def test_the_report_lists_bad_gpus_with_their_pods(sim):
    rc, out, err = await report_of("--kubeconfig", str(sim.kubeconfig_path), "-o", "json")
    data = json.loads(out)
    by_device = {(g["node"], g["device"]): g for g in data["bad_gpus"]}
    whole = by_device[("gpu-1", "GPU 1")]
    assert whole["signals"][0]["source"] == "dcgm" and whole["signals"][0]["age_s"] is None  # read once: age unknown
    [holder] = whole["pods"]  # how: DCGM, and its own status once the kubelet wrote it (after the gpu-health test)
    assert holder["name"] == "llm-train-0" and holder["owner"] == "Job llm-train" and health.BY_DCGM in holder["how"]
    assert by_device[("dra-1", "gpu-0")]["signals"][0]["age_s"] >= 1200
    assert by_device[("cond-1", None)]["pods"] is None
    rc, out, err = await report_of("--kubeconfig", str(sim.kubeconfig_path))
    section = out.split("\nBad GPUs:\n", 1)[1]
    assert "gpu-1 GPU 1" in section and "pod ml/llm-train-0 (Job llm-train) by" in section
    assert "cannot tell which" in section


async def test_each_gpu_of_a_node_has_its_health_and_unknown_is_never_ok(watched):
    """The node details' per-GPU list (issue 24): bad with its signal and pods, ok only where DCGM read it and no
    signal says otherwise, `?` with why (no exporter; a node-level condition that names no GPU)."""
    model, _ = watched
    await model.metrics.poll_once()

    def states(node: str) -> dict[str | None, tuple[str, str, list[str]]]:
        return {g.device: (g.state, g.why, [f"{h.namespace}/{h.name}" for h in g.bad.holders] if g.bad else [])
                for g in model.gpu_health(node)}

    gpu_1 = states("gpu-1")
    assert len(gpu_1) == 8
    assert gpu_1["GPU 1"][0] == health.BAD and gpu_1["GPU 1"][1].startswith("XID 79") and gpu_1["GPU 1"][2] == ["ml/llm-train-0"]
    assert gpu_1["GPU 6"][0] == health.BAD and gpu_1["GPU 6"][2] == []
    assert gpu_1["GPU 0"][0] == health.OK and gpu_1["GPU 0"][1].startswith("no XID reported by DCGM, read ")
    assert states("ts-1")["GPU 0"][2] == ["research/notebook-a", "research/notebook-b"]  # the kubelet's word, time-sliced
    dra_1 = states("dra-1")  # no exporter there: the tainted device is bad, the others not known
    assert dra_1["gpu-0"][0] == health.BAD and dra_1["gpu-0"][2] == ["inference/vllm-0"]
    assert dra_1["gpu-3"] == (health.UNKNOWN, "no DCGM reading: no DCGM exporter on this node", [])
    cond_1 = states("cond-1")  # the condition names no GPU: no GPU of the node is ok
    assert cond_1[None][0] == health.BAD and "GpuXidError" in cond_1[None][1]
    assert {cond_1[f"GPU {i}"][0] for i in range(8)} == {health.UNKNOWN}
