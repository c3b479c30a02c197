"""Which NVIDIA GPU stack a cluster runs, and the health of its parts per node.

Pure functions over the model's records (`records.Node`, `Pod`, `DaemonSet`)
and raw ClusterPolicy objects (`nvidia.com/v1`, as the API returns them).

- `detect_stack(daemonsets, cluster_policies)`: GPU Operator, standalone device
  plugin (static manifest, Helm, GKE), several at once, or none.
- `component_matrix(stack, nodes, pods)`: per GPU node, the state of each
  component: running / not-ready / crash-looping / missing / not-expected
  (`node_components` for one node).
- `cluster_problems(stack)` and `node_problems(node, components)`: the
  verdicts `operator-not-ready`, `component-failing`, `several-plugins`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from .gpu import OPERATOR_APPS, Problem, has_nvidia_gpus
from .records import ContainerStatus, DaemonSet, Node, Pod, Taint

COMPONENTS = ("driver", "container-toolkit", "device-plugin", "gfd", "dcgm-exporter", "mig-manager", "validator", "nfd-worker")

RUNNING = "running"
NOT_READY = "not-ready"
CRASH_LOOPING = "crash-looping"
MISSING = "missing"
NOT_EXPECTED = "not-expected"
_SEVERITY = {CRASH_LOOPING: 4, MISSING: 3, NOT_READY: 2, RUNNING: 1, NOT_EXPECTED: 0}
FAILING_STATES = (CRASH_LOOPING, NOT_READY, MISSING)

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


# -- DaemonSets ------------------------------------------------------------


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def classify_daemonset(ds: DaemonSet) -> tuple[str, str] | None:
    """(component, install) for a DaemonSet of the GPU stack, else None.

    install is "operator", "static", "helm", "gke" or "standalone".
    """
    labels = {**ds.labels, **ds.selector, **ds.pod_labels}
    name = ds.name
    if labels.get("app.kubernetes.io/component") == "nvidia-driver":
        return ("driver", "operator")
    if OPERATOR_APPS.get(labels.get("app", "")) in _POLICY_KEYS:
        return (OPERATOR_APPS[labels["app"]], "operator")
    if labels.get("name") == "nvidia-device-plugin-ds":
        return ("device-plugin", "static")
    if labels.get("k8s-app") == "nvidia-gpu-device-plugin":
        return ("device-plugin", "gke")
    app_name = labels.get("app.kubernetes.io/name", "")
    if app_name.startswith("nvidia-device-plugin"):
        # The chart's GFD and MPS DaemonSets may carry the plugin's own labels.
        if name.endswith("-gpu-feature-discovery") or any(c.startswith("gpu-feature-discovery") for c in ds.containers):
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
    daemonset: DaemonSet = field(compare=False, repr=False)

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


def detect_stack(daemonsets: Iterable[DaemonSet], cluster_policies: Iterable[dict] = ()) -> Stack:
    found = []
    for ds in daemonsets:
        classified = classify_daemonset(ds)
        if classified:
            found.append(StackDaemonSet(ds.namespace, ds.name, *classified, daemonset=ds))
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


def _term_matches(term: dict, node: Node) -> bool:
    fields = {"metadata.name": node.name}
    return all(_expression_matches(e, node.labels.get(e.get("key"))) for e in term.get("matchExpressions") or []) and all(
        _expression_matches(e, fields.get(e.get("key"))) for e in term.get("matchFields") or []
    )


def _tolerates(tolerations: Iterable[dict], taint: Taint) -> bool:
    if (taint.key, taint.effect) in _DAEMONSET_TOLERATED:
        return True
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.effect:
            continue
        if t.get("operator") == "Exists" and not t.get("key"):
            return True
        if t.get("key") != taint.key:
            continue
        if t.get("operator") == "Exists" or t.get("value", "") == taint.value:
            return True
    return False


def daemonset_targets(ds: DaemonSet, node: Node) -> tuple[bool, str | None]:
    """Whether the DaemonSet should run a pod on the node, and if not, why.

    The node record keeps only NVIDIA's NFD labels (pci-10de): a selector on
    another feature.node.kubernetes.io label does not match here.
    """
    labels = node.labels
    for key, value in ds.node_selector.items():
        if labels.get(key) != value:
            has = f"; the node has {key}={labels[key]}" if key in labels else ""
            return False, f"its nodeSelector wants {key}={value}{has}"
    required = (ds.affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms") or []
    if terms and not any(_term_matches(t, node) for t in terms):
        return False, "its node affinity excludes the node"
    for taint in node.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not _tolerates(ds.tolerations, taint):
            return False, f"the node's taint {taint.key}:{taint.effect} is not tolerated"
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


def _termination(reason: str, exit_code: int | None) -> str:
    reason = reason or "terminated"
    return f"{reason} (exit {exit_code})" if exit_code not in (None, 0) and reason != "Completed" else reason


def _last_termination(cs: ContainerStatus) -> str | None:
    """The container's last termination (lastState), else its current one; None if it never ended."""
    if cs.last_reason or cs.last_exit_code is not None:
        return _termination(cs.last_reason, cs.last_exit_code)
    if cs.state == "terminated":
        return _termination(cs.reason, cs.exit_code)
    return None


