"""Lists as kube-apiserver 1.34 serves them, seen by the real kubectl and the official Python client: a list with
resourceVersionMatch=Exact (or, with a limit, a resourceVersion and no match) is the state at that revision; NotOlderThan
the latest; every page of a paged list is cut from the first page's revision, which its continue token keeps; a
continue from a compacted revision is 410 with the words of etcd3's store and a new token that goes on at the latest
revision (an inconsistent list); a compacted exact revision is 410; a continue with a resourceVersion is 400."""
from __future__ import annotations

import json
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from gputui.ui.demo import BackgroundCluster

INCONSISTENT = ("The provided continue parameter is too old to display a consistent list result. You can start a new list without "
                "the continue parameter, or use the continue token in this response to retrieve the remainder of the results. "
                "Continuing with the provided token results in an inconsistent list - objects that were created, modified, or "
                "deleted between the time the first chunk was returned and now may show up in the list.")


def config_map(name: str, value: str = "1") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "snap"}, "data": {"v": value}}


@pytest.fixture(scope="module")
def sim():
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "snap"}}
    with BackgroundCluster(scenario=[namespace, *(config_map(n) for n in "abcde")], run_controllers=False) as cluster:
        yield cluster


def write(sim, change):
    """Run change(store) on the simulator's loop."""
    return sim.call(change, sim.sim.store)


def names(listed) -> list[str]:
    return [item.metadata.name for item in listed.items]


def test_exact_is_the_state_then_not_older_than_the_latest(sim, core, kubectl):
    before = core.list_namespaced_config_map("snap").metadata.resource_version
    write(sim, lambda s: (s.delete("configmaps", "snap", "a"), s.create("configmaps", config_map("f")),
                          s.replace("configmaps", config_map("b", "2"))))
    then = core.list_namespaced_config_map("snap", resource_version=before, resource_version_match="Exact")
    assert (names(then), then.metadata.resource_version) == (list("abcde"), before)
    assert then.items[1].data == {"v": "1"}
    raw = json.loads(kubectl("get", "--raw", f"/api/v1/namespaces/snap/configmaps?resourceVersion={before}&resourceVersionMatch=Exact"))
    assert [item["metadata"]["name"] for item in raw["items"]] == list("abcde")
    now = core.list_namespaced_config_map("snap", resource_version=before, resource_version_match="NotOlderThan")
    assert names(now) == list("bcdef") and int(now.metadata.resource_version) > int(before)
    assert now.items[0].data == {"v": "2"}
    # A limit with a resourceVersion and no match: exact too (the legacy paged list).
    legacy = core.list_namespaced_config_map("snap", resource_version=before, limit=10)
    assert (names(legacy), legacy.metadata.resource_version) == (list("abcde"), before)
    write(sim, lambda s: (s.create("configmaps", config_map("a")), s.delete("configmaps", "snap", "f")))


def test_pages_are_cut_from_the_first_pages_revision(sim, core, kubectl):
    first = core.list_namespaced_config_map("snap", limit=2)
    assert names(first) == ["a", "b"] and first.metadata.remaining_item_count == 3
    write(sim, lambda s: (s.delete("configmaps", "snap", "c"), s.create("configmaps", config_map("bb")),
                          s.create("configmaps", config_map("z"))))
    second = core.list_namespaced_config_map("snap", limit=2, _continue=first.metadata._continue)
    assert names(second) == ["c", "d"] and second.metadata.resource_version == first.metadata.resource_version
    assert second.metadata.remaining_item_count == 1
    third = core.list_namespaced_config_map("snap", limit=2, _continue=second.metadata._continue)
    assert names(third) == ["e"] and not third.metadata._continue
    # kubectl pages too (--chunk-size): the whole of the latest revision.
    assert kubectl("get", "configmaps", "-n", "snap", "--chunk-size=2", "-o", "name").split() == [
        f"configmap/{n}" for n in ("a", "b", "bb", "d", "e", "z")]
    write(sim, lambda s: (s.create("configmaps", config_map("c")), s.delete("configmaps", "snap", "bb"), s.delete("configmaps", "snap", "z")))


