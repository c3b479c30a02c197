"""The simulator's admission plugins, seen by the real kubectl and the official Python client: the status code,
reason, message and details kube-apiserver 1.34 answers with (NamespaceLifecycle, LimitRanger, PodSecurity,
ResourceQuota, in its order), on the "restricted" scenario (gputui/sim/scenarios/restricted.py)."""
from __future__ import annotations

import json
import time

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from gputui.ui.demo import BackgroundCluster

RESTRICTED_POD_SPEC = {
    "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "60"],
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
}
VIOLATIONS = (
    'allowPrivilegeEscalation != false (container "bad" must set securityContext.allowPrivilegeEscalation=false), '
    'unrestricted capabilities (container "bad" must set securityContext.capabilities.drop=["ALL"]), '
    'runAsNonRoot != true (pod or container "bad" must set securityContext.runAsNonRoot=true), '
    'seccompProfile (pod or container "bad" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'
)


@pytest.fixture(scope="module")
def sim():
    with BackgroundCluster(scenario="restricted", speed=50) as cluster:
        yield cluster


def pod(name: str, namespace: str, spec: dict | None = None, **resources: dict) -> dict:
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": json.loads(json.dumps(spec or RESTRICTED_POD_SPEC))}
    if resources:
        body["spec"]["containers"][0]["resources"] = resources
    return body


def refused(call, *args) -> tuple[int, str, dict]:
    """(status, reason, body) of a call the server refuses."""
    with pytest.raises(ApiException) as caught:
        call(*args)
    return caught.value.status, caught.value.reason, json.loads(caught.value.body)


def create(kubectl, body: dict):
    return kubectl.run("create", "--validate=false", "-f", "-", input=json.dumps(body))


# -- NamespaceLifecycle -------------------------------------------------------------------
def test_a_namespace_that_does_not_exist_is_not_found(kubectl, core):
    done = kubectl.run("run", "x", "-n", "no-such-namespace", "--image=busybox", "--restart=Never")
    assert (done.returncode, done.stderr.strip()) == (1, 'Error from server (NotFound): namespaces "no-such-namespace" not found')
    status, reason, body = refused(core.create_namespaced_pod, "no-such-namespace", pod("x", "no-such-namespace"))
    assert (status, reason, body["reason"], body["code"]) == (404, "Not Found", "NotFound", 404)
    assert body["details"] == {"name": "no-such-namespace", "kind": "namespaces"}


def test_a_namespace_being_deleted_refuses_new_content_with_its_cause(sim, kubectl, core):
    done = kubectl.run("run", "x", "-n", "retired", "--image=busybox", "--restart=Never")
    assert (done.returncode, done.stderr.strip()) == (1, 'Error from server (Forbidden): pods "x" is forbidden: '
                                                         "unable to create new content in namespace retired because it is being terminated")
    status, _, body = refused(core.create_namespaced_pod, "retired", pod("x", "retired"))
    assert (status, body["reason"]) == (403, "Forbidden")
    assert body["details"] == {"name": "x", "kind": "pods", "causes": [
        {"reason": "NamespaceTerminating", "message": "namespace retired is being terminated", "field": "metadata.namespace"}]}
    claims = k8s.ResourceV1Api(k8s_config.new_client_from_config(str(sim.kubeconfig_path)))
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}
    status, _, body = refused(claims.create_namespaced_resource_claim, "retired", claim)
    assert (status, body["message"]) == (403, 'resourceclaims.resource.k8s.io "c" is forbidden: unable to create new content in '
                                              "namespace retired because it is being terminated")
    status, _, body = refused(claims.create_namespaced_resource_claim, "no-such-namespace", claim)
    assert (status, body["message"]) == (404, 'namespaces "no-such-namespace" not found')


def test_the_namespace_is_checked_before_the_object_is_validated(kubectl):
    invalid = pod("Bad_Name", "no-such-namespace")
    assert create(kubectl, invalid).stderr.strip() == 'Error from server (NotFound): error when creating "STDIN": namespaces "no-such-namespace" not found'


