"""Which NVIDIA GPU stack a cluster runs, and the health of its parts per node.

Pure functions over the model's records (`records.Node`, `Pod`, `DaemonSet`)
and raw ClusterPolicy objects (`nvidia.com/v1`, as the API returns them).

- `detect_stack(daemonsets, cluster_policies)`: GPU Operator, standalone device
  plugin (static manifest, Helm, GKE, or any DaemonSet mounting the kubelet's
  device-plugin directory: install "other"), several at once, or none.
- `component_matrix(stack, nodes, pods)`: per GPU node, the state of each
  component: running / not-ready / crash-looping / missing / not-expected, and
  for validation pods succeeded / failed (`node_components` for one node;
  `node_stack` adds every device plugin there and the GPU plugins' pods).
- `cluster_problems(stack)` and `node_problems(node, components)`: the
  verdicts `operator-not-ready`, `component-failing`, `several-plugins`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Iterable

from .gpu import (
    OPERATOR_APPS,
    GpuResources,
    Problem,
    advertises_nvidia_gpus,
    has_nvidia_gpus,
    is_nvidia_resource,
    is_operator_driver_app,
    is_plugin_pod,
)
from .duration import human_duration
from .quantities import parse_count, parse_time
from .placement import daemonset_targets
from .records import ContainerStatus, DaemonSet, Node, Pod
from .verdicts import Verdict

COMPONENTS = ("driver", "container-toolkit", "device-plugin", "gfd", "dcgm-exporter", "mig-manager", "validator", "nfd-worker")

RUNNING = "running"
NOT_READY = "not-ready"
CRASH_LOOPING = "crash-looping"
MISSING = "missing"
NOT_EXPECTED = "not-expected"
SUCCEEDED = "succeeded"  # a validation pod that ran to completion
FAILED = "failed"  # a validation pod that failed
_SEVERITY = {FAILED: 5, CRASH_LOOPING: 5, MISSING: 4, NOT_READY: 3, RUNNING: 2, SUCCEEDED: 1, NOT_EXPECTED: 0}
FAILING_STATES = (CRASH_LOOPING, NOT_READY, MISSING, FAILED)
# The operator's validation pods, by their `app` label: the validator's (1.7 on) and those before it (1.0 to 1.6).
VALIDATION_APPS = ("nvidia-cuda-validator", "nvidia-device-plugin-validator", "nvidia-driver-validation",
                   "nvidia-device-plugin-validation")

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

# -- DaemonSets ------------------------------------------------------------


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def classify_daemonset(ds: DaemonSet) -> tuple[str, str] | None:
    """(component, install) for a DaemonSet of the GPU stack, else None.

    install is "operator", "static", "helm", "gke", "standalone", or "other" for a
    device plugin gputui does not know by name (its pods mount the kubelet's
    device-plugin directory).
    """
    labels = {**ds.labels, **ds.selector, **ds.pod_labels}
    name = ds.name
    if labels.get("app.kubernetes.io/component") == "nvidia-driver" or is_operator_driver_app(labels.get("app")):
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
    if ds.plugin_dir:
        return ("device-plugin", "other")
    return None


# A resource name (domain/name), as a flag or an environment variable gives it.
_RESOURCE_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.+]*[A-Za-z0-9])?")
# NVIDIA's GPU resources anywhere in an argument or a value (not a label such as nvidia.com/gpu.product).
_NVIDIA_GPU_IN_TEXT = re.compile(r"(?<![\w./-])nvidia\.com/(?:gpu\.shared|gpu|mig-[0-9a-z.+]+)(?![\w.+-])")


def _option(key: str) -> str:
    """A flag's or an environment variable's name, normalised: `--resource-name`, `RESOURCE_NAME` -> `resource-name`."""
    return key.lstrip("-").lower().replace("_", "-")


def advertised_resources(ds: DaemonSet, resources: GpuResources = GpuResources()) -> tuple[str, ...]:
    """The extended resources a device plugin's DaemonSet advertises, as its containers' args or env name
    them: a `--resource-name` (or `--resource`) flag or a `*RESOURCE_NAME` variable (with a resource prefix
    when the name has no domain), else a GPU resource named anywhere in them; () when none is named."""
    args = ds.plugin_args
    pairs = [(k, v) for k, eq, v in (a.partition("=") for a in args) if eq and k.startswith("-")]
    pairs += [(a, args[i + 1]) for i, a in enumerate(args[:-1]) if a.startswith("-") and "=" not in a]
    pairs += list(ds.plugin_env)
    prefix = next((v.strip("/") for k, v in pairs if _option(k).endswith("resource-prefix")), "")
    named: list[str] = []
    for key, value in pairs:
        option = _option(key)
        if option.endswith("resource-name") or option == "resource":
            value = value if "/" in value or not prefix else f"{prefix}/{value}"
            if _RESOURCE_NAME.fullmatch(value) and value not in named:
                named.append(value)
    if named:
        return tuple(named)
    found: list[str] = []
    for text in [*args, *(v for _, v in ds.plugin_env)]:
        found += _NVIDIA_GPU_IN_TEXT.findall(text)
        found += [r for r in sorted(resources.extra) if re.search(rf"(?<![\w./-]){re.escape(r)}(?![\w.+-])", text)]
    return tuple(dict.fromkeys(found))


@dataclass(frozen=True)
class StackDaemonSet:
    namespace: str
    name: str
    component: str
    install: str
    daemonset: DaemonSet = field(compare=False, repr=False)
    resources: tuple[str, ...] = ()  # device plugins: what it advertises, as its args or env name it
    gpu: bool | None = None  # device plugins: advertises a GPU resource (NVIDIA's installs do), or not; None: unknown

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def nvidia(self) -> bool:
        """A device plugin known to advertise NVIDIA GPUs: one of NVIDIA's installs, or it names one of their resources."""
        return self.component == "device-plugin" and (self.install != "other" or any(is_nvidia_resource(r) for r in self.resources))