def test_a_continue_from_a_compacted_revision_is_410_with_a_token_for_the_rest(sim, core):
    first = core.list_namespaced_config_map("snap", limit=2)
    write(sim, lambda s: (s.delete("configmaps", "snap", "d"), s.compact()))
    with pytest.raises(ApiException) as caught:
        core.list_namespaced_config_map("snap", limit=2, _continue=first.metadata._continue)
    status = json.loads(caught.value.body)
    assert (caught.value.status, status["reason"], status["message"]) == (410, "Expired", INCONSISTENT)
    rest = core.list_namespaced_config_map("snap", limit=2, _continue=status["metadata"]["continue"])
    assert names(rest) == ["c", "e"]  # after "b", at the latest revision: "d" is gone
    assert int(rest.metadata.resource_version) > int(first.metadata.resource_version)
    # An exact list from before the compaction is gone as well.
    with pytest.raises(ApiException) as caught:
        core.list_namespaced_config_map("snap", resource_version=first.metadata.resource_version, resource_version_match="Exact")
    assert (caught.value.status, json.loads(caught.value.body)["message"]) == (410, "The resourceVersion for the provided list is too old.")
    write(sim, lambda s: s.create("configmaps", config_map("d")))


def test_a_continue_with_a_resource_version_is_400(sim, core, kubectl):
    first = core.list_namespaced_config_map("snap", limit=2)
    token = urllib.parse.quote(first.metadata._continue)
    done = kubectl.run("get", "--raw", f"/api/v1/namespaces/snap/configmaps?limit=2&continue={token}&resourceVersion=5")
    assert (done.returncode, done.stderr.strip()) == (1, "Error from server (BadRequest): specifying resource version is not allowed when using continue")
    with pytest.raises(ApiException) as caught:
        core.list_namespaced_config_map("snap", limit=2, _continue=first.metadata._continue, resource_version=first.metadata.resource_version,
                                        resource_version_match="Exact")
    assert caught.value.status == 422  # resourceVersionMatch is forbidden when continue is provided


def test_an_exact_list_from_the_future_waits_for_it_then_504(sim, core, kubectl):
    """1.34 serves an exact revision from the watch cache's snapshots, so a revision not reached yet is waited for
    (waitUntilFreshLocked, 3 s) like a NotOlderThan one, then refused with ResourceVersionTooLarge."""
    sim.sim.too_large_wait = 0.3
    try:
        now = int(core.list_namespaced_config_map("snap").metadata.resource_version)
        with pytest.raises(ApiException) as caught:
            core.list_namespaced_config_map("snap", resource_version=str(now + 5), resource_version_match="Exact")
        status = json.loads(caught.value.body)
        assert (caught.value.status, status["reason"], status["message"]) == (504, "Timeout", f"Timeout: Too large resource version: {now + 5}, current: {now}")
        assert status["details"] == {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1}
        done = kubectl.run("get", "--raw", f"/api/v1/namespaces/snap/configmaps?limit=2&resourceVersion={now + 5}")  # the legacy exact list
        assert (done.returncode, done.stderr.strip()) == (1, f"Error from server (Timeout): Timeout: Too large resource version: {now + 5}, current: {now}")
        # Reached while waited for: the state at that revision.
        sim.sim.too_large_wait = 20.0
        with ThreadPoolExecutor(1) as pool:
            listed = pool.submit(core.list_namespaced_config_map, "snap", resource_version=str(now + 1), resource_version_match="Exact")
            while not any(shape.get("resourceVersion") == str(now + 1) for _, _, shape in list(sim.sim.api_counts.recent)):
                time.sleep(0.01)
            write(sim, lambda s: (s.create("configmaps", config_map("f")), s.create("configmaps", config_map("g"))))
            then = listed.result(timeout=10)
        assert (names(then), then.metadata.resource_version) == (list("abcdef"), str(now + 1))
    finally:
        sim.sim.too_large_wait = 3.0
        write(sim, lambda s: (s.delete("configmaps", "snap", "f"), s.delete("configmaps", "snap", "g")))


def test_before_1_34_an_exact_list_from_the_future_is_etcds_error_at_once(make_kubectl):
    """Without cache snapshots the exact list is read from etcd, which refuses a future revision (ErrFutureRev):
    kube-apiserver passes the error on unconverted, a 500 with no reason."""
    with BackgroundCluster(scenario=[], run_controllers=False, server_minor=33) as old:
        old.sim.too_large_wait = 30.0  # not waited for: the answer comes at once
        now = int(old.sim.store.resource_version)
        core = k8s.CoreV1Api(k8s_config.new_client_from_config(str(old.kubeconfig_path)))
        with pytest.raises(ApiException) as caught:
            core.list_namespace(resource_version=str(now + 5), resource_version_match="Exact")
        status = json.loads(caught.value.body)
        assert (caught.value.status, status.get("reason"), status["message"]) == (500, None, "etcdserver: mvcc: required revision is a future revision")
        done = make_kubectl(old.kubeconfig_path).run("get", "--raw", f"/api/v1/namespaces?resourceVersion={now + 5}&resourceVersionMatch=Exact")
        assert (done.returncode, done.stderr.strip()) == (1, "Error from server: etcdserver: mvcc: required revision is a future revision")
