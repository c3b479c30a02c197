"""The generic part of the cluster builder: nodes, pods as they run on them, DaemonSets, and the states
a pod can be left in (crash-looping, stuck in init); the constants the demo and the stack scenarios share."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from ... import builders as b
from ...behaviour.daemonsets import daemonset_status_for

Obj = dict[str, Any]

DAY = 86400
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
FAULT_ANNOTATION = "sim.gputui.io/fault"

# DaemonSet pods tolerate these (added by the DaemonSet controller).
DS_TOLERATIONS = [
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
    # the DaemonSet controller's: its pods stay on a lost node (no tolerationSeconds)
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
]


class ClusterBase:
    """The objects collected so far, and the builders every install uses (see ClusterBuilder)."""

    def __init__(self, now: datetime | None = None) -> None:
        self.now = now or b.utcnow()
        self.nodes: dict[str, Obj] = {}
        self.node_index: dict[str, int] = {}
        self.slots: dict[str, int] = {}
        self.pods: list[Obj] = []
        self.daemonsets: list[Obj] = []
        self.events: list[Obj] = []
        self.others: list[Obj] = []  # every other kind (CRDs, ClusterPolicies, Services, DRA objects)

    def objects(self, namespaces: list[str]) -> list[Obj]:
        """Every object, DaemonSet status computed from the pods and nodes; namespaces as given plus any the others use."""
        for ds in self.daemonsets:
            ds["status"] = daemonset_status_for(ds, self.pods, list(self.nodes.values()))
        used = [o["metadata"].get("namespace") for o in [*self.pods, *self.daemonsets, *self.others]]
        names = list(dict.fromkeys([*namespaces, *(n for n in used if n)]))
        return [*map(b.namespace, names), *self.nodes.values(), *self.daemonsets, *self.pods, *self.events, *self.others]

    # -- nodes -----------------------------------------------------------
    def add_node(self, name: str, **kw: Any) -> Obj:
        index = len(self.nodes)
        obj = b.node(name, index, now=self.now, **kw)
        self.nodes[name] = obj
        self.node_index[name] = index
        return obj

    # -- pods ------------------------------------------------------------
    def place(self, pod: Obj, node: str, age_s: float) -> Obj:
        slot = self.slots.get(node, 0)
        self.slots[node] = slot + 1
        b.set_running(pod, self.nodes[node], self.node_index[node], slot, age_s - 5, self.now)
        self.pods.append(pod)
        return pod

    def finish(self, pod: Obj, node: str, age_s: float, run_s: float, exit_code: int, reason: str) -> Obj:
        """A pod that ran on the node and ended (Succeeded or Failed)."""
        self.place(pod, node, age_s)
        status = pod["status"]
        started, finished = b.ago(age_s - 5, self.now), b.ago(age_s - 5 - run_s, self.now)
        phase = "Succeeded" if exit_code == 0 else "Failed"
        status["phase"] = phase
        for cond in status["conditions"]:
            if cond["type"] in ("Ready", "ContainersReady", "PodReadyToStartContainers"):
                cond["status"] = "False"
                cond["lastTransitionTime"] = finished
                if cond["type"] != "PodReadyToStartContainers":
                    cond["reason"] = "PodCompleted" if phase == "Succeeded" else "PodFailed"
        for cs in status["containerStatuses"]:
            cs["ready"] = False
            cs["started"] = False
            cs["state"] = b.terminated_state(exit_code, reason, started, finished, cs["containerID"])
        return pod

    def ds_pod(self, ds_name: str, ns: str, node: str, containers: list[Obj], labels: dict[str, str], *,
               init: list[Obj] | None = None, host_network: bool = False, host_volumes: dict[str, str] | None = None,
               tolerations: list[Obj] | None = None, age_s: float = 14 * DAY, priority: str | None = None,
               service_account: str = "default") -> Obj:
        name = f"{ds_name}-{b.suffix(ns, ds_name, node)}"
        pod = b.pod(name, ns, containers, labels={**labels, "controller-revision-hash": b.suffix(ds_name, length=10),
                                                   "pod-template-generation": "1"},
                    init_containers=init, owner=("apps/v1", "DaemonSet", ds_name), host_volumes=host_volumes,
                    tolerations=list(tolerations or []) + DS_TOLERATIONS, age_s=age_s, now=self.now,
                    priority_class=priority, service_account=service_account,
                    affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}})
        pod["metadata"]["generateName"] = f"{ds_name}-"
        if host_network:
            pod["spec"]["hostNetwork"] = True
            pod["spec"]["dnsPolicy"] = "ClusterFirstWithHostNet"
        return self.place(pod, node, age_s)

    def daemonset(self, name: str, ns: str, selector: dict[str, str], example: Obj | None, node_selector: dict[str, str] | None,
                  labels: dict[str, str] | None = None) -> None:
        """example: one of its pods (ds_pod's), the template's source; None (it runs on no node) is a builder's error."""
        assert example is not None, f"{name}: no node to run on, so no pod to take the template from"
        self.daemonsets.append(b.daemonset(name, ns, selector, example, labels=labels, node_selector=node_selector, now=self.now))

    def crash_loop(self, pod: Obj, restarts: int) -> None:
        """Make a running pod's first container crash-loop (the kubelet writes its log lines, see controllers.py),
        as the kubelet shows it: restarts >= 1 (the first exit is started again at once), waiting in the back-off
        of that restartCount (10s doubled, 5m0s at most), the last exit within it."""
        if restarts < 1:
            raise ValueError(f"crash_loop: restarts={restarts}: the kubelet restarts a first exit at once, "
                             "CrashLoopBackOff comes with restartCount 1 or more")
        backoff = b.crash_loop_backoff(restarts)
        finished = min(139.0, backoff / 2)
        status = pod["status"]
        status["conditions"] = [
            dict(c, status="False", reason="ContainersNotReady",
                 message=f"containers with unready status: [{pod['spec']['containers'][0]['name']}]")
            if c["type"] in ("Ready", "ContainersReady") else c
            for c in status["conditions"]
        ]
        cs = status["containerStatuses"][0]
        meta = pod["metadata"]
        cs.update({
            "ready": False, "started": False, "restartCount": restarts,
            "containerID": b.container_id(meta["namespace"], meta["name"], cs["name"], restarts),
            "state": {"waiting": {"reason": "CrashLoopBackOff",
                                  "message": b.back_off_message(backoff, cs["name"], meta["name"], meta["namespace"], meta["uid"])}},
            "lastState": b.terminated_state(1, "Error", b.ago(finished + 1, self.now), b.ago(finished, self.now),
                                            b.container_id(meta["namespace"], meta["name"], cs["name"], restarts), None),
        })
        self.events.append(b.event(pod, "BackOff", f"Back-off restarting failed container {cs['name']} in pod {meta['name']}_{meta['namespace']}({meta['uid']})",
                                   kind="Warning", host=pod["spec"]["nodeName"], field_path=f"spec.containers{{{cs['name']}}}",
                                   count=restarts * 12 if restarts > 1 else 1,
                                   first=b.ago(3 * 3600 if restarts > 1 else finished, self.now), last=b.ago(min(30.0, finished), self.now)))

    def pod_of(self, daemonset: str, node: str) -> Obj:
        """The DaemonSet's pod on the node."""
        return next(
            p for p in self.pods
            if p["spec"].get("nodeName") == node
            and any(o.get("kind") == "DaemonSet" and o.get("name") == daemonset for o in p["metadata"].get("ownerReferences") or [])
        )

    def stuck_in_init(self, pod: Obj) -> None:
        """Make a running pod wait in its first init container (kubectl: Init:0/N), e.g. for a driver that never comes."""
        status = pod["status"]
        inits = [c["name"] for c in pod["spec"].get("initContainers") or []]
        apps = [c["name"] for c in pod["spec"]["containers"]]
        since = status["startTime"]
        status["phase"] = "Pending"
        status["conditions"] = [
            b.pod_condition("PodReadyToStartContainers", "True", since),
            b.pod_condition("Initialized", "False", since, "ContainersNotInitialized", f"containers with incomplete status: [{' '.join(inits)}]"),
            b.pod_condition("Ready", "False", since, "ContainersNotReady", f"containers with unready status: [{' '.join(apps)}]"),
            b.pod_condition("ContainersReady", "False", since, "ContainersNotReady", f"containers with unready status: [{' '.join(apps)}]"),
            b.pod_condition("PodScheduled", "True", since),
        ]
        for i, cs in enumerate(status["initContainerStatuses"]):
            cs.update({"ready": False, "started": i == 0, "restartCount": 0, "lastState": {}})
            if i == 0:
                cs["state"] = {"running": {"startedAt": since}}
            else:
                cs["state"] = {"waiting": {"reason": "PodInitializing"}}
                cs.pop("containerID", None)
        for cs in status["containerStatuses"]:
            cs.update({"ready": False, "started": False, "restartCount": 0, "lastState": {},
                       "state": {"waiting": {"reason": "PodInitializing"}}})
            cs.pop("containerID", None)
