"""Pod log options as kube-apiserver 1.34 and the kubelet take them, seen by the real kubectl and the official Python
client: sinceSeconds, sinceTime, timestamps (RFC 3339 with nine fraction digits), tailLines, limitBytes and previous
honoured; what ValidatePodLogOptions refuses (tailLines=-1, limitBytes=0, sinceSeconds=0, both since options) is a 422
for the kind PodLogOptions, before the pod is looked up."""
from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone

import pytest
from kubernetes.client.rest import ApiException

from gputui.ui.demo import BackgroundCluster
from tests.model.objects import plugin_pod

NS, POD, CTR = "kube-system", "plugin-static-gpu-1", "nvidia-device-plugin-ctr"
STAMPED = re.compile(rb"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z (.*)$")


@pytest.fixture(scope="module")
def sim():
    with BackgroundCluster(scenario=[plugin_pod("gpu-1", "static")], run_controllers=False) as cluster:
        hour_ago = datetime.now(timezone.utc) - timedelta(hours=1)
        cluster.call(lambda: cluster.sim.logs.append(NS, POD, CTR, "old 1\nold 2\n", at=hour_ago))
        cluster.call(lambda: cluster.sim.logs.append(NS, POD, CTR, "new 1\nnew 2\n"))
        yield cluster


def test_since_timestamps_tail_and_limit_are_honoured(kubectl, core):
    assert kubectl("logs", "-n", NS, POD) == "old 1\nold 2\nnew 1\nnew 2\n"
    assert kubectl("logs", "-n", NS, POD, "--since=10m") == "new 1\nnew 2\n"
    ten_minutes_ago = (datetime.now(timezone.utc) - timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert kubectl("logs", "-n", NS, POD, f"--since-time={ten_minutes_ago}") == "new 1\nnew 2\n"
    assert kubectl("logs", "-n", NS, POD, "--tail=3") == "old 2\nnew 1\nnew 2\n"
    assert kubectl("logs", "-n", NS, POD, "--tail=3", "--since=10m") == "new 1\nnew 2\n"  # the tail first, then since
    assert kubectl("logs", "-n", NS, POD, "--limit-bytes=8") == "old 1\nol"
    stamped = kubectl("logs", "-n", NS, POD, "--timestamps", "--tail=1").encode().splitlines()
    assert [STAMPED.match(line).group(1) for line in stamped] == [b"new 2"]  # type: ignore[union-attr]
    text = core.read_namespaced_pod_log(POD, NS, since_seconds=600, timestamps=True, _preload_content=False).data
    assert [STAMPED.match(line).group(1) for line in text.splitlines()] == [b"new 1", b"new 2"]  # type: ignore[union-attr]


# query -> (kubectl's words for the Status, made of its causes; the causes)
INVALID = {
    "tailLines=-1": ('The PodLogOptions "{pod}" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0',
                     [{"reason": "FieldValueInvalid", "message": "Invalid value: -1: must be greater than or equal to 0", "field": "tailLines"}]),
    "sinceSeconds=0": ('The PodLogOptions "{pod}" is invalid: sinceSeconds: Invalid value: 0: must be greater than 0',
                       [{"reason": "FieldValueInvalid", "message": "Invalid value: 0: must be greater than 0", "field": "sinceSeconds"}]),
    "sinceSeconds=5&sinceTime=2025-01-01T00:00:00Z": (
        'The PodLogOptions "{pod}" is invalid: : Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified',
        [{"reason": "FieldValueForbidden", "message": "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"}]),
    "limitBytes=0&tailLines=-2": (
        'The PodLogOptions "{pod}" is invalid: \n* tailLines: Invalid value: -2: must be greater than or equal to 0\n'
        '* limitBytes: Invalid value: 0: must be greater than 0',
        [{"reason": "FieldValueInvalid", "message": "Invalid value: -2: must be greater than or equal to 0", "field": "tailLines"},
         {"reason": "FieldValueInvalid", "message": "Invalid value: 0: must be greater than 0", "field": "limitBytes"}]),
}


@pytest.mark.parametrize("query", sorted(INVALID))
def test_invalid_options_are_422_even_for_a_pod_that_is_not_there(kubectl, query):
    words, _ = INVALID[query]
    for pod in (POD, "absent"):
        done = kubectl.run("get", "--raw", f"/api/v1/namespaces/{NS}/pods/{pod}/log?{query}")
        assert (done.returncode, done.stderr.strip()) == (1, words.format(pod=pod))


def test_the_python_client_sees_the_status(core):
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_pod_log(POD, NS, tail_lines=-1, limit_bytes=0)
    status = json.loads(caught.value.body)
    causes = INVALID["tailLines=-1"][1] + INVALID["limitBytes=0&tailLines=-2"][1][1:]
    assert (caught.value.status, status["reason"], status["details"]) == (422, "Invalid", {"name": POD, "kind": "PodLogOptions", "causes": causes})
    assert status["message"] == (f'PodLogOptions "{POD}" is invalid: [tailLines: Invalid value: -1: must be greater than or equal to 0, '
                                 "limitBytes: Invalid value: 0: must be greater than 0]")


def test_previous_reads_the_instance_before(sim, kubectl):
    sim.call(lambda: sim.sim.logs.end(NS, POD, CTR))
    sim.call(lambda: sim.sim.logs.append(NS, POD, CTR, "second run\n"))
    sim.call(sim.sim.store.mutate, "pods", NS, POD, lambda p: p["status"]["containerStatuses"][0].update(
        lastState={"terminated": {"exitCode": 1, "reason": "Error"}}))
    assert kubectl("logs", "-n", NS, POD) == "second run\n"
    assert kubectl("logs", "-n", NS, POD, "--previous", "--tail=1") == "new 2\n"
