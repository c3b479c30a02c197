"""Requests kube-apiserver 1.34 refuses, the simulator refuses with the same 400 and words, seen by the real
kubectl and the official Python client: field labels a resource's conversion function does not take (each kind's
own wording), and label selectors labels.Parse refuses (a trailing comma, a key with two slashes, an upper-case
prefix, a name over 63 characters)."""
from __future__ import annotations

import json
import urllib.parse

import pytest
from kubernetes.client.rest import ApiException

from gputui.sim import builders
from gputui.ui.demo import BackgroundCluster

QUALIFIED = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
             "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end "
             "with an alphanumeric character (e.g. 'example.com', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


@pytest.fixture(scope="module")
def sim():
    with BackgroundCluster(scenario=[builders.node("gpu-1", 0)], run_controllers=False) as cluster:
        yield cluster


FIELD_REFUSALS = {
    "/api/v1/nodes": ("metadata.namespace=default", "field label not supported: metadata.namespace"),
    "/apis/resource.k8s.io/v1/resourceslices": ("spec.pool.name=gpu-1",
                                                "field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: spec.pool.name"),
    "/apis/apps/v1/daemonsets": ("spec.updateStrategy.type=OnDelete",
                                 '"spec.updateStrategy.type" is not a known field selector: only "metadata.name", "metadata.namespace"'),
    "/apis/events.k8s.io/v1/events": ("involvedObject.name=x", "field label not supported: involvedObject.name"),
}
FIELDS_TAKEN = {"/api/v1/nodes": "spec.unschedulable=false", "/apis/resource.k8s.io/v1/resourceslices": "spec.nodeName=gpu-1",
                "/apis/apps/v1/daemonsets": "metadata.namespace=kube-system", "/apis/events.k8s.io/v1/events": "regarding.name=x"}


@pytest.mark.parametrize("path", sorted(FIELD_REFUSALS))
def test_field_labels_a_kind_does_not_take_are_400(kubectl, path):
    selector, words = FIELD_REFUSALS[path]
    done = kubectl.run("get", "--raw", f"{path}?fieldSelector={urllib.parse.quote(selector)}")
    assert (done.returncode, done.stderr.strip()) == (1, f"Error from server (BadRequest): {words}")
    assert json.loads(kubectl("get", "--raw", f"{path}?fieldSelector={urllib.parse.quote(FIELDS_TAKEN[path])}"))["kind"].endswith("List")


LABEL_REFUSALS = {
    "a,": "found '', expected: identifier after ','",
    "a/b/c=x": f'unable to parse requirement: key: Invalid value: "a/b/c": a qualified name {QUALIFIED} with an optional DNS subdomain '
               "prefix and '/' (e.g. 'example.com/MyName')",
    "Example.com/gpu=x": f'unable to parse requirement: key: Invalid value: "Example.com/gpu": prefix part {SUBDOMAIN}',
    "n" * 64: f'unable to parse requirement: key: Invalid value: "{"n" * 64}": name part must be no more than 63 characters',
}


@pytest.mark.parametrize("selector", sorted(LABEL_REFUSALS))
def test_label_selectors_labels_parse_refuses_are_400(kubectl, core, selector):
    done = kubectl.run("get", "--raw", f"/api/v1/pods?labelSelector={urllib.parse.quote(selector)}")
    assert (done.returncode, done.stderr.strip()) == (1, f"Error from server (BadRequest): {LABEL_REFUSALS[selector]}")
    with pytest.raises(ApiException) as caught:
        core.list_pod_for_all_namespaces(label_selector=selector)
    assert (caught.value.status, json.loads(caught.value.body)["message"]) == (400, LABEL_REFUSALS[selector])


def test_label_selectors_kube_apiserver_takes_are_taken(core):
    for selector in ("app=web,tier!=db", "example.com/gpu in (a,b)", "!a", "a>3", "MyName=My_Value", "n" * 63):
        core.list_pod_for_all_namespaces(label_selector=selector)
