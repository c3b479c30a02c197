"""A generated cluster of realistic objects, for benchmarks (`gputui sim --nodes N --pods M`).

Pods are 3 to 8 KB of JSON each (managedFields, env, probes, volumes, full
status) and about a fifth of them ask for GPUs; two nodes in five are 8-GPU
nodes with GPU Feature Discovery labels and a device-plugin pod. GPU pods
run while their node has GPUs left; the rest are finished jobs that still
declare GPUs, and a few wait unscheduled.

Built from a few templates: each pod gets its own metadata, spec and status
dicts but shares the unchanging parts (containers, volumes, managedFields)
with its template, so 150,000 pods stay affordable in memory and 20,000 are
generated in about a second.
"""
from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any

from .. import builders as b
from ..builders import namespace

Obj = dict[str, Any]

GPUS_PER_NODE = 8
PENDING_GPU_PODS = 5


def _managed_fields(manager: str, operation: str, when: str, fields: Obj, subresource: str | None = None) -> Obj:
    entry: Obj = {"apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": fields, "manager": manager,
                  "operation": operation, "time": when}
    if subresource:
        entry["subresource"] = subresource
    return entry


def _spec_fields(pod: Obj) -> Obj:
    """A fieldsV1 tree for the pod's spec, shaped like kube-controller-manager's."""
    containers: Obj = {}
    for c in pod["spec"]["containers"]:
        containers[f'k:{{"name":"{c["name"]}"}}'] = {
            ".": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {},
            "f:env": {f'k:{{"name":"{e["name"]}"}}': {".": {}, "f:name": {}, "f:value": {}} for e in c.get("env", [])},
            "f:resources": {"f:limits": {f"f:{k}": {} for k in (c["resources"].get("limits") or {})},
                            "f:requests": {f"f:{k}": {} for k in (c["resources"].get("requests") or {})}},
            "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {},
            "f:volumeMounts": {f'k:{{"mountPath":"{m["mountPath"]}"}}': {".": {}, "f:mountPath": {}, "f:name": {}}
                               for m in c.get("volumeMounts", [])},
        }
    return {
        "f:metadata": {"f:generateName": {}, "f:labels": {f"f:{k}": {} for k in pod["metadata"]["labels"]},
                       "f:ownerReferences": {".": {}, f'k:{{"uid":"{pod["metadata"]["ownerReferences"][0]["uid"]}"}}': {}}},
        "f:spec": {"f:containers": containers, "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {},
                   "f:schedulerName": {}, "f:securityContext": {}, "f:terminationGracePeriodSeconds": {},
                   "f:volumes": {f'k:{{"name":"{v["name"]}"}}': {".": {}, "f:name": {}} for v in pod["spec"]["volumes"]}},
    }


_STATUS_FIELDS = {"f:status": {"f:conditions": {f'k:{{"type":"{t}"}}': {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {},
                                                                        "f:status": {}, "f:type": {}}
                                                for t in ("ContainersReady", "Initialized", "PodReadyToStartContainers", "Ready")},
                               "f:containerStatuses": {}, "f:hostIP": {}, "f:hostIPs": {}, "f:phase": {}, "f:podIP": {},
                               "f:podIPs": {".": {}}, "f:startTime": {}}}


