"""Writes tests/dumps/must-gather/: the files NVIDIA's must-gather script (gpu-operator's
hack/must-gather.sh) writes, taken with the real kubectl from a small simulated cluster (one GPU
node with the GPU Operator, nothing running: the objects as built), and `cluster/`, what a
support engineer asks for besides (the script collects no node, CRD, event or Service YAML).

    python3 tests/dumps/make_must_gather.py      # rewrites the directory

The layout follows the script: cluster_policy.yaml, gpu_operator_pod.yaml (the operator pod,
also in gpu_operand_pods.yaml), gpu_operand_pods.yaml, gpu_operand_ds.yaml, and text it writes
beside them (*.status, *.descr, *.labels, *.log, version).
"""
from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from gputui.sim import builders as b
from gputui.sim.scenarios.cluster_builder import OPERATOR_NS, ClusterBuilder
from gputui.ui.demo import BackgroundCluster

OUT = Path(__file__).resolve().parent / "must-gather"
NOW = datetime(2025, 6, 2, 9, 30, tzinfo=timezone.utc)


def objects() -> list[dict]:
    c = ClusterBuilder(now=NOW)
    c.add_node("cpu-1", cpu=16, memory_gib=64, labels={"node-role.kubernetes.io/control-plane": ""})
    c.add_node("gpu-1", cpu=96, memory_gib=768, labels={"node-pool": "gpu", **b.gfd_labels("NVIDIA-H100-80GB-HBM3", 8)},
               extra_resources={"nvidia.com/gpu": (8, 8)})
    c.add_operator(["gpu-1"], ["cpu-1", "gpu-1"], "cpu-1", ["gpu-1"])
    c.add_cluster_policy()
    c.add_dcgm_service()
    train = b.pod("train-0", "ml", [b.container("main", "nvcr.io/nvidia/pytorch:24.03-py3", limits={"nvidia.com/gpu": 4})],
                  age_s=3600, now=NOW)
    c.place(train, "gpu-1", 3600)
    extra = [
        b.custom_resource_definition("nvidia.com", "v1alpha1", "nvidiadrivers", "NVIDIADriver", namespaced=False,
                                     printer_columns=[("Status", "string", ".status.state"), ("Age", "date", ".metadata.creationTimestamp")],
                                     now=NOW),
        {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": {"name": "default", "uid": b.stable_uid("nvd", "default"),
         "creationTimestamp": "2025-05-01T09:30:00Z"}, "spec": {"driverType": "gpu", "version": "550.54.15"},
         "status": {"state": "ready", "conditions": [{"type": "Ready", "status": "True", "reason": "Reconciled", "message": "",
                                                      "lastTransitionTime": "2025-05-01T09:35:00Z"}]}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "time-slicing-config", "namespace": OPERATOR_NS,
         "uid": b.stable_uid("cm", "time-slicing-config"), "creationTimestamp": "2025-05-01T09:30:00Z"},
         "data": {"any": "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"}},
    ]
    return c.objects(["default", "kube-system", OPERATOR_NS, "ml"]) + extra


def main() -> int:
    with BackgroundCluster(scenario=objects(), run_controllers=False) as cluster:
        def kubectl(*args: str, to: str | None = None) -> str:
            done = subprocess.run(["kubectl", "--kubeconfig", str(cluster.kubeconfig_path), *args], capture_output=True, text=True, check=True)
            if to is not None:
                (OUT / to).parent.mkdir(parents=True, exist_ok=True)
                (OUT / to).write_text(done.stdout)
            return done.stdout

        operator = kubectl("get", "pods", "-lapp=gpu-operator", "-A", "-oname").strip()
        kubectl("get", "-oyaml", kubectl("get", "clusterpolicies.nvidia.com", "-oname").strip(), to="cluster_policy.yaml")
        kubectl("get", operator, "-owide", "-n", OPERATOR_NS, to="gpu_operator_pod.status")
        kubectl("get", operator, "-oyaml", "-n", OPERATOR_NS, to="gpu_operator_pod.yaml")
        kubectl("get", "pods", "-owide", "-n", OPERATOR_NS, to="gpu_operand_pods.status")
        kubectl("get", "pods", "-oyaml", "-n", OPERATOR_NS, to="gpu_operand_pods.yaml")
        kubectl("get", "ds", "-n", OPERATOR_NS, to="gpu_operand_ds.status")
        kubectl("get", "ds", "-oyaml", "-n", OPERATOR_NS, to="gpu_operand_ds.yaml")
        kubectl("get", "nodes", "-l", "nvidia.com/gpu.present=true", "-o", "wide", to="gpu_nodes.status")
        (OUT / "gpu_nodes.labels").write_text("gpu-1\n" + "".join(f"- {k}={v}\n" for k, v in sorted(
            b.gfd_labels("NVIDIA-H100-80GB-HBM3", 8).items())) + "\n")
        (OUT / "version").write_text("NVIDIA GPU Operator\nv24.3.0\n")
        (OUT / "must-gather.log").write_text(f"Using ARTIFACT_DIR={OUT.name}\n#\n# ClusterPolicy\n#\nGet {operator}\n#\n# All done!\n")
        kubectl("get", "nodes", "-oyaml", to="cluster/nodes.yaml")
        kubectl("get", "crd,nvidiadrivers", "-oyaml", to="cluster/crds.yaml")
        kubectl("get", "pods,services,configmaps", "-n", "ml", "-oyaml", to="cluster/workloads.yaml")
        kubectl("get", "services,configmaps", "-n", OPERATOR_NS, "-oyaml", to="cluster/operator-services.yaml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