# -- LimitRanger --------------------------------------------------------------------------------
def test_a_limit_range_fills_in_requests_and_limits_and_says_so(kubectl):
    assert create(kubectl, pod("defaulted", "ml-team")).returncode == 0
    try:
        got = json.loads(kubectl("get", "pod", "defaulted", "-n", "ml-team", "-o", "json"))
    finally:
        kubectl("delete", "pod", "defaulted", "-n", "ml-team", "--grace-period=0", "--force")
    assert got["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "500m", "memory": "512Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}}
    assert got["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == \
        "LimitRanger plugin set: cpu, memory request for container c; cpu, memory limit for container c"
    assert got["status"]["qosClass"] == "Burstable"


def test_a_limit_range_maximum_is_enforced(kubectl):
    done = create(kubectl, pod("big", "ml-team", limits={"cpu": "20", "memory": "1Gi"}))
    assert done.stderr.strip() == ('Error from server (Forbidden): error when creating "STDIN": pods "big" is forbidden: '
                                   "maximum cpu usage per Container is 16, but limit is 20")


def test_a_request_above_its_limit_is_invalid(kubectl):
    done = create(kubectl, pod("upside-down", "ml-team", requests={"cpu": "2"}, limits={"cpu": "1"}))
    assert done.stderr.strip() == ('The Pod "upside-down" is invalid: spec.containers[0].resources.requests: '
                                   'Invalid value: "2": must be less than or equal to cpu limit of 1')
    # the LimitRange's default limit (500m) is below the request: invalid the same way
    done = create(kubectl, pod("over-default", "ml-team", requests={"cpu": "1"}))
    assert "Invalid value: \"1\": must be less than or equal to cpu limit of 500m" in done.stderr


# -- PodSecurity -----------------------------------------------------------------------------------
def test_pod_security_enforce_names_every_violation(kubectl, core):
    done = kubectl.run("run", "bad", "-n", "ml-team", "--image=busybox", "--restart=Never")
    assert (done.returncode, done.stderr.strip()) == (
        1, f'Error from server (Forbidden): pods "bad" is forbidden: violates PodSecurity "restricted:latest": {VIOLATIONS}')
    body = pod("bad", "ml-team", {"containers": [{"name": "bad", "image": "busybox"}]})
    status, reason, answer = refused(core.create_namespaced_pod, "ml-team", body)
    assert (status, reason, answer["reason"], answer["details"]) == (403, "Forbidden", "Forbidden", {"name": "bad", "kind": "pods"})


def test_pod_security_baseline_and_the_warning_kubectl_prints(kubectl):
    assert create(kubectl, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "psa-test"}}).returncode == 0  # not `create
    # namespace`: it speaks protobuf
    kubectl("label", "namespace", "psa-test", "pod-security.kubernetes.io/enforce=baseline", "pod-security.kubernetes.io/warn=restricted")
    privileged = pod("bad", "psa-test", {"hostNetwork": True, "containers": [
        {"name": "bad", "image": "busybox", "securityContext": {"privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}}}]})
    done = create(kubectl, privileged)
    assert done.stderr.strip() == (
        'Error from server (Forbidden): error when creating "STDIN": pods "bad" is forbidden: violates PodSecurity "baseline:latest": '
        'host namespaces (hostNetwork=true), privileged (container "bad" must not set securityContext.privileged=true), '
        'non-default capabilities (container "bad" must not include "SYS_ADMIN" in securityContext.capabilities.add)')
    done = kubectl.run("run", "bad", "-n", "psa-test", "--image=busybox", "--restart=Never")
    assert done.returncode == 0 and done.stdout.strip() == "pod/bad created"
    assert done.stderr.strip() == f'Warning: would violate PodSecurity "restricted:latest": {VIOLATIONS}'
    compliant = kubectl.run("create", "--validate=false", "-f", "-", input=json.dumps(pod("good", "psa-test")))
    assert compliant.returncode == 0 and compliant.stderr == ""


# -- ResourceQuota ------------------------------------------------------------------------------
def test_a_quota_on_cpu_and_memory_makes_every_container_name_them(kubectl):
    assert create(kubectl, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "quota-test"}}).returncode == 0
    assert create(kubectl, {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "compute", "namespace": "quota-test"},
                            "spec": {"hard": {"limits.cpu": "2", "limits.memory": "2Gi", "requests.cpu": "2"}}}).returncode == 0
    done = kubectl.run("run", "p", "-n", "quota-test", "--image=busybox", "--restart=Never")
    assert done.stderr.strip() == ('Error from server (Forbidden): pods "p" is forbidden: failed quota: compute: '
                                   "must specify limits.cpu for: p; limits.memory for: p; requests.cpu for: p")
    named = create(kubectl, pod("p", "quota-test", limits={"cpu": "1500m", "memory": "1Gi"}))
    assert named.returncode == 0, named.stderr
    over = create(kubectl, pod("q", "quota-test", limits={"cpu": "1", "memory": "1Gi"}))
    assert over.stderr.strip() == ('Error from server (Forbidden): error when creating "STDIN": pods "q" is forbidden: exceeded quota: '
                                   "compute, requested: limits.cpu=1,requests.cpu=1, used: limits.cpu=1500m,requests.cpu=1500m, "
                                   "limited: limits.cpu=2,requests.cpu=2")


def test_a_quota_is_validated_as_kube_apiserver_validates_it(kubectl):
    def quota(hard: dict) -> str:
        body = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "ml-team"}, "spec": {"hard": hard}}
        return create(kubectl, body).stderr.strip()

    assert quota({"gpu": "1"}) == 'The ResourceQuota "q" is invalid: spec.hard[gpu]: Invalid value: "gpu": must be a standard resource for quota'
    assert quota({"cpu": "lots"}) == (
        'Error from server (BadRequest): error when creating "STDIN": ResourceQuota in version "v1" cannot be handled as a '
        "ResourceQuota: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    assert kubectl.run("get", "quota", "q", "-n", "ml-team").returncode == 1  # neither was created


def test_a_gpu_quota_exceeded_says_requested_used_and_limited(kubectl, core):
    body = pod("gpu", "ml-small", limits={"nvidia.com/gpu": "1"})
    done = create(kubectl, body)
    expected = ('pods "gpu" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=1, '
                "used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2")
    assert done.stderr.strip() == f'Error from server (Forbidden): error when creating "STDIN": {expected}'
    status, _, answer = refused(core.create_namespaced_pod, "ml-small", body)
    assert (status, answer["reason"], answer["message"], answer["details"]) == (403, "Forbidden", expected, {"name": "gpu", "kind": "pods"})


def test_pod_security_comes_before_the_quota(kubectl):
    body = pod("bad", "ml-small", {"containers": [{"name": "bad", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]})
    assert f'violates PodSecurity "restricted:latest": {VIOLATIONS}' in create(kubectl, body).stderr


def test_quota_status_counts_what_is_admitted_and_what_goes(kubectl):
    def used() -> dict:
        return json.loads(kubectl("get", "quota", "gpus", "-n", "ml-team", "-o", "jsonpath={.status}"))

    assert used() == {"hard": {"requests.nvidia.com/gpu": "4"}, "used": {"requests.nvidia.com/gpu": "2"}}
    assert create(kubectl, pod("one-gpu", "ml-team", limits={"nvidia.com/gpu": "1"})).returncode == 0
    assert used()["used"] == {"requests.nvidia.com/gpu": "3"}  # charged as it was admitted
    kubectl("delete", "pod", "one-gpu", "-n", "ml-team", "--grace-period=0", "--force")
    deadline = time.monotonic() + 10
    while used()["used"] != {"requests.nvidia.com/gpu": "2"} and time.monotonic() < deadline:
        time.sleep(0.05)
    assert used()["used"] == {"requests.nvidia.com/gpu": "2"}
    table = kubectl("describe", "quota", "compute", "-n", "ml-team")
    assert "requests.memory  32Gi  64Gi" in table


# -- deleting a namespace -----------------------------------------------------------------------
def test_deleting_a_namespace_makes_it_terminating_until_its_content_is_gone(kubectl):
    immortal = kubectl.run("delete", "namespace", "default")
    assert immortal.stderr.strip() == 'Error from server (Forbidden): namespaces "default" is forbidden: this namespace may not be deleted'
    assert create(kubectl, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}}).returncode == 0
    held = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "held", "namespace": "doomed", "finalizers": ["example.com/hold"]},
            "spec": {"limits": [{"type": "Container", "default": {"cpu": "200m"}}]}}
    assert create(kubectl, held).returncode == 0
    running = pod("worker", "doomed", {**RESTRICTED_POD_SPEC, "nodeName": "cpu-1"})
    assert create(kubectl, running).returncode == 0
    assert kubectl("delete", "namespace", "doomed", "--wait=false").strip() == 'namespace "doomed" deleted'
    assert kubectl("get", "namespace", "doomed", "-o", "jsonpath={.status.phase}") == "Terminating"
    refused_run = kubectl.run("run", "late", "-n", "doomed", "--image=busybox", "--restart=Never")
    assert refused_run.stderr.strip() == ('Error from server (Forbidden): pods "late" is forbidden: '
                                          "unable to create new content in namespace doomed because it is being terminated")

    def left() -> str:
        return kubectl("get", "pods,limitranges", "-n", "doomed", "-o", "name")

    deadline = time.monotonic() + 15
    while left().strip() != "limitrange/held" and time.monotonic() < deadline:  # the worker is stopped and goes
        time.sleep(0.05)
    assert left().strip() == "limitrange/held"
    assert kubectl("get", "namespace", "doomed", "-o", "jsonpath={.status.phase}") == "Terminating"  # the finalizer holds it
    kubectl("patch", "limitrange", "held", "-n", "doomed", "--type=json", "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')
    deadline = time.monotonic() + 10
    while kubectl.run("get", "namespace", "doomed").returncode == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert kubectl.run("get", "namespace", "doomed").stderr.strip() == 'Error from server (NotFound): namespaces "doomed" not found'
