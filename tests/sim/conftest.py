"""What the simulator's test modules share: the real kubectl and the official client, on the module's `sim`."""
from __future__ import annotations

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config


@pytest.fixture(scope="module")
def kubectl(sim, make_kubectl):
    """The real kubectl on this module's simulated cluster (each module defines `sim`)."""
    return make_kubectl(sim.kubeconfig_path)


@pytest.fixture(scope="module")
def core(sim):
    """The official Python client's CoreV1Api on this module's simulated cluster."""
    return k8s.CoreV1Api(k8s_config.new_client_from_config(str(sim.kubeconfig_path)))
