"""A verdict is not `ok` before its inputs are known (issue 22): the device-plugin verdict waits for the
pods, the XID verdict for the node's first DCGM read; each reads `…` meanwhile, then the real verdict."""
from __future__ import annotations

import pytest

from gputui.kube import gpu
from gputui.kube.config import connect
from gputui.kube.model import ClusterModel
from gputui.sim.scenarios import demo
from gputui.sim.cluster import SimCluster
from gputui.ui import render
from tests.model.scenario import FAST, until

pytestmark = pytest.mark.asyncio


async def test_the_plugin_verdict_waits_for_the_pods_and_the_xid_verdict_for_the_first_read():
    async with SimCluster(demo.build(), faults=True) as sim:
        sim.faults.slow("pods", 2.0)  # nodes are listed first; the pods take a while
        async with await connect(str(sim.kubeconfig_path)) as conn, ClusterModel(conn.api, **FAST) as model:
            await until(lambda: model.states["nodes"].synced, what="the nodes listed")
            waiting = model.summary("h100-2")
            assert not model.pods_known and waiting is not None and not waiting.problems
            assert gpu.Unknown(gpu.PLUGIN_INPUT, "pods not listed yet", pending=True) in waiting.unknown
            assert render.verdicts(waiting.problems, unknown=waiting.unknown).plain.startswith("… device plugin")

            sim.faults.clear()
            assert await model.wait_synced(20)
            await until(lambda: model.stack_known, what="pods and DaemonSets known")
            before_read = model.summary("h100-1")  # XID 79 on one GPU, not read yet
            assert before_read is not None and [u.what for u in before_read.unknown] == [gpu.XID_INPUT]
            assert "xid-errors" not in [p.code for p in before_read.problems]
            assert render.verdicts(before_read.problems, unknown=before_read.unknown).plain == "… XIDs: DCGM not read yet"

            await model.metrics.poll_once(["h100-1"])
            read = model.summary("h100-1")
            assert read is not None and read.unknown == ()
            assert [p.code for p in read.problems] == ["xid-errors"]
            assert render.verdicts(read.problems, unknown=read.unknown).plain.startswith("✗ XID errors")