@dataclass(frozen=True)
class ClusterPolicyStatus:
    """The GPU Operator's custom resource: a ClusterPolicy, or the DRA-based GPUCluster (operator v26.x,
    `nvidia.com/v1alpha1`, a singleton named gpu-cluster, not reconciled beside a ClusterPolicy); both report
    `status.state` and the conditions Ready and Error, written alike (the operator's internal/conditions)."""

    name: str
    # ready, notReady, ignored (a ClusterPolicy not reconciled), disabled, or "unknown" before the operator reports
    state: str
    message: str | None
    kind: str = "ClusterPolicy"  # or "GPUCluster"
    since: float | None = None  # when its Ready condition last changed (how long it has been notReady)

    def to_json(self) -> dict:
        return {"name": self.name, "state": self.state, "message": self.message, "kind": self.kind, "since": self.since}


def cluster_policy_status(policy: dict) -> ClusterPolicyStatus:
    status = policy.get("status") or {}
    state = status.get("state") or "unknown"
    message = None
    if state != "ready":
        conditions = status.get("conditions") or []
        # The operator writes why on Error=True ("ClusterPolicy is not ready; states not ready: [...]", a
        # GPUCluster's "Waiting for operand pods to be ready"), Ready=False with no message; Ready's first.
        for ctype, wanted in (("Ready", "False"), ("Error", "True")):
            for cond in conditions:
                if cond.get("type") == ctype and cond.get("status") == wanted and cond.get("message"):
                    message = message or cond["message"]
    ready = next((c for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") == "Ready"), {})
    return ClusterPolicyStatus(_meta(policy).get("name", ""), state, message, policy.get("kind") or "ClusterPolicy",
                               parse_time(ready.get("lastTransitionTime")))


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


def detect_stack(daemonsets: Iterable[DaemonSet], cluster_policies: Iterable[dict] = (),
                 resources: GpuResources = GpuResources()) -> Stack:
    """`resources`: the GPU resources (an unknown device plugin naming one of them advertises GPUs)."""
    found = []
    for ds in daemonsets:
        classified = classify_daemonset(ds)
        if not classified:
            continue
        named = advertised_resources(ds, resources) if classified[0] == "device-plugin" else ()
        gpu = None if classified[0] != "device-plugin" else True if classified[1] != "other" else (
            any(r in resources for r in named) if named else None)
        found.append(StackDaemonSet(ds.namespace, ds.name, *classified, daemonset=ds, resources=named, gpu=gpu))
    # NVIDIA's installs before other device plugins, then by namespace and name.
    found.sort(key=lambda d: (COMPONENTS.index(d.component), d.install == "other", d.namespace, d.name))
    # A ClusterPolicy before a GPUCluster (the two are not meant to be together), then by name.
    policies = sorted(cluster_policies, key=lambda p: (p.get("kind") == "GPUCluster", _meta(p).get("name", "")))
    # Several ClusterPolicies: the operator reconciles one and marks the others "ignored" (a GPUCluster is one).
    active = next((p for p in policies if (p.get("status") or {}).get("state") != "ignored"), policies[0] if policies else None)
    operator_sets = [d for d in found if d.install == "operator"]
    if active is not None or operator_sets:
        namespace = ((active or {}).get("status") or {}).get("namespace") or (operator_sets[0].namespace if operator_sets else None)
        return Stack(
            "gpu-operator", "operator", namespace,
            cluster_policy_status(active) if active is not None else None,
            tuple(found), _disabled_components(active) if active is not None else frozenset(),
        )
    plugins = [d for d in found if d.nvidia]
    if plugins:
        return Stack("device-plugin", plugins[0].install, plugins[0].namespace, None, tuple(found))
    return Stack("none", None, None, None, tuple(found))


# -- pods ------------------------------------------------------------------


@dataclass(frozen=True)
class ComponentState:
    component: str
    state: str  # RUNNING, NOT_READY, CRASH_LOOPING, MISSING, NOT_EXPECTED; SUCCEEDED or FAILED (validation pods)
    detail: str | None = None  # kubectl-like status ("Init:0/1", "CrashLoopBackOff") or why missing / not expected
    pod: str | None = None  # "namespace/name", for logs
    container: str | None = None  # the container worth reading logs from
    ready: str | None = None  # "1/2"
    restarts: int = 0
    last_termination: str | None = None  # "Error (exit 1)", "OOMKilled"...
    daemonsets: tuple[str, ...] = ()  # "namespace/name" of the DaemonSets that should run here
    deploy: str | None = None  # not expected because of this nvidia.com/gpu.deploy.* value (pre-installed, paused-for-*, ...)
    note: str | None = None  # what else a person should know (a device plugin's resource taken from the node's)
    outside: bool = False  # the device plugin runs outside Kubernetes (a host service) and registered (HOST_PLUGIN)

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


# Deploy values other than true/false that others set: the GPU Operator's driver container on a host with
# its own driver, the MIG manager and the driver manager while they need the GPUs to themselves.
_PAUSES = {"paused-for-mig-change": "MIG change", "paused-for-driver-upgrade": "driver upgrade"}


def _holds_off(value: str | None) -> bool:
    """A deploy value under which the operator runs no operand here, and that is no problem."""
    return value == "pre-installed" or (value or "").startswith("paused-for-")


def _deploy_words(label: str) -> str:
    """Why a deploy label keeps the operand off the node: `paused for MIG change (nvidia.com/gpu.deploy.x=paused-for-mig-change)`."""
    value = label.partition("=")[2]
    if value == "pre-installed":
        return f"pre-installed on the host ({label})"
    if value.startswith("paused-for-"):
        return f"paused for {_PAUSES.get(value, value.removeprefix('paused-for-').replace('-', ' '))} ({label})"
    return f"the node has {label}" + ("" if value in ("true", "false") else ", neither true nor false")


PodsByDaemonSet = dict[tuple[str, str], list[Pod]]  # (namespace, DaemonSet name) -> its pods on one node


def daemonset_pods(pods: Iterable[Pod], daemonsets: Iterable[StackDaemonSet] = ()) -> PodsByDaemonSet:
    """The pods of each DaemonSet, by (namespace, DaemonSet name): those it owns, and those owned by nothing
    that its selector matches (the DaemonSet controller adopts them)."""
    out: PodsByDaemonSet = {}
    sets = [ds for ds in daemonsets if ds.daemonset.selector]
    for pod in pods:
        if pod.owner is not None:
            if pod.owner[0] == "DaemonSet":
                out.setdefault((pod.namespace, pod.owner[1]), []).append(pod)
            continue
        for ds in sets:
            if ds.namespace == pod.namespace and all(pod.labels.get(k) == v for k, v in ds.daemonset.selector.items()):
                out.setdefault((ds.namespace, ds.name), []).append(pod)
                break
    return out


def _placed(ds: StackDaemonSet, node: Node, pods_here: PodsByDaemonSet) -> tuple[Pod | None, str | None, bool]:
    """The DaemonSet's current pod on the node (or None), why it should not run there (None: it should),
    and whether a deploy label holds it off without that being a problem."""
    # Newest first, then any terminating pod after the live ones (during a rollout there are two).
    live = sorted(pods_here.get((ds.namespace, ds.name), []), key=lambda p: p.created or 0.0, reverse=True)
    live.sort(key=lambda p: p.deleted is not None)
    targets, why = daemonset_targets(ds.daemonset, node)
    switch = _deploy_switch(node, ds.component) if ds.install == "operator" else None
    if switch == "false" or _holds_off(switch):
        # The operator's DaemonSets select nodes by these labels; they say why, whatever the selector says.
        targets, why = False, _deploy_words(_deploy_label(node, ds.component) or "")
    return (live[0] if live else None), (None if targets else why or "not targeted"), _holds_off(switch)


def _states(placed: list[tuple[StackDaemonSet, Pod | None]], component: str) -> list[ComponentState]:
    refs = tuple(ds.ref for ds, _ in placed)
    return [
        pod_component_state(component, pod, refs) if pod is not None
        else ComponentState(component, MISSING, f"no pod of DaemonSet {ds.ref} on this node", daemonsets=refs)
        for ds, pod in placed
    ]


def _component(stack: Stack, node: Node, component: str, pods_here: PodsByDaemonSet,
               sets: Iterable[StackDaemonSet] | None = None) -> ComponentState:
    """The component's state on the node from its DaemonSets (`sets`: these, not every one of the component's)."""
    candidates: list[tuple[StackDaemonSet, Pod | None]] = []
    excluded = []
    held_off = None
    for ds in (d for d in stack.daemonsets if d.component == component) if sets is None else sets:
        pod, why, holds_off = _placed(ds, node, pods_here)
        if pod is not None or why is None:
            candidates.append((ds, pod))
        elif holds_off:
            held_off = why
        else:
            excluded.append(f"{ds.ref}: {why}")
    if candidates:
        return max(_states(candidates, component), key=lambda s: _SEVERITY[s.state])
    switch = _deploy_switch(node, component) if stack.kind == "gpu-operator" else None
    if stack.kind == "gpu-operator" and component in _POLICY_KEYS:
        if component in stack.disabled:
            policy = stack.cluster_policy.name if stack.cluster_policy is not None else "?"
            return ComponentState(component, NOT_EXPECTED, f"disabled in ClusterPolicy {policy}: spec.{_POLICY_KEYS[component]}.enabled=false")
        if switch == "true":
            label = DEPLOY_LABEL_PREFIX + _DEPLOY_LABELS[component]
            return ComponentState(component, MISSING, f"no DaemonSet runs it here though {label}=true")
        if switch is not None and switch != "false" and (held_off or not excluded):
            return ComponentState(component, NOT_EXPECTED, held_off or _deploy_words(_deploy_label(node, component) or ""), deploy=switch)
    if excluded:
        return ComponentState(component, NOT_EXPECTED, "; ".join(excluded))
    return ComponentState(component, NOT_EXPECTED, None)


def _validation(pods_on_node: Iterable[Pod]) -> ComponentState | None:
    """The operator's validation pods on the node, the newest of each kind: the worst of them, or None."""
    newest: dict[str, Pod] = {}
    for pod in pods_on_node:
        app = pod.labels.get("app", "")
        if app in VALIDATION_APPS and (app not in newest or (pod.created or 0.0) > (newest[app].created or 0.0)):
            newest[app] = pod
    states = []
    for pod in newest.values():
        state = pod_component_state("validator", pod)
        states.append(replace(state, state=SUCCEEDED) if pod.phase == "Succeeded" else replace(state, state=FAILED)
                      if pod.phase == "Failed" else state)
    return max(states, key=lambda s: _SEVERITY[s.state]) if states else None


@dataclass(frozen=True)
class NodePlugin:
    """A device-plugin DaemonSet that runs, or should run, on one node."""

    daemonset: StackDaemonSet
    state: ComponentState
    nvidia: bool | None  # serves the node's NVIDIA GPUs (True, False); None: its resource is unknown

    def to_json(self) -> dict:
        ds = self.daemonset
        return {"daemonset": ds.ref, "install": ds.install, "resources": list(ds.resources), "nvidia": self.nvidia,
                "state": self.state.state}


@dataclass(frozen=True)
class NodeStack:
    components: dict[str, ComponentState]  # every one of COMPONENTS
    plugins: tuple[NodePlugin, ...] = ()  # every device plugin here, whatever it advertises
    plugin_pods: tuple[Pod, ...] = ()  # the current pods of those serving the node's NVIDIA GPUs


def _node_plugins(stack: Stack, node: Node, pods_here: PodsByDaemonSet) -> list[tuple[NodePlugin, Pod | None]]:
    here = []
    for ds in stack.plugins:
        pod, why, _ = _placed(ds, node, pods_here)
        if pod is not None or why is None:
            here.append((ds, pod))
    unknown = [ds for ds, _ in here if ds.install == "other" and not ds.resources]
    # A plugin naming no resource is the node's GPU plugin when the node advertises NVIDIA GPUs and
    # no other plugin here is known to: the node's resources say what it advertises.
    guessed = unknown[0] if len(unknown) == 1 and not any(ds.nvidia for ds, _ in here) and advertises_nvidia_gpus(node) else None
    out = []
    for ds, pod in here:
        [state] = _states([(ds, pod)], "device-plugin")
        if ds is guessed:
            names = ", ".join(sorted(r for r in node.capacity if is_nvidia_resource(r)))
            state = replace(state, note=f"{ds.ref} names no resource in its args or env: taken for the plugin of the node's {names}")
        out.append((NodePlugin(ds, state, True if ds.nvidia or ds is guessed else None if ds in unknown else False), pod))
    return out


def node_stack(stack: Stack, node: Node, pods_on_node: Iterable[Pod]) -> NodeStack:
    """One GPU node's components (pods: those bound to it), its device plugins, and the current pods of
    those serving its NVIDIA GPUs (for the plugin verdict and the plugin pane)."""
    pods_on_node = list(pods_on_node)
    pods_here = daemonset_pods(pods_on_node, stack.daemonsets)
    plugins = _node_plugins(stack, node, pods_here)
    serving = [(p.daemonset, pod) for p, pod in plugins if p.nvidia]
    components = {}
    for c in COMPONENTS:
        if c != "device-plugin":
            components[c] = _component(stack, node, c, pods_here)
        elif serving:
            state = max(_states(serving, c), key=lambda s: _SEVERITY[s.state])
            note = next((p.state.note for p, _ in plugins if p.state.note), None)
            components[c] = replace(state, note=note) if note else state
        else:  # why none is expected here, or which is missing
            state = _component(stack, node, c, pods_here, [ds for ds in stack.plugins if ds.nvidia])
            if state.state == NOT_EXPECTED and not state.deploy and _registered_outside(node, pods_on_node):
                # What kept each DaemonSet off the node stays, as a note.
                state = replace(state, detail=HOST_PLUGIN, note=state.detail, outside=True)
            components[c] = state
    validation = _validation(pods_on_node)
    if validation is not None and _SEVERITY[validation.state] > _SEVERITY[components["validator"].state]:
        components["validator"] = validation
    return NodeStack(components, tuple(p for p, _ in plugins), tuple(pod for _, pod in serving if pod is not None))


HOST_PLUGIN = "registered (plugin not run by Kubernetes)"


def _registered_outside(node: Node, pods_on_node: Iterable[Pod]) -> bool:
    """The kubelet reports allocatable NVIDIA GPUs, so a device plugin registered, and no plugin pod runs on the node
    (none labelled as one, a static pod's mirror included): a host service (Bottlerocket, some managed node images).
    Called where no plugin DaemonSet would place a pod on the node."""
    if not any(is_nvidia_resource(name) and parse_count(q) > 0 for name, q in node.allocatable.items()):
        return False
    return not any(is_plugin_pod(p) and not p.finished for p in pods_on_node)


def plugin_expected(components: dict[str, ComponentState]) -> bool:
    """False when a deploy label holds the device plugin off the node and that is no problem (paused, pre-installed),
    or when a plugin outside Kubernetes registered the node's GPUs and no plugin DaemonSet is meant to run there."""
    plugin = components.get("device-plugin")
    return plugin is None or plugin.state != NOT_EXPECTED or not (_holds_off(plugin.deploy) or plugin.outside)


def node_components(stack: Stack, node: Node, pods_on_node: Iterable[Pod]) -> dict[str, ComponentState]:
    """The state of every component in COMPONENTS on one GPU node (pods: those bound to it)."""
    return node_stack(stack, node, pods_on_node).components


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


def cluster_problems(stack: Stack, now: float | None = None) -> list[Problem]:
    """`operator-not-ready` when the active ClusterPolicy (or GPUCluster) is notReady."""
    return policy_problems(stack.cluster_policy, now)


def policy_problems(policy: ClusterPolicyStatus | None, now: float | None = None) -> list[Problem]:
    """`operator-not-ready`, with how long when its Ready condition says since when (and `now` is given)."""
    if policy is None or policy.state != "notReady":
        return []
    age = human_duration(max(0.0, now - policy.since)) if now is not None and policy.since is not None else None
    message = f"{policy.kind} {policy.name} is notReady" + (f" for {age}" if age else "")
    if policy.message:
        message += f": {policy.message}"
    return [Problem(Verdict.OPERATOR_NOT_READY, message, age)]


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
            problems.append(Problem(Verdict.COMPONENT_FAILING, state.describe()))
    plugin = components.get("device-plugin")
    if plugin and len(plugin.daemonsets) > 1:
        problems.append(Problem(Verdict.SEVERAL_PLUGINS, "several device plugins target this node: " + ", ".join(plugin.daemonsets)))
    return problems
