"""gputui.kube.dra: ResourceSlices and ResourceClaims → DRA devices per node, DRA-held GPUs."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from gputui.kube.dra import (
    devices_by_node,
    dra_gpus_held,
    extended_resource_classes,
    held_extended_resources,
    parse_claims,
    parse_slices,
    quantity_to_mib,
)

DRA = Path("/work/shared/fixtures/real/dra")


def generated_claim() -> dict:
    """The auto-generated ResourceClaim the fixture shows (commented out) for an nvidia.com/gpu pod."""
    lines = (DRA / "extended-resources-gpu-full-with-generated-claim.yaml").read_text().splitlines()
    start = lines.index("# apiVersion: resource.k8s.io/v1")
    block = []
    for line in lines[start:]:
        if line == "#":
            break
        block.append(line[2:])
    return yaml.safe_load("\n".join(block))


def template_claim(path: str, name: str, namespace: str) -> dict:
    """A ResourceClaim as the control plane makes it from a fixture's ResourceClaimTemplate."""
    [template] = [d for d in yaml.safe_load_all((DRA / path).read_text()) if d and d["kind"] == "ResourceClaimTemplate"]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace}, "spec": copy.deepcopy(template["spec"]["spec"])}


def v1_slice(node: str, devices: list[dict]) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpu.nvidia.com-abcde"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


def gpu(index: int, product: str = "NVIDIA A100-SXM4-40GB", memory: str = "40Gi") -> dict:
    return {"name": f"gpu-{index}",
            "attributes": {"type": {"string": "gpu"}, "index": {"int": index}, "productName": {"string": product},
                           "uuid": {"string": f"GPU-{index:08d}-0000-0000-0000-000000000000"},
                           "driverVersion": {"version": "580.95.5"}, "architecture": {"string": "Ampere"}},
            "capacity": {"memory": {"value": memory}}}


def mig(parent: int, profile: str, n: int, memory: str) -> dict:
    return {"name": f"gpu-{parent}-mig-{profile.replace('.', '')}-{n}",
            "attributes": {"type": {"string": "mig"}, "profile": {"string": profile}, "parentIndex": {"int": parent},
                           "productName": {"string": "NVIDIA A100-SXM4-40GB"}},
            "capacity": {"memory": {"value": memory}}}


GPU_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
             "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}],
                      "extendedResourceName": "nvidia.com/gpu"}}
MIG_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "mig.nvidia.com"},
             "spec": {"selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].type == 'mig'"}}]}}


@pytest.mark.parametrize(("text", "mib"), [("40Gi", 40960), ("4864Mi", 4864), ("42949672960", 40960), ("80G", 76294), ("1.5Gi", 1536), ("junk", None), (None, None)])
def test_quantity_to_mib(text, mib):
    assert quantity_to_mib(text) == mib


def test_v1_slice_devices():
    devices = parse_slices([v1_slice("node-a", [gpu(0), gpu(1, "NVIDIA H100 80GB HBM3", "81559Mi"), mig(2, "1g.5gb", 0, "4864Mi")])])
    assert [(d.node, d.pool, d.name, d.type) for d in devices] == [
        ("node-a", "node-a", "gpu-0", "gpu"), ("node-a", "node-a", "gpu-1", "gpu"), ("node-a", "node-a", "gpu-2-mig-1g5gb-0", "mig")]
    assert (devices[1].product, devices[1].memory_mib) == ("NVIDIA H100 80GB HBM3", 81559)
    assert (devices[2].mig_profile, devices[2].memory_mib, devices[2].uuid) == ("1g.5gb", 4864, None)
    assert devices[0].uuid.startswith("GPU-00000000")


def test_v1beta1_slice_wraps_fields_in_basic_and_qualified_attribute_names_are_read():
    s = v1_slice("node-b", [])
    s["apiVersion"] = "resource.k8s.io/v1beta1"
    device = gpu(0)
    device["attributes"] = {f"gpu.nvidia.com/{k}": v for k, v in device["attributes"].items()}
    s["spec"]["devices"] = [{"name": "gpu-0", "basic": {k: v for k, v in device.items() if k != "name"}}]
    [d] = parse_slices([s])
    assert (d.node, d.type, d.product, d.memory_mib) == ("node-b", "gpu", "NVIDIA A100-SXM4-40GB", 40960)


def test_node_from_slice_node_selector():
    s = v1_slice("x", [gpu(0)])
    del s["spec"]["nodeName"]
    s["spec"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-c"]}]}]}
    assert parse_slices([s])[0].node == "node-c"
    s["spec"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]}
    assert parse_slices([s])[0].node is None


