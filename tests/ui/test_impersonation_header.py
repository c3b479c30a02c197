"""The header names whom gputui acts as (`as readonly-auditor`) when the kubeconfig or --as impersonates a user,
and the screen shows what that user may read."""
from __future__ import annotations

import pytest

from gputui.kube.config import Impersonation
from gputui.ui.launch import make_app
from tests.model.test_impersonation import POLICY
from tests.ui.ui_helpers import screen_text, start_cluster, wait_for
from tests.ui.ui_scenario import NOW_TS
from tests.ui.test_unknown import full_cluster


@pytest.fixture(scope="module")
def cluster():
    yield from start_cluster([*full_cluster(), *POLICY])  # the simulator's admin (system:masters) may impersonate anyone


async def test_the_header_says_as_whom_and_the_nodes_are_that_users(cluster):
    app = make_app(str(cluster.kubeconfig_path), clock=lambda: NOW_TS, impersonate=Impersonation("readonly-auditor"))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: "full-1" in screen_text(app), what="the node, read as readonly-auditor")
        header = screen_text(app).splitlines()[0]
        assert "context gputui-sim" in header and "as readonly-auditor" in header
