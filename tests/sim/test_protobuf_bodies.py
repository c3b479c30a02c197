"""kubectl's typed create commands send Kubernetes protobuf (Content-Type application/vnd.kubernetes.protobuf, the
`k8s\\0` envelope): the simulator reads them as kube-apiserver does, so `kubectl create namespace|quota|configmap|
secret|serviceaccount` succeed, and the object read back (official Python client) is the one kubectl builds
(`--dry-run=client -o json`), with the server's defaults. A kind it does not read from protobuf: 415."""
from __future__ import annotations

import json

import pytest

from gputui.ui.demo import BackgroundCluster


@pytest.fixture(scope="module")
def sim():
    with BackgroundCluster(scenario=[], run_controllers=False) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def namespace(kubectl):
    assert kubectl("create", "namespace", "proto").strip() == "namespace/proto created"
    return "proto"


def as_built(kubectl, *args: str) -> dict:
    """The object kubectl sends for `kubectl create ARGS`, as it renders it."""
    return json.loads(kubectl("create", *args, "--dry-run=client", "-o", "json"))


def test_create_namespace(core, namespace):
    read = core.read_namespace(namespace)
    assert read.metadata.name == namespace and read.metadata.labels == {"kubernetes.io/metadata.name": namespace}
    assert (read.spec.finalizers, read.status.phase) == (["kubernetes"], "Active")
    assert read.metadata.uid and read.metadata.creation_timestamp


def test_create_quota(core, kubectl, namespace):
    args = ("quota", "gpus", "-n", namespace, "--hard=cpu=2,memory=1Gi,requests.nvidia.com/gpu=4,pods=10", "--scopes=NotTerminating")
    built = as_built(kubectl, *args)
    assert kubectl("create", *args).strip() == "resourcequota/gpus created"
    read = core.read_namespaced_resource_quota("gpus", namespace)
    assert read.spec.hard == built["spec"]["hard"] == {"cpu": "2", "memory": "1Gi", "requests.nvidia.com/gpu": "4", "pods": "10"}
    assert read.spec.scopes == built["spec"]["scopes"] == ["NotTerminating"]


def test_create_configmap_with_text_and_binary(core, kubectl, namespace, tmp_path):
    (tmp_path / "blob").write_bytes(b"\x00\xff\xfe binary")
    args = ("configmap", "settings", "-n", namespace, "--from-literal=mode=fast", "--from-literal=empty=", f"--from-file={tmp_path / 'blob'}")
    built = as_built(kubectl, *args)
    assert kubectl("create", *args).strip() == "configmap/settings created"
    read = core.read_namespaced_config_map("settings", namespace)
    assert read.data == built["data"] == {"mode": "fast", "empty": ""}
    assert read.binary_data == built["binaryData"] == {"blob": "AP/+IGJpbmFyeQ=="}
    assert read.metadata.labels is None and read.metadata.resource_version


def test_create_secret_and_serviceaccount(core, kubectl, namespace):
    args = ("secret", "generic", "token", "-n", namespace, "--from-literal=key=value")
    built = as_built(kubectl, *args)
    assert kubectl("create", *args).strip() == "secret/token created"
    read = core.read_namespaced_secret("token", namespace)
    assert (read.data, read.type) == (built["data"], "Opaque")  # the type defaulted by the server
    assert kubectl("create", "serviceaccount", "runner", "-n", namespace).strip() == "serviceaccount/runner created"
    assert core.read_namespaced_service_account("runner", namespace).metadata.namespace == namespace
    # Read back by kubectl too, from the same store.
    assert json.loads(kubectl("get", "configmap", "settings", "-n", namespace, "-o", "json"))["data"]["mode"] == "fast"


def post(sim, path: str, body: bytes) -> tuple[int, dict]:
    """A protobuf POST as client-go makes it, with the admin's token."""
    async def send() -> tuple[int, dict]:
        async with sim.sim.http_session(base_url=sim.sim.url) as http, http.post(path, data=body, headers={
                "Content-Type": "application/vnd.kubernetes.protobuf", "Accept": "application/json"}) as answer:
            return answer.status, await answer.json()
    return sim.call(send)


def test_a_kind_not_read_from_protobuf_is_415_and_a_broken_body_400(sim, namespace):
    code, status = post(sim, f"/api/v1/namespaces/{namespace}/services", b"k8s\x00\x0a\x00")
    assert (code, status["reason"], status["message"]) == (
        415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml")
    code, status = post(sim, f"/api/v1/namespaces/{namespace}/configmaps", b"not protobuf")
    assert (code, status["reason"]) == (400, "BadRequest")
    assert status["message"].startswith("the body of the request was in an unknown format: ")