def test_generated_claim_from_fixture_counts_as_one_nvidia_gpu():
    claim = generated_claim()
    [allocation] = parse_claims([claim])
    assert allocation.device == ("gpu.nvidia.com", "worker-node-1", "gpu-0")
    assert allocation.device_class == "gpu.nvidia.com"
    assert allocation.claim.startswith("extended-resource-gpu-full/gpu-full-pod-extended-resources-")
    assert extended_resource_classes([GPU_CLASS, MIG_CLASS]) == {"gpu.nvidia.com": "nvidia.com/gpu"}
    assert dra_gpus_held([v1_slice("worker-node-1", [gpu(0), gpu(1)])], [claim], [GPU_CLASS, MIG_CLASS]) == {"worker-node-1": 1}
    # Without a slice the pool name stands for the node.
    assert dra_gpus_held([], [claim], [GPU_CLASS]) == {"worker-node-1": 1}
    # A class without extendedResourceName does not count.
    assert dra_gpus_held([], [claim], [MIG_CLASS]) == {}


def test_devices_show_their_claim_and_pods():
    claim = generated_claim()
    claim["status"]["reservedFor"] = [{"resource": "pods", "name": "gpu-full-pod", "uid": "u1"}]
    by_node = devices_by_node([v1_slice("worker-node-1", [gpu(1), gpu(0)])], [claim])
    gpu0, gpu1 = by_node["worker-node-1"]
    assert gpu0.name == "gpu-0" and gpu0.claim == claim["metadata"]["namespace"] + "/" + claim["metadata"]["name"]
    assert gpu0.pods == ("extended-resource-gpu-full/gpu-full-pod",)
    assert gpu1.claim is None and gpu1.pods == ()


def test_mig_claim_from_fixture_template_holds_mig_devices_not_gpus():
    claim = template_claim("quickstart-v1-gpu-test4-mig-resourceclaimtemplate.yaml", "pod-abc-mig-devices", "gpu-test4")
    requests = [r["name"] for r in claim["spec"]["devices"]["requests"]]
    devices = [mig(0, "1g.5gb", 0, "4864Mi"), mig(0, "1g.5gb", 1, "4864Mi"), mig(0, "2g.10gb", 0, "9856Mi"), mig(0, "3g.20gb", 0, "19968Mi"), gpu(1)]
    claim["status"] = {
        "allocation": {"devices": {"results": [
            {"request": req, "driver": "gpu.nvidia.com", "pool": "node-m", "device": dev["name"]}
            for req, dev in zip(requests, devices, strict=False)]}},  # the last device (a whole GPU) is requested by none
        "reservedFor": [{"resource": "pods", "name": "pod-abc", "uid": "u2"}],
    }
    allocations = parse_claims([claim])
    assert {a.device_class for a in allocations} == {"mig.nvidia.com"}
    by_node = devices_by_node([v1_slice("node-m", devices)], [claim])
    held = [d for d in by_node["node-m"] if d.claim]
    assert sorted(d.mig_profile for d in held) == ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"]
    assert all(d.pods == ("gpu-test4/pod-abc",) for d in held)
    assert dra_gpus_held([v1_slice("node-m", devices)], [claim], [GPU_CLASS, MIG_CLASS]) == {}


def test_mps_claim_template_from_fixture_counts_one_gpu_when_allocated():
    claim = template_claim("quickstart-v1-gpu-test-mps-opaque-gpuconfig.yaml", "test-pod-shared-gpu", "gpu-test-mps")
    assert parse_claims([claim]) == []  # not allocated yet
    claim["status"] = {"allocation": {"devices": {"results": [{"request": "mps-gpu", "driver": "gpu.nvidia.com", "pool": "node-s", "device": "gpu-3"}]},
                                      "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-s"]}]}]}}}
    [allocation] = parse_claims([claim])
    assert allocation.node == "node-s" and allocation.pods == ()
    assert held_extended_resources([], [claim], [GPU_CLASS]) == {"node-s": {"nvidia.com/gpu": 1}}


def test_first_available_sub_request_and_v1beta1_request_class():
    claim = {"metadata": {"name": "c", "namespace": "ns"},
             "spec": {"devices": {"requests": [
                 {"name": "any", "firstAvailable": [{"name": "big", "deviceClassName": "gpu.nvidia.com"}, {"name": "small", "deviceClassName": "mig.nvidia.com"}]},
                 {"name": "old", "deviceClassName": "gpu.nvidia.com"}]}},
             "status": {"allocation": {"devices": {"results": [
                 {"request": "any/small", "driver": "gpu.nvidia.com", "pool": "n", "device": "gpu-0-mig-1g5gb-0"},
                 {"request": "old", "driver": "gpu.nvidia.com", "pool": "n", "device": "gpu-1"}]}}}}
    assert [a.device_class for a in parse_claims([claim])] == ["mig.nvidia.com", "gpu.nvidia.com"]
    assert dra_gpus_held([], [claim], [GPU_CLASS, MIG_CLASS]) == {"n": 1}
