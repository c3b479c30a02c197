"""SelfSubjectAccessReview and SelfSubjectRulesReview answered from the simulator's RBAC as kube-apiserver answers
them: `kubectl auth can-i` (yes / no, exit 0 / 1) and `kubectl auth can-i --list` for a user who may read pods in
one namespace only, with the bootstrap policy every cluster has (reviews of oneself, discovery); the official Python
client sees RBAC's reason and the 422 for a review that asks about nothing."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from gputui.sim import builders
from gputui.ui.demo import BackgroundCluster

RBAC = "rbac.authorization.k8s.io/v1"
ALICE = "alice-t0ken"
POLICY = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}},
    {"apiVersion": RBAC, "kind": "Role", "metadata": {"name": "pod-reader", "namespace": "ml"},
     "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]}]},
    {"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": "alice-reads", "namespace": "ml"},
     "subjects": [{"kind": "User", "name": "alice"}], "roleRef": {"kind": "Role", "name": "pod-reader"}},
    {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "node-viewer"},
     "rules": [{"apiGroups": [""], "resources": ["nodes"], "resourceNames": ["gpu-1"], "verbs": ["get"]}]},
    {"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": "alice-nodes"},
     "subjects": [{"kind": "User", "name": "alice"}], "roleRef": {"kind": "ClusterRole", "name": "node-viewer"}},
]


@pytest.fixture(scope="module")
def sim():
    with BackgroundCluster(scenario=[builders.node("gpu-1", 0), *POLICY], tokens={ALICE: "alice"}, run_controllers=False) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def alice_config(sim, tmp_path_factory) -> Path:
    doc = yaml.safe_load(sim.kubeconfig_path.read_text())
    doc["users"][0]["user"] = {"token": ALICE}
    doc["contexts"][0]["context"]["namespace"] = "ml"
    path = tmp_path_factory.mktemp("alice") / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="module")
def alice(alice_config, make_kubectl):
    return make_kubectl(alice_config)


@pytest.fixture(scope="module")
def authz(alice_config):
    return k8s.AuthorizationV1Api(k8s_config.new_client_from_config(str(alice_config)))


CAN_I = [
    (("list", "pods"), True), (("list", "pods", "-n", "default"), False), (("delete", "pods"), False),
    (("get", "pods", "--subresource=log"), True), (("list", "pods", "-A"), False), (("get", "nodes/gpu-1"), True),
    (("get", "nodes/gpu-2"), False), (("list", "nodes"), False), (("get", "/version"), True), (("get", "/api/v1"), True),
    (("get", "/metrics"), False), (("create", "selfsubjectaccessreviews"), True),
]


@pytest.mark.parametrize(("args", "allowed"), CAN_I, ids=[" ".join(a) for a, _ in CAN_I])
def test_kubectl_auth_can_i(alice, args, allowed):
    done = alice.run("auth", "can-i", *args)
    assert (done.returncode, done.stdout.strip()) == ((0, "yes") if allowed else (1, "no")), done.stderr


def test_kubectl_auth_can_i_list(alice):
    rows = [line.split() for line in alice("auth", "can-i", "--list").splitlines()]
    assert rows[0] == ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]
    assert ["pods", "[]", "[]", "[get", "list", "watch]"] in rows
    assert ["pods/log", "[]", "[]", "[get", "list", "watch]"] in rows
    assert ["nodes", "[]", "[gpu-1]", "[get]"] in rows
    assert ["selfsubjectaccessreviews.authorization.k8s.io", "[]", "[]", "[create]"] in rows
    assert ["[/version]", "[]", "[get]"] in rows and ["[/apis/*]", "[]", "[get]"] in rows
    elsewhere = [line.split()[0] for line in alice("auth", "can-i", "--list", "-n", "default").splitlines()[1:]]
    assert "pods" not in elsewhere and "nodes" in elsewhere  # the RoleBinding is ml's only


def test_the_python_client_sees_rbacs_reason(authz):
    review = authz.create_self_subject_access_review(k8s.V1SelfSubjectAccessReview(spec=k8s.V1SelfSubjectAccessReviewSpec(
        resource_attributes=k8s.V1ResourceAttributes(namespace="ml", verb="watch", resource="pods"))))
    assert (review.status.allowed, review.status.reason) == (
        True, 'RBAC: allowed by RoleBinding "alice-reads/ml" of Role "pod-reader" to User "alice"')
    denied = authz.create_self_subject_access_review(k8s.V1SelfSubjectAccessReview(spec=k8s.V1SelfSubjectAccessReviewSpec(
        resource_attributes=k8s.V1ResourceAttributes(namespace="ml", verb="delete", resource="pods"))))
    assert (denied.status.allowed, denied.status.reason, denied.status.denied) == (False, None, None)
    rules = authz.create_self_subject_rules_review(k8s.V1SelfSubjectRulesReview(spec=k8s.V1SelfSubjectRulesReviewSpec(namespace="ml")))
    assert rules.status.incomplete is False
    assert {"verbs": ["get", "list", "watch"], "api_groups": [""], "resources": ["pods", "pods/log"], "resource_names": None} in [
        r.to_dict() for r in rules.status.resource_rules]
    with pytest.raises(ApiException) as caught:
        authz.create_self_subject_access_review(k8s.V1SelfSubjectAccessReview(spec=k8s.V1SelfSubjectAccessReviewSpec()))
    status = json.loads(caught.value.body)
    assert (caught.value.status, status["message"]) == (422, 'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: '
                                                              'spec.resourceAttributes: Invalid value: "null": exactly one of '
                                                              "nonResourceAttributes or resourceAttributes must be specified")
    with pytest.raises(ApiException) as caught:
        authz.create_self_subject_rules_review(k8s.V1SelfSubjectRulesReview(spec=k8s.V1SelfSubjectRulesReviewSpec(namespace="")))
    assert (caught.value.status, json.loads(caught.value.body)["message"]) == (400, "no namespace on request")
