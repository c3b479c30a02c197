"""Fixtures shared by the verification tests: each module provides its own `sim`."""
from __future__ import annotations

import pytest
import pytest_asyncio

from gputui.kube import verify as v
from gputui.kube.config import connect
from tests.verify.cluster import verification_pods


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(sim):
    """A connection to the module's cluster, for the whole module."""
    conn = await connect(str(sim.kubeconfig_path))
    yield conn.api
    await conn.close()


@pytest.fixture(scope="module")
def created(sim) -> list[str]:
    """Names of every verification pod ever created in the module's cluster."""
    names: list[str] = []

    def record(event) -> None:
        labels = event.obj["metadata"].get("labels") or {}
        if event.type == "ADDED" and event.resource.key == "pods" and labels.get(v.MANAGED_BY_LABEL) == "gputui":
            names.append(event.obj["metadata"]["name"])

    sim.store.subscribe(record)
    return names


@pytest.fixture
def nothing_left_behind(sim):
    """Used by every test of the live modules: no test may leave a verification pod behind."""
    yield
    sim.faults.clear()
    assert verification_pods(sim) == []