def _is_sidecar_name(name: str) -> bool:
    return name == "config-manager" or name.endswith("-sidecar")


def pod_component_state(component: str, pod: Pod, daemonsets: tuple[str, ...] = ()) -> ComponentState:
    """The component's state from its DaemonSet pod on the node."""
    statuses = pod.container_statuses
    all_statuses = pod.init_container_statuses + statuses
    restarts = sum(cs.restarts for cs in all_statuses)
    main = next((name for name in pod.containers if not _is_sidecar_name(name)), None)
    ready = f"{sum(1 for cs in statuses if cs.ready)}/{len(pod.containers) or len(statuses)}"

    # The container in trouble, if any: crash-looping first, then any other not-ready one.
    looping = next((cs for cs in all_statuses if cs.state == "waiting" and cs.reason == "CrashLoopBackOff"), None)
    unready = [cs for cs in all_statuses if not cs.ready and not (cs.state == "terminated" and cs.exit_code == 0)]
    restarted = next((cs for cs in unready if cs.restarts > 0 and (cs.last_reason or cs.last_exit_code is not None)), None)
    troubled = looping or restarted or (unready[0] if unready else None)
    last = None
    for cs in ([troubled] if troubled else []) + [cs for cs in all_statuses if cs.restarts > 0]:
        last = _last_termination(cs)
        if last:
            break

    if pod.deleted is not None:
        state = NOT_READY
    elif looping or restarted:
        state = CRASH_LOOPING
    elif pod.phase == "Running" and statuses and all(cs.ready for cs in statuses):
        state = RUNNING
    else:
        state = NOT_READY
    return ComponentState(
        component=component, state=state, detail=pod.status, pod=f"{pod.namespace}/{pod.name}",
        container=troubled.name if troubled else main, ready=ready, restarts=restarts,
        last_termination=last, daemonsets=daemonsets,
    )


# -- nodes -----------------------------------------------------------------


@dataclass(frozen=True)
class MigConfig:
    config: str | None  # nvidia.com/mig.config, e.g. "all-balanced"
    state: str | None  # nvidia.com/mig.config.state: pending, success, failed, rebooting


def mig_config(node: Node) -> MigConfig:
    return MigConfig(node.labels.get("nvidia.com/mig.config"), node.labels.get("nvidia.com/mig.config.state"))


def _deploy_switch(node: Node, component: str) -> str | None:
    """The node's nvidia.com/gpu.deploy.* value for the component ("false" also via deploy.operands)."""
    switch = _deploy_label(node, component)
    return switch.partition("=")[2] if switch else None


def _deploy_label(node: Node, component: str) -> str | None:
    """The nvidia.com/gpu.deploy.* label that decides the component on the node, as the node has it
    (`nvidia.com/gpu.deploy.operands=false` when that switches every operand off), or None."""
    labels = node.labels
    key = _DEPLOY_LABELS.get(component)
    own = DEPLOY_LABEL_PREFIX + key if key else None
    if own is not None and labels.get(own) == "false":
        return f"{own}=false"
    operands = DEPLOY_LABEL_PREFIX + "operands"
    if labels.get(operands) == "false":
        return f"{operands}=false"
    return f"{own}={labels[own]}" if own is not None and own in labels else None


PodsByDaemonSet = dict[tuple[str, str], list[Pod]]  # (namespace, DaemonSet name) -> its pods on one node


