"""Pending pods on claims gputui did not explain (issues 22 and 24): a request with `firstAvailable` subrequests
(DRAPrioritizedList) or `allocationMode: All`. Model-level, from objects built here: the simulator's scheduler serves
neither mode as kube-scheduler's allocator does (structured/internal/stable/allocator_stable.go)."""
from __future__ import annotations

import io
from typing import Any

from gputui.kube import dra, fit, gpu
from gputui.kube.records import node_from, pod_from
from gputui.report.formats import write_tsv
from gputui.sim import builders as b
from gputui.sim.scenarios.cluster_builder import ClusterBuilder

PRODUCT = "NVIDIA H100 80GB HBM3"
B200 = {"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'"}}


def cluster(free_node: bool = False) -> tuple[dict, list, dict]:
    """dra-1: 4 GPUs, 2 held by serve-0; with free_node, dra-2: 2 GPUs, none held. (classes, devices, nodes)"""
    c = ClusterBuilder()
    names = ["dra-1", "dra-2"] if free_node else ["dra-1"]
    for name in names:
        c.add_node(name, cpu=64, memory_gib=512, labels={"feature.node.kubernetes.io/pci-10de.present": "true"})
    c.add_dra_driver(names)
    c.add_resource_slice("dra-1", PRODUCT, 81559, 4)
    if free_node:
        c.add_resource_slice("dra-2", PRODUCT, 81559, 2)
    serve = b.pod("serve-0", "default", [b.container("vllm", "vllm/vllm-openai:v0.10.1")], age_s=3600, now=c.now)
    c.add_claimed_pod(serve, "dra-1", "gpus", "gpu.nvidia.com", ["gpu-0", "gpu-1"])
    objects = c.objects(["default"])
    of = {kind: [o for o in objects if o.get("kind") == kind] for kind in ("DeviceClass", "ResourceSlice", "ResourceClaim", "Node")}
    classes = {d.name: d for d in map(dra.device_class_from, of["DeviceClass"])}
    devices = [d for held in dra.devices_by_node(of["ResourceSlice"], of["ResourceClaim"]).values() for d in held]
    return classes, devices, {n["metadata"]["name"]: node_from(n) for n in of["Node"]}


def claim(name: str, request: dict[str, Any]) -> dra.Claim:
    return dra.claim_from({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": "ml"},
                           "spec": {"devices": {"requests": [{"name": "gpus", **request}]}}})


ALL = {"exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}}
FIRST = {"firstAvailable": [{"name": "eight", "deviceClassName": "gpu.nvidia.com", "count": 8},
                            {"name": "b200", "deviceClassName": "gpu.nvidia.com", "selectors": [B200]}]}


def test_all_wants_every_matching_device_of_the_node_free():
    line = fit.claim_line([claim("all", ALL)], *cluster())
    assert line == ("claim ml/all request gpus: needs all matching devices of its node, each free (allocationMode All); "
                    "node dra-1: 2 of 4 devices free matching DeviceClass gpu.nvidia.com (2 allocated)")  # 2 free are not all
    assert fit.claim_line([claim("all", ALL)], *cluster(free_node=True)) is None  # dra-2's two are all free: it could be served


def test_first_available_says_per_subrequest_in_order_what_is_missing():
    line = fit.claim_line([claim("first", FIRST)], *cluster(free_node=True))
    assert line == ("claim ml/first request gpus: firstAvailable, none of its subrequests can be served now: "
                    "1. eight (8 gpu.nvidia.com): needs 8 devices of one pool; "
                    "pool dra-1/gpu.nvidia.com: 2 of 4 devices free matching DeviceClass gpu.nvidia.com (2 allocated); "
                    "pool dra-2/gpu.nvidia.com: 2 of 2 devices free matching DeviceClass gpu.nvidia.com · "
                    "2. b200 (1 gpu.nvidia.com): no published device matches DeviceClass gpu.nvidia.com and the claim's selectors")
    fallback = {"firstAvailable": [*FIRST["firstAvailable"], {"name": "two", "deviceClassName": "gpu.nvidia.com", "count": 2}]}
    assert fit.claim_line([claim("first", fallback)], *cluster()) is None  # its third can be served: nothing to say


def test_a_pod_waiting_only_on_all_or_first_available_is_a_gpu_pod_with_what_it_asks():
    claims = [claim("all", ALL), claim("first", FIRST),
              claim("nic", {"exactly": {"deviceClassName": "rdma.example.com", "allocationMode": "All"}})]
    counted, asks = dra.waiting_asks(claims, lambda name: name.endswith(".nvidia.com"))
    assert counted == [] and asks == ["all matching gpu.nvidia.com", "8 gpu.nvidia.com or 1 gpu.nvidia.com"]  # no count made up
    pod = pod_from(b.pod("wait-0", "ml", [b.container("c", "busybox")], age_s=60, now=0.0))
    entry = gpu.gpu_pod(pod, gpu.GpuResources(), claimed=counted, asks=asks)
    assert entry is not None and entry.pod.node is None and entry.gpu == {} and entry.asks == tuple(asks)
    assert gpu.gpu_pod(pod, gpu.GpuResources(), claimed=[], asks=[]) is None


def test_what_such_a_pod_asks_reads_in_the_pods_pane_and_the_report():
    from gputui.ui.panes import gpus_cell  # the pane's cell, a pure renderer

    pod = pod_from(b.pod("wait-0", "ml", [b.container("c", "busybox")], age_s=60, now=0.0))
    entry = gpu.gpu_pod(pod, gpu.GpuResources(), asks=["all matching gpu.nvidia.com", "8 gpu.nvidia.com or 1 gpu.nvidia.com"])
    assert entry is not None and gpus_cell(entry).plain == "all matching gpu.nvidia.com + 8 gpu.nvidia.com or 1 gpu.nvidia.com"
    out = io.StringIO()
    row = {"namespace": "ml", "name": "wait-0", "node": None, "phase": "Pending", "gpu": {}, "reason": None, "claims": [],
           "asks": list(entry.asks)}
    write_tsv({"nodes": [], "pods": [row]}, out)
    assert out.getvalue().splitlines()[-1].split("\t")[5] == "all matching gpu.nvidia.com,8 gpu.nvidia.com or 1 gpu.nvidia.com"
