"""Which NVIDIA GPU stack a cluster runs, and the health of its parts per node.

Pure functions over raw Kubernetes JSON objects (dicts as the API returns
them): ClusterPolicies (`nvidia.com/v1`), DaemonSets, Pods and Nodes.

- `detect_stack(daemonsets, cluster_policies)`: GPU Operator, standalone device
  plugin (static manifest, Helm, GKE), several at once, or none.
- `component_matrix(stack, nodes, pods)`: per GPU node, the state of each
  component: running / not-ready / crash-looping / missing / not-expected.
- `cluster_problems(stack)` and `node_problems(node, components)`: the
  verdicts `operator-not-ready`, `component-failing`, `several-plugins`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

COMPONENTS = ("driver", "container-toolkit", "device-plugin", "gfd", "dcgm-exporter", "mig-manager", "validator", "nfd-worker")

RUNNING = "running"
NOT_READY = "not-ready"
CRASH_LOOPING = "crash-looping"
MISSING = "missing"
NOT_EXPECTED = "not-expected"
_SEVERITY = {CRASH_LOOPING: 4, MISSING: 3, NOT_READY: 2, RUNNING: 1, NOT_EXPECTED: 0}
FAILING_STATES = (CRASH_LOOPING, NOT_READY, MISSING)

# GPU Operator operands: the DaemonSet's `app` label → component.
_OPERATOR_APPS = {
    "nvidia-driver-daemonset": "driver",
    "nvidia-container-toolkit-daemonset": "container-toolkit",
    "nvidia-device-plugin-daemonset": "device-plugin",
    "gpu-feature-discovery": "gfd",
    "nvidia-dcgm-exporter": "dcgm-exporter",
    "nvidia-mig-manager": "mig-manager",
    "nvidia-operator-validator": "validator",
}
# Component → its switch under ClusterPolicy.spec and its nvidia.com/gpu.deploy.* label.
_POLICY_KEYS = {
    "driver": "driver", "container-toolkit": "toolkit", "device-plugin": "devicePlugin", "gfd": "gfd",
    "dcgm-exporter": "dcgmExporter", "mig-manager": "migManager", "validator": "validator",
}
_DEPLOY_LABELS = {
    "driver": "driver", "container-toolkit": "container-toolkit", "device-plugin": "device-plugin",
    "gfd": "gpu-feature-discovery", "dcgm-exporter": "dcgm-exporter", "mig-manager": "mig-manager",
    "validator": "operator-validator",
}
DEPLOY_LABEL_PREFIX = "nvidia.com/gpu.deploy."

# Tolerations the DaemonSet controller adds to every DaemonSet pod.
_DAEMONSET_TOLERATED = {
    ("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"), ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"), ("node.kubernetes.io/unschedulable", "NoSchedule"),
}

GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


# -- objects ---------------------------------------------------------------


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def _ref(obj: dict) -> str:
    meta = _meta(obj)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _daemonset_labels(ds: dict) -> dict[str, str]:
    spec = ds.get("spec") or {}
    return {
        **(_meta(ds).get("labels") or {}),
        **((spec.get("selector") or {}).get("matchLabels") or {}),
        **(_meta(spec.get("template") or {}).get("labels") or {}),
    }


def _container_names(ds: dict) -> list[str]:
    pod_spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    return [c.get("name", "") for c in pod_spec.get("containers") or []]


def classify_daemonset(ds: dict) -> tuple[str, str] | None:
    """(component, install) for a DaemonSet of the GPU stack, else None.

    install is "operator", "static", "helm", "gke" or "standalone".
    """
    labels = _daemonset_labels(ds)
    name = _meta(ds).get("name", "")
    if labels.get("app.kubernetes.io/component") == "nvidia-driver":
        return ("driver", "operator")
    if labels.get("app") in _OPERATOR_APPS:
        return (_OPERATOR_APPS[labels["app"]], "operator")
    if labels.get("name") == "nvidia-device-plugin-ds":
        return ("device-plugin", "static")
    if labels.get("k8s-app") == "nvidia-gpu-device-plugin":
        return ("device-plugin", "gke")
    app_name = labels.get("app.kubernetes.io/name", "")
    if app_name.startswith("nvidia-device-plugin"):
        # The chart's GFD and MPS DaemonSets may carry the plugin's own labels.
        containers = _container_names(ds)
        if name.endswith("-gpu-feature-discovery") or any(c.startswith("gpu-feature-discovery") for c in containers):
            return ("gfd", "helm")
        if "mps-control-daemon" in name or "mps-control-daemon" in app_name:
            return None
        return ("device-plugin", "helm")
    if app_name == "gpu-feature-discovery":
        return ("gfd", "standalone")
    if app_name == "dcgm-exporter":
        return ("dcgm-exporter", "standalone")
    if (app_name == "node-feature-discovery" and labels.get("role") == "worker") or labels.get("app") == "nfd-worker" or name.endswith("node-feature-discovery-worker"):
        return ("nfd-worker", "standalone")
    return None


@dataclass(frozen=True)
class StackDaemonSet:
    namespace: str
    name: str
    component: str
    install: str
    obj: dict = field(compare=False, repr=False)

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class ClusterPolicyStatus:
    name: str
    state: str  # ready, notReady, ignored, disabled, or "unknown" before the operator reports
    message: str | None

    def to_json(self) -> dict:
        return {"name": self.name, "state": self.state, "message": self.message}


def cluster_policy_status(policy: dict) -> ClusterPolicyStatus:
    status = policy.get("status") or {}
    state = status.get("state") or "unknown"
    message = None
    if state != "ready":
        conditions = status.get("conditions") or []
        # The Ready=False condition carries "ClusterPolicy is not ready; states not ready: [...]";
        # Error=True says why reconciling failed.
        for ctype, wanted in (("Ready", "False"), ("Error", "True")):
            for cond in conditions:
                if cond.get("type") == ctype and cond.get("status") == wanted and cond.get("message"):
                    message = message or cond["message"]
    return ClusterPolicyStatus(_meta(policy).get("name", ""), state, message)


@dataclass(frozen=True)
class Stack:
    kind: str  # "gpu-operator", "device-plugin" or "none"
    install: str | None  # "operator", "static", "helm", "gke" or None
    namespace: str | None
    cluster_policy: ClusterPolicyStatus | None
    daemonsets: tuple[StackDaemonSet, ...] = ()
    disabled: frozenset[str] = frozenset()  # components the ClusterPolicy switches off

    @property
    def plugins(self) -> tuple[StackDaemonSet, ...]:
        return tuple(ds for ds in self.daemonsets if ds.component == "device-plugin")

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "install": self.install,
            "namespace": self.namespace,
            "cluster_policy": self.cluster_policy.to_json() if self.cluster_policy else None,
        }


def _disabled_components(policy: dict) -> frozenset[str]:
    spec = policy.get("spec") or {}
    return frozenset(
        component for component, key in _POLICY_KEYS.items()
        if (spec.get(key) or {}).get("enabled") is False
    )


def detect_stack(daemonsets: Iterable[dict], cluster_policies: Iterable[dict] = ()) -> Stack:
    found = []
    for ds in daemonsets:
        classified = classify_daemonset(ds)
        if classified:
            meta = _meta(ds)
            found.append(StackDaemonSet(meta.get("namespace", ""), meta.get("name", ""), *classified, obj=ds))
    found.sort(key=lambda d: (COMPONENTS.index(d.component), d.namespace, d.name))
    policies = sorted(cluster_policies, key=lambda p: _meta(p).get("name", ""))
    # Several ClusterPolicies: the operator reconciles one and marks the others "ignored".
    active = next((p for p in policies if (p.get("status") or {}).get("state") != "ignored"), policies[0] if policies else None)
    operator_sets = [d for d in found if d.install == "operator"]
    if active is not None or operator_sets:
        namespace = ((active or {}).get("status") or {}).get("namespace") or (operator_sets[0].namespace if operator_sets else None)
        return Stack(
            "gpu-operator", "operator", namespace,
            cluster_policy_status(active) if active is not None else None,
            tuple(found), _disabled_components(active) if active is not None else frozenset(),
        )
    plugins = [d for d in found if d.component == "device-plugin"]
    if plugins:
        return Stack("device-plugin", plugins[0].install, plugins[0].namespace, None, tuple(found))
    return Stack("none", None, None, None, tuple(found))


# -- scheduling: where a DaemonSet should run -----------------------------


def _expression_matches(expr: dict, value: str | None) -> bool:
    operator, values = expr.get("operator"), expr.get("values") or []
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and values:
        try:
            return int(value) > int(values[0]) if operator == "Gt" else int(value) < int(values[0])
        except ValueError:
            return False
    return False


def _term_matches(term: dict, node: dict) -> bool:
    labels = _meta(node).get("labels") or {}
    fields = {"metadata.name": _meta(node).get("name")}
    return all(_expression_matches(e, labels.get(e.get("key"))) for e in term.get("matchExpressions") or []) and all(
        _expression_matches(e, fields.get(e.get("key"))) for e in term.get("matchFields") or []
    )


def _tolerates(tolerations: list[dict], taint: dict) -> bool:
    key, effect = taint.get("key"), taint.get("effect")
    if (key, effect) in _DAEMONSET_TOLERATED:
        return True
    for t in tolerations:
        if t.get("effect") and t.get("effect") != effect:
            continue
        if t.get("operator") == "Exists" and not t.get("key"):
            return True
        if t.get("key") != key:
            continue
        if t.get("operator") == "Exists" or t.get("value", "") == taint.get("value", ""):
            return True
    return False


def daemonset_targets(ds: dict, node: dict) -> tuple[bool, str | None]:
    """Whether the DaemonSet should run a pod on the node, and if not, why."""
    pod_spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    labels = _meta(node).get("labels") or {}
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False, f"its nodeSelector wants {key}={value}"
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms") or []
    if terms and not any(_term_matches(t, node) for t in terms):
        return False, "its node affinity excludes the node"
    tolerations = pod_spec.get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(tolerations, taint):
            return False, f"the node's taint {taint.get('key')}:{taint.get('effect')} is not tolerated"
    return True, None


# -- pods ------------------------------------------------------------------


@dataclass(frozen=True)
class ComponentState:
    component: str
    state: str  # RUNNING, NOT_READY, CRASH_LOOPING, MISSING or NOT_EXPECTED
    detail: str | None = None  # kubectl-like status ("Init:0/1", "CrashLoopBackOff") or why missing / not expected
    pod: str | None = None  # "namespace/name", for logs
    container: str | None = None  # the container worth reading logs from
    ready: str | None = None  # "1/2"
    restarts: int = 0
    last_termination: str | None = None  # "Error (exit 1)", "OOMKilled"...
    daemonsets: tuple[str, ...] = ()  # "namespace/name" of the DaemonSets that should run here

    def describe(self) -> str:
        """One line for a verdict or a tooltip."""
        text = f"{self.component} {self.state}"
        if self.pod:
            text += f" ({self.pod.split('/', 1)[1]}"
            if self.detail:
                text += f": {self.detail}"
            if self.restarts:
                text += f", {self.restarts} restart{'s' if self.restarts != 1 else ''}"
            if self.last_termination:
                text += f", last {self.last_termination}"
            text += ")"
        elif self.detail:
            text += f": {self.detail}"
        return text


def _termination(terminated: dict) -> str:
    reason = terminated.get("reason") or "terminated"
    code = terminated.get("exitCode")
    return f"{reason} (exit {code})" if code not in (None, 0) and reason != "Completed" else reason


def _is_sidecar_name(name: str) -> bool:
    return name == "config-manager" or name.endswith("-sidecar")


def pod_component_state(component: str, pod: dict, daemonsets: tuple[str, ...] = ()) -> ComponentState:
    """The component's state from its DaemonSet pod on the node."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    init_specs = spec.get("initContainers") or []
    sidecars = {c.get("name") for c in init_specs if c.get("restartPolicy") == "Always"}
    init_statuses = status.get("initContainerStatuses") or []
    statuses = status.get("containerStatuses") or []
    all_statuses = init_statuses + statuses
    restarts = sum(int(s.get("restartCount") or 0) for s in all_statuses)
    main = next((c.get("name") for c in spec.get("containers") or [] if not _is_sidecar_name(c.get("name", ""))), None)
    ready_count = sum(1 for s in statuses if s.get("ready"))
    ready = f"{ready_count}/{len(spec.get('containers') or statuses)}"

    # The container in trouble, if any: crash-looping first, then any other not-ready one.
    looping = next((s for s in all_statuses if ((s.get("state") or {}).get("waiting") or {}).get("reason") == "CrashLoopBackOff"), None)
    unready = [s for s in all_statuses if not s.get("ready") and not ((s.get("state") or {}).get("terminated") or {}).get("exitCode") == 0]
    restarted = next((s for s in unready if int(s.get("restartCount") or 0) > 0 and (s.get("lastState") or {}).get("terminated")), None)
    troubled = looping or restarted or (unready[0] if unready else None)
    last = None
    for s in ([troubled] if troubled else []) + all_statuses:
        terminated = (s.get("lastState") or {}).get("terminated") or (s.get("state") or {}).get("terminated")
        if terminated and (s is troubled or int(s.get("restartCount") or 0) > 0):
            last = _termination(terminated)
            break

    detail = _status_reason(pod, init_statuses, sidecars, statuses)
    all_ready = bool(statuses) and all(s.get("ready") for s in statuses)
    if _meta(pod).get("deletionTimestamp"):
        state = NOT_READY
    elif looping or restarted:
        state = CRASH_LOOPING
    elif status.get("phase") == "Running" and all_ready:
        state = RUNNING
    else:
        state = NOT_READY
    return ComponentState(
        component=component, state=state, detail=detail, pod=_ref(pod),
        container=(troubled or {}).get("name") or main, ready=ready, restarts=restarts,
        last_termination=last, daemonsets=daemonsets,
    )