class _Template:
    """One kind of pod: built once, instantiated many times with fresh identity and placement."""

    def __init__(self, kind: str, pod: Obj, gpu: dict[str, int]) -> None:
        self.kind = kind
        self.pod = pod
        self.gpu = gpu
        self.owner_kind = pod["metadata"]["ownerReferences"][0]["kind"]

    def instance(self, ns: str, name: str, node: Obj | None, node_index: int, slot: int, phase: str, now: datetime) -> Obj:
        tpl = self.pod
        meta = dict(tpl["metadata"])
        meta.update(name=name, namespace=ns, uid=b.stable_uid("pod", ns, name))
        owner_name = name.rsplit("-", 1)[0]
        meta["ownerReferences"] = [dict(tpl["metadata"]["ownerReferences"][0], name=owner_name,
                                        uid=b.stable_uid(self.owner_kind, ns, owner_name))]
        spec = dict(tpl["spec"])
        status = dict(tpl["status"])
        if node is None:
            spec.pop("nodeName", None)
            return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
                    "status": {"phase": "Pending", "qosClass": status["qosClass"]}}
        spec["nodeName"] = node["metadata"]["name"]
        host_ip = b.node_ip(node)
        ip = b.pod_ip(node_index, slot)
        status.update(hostIP=host_ip, hostIPs=[{"ip": host_ip}], podIP=ip, podIPs=[{"ip": ip}])
        statuses = []
        for cs in tpl["status"]["containerStatuses"]:
            cs = dict(cs, containerID=b.container_id(ns, name, cs["name"], 0))
            if phase != "Running":
                state = cs["state"].get("running") or {}
                cs.update(ready=False, started=False,
                          state=b.terminated_state(0, "Completed", state.get("startedAt", ""), b.rfc3339(now), cs["containerID"]))
            statuses.append(cs)
        status["containerStatuses"] = statuses
        status["phase"] = phase
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def _templates(now: datetime, node: Obj) -> list[_Template]:
    env_common = {"LOG_LEVEL": "info", "TZ": "UTC"}
    probes = {"livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"}, "periodSeconds": 10,
                                "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
              "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP"}, "periodSeconds": 5,
                                 "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3}}

    def make(kind: str, owner: tuple[str, str], containers: list[Obj], labels: dict[str, str], gpu: dict[str, int],
             restart: str = "Always") -> _Template:
        if restart == "Always":
            containers[0].update(probes)
        pod = b.pod(f"{kind}-x", "ns", containers, labels=labels, owner=(owner[0], owner[1], kind), restart_policy=restart,
                    host_volumes={"config": "/etc/app", "scratch": "/mnt/scratch"}, age_s=3 * 86400, now=now)
        b.set_running(pod, node, 0, 0, 3 * 86400 - 10, now)
        created = pod["metadata"]["creationTimestamp"]
        pod["metadata"]["managedFields"] = [
            _managed_fields("kube-controller-manager", "Update", created, _spec_fields(pod)),
            _managed_fields("kubelet", "Update", pod["status"]["startTime"], _STATUS_FIELDS, "status"),
        ]
        return _Template(kind, pod, gpu)

    app_env = {**env_common, "APP_PORT": "8080"}
    return [
        make("web", ("apps/v1", "ReplicaSet"), [
            b.container("app", "registry.example.com/shop/web:2.14.3", requests={"cpu": "250m", "memory": "256Mi"},
                        limits={"memory": "512Mi"}, env=app_env, ports=[8080], mounts=[("config", "/etc/app")]),
        ], {"app": "web", "pod-template-hash": "7c9d8f6b5"}, {}),
        make("batch", ("batch/v1", "Job"), [
            b.container("etl", "registry.example.com/data/etl:1.8.0", command=["python", "-m", "etl.run"], args=["--date=today"],
                        requests={"cpu": "2", "memory": "4Gi"}, limits={"cpu": "4", "memory": "8Gi"}, env=env_common,
                        mounts=[("scratch", "/mnt/scratch")]),
        ], {"job-name": "etl", "batch.kubernetes.io/job-name": "etl"}, {}, restart="Never"),
        make("train", ("batch/v1", "Job"), [
            b.container("trainer", "nvcr.io/nvidia/pytorch:24.03-py3", command=["torchrun"], args=["--nproc_per_node=2", "train.py"],
                        requests={"cpu": "16", "memory": "128Gi"}, limits={"nvidia.com/gpu": 2, "memory": "128Gi"},
                        env={**env_common, "NCCL_DEBUG": "WARN"}, mounts=[("scratch", "/mnt/scratch")]),
        ], {"job-name": "train", "team": "research"}, {"nvidia.com/gpu": 2}, restart="Never"),
        make("serve", ("apps/v1", "ReplicaSet"), [
            b.container("triton", "nvcr.io/nvidia/tritonserver:24.03-py3", args=["tritonserver", "--model-repository=/models"],
                        requests={"cpu": "4", "memory": "32Gi"}, limits={"nvidia.com/gpu": 1, "memory": "32Gi"},
                        env=env_common, ports=[8000, 8001, 8002], mounts=[("config", "/models")]),
        ], {"app": "serve", "pod-template-hash": "5f4e3d2c1"}, {"nvidia.com/gpu": 1}),
    ]