def daemonset_pods(pods: Iterable[Pod]) -> PodsByDaemonSet:
    """The pods owned by a DaemonSet, by (namespace, DaemonSet name)."""
    out: PodsByDaemonSet = {}
    for pod in pods:
        if pod.owner is not None and pod.owner[0] == "DaemonSet":
            out.setdefault((pod.namespace, pod.owner[1]), []).append(pod)
    return out


def _component(stack: Stack, node: Node, component: str, pods_here: PodsByDaemonSet) -> ComponentState:
    candidates = []  # (daemonset, its pod on the node or None)
    excluded = []
    for ds in stack.daemonsets:
        if ds.component != component:
            continue
        # Newest first, then any terminating pod after the live ones (during a rollout there are two).
        live = sorted(pods_here.get((ds.namespace, ds.name), []), key=lambda p: p.created or 0.0, reverse=True)
        live.sort(key=lambda p: p.deleted is not None)
        targets, why = daemonset_targets(ds.daemonset, node)
        if ds.install == "operator" and _deploy_switch(node, component) == "false":
            targets, why = False, f"the node has {_deploy_label(node, component)}"
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
            policy = stack.cluster_policy.name if stack.cluster_policy is not None else "?"
            return ComponentState(component, NOT_EXPECTED, f"disabled in ClusterPolicy {policy}: spec.{_POLICY_KEYS[component]}.enabled=false")
        if _deploy_switch(node, component) == "true":
            label = DEPLOY_LABEL_PREFIX + _DEPLOY_LABELS[component]
            return ComponentState(component, MISSING, f"no DaemonSet runs it here though {label}=true")
    if excluded:
        return ComponentState(component, NOT_EXPECTED, "; ".join(excluded))
    return ComponentState(component, NOT_EXPECTED, None)


def node_components(stack: Stack, node: Node, pods_on_node: Iterable[Pod]) -> dict[str, ComponentState]:
    """The state of every component in COMPONENTS on one GPU node (pods: those bound to it)."""
    pods_here = daemonset_pods(pods_on_node)
    return {c: _component(stack, node, c, pods_here) for c in COMPONENTS}


def component_matrix(stack: Stack, nodes: Iterable[Node], pods: Iterable[Pod]) -> dict[str, dict[str, ComponentState]]:
    """Per GPU node (by name), the state of every component in COMPONENTS."""
    by_node: dict[str, list[Pod]] = {}
    for pod in pods:
        if pod.node:
            by_node.setdefault(pod.node, []).append(pod)
    return {node.name: node_components(stack, node, by_node.get(node.name, ())) for node in nodes if has_nvidia_gpus(node)}


def components_json(components: dict[str, ComponentState]) -> dict[str, str]:
    """The report's per-node "components": {NAME: STATE}."""
    return {name: state.state for name, state in components.items()}


# -- verdicts --------------------------------------------------------------


def cluster_problems(stack: Stack) -> list[Problem]:
    """`operator-not-ready` when the active ClusterPolicy is notReady."""
    return policy_problems(stack.cluster_policy)


def policy_problems(policy: ClusterPolicyStatus | None) -> list[Problem]:
    if policy is None or policy.state != "notReady":
        return []
    message = f"ClusterPolicy {policy.name} is notReady"
    if policy.message:
        message += f": {policy.message}"
    return [Problem("operator-not-ready", message)]


def node_problems(node: Node, components: dict[str, ComponentState], skip: Iterable[str] = ("device-plugin",)) -> list[Problem]:
    """`component-failing` per failing component, and `several-plugins`.

    The device plugin is skipped by default: the model's `plugin-not-running`
    verdict already covers it.
    """
    problems = []
    skipped = set(skip)
    for name in COMPONENTS:
        state = components.get(name)
        if state and state.state in FAILING_STATES and name not in skipped:
            problems.append(Problem("component-failing", state.describe()))
    mig = mig_config(node)
    if mig.state == "failed" and "mig-manager" not in skipped:
        problems.append(Problem("component-failing", f"mig-manager failed to apply MIG config {mig.config or '?'} (nvidia.com/mig.config.state=failed)"))
    plugin = components.get("device-plugin")
    if plugin and len(plugin.daemonsets) > 1:
        problems.append(Problem("several-plugins", "several device plugins target this node: " + ", ".join(plugin.daemonsets)))
    return problems