def _status_reason(pod: dict, init_statuses: list[dict], sidecars: set, statuses: list[dict]) -> str:
    """The STATUS column kubectl would print for the pod (the common cases)."""
    if _meta(pod).get("deletionTimestamp"):
        return "Terminating"
    status = pod.get("status") or {}
    regular_init = [s for s in init_statuses if s.get("name") not in sidecars]
    for i, s in enumerate(regular_init):
        state = s.get("state") or {}
        terminated = state.get("terminated")
        if terminated and terminated.get("exitCode") == 0:
            continue
        if terminated:
            return f"Init:{terminated.get('reason') or 'ExitCode:' + str(terminated.get('exitCode'))}"
        waiting = (state.get("waiting") or {}).get("reason")
        if waiting and waiting != "PodInitializing":
            return f"Init:{waiting}"
        return f"Init:{i}/{len(regular_init)}"
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for s in statuses:
        state = s.get("state") or {}
        if (state.get("waiting") or {}).get("reason"):
            return state["waiting"]["reason"]
        terminated = state.get("terminated")
        if terminated:
            return terminated.get("reason") or f"ExitCode:{terminated.get('exitCode')}"
    return reason


def _owner_daemonset(pod: dict) -> str | None:
    for owner in _meta(pod).get("ownerReferences") or []:
        if owner.get("kind") == "DaemonSet":
            return owner.get("name")
    return None


