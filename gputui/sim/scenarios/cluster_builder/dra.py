"""Dynamic Resource Allocation, as the cluster builder adds it: the NVIDIA DRA driver, its ResourceSlices,
and pods that hold devices through ResourceClaims."""
from __future__ import annotations

from typing import Any

from ... import builders as b
from .base import DAY, GPU_TOLERATION, ClusterBase

Obj = dict[str, Any]

# DRA: the NVIDIA driver's name, and the parts of a DRA node's GPUs.
DRA_DRIVER = "gpu.nvidia.com"
DRA_NAMESPACE = "nvidia-dra-driver-gpu"
DRA_IMAGE = "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.0"
MIG_PROFILE_IDS = {"1g.10gb": 19, "1g.20gb": 15, "2g.20gb": 14, "3g.40gb": 9, "4g.40gb": 5, "7g.80gb": 0}


class DraInstalls(ClusterBase):
    """ClusterBuilder's methods for Dynamic Resource Allocation."""

    # -- dynamic resource allocation -------------------------------------
    def add_dra_driver(self, nodes: list[str]) -> None:
        """The NVIDIA DRA driver: its kubelet plugin on the nodes (label nvidia.com/dra-kubelet-plugin=true),
        and the DeviceClasses its chart installs (gpu.nvidia.com maps to the extended resource nvidia.com/gpu)."""
        labels = {"app.kubernetes.io/name": "nvidia-dra-driver-gpu", "app.kubernetes.io/instance": "nvidia-dra-driver-gpu",
                  "nvidia-dra-driver-gpu-component": "kubelet-plugin"}
        example = None
        for node in nodes:
            example = self.ds_pod("nvidia-dra-driver-gpu-kubelet-plugin", DRA_NAMESPACE, node,
                                  [b.container("gpus", DRA_IMAGE, command=["gpu-kubelet-plugin"], env={"LOG_VERBOSITY": "2"},
                                               mounts=[("plugins-registry", "/var/lib/kubelet/plugins_registry"),
                                                       ("plugins", "/var/lib/kubelet/plugins")])],
                                  labels, host_volumes={"plugins-registry": "/var/lib/kubelet/plugins_registry",
                                                        "plugins": "/var/lib/kubelet/plugins"},
                                  tolerations=[GPU_TOLERATION], age_s=10 * DAY, priority="system-node-critical",
                                  service_account="nvidia-dra-driver-gpu-service-account-kubeletplugin")
        self.daemonset("nvidia-dra-driver-gpu-kubelet-plugin", DRA_NAMESPACE, labels, example,
                       {"nvidia.com/dra-kubelet-plugin": "true"})
        for name, device_type, extended in [("gpu.nvidia.com", "gpu", "nvidia.com/gpu"), ("mig.nvidia.com", "mig", None)]:
            spec: Obj = {"selectors": [{"cel": {"expression":
                         f"device.driver == '{DRA_DRIVER}' && device.attributes['{DRA_DRIVER}'].type == '{device_type}'"}}]}
            if extended:
                spec["extendedResourceName"] = extended
            self.others.append({
                "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": name, "uid": b.stable_uid("DeviceClass", name), "creationTimestamp": b.ago(10 * DAY, self.now),
                             "generation": 1, "labels": {"app.kubernetes.io/managed-by": "Helm"}},
                "spec": spec,
            })

    def add_resource_slice(self, node: str, product: str, memory_mib: int, gpus: int,
                           mig: dict[int, dict[str, int]] | None = None, driver_version: str = "580.95.5") -> Obj:
        """The DRA driver's ResourceSlice for a node: `gpus` full GPUs, except those in `mig`
        (GPU index -> {profile: instances}), published as their MIG devices instead."""
        devices: list[Obj] = []
        common = {"productName": {"string": product}, "brand": {"string": "Nvidia"}, "architecture": {"string": "Hopper"},
                  "driverVersion": {"version": driver_version}, "cudaDriverVersion": {"version": "13.0.0"},
                  "cudaComputeCapability": {"version": "9.0.0"}}
        for index in range(gpus):
            uuid = b.gpu_uuid(node, index)
            if mig and index in mig:
                start = 0
                for profile, count in mig[index].items():
                    for _ in range(count):
                        devices.append({
                            "name": f"gpu-{index}-mig-{profile.replace('.', '')}-{MIG_PROFILE_IDS[profile]}-{start}",
                            "attributes": {"type": {"string": "mig"}, "uuid": {"string": b.mig_uuid(node, index, start)},
                                           "parentUUID": {"string": uuid}, "parentIndex": {"int": index},
                                           "profile": {"string": profile}, **common},
                            "capacity": {"memory": {"value": f"{b.MIG_PROFILES[profile]['memory']}Mi" if profile in b.MIG_PROFILES
                                                    else f"{int(profile.split('.')[1].removesuffix('gb')) * 1024}Mi"}},
                        })
                        start += int(profile.split("g", 1)[0])
                continue
            devices.append({
                "name": f"gpu-{index}",
                "attributes": {"type": {"string": "gpu"}, "uuid": {"string": uuid}, "index": {"int": index}, "minor": {"int": index},
                               "pcieBusID": {"string": f"0000:{0x18 + 0x10 * index:02x}:00.0"}, **common},
                "capacity": {"memory": {"value": f"{memory_mib}Mi"}},
            })
        name = f"{node}-{DRA_DRIVER}-{b.suffix('slice', node)}"
        node_obj = self.nodes[node]
        slice_obj = {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name, "generateName": f"{node}-{DRA_DRIVER}-", "uid": b.stable_uid("ResourceSlice", name),
                         "creationTimestamp": b.ago(10 * DAY, self.now), "generation": 1,
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_obj["metadata"]["uid"],
                                              "controller": True}]},
            "spec": {"driver": DRA_DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices},
        }
        self.others.append(slice_obj)
        return slice_obj

    def add_claimed_pod(self, pod: Obj, node: str, request: str, device_class: str, devices: list[str],
                        selector: str | None = None, age_s: float = 3600) -> Obj:
        """Run the pod on the node holding `devices` through a ResourceClaim made from a claim template,
        as the resource claim controller and scheduler leave it: allocated and reserved for the pod."""
        meta = pod["metadata"]
        template = f"{meta['name'].rsplit('-', 1)[0]}-{request}"
        claim_name = f"{meta['name']}-{request}-{b.suffix('claim', meta['namespace'], meta['name'])}"
        pod["spec"]["resourceClaims"] = [{"name": request, "resourceClaimTemplateName": template}]
        for container in pod["spec"]["containers"]:
            container["resources"]["claims"] = [{"name": request}]
        self.place(pod, node, age_s)
        pod["status"]["resourceClaimStatuses"] = [{"name": request, "resourceClaimName": claim_name}]
        exactly: Obj = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": len(devices)}
        if selector:
            exactly["selectors"] = [{"cel": {"expression": selector}}]
        self.others.append({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": claim_name, "generateName": f"{meta['name']}-{request}-", "namespace": meta["namespace"],
                         "uid": b.stable_uid("ResourceClaim", meta["namespace"], claim_name),
                         "creationTimestamp": meta["creationTimestamp"],
                         "annotations": {"resource.kubernetes.io/pod-claim-name": request},
                         "finalizers": ["resource.kubernetes.io/delete-protection"],
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"],
                                              "controller": True, "blockOwnerDeletion": True}]},
            "spec": {"devices": {"requests": [{"name": request, "exactly": exactly}]}},
            "status": {
                "allocation": {
                    "devices": {"results": [{"request": request, "driver": DRA_DRIVER, "pool": node, "device": d} for d in devices]},
                    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]},
                },
                "reservedFor": [{"resource": "pods", "name": meta["name"], "uid": meta["uid"]}],
            },
        })
        return pod