def generate(nodes: int, pods: int, now: datetime | None = None) -> list[Obj]:
    now = now or b.utcnow()
    nodes = max(1, nodes)
    node_objs: list[Obj] = []
    gpu_nodes: list[int] = []
    for i in range(nodes):
        name = f"node-{i:05d}"
        if i % 5 in (1, 3):
            product = "NVIDIA-H100-80GB-HBM3" if i % 2 else "NVIDIA-A100-SXM4-80GB"
            node_objs.append(b.node(name, i, labels={**b.gfd_labels(product, GPUS_PER_NODE, operator=False),
                                                     "node-pool": "gpu"},
                                    extra_resources={"nvidia.com/gpu": (GPUS_PER_NODE, GPUS_PER_NODE)}, now=now))
            gpu_nodes.append(i)
        else:
            node_objs.append(b.node(name, i, cpu=64, memory_gib=256, labels={"node-pool": "general"}, now=now))

    out: list[Obj] = []
    slots = [0] * nodes

    plugin_example: Obj | None = None
    for i in gpu_nodes:
        node = node_objs[i]
        name = f"nvidia-device-plugin-daemonset-{b.suffix('plugin', i)}"
        pod = b.pod(name, "kube-system", [b.container("nvidia-device-plugin-ctr", "nvcr.io/nvidia/k8s-device-plugin:v0.15.0",
                                                      mounts=[("device-plugin", "/var/lib/kubelet/device-plugins")])],
                    labels={"name": "nvidia-device-plugin-ds"}, owner=("apps/v1", "DaemonSet", "nvidia-device-plugin-daemonset"),
                    tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    host_volumes={"device-plugin": "/var/lib/kubelet/device-plugins"}, priority_class="system-node-critical",
                    age_s=30 * 86400, now=now)
        pod["metadata"]["generateName"] = "nvidia-device-plugin-daemonset-"
        b.set_running(pod, node, i, slots[i], 30 * 86400, now)
        slots[i] += 1
        out.append(pod)
        plugin_example = pod

    templates = _templates(now, node_objs[0])
    web, batch, train, serve = templates
    gpu_free = {i: GPUS_PER_NODE for i in gpu_nodes}
    gpu_cycle = itertools.cycle(gpu_nodes) if gpu_nodes else None
    cpu_nodes = [i for i in range(nodes) if i not in gpu_free] or list(range(nodes))
    namespaces = [f"team-{k:02d}" for k in range(max(3, min(50, pods // 2000)))]
    pending_left = PENDING_GPU_PODS
    remaining = max(0, pods - len(out))
    for n in range(remaining):
        ns = namespaces[n % len(namespaces)]
        # About 20 % GPU pods: one in ten training (2 GPUs), one in ten serving (1 GPU).
        tpl = train if n % 10 == 3 else serve if n % 10 == 7 else batch if n % 10 in (1, 5) else web
        name = f"{tpl.kind}-{n // 7:05d}-{b.suffix(ns, n)}"
        phase = "Running" if tpl is not batch or n % 3 else "Succeeded"
        if tpl.gpu and gpu_cycle is not None:
            need = sum(tpl.gpu.values())
            target = None
            for _ in range(len(gpu_nodes)):
                candidate = next(gpu_cycle)
                if gpu_free[candidate] >= need:
                    target = candidate
                    break
            if target is None and pending_left > 0:
                pending_left -= 1
                out.append(tpl.instance(ns, name, None, 0, 0, "Pending", now))
                continue
            if target is None:
                target, phase = next(gpu_cycle), "Succeeded"  # a finished job that still declares its GPUs
            else:
                gpu_free[target] -= need
            index = target
        else:
            index = cpu_nodes[n % len(cpu_nodes)]
        out.append(tpl.instance(ns, name, node_objs[index], index, slots[index], phase, now))
        slots[index] += 1

    daemonsets = []
    if plugin_example is not None:
        daemonsets.append(b.daemonset("nvidia-device-plugin-daemonset", "kube-system", {"name": "nvidia-device-plugin-ds"},
                                      plugin_example, node_selector={"node-pool": "gpu"}, now=now))
        daemonsets[0]["status"] = b.daemonset_status(daemonsets[0], out[: len(gpu_nodes)])
    return [*(namespace(ns) for ns in namespaces), *node_objs, *daemonsets, *out]