# -- nodes -----------------------------------------------------------------


def _quantity(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def is_gpu_node(node: dict) -> bool:
    """NVIDIA hardware labelled (GFD or NFD) or NVIDIA GPU resources advertised."""
    labels = _meta(node).get("labels") or {}
    if labels.get("nvidia.com/gpu.present") == "true" or labels.get("feature.node.kubernetes.io/pci-10de.present") == "true":
        return True
    if labels.get("nvidia.com/gpu.product"):
        return True
    capacity = (node.get("status") or {}).get("capacity") or {}
    return any(_quantity(v) > 0 for k, v in capacity.items() if k in GPU_RESOURCES or k.startswith(MIG_RESOURCE_PREFIX))


@dataclass(frozen=True)
class MigConfig:
    config: str | None  # nvidia.com/mig.config, e.g. "all-balanced"
    state: str | None  # nvidia.com/mig.config.state: pending, success, failed, rebooting


def mig_config(node: dict) -> MigConfig:
    labels = _meta(node).get("labels") or {}
    return MigConfig(labels.get("nvidia.com/mig.config"), labels.get("nvidia.com/mig.config.state"))


def _deploy_switch(node: dict, component: str) -> str | None:
    """The node's nvidia.com/gpu.deploy.* value for the component ("false" also via deploy.operands)."""
    labels = _meta(node).get("labels") or {}
    if labels.get(DEPLOY_LABEL_PREFIX + "operands") == "false":
        return "false"
    key = _DEPLOY_LABELS.get(component)
    return labels.get(DEPLOY_LABEL_PREFIX + key) if key else None


def _node_component(stack: Stack, node: dict, component: str, pods_here: dict[tuple[str, str], list[dict]]) -> ComponentState:
    candidates = []  # (daemonset, its pod on the node or None)
    excluded = []
    for ds in stack.daemonsets:
        if ds.component != component:
            continue
        # Newest first, then any terminating pod after the live ones (during a rollout there are two).
        live = sorted(pods_here.get((ds.namespace, ds.name), []), key=lambda p: _meta(p).get("creationTimestamp") or "", reverse=True)
        live.sort(key=lambda p: bool(_meta(p).get("deletionTimestamp")))
        targets, why = daemonset_targets(ds.obj, node)
        if ds.install == "operator" and _deploy_switch(node, component) == "false":
            targets, why = False, f"{DEPLOY_LABEL_PREFIX}{_DEPLOY_LABELS[component]}=false"
        if live or targets:
            candidates.append((ds, live[0] if live else None))
        else:
            excluded.append(f"{ds.ref}: {why}")
    refs = tuple(ds.ref for ds, _ in candidates)
    if candidates:
        states = [
            pod_component_state(component, pod, refs) if pod is not None
            else ComponentState(component, MISSING, f"no pod of DaemonSet {ds.ref} on this node", daemonsets=refs)
            for ds, pod in candidates
        ]
        return max(states, key=lambda s: _SEVERITY[s.state])
    if stack.kind == "gpu-operator" and component in _POLICY_KEYS:
        if component in stack.disabled:
            return ComponentState(component, NOT_EXPECTED, "disabled in the ClusterPolicy")
        if _deploy_switch(node, component) == "true":
            label = DEPLOY_LABEL_PREFIX + _DEPLOY_LABELS[component]
            return ComponentState(component, MISSING, f"no DaemonSet runs it here though {label}=true")
    if excluded:
        return ComponentState(component, NOT_EXPECTED, "; ".join(excluded))
    return ComponentState(component, NOT_EXPECTED, None)


def component_matrix(stack: Stack, nodes: Iterable[dict], pods: Iterable[dict]) -> dict[str, dict[str, ComponentState]]:
    """Per GPU node (by name), the state of every component in COMPONENTS."""
    by_node: dict[str, dict[tuple[str, str], list[dict]]] = {}
    for pod in pods:
        owner = _owner_daemonset(pod)
        node_name = (pod.get("spec") or {}).get("nodeName")
        if owner and node_name:
            by_node.setdefault(node_name, {}).setdefault((_meta(pod).get("namespace", ""), owner), []).append(pod)
    matrix = {}
    for node in nodes:
        if not is_gpu_node(node):
            continue
        name = _meta(node).get("name", "")
        pods_here = by_node.get(name, {})
        matrix[name] = {c: _node_component(stack, node, c, pods_here) for c in COMPONENTS}
    return matrix


def components_json(components: dict[str, ComponentState]) -> dict[str, str]:
    """The report's per-node "components": {NAME: STATE}."""
    return {name: state.state for name, state in components.items()}


# -- verdicts --------------------------------------------------------------


def cluster_problems(stack: Stack) -> list[dict[str, str]]:
    """`operator-not-ready` when the active ClusterPolicy is notReady."""
    policy = stack.cluster_policy
    if policy is None or policy.state != "notReady":
        return []
    message = f"ClusterPolicy {policy.name} is notReady"
    if policy.message:
        message += f": {policy.message}"
    return [{"code": "operator-not-ready", "message": message}]


def node_problems(node: dict, components: dict[str, ComponentState], skip: Iterable[str] = ("device-plugin",)) -> list[dict[str, str]]:
    """`component-failing` per failing component, and `several-plugins`.

    The device plugin is skipped by default: the model's `plugin-not-running`
    verdict already covers it.
    """
    problems = []
    skipped = set(skip)
    for name in COMPONENTS:
        state = components.get(name)
        if state and state.state in FAILING_STATES and name not in skipped:
            problems.append({"code": "component-failing", "message": state.describe()})
    mig = mig_config(node)
    if mig.state == "failed" and "mig-manager" not in skipped:
        problems.append({"code": "component-failing", "message": f"mig-manager failed to apply MIG config {mig.config or '?'} (nvidia.com/mig.config.state=failed)"})
    plugin = components.get("device-plugin")
    if plugin and len(plugin.daemonsets) > 1:
        problems.append({"code": "several-plugins", "message": "several device plugins target this node: " + ", ".join(plugin.daemonsets)})
    return problems
