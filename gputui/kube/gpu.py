"""GPU arithmetic and verdicts: pure functions of records.

Allocated counts the effective requests of pods bound to the node that are not
finished (terminating pods hold their devices until they are gone). Free is
allocatable - allocated. A resource at 0 in capacity and allocatable, with
nothing allocated, is a stale entry (left over after a MIG strategy change),
not a GPU the node has, and is left out.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Mapping

from .quantities import parse_count
from .records import Event, Node, Pod
from .verdicts import NODE_VERDICTS, Verdict, rank

if TYPE_CHECKING:  # stack.py and dra.py build on this module
    from .dra import ClaimHold, DraDevice
    from .stack import ComponentState, NodePlugin

GPU = "nvidia.com/gpu"
GPU_SHARED = "nvidia.com/gpu.shared"
MIG_PREFIX = "nvidia.com/mig-"

# Label values naming the device-plugin pods of each install style
# (see shared/reference/gpu-stack.md): label key, value, style.
PLUGIN_LABELS: tuple[tuple[str, str, str], ...] = (
    ("name", "nvidia-device-plugin-ds", "static"),
    ("app.kubernetes.io/name", "nvidia-device-plugin", "helm"),
    ("app", "nvidia-device-plugin-daemonset", "operator"),
    ("k8s-app", "nvidia-gpu-device-plugin", "gke"),
)
PLUGIN_CONTAINERS = ("nvidia-device-plugin-ctr", "nvidia-device-plugin")
# The Helm chart labels its GFD and MPS daemons like the plugin; their
# container names tell them apart.
_NOT_PLUGIN_CONTAINERS = ("gpu-feature-discovery", "mps-control-daemon")

# GPU Operator operands and friends, by their `app` label.  The one map of
# operator apps: stack.py's component matrix uses the names of its columns.
OPERATOR_APPS = {
    "nvidia-driver-daemonset": "driver",
    "nvidia-container-toolkit-daemonset": "container-toolkit",
    "nvidia-device-plugin-daemonset": "device-plugin",
    "nvidia-device-plugin-mps-control-daemon": "mps-control-daemon",
    "gpu-feature-discovery": "gfd",
    "nvidia-dcgm-exporter": "dcgm-exporter",
    "nvidia-dcgm": "dcgm",
    "nvidia-mig-manager": "mig-manager",
    "nvidia-operator-validator": "validator",
    "nvidia-node-status-exporter": "node-status-exporter",
    "nvidia-cuda-validator": "cuda-validator",
    "nvidia-device-plugin-validator": "plugin-validator",
    "nvidia-driver-validation": "driver-validation",  # the operator's validation pods before its validator (1.0 to 1.6)
    "nvidia-device-plugin-validation": "plugin-validation",
    "nvidia-vfio-manager": "vfio-manager",
    "nvidia-cc-manager": "cc-manager",
    "gpu-operator": "gpu-operator",
    "nfd-worker": "nfd-worker",
}
_NAMED_APPS = {  # app.kubernetes.io/name values
    "gpu-feature-discovery": "gfd",
    "dcgm-exporter": "dcgm-exporter",
    "node-feature-discovery": "node-feature-discovery",
    "gpu-operator": "gpu-operator",
    "nvidia-dra-driver-gpu": "dra-driver",
    "dra-driver-nvidia-gpu": "dra-driver",
}
MANAGED_BY_GPUTUI = ("app.kubernetes.io/managed-by", "gputui")


@dataclass(frozen=True, slots=True)
class GpuResources:
    """Which extended resources count as GPUs: NVIDIA's plus user-configured extras."""

    extra: frozenset[str] = frozenset()

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (
            name == GPU or name == GPU_SHARED or name.startswith(MIG_PREFIX) or name in self.extra
        )

    def of(self, requests: dict[str, int]) -> dict[str, int]:
        """Only the GPU resources of a request map."""
        return {k: v for k, v in requests.items() if k in self and v}


def resource_order(name: str) -> tuple[int, str]:
    """Sort key: nvidia.com/gpu, gpu.shared, MIG slices, then others by name."""
    if name == GPU:
        return 0, name
    if name == GPU_SHARED:
        return 1, name
    if name.startswith(MIG_PREFIX):
        return 2, name
    return 3, name


def sorted_resources(names: Iterable[str]) -> list[str]:
    return sorted(names, key=resource_order)


@dataclass(slots=True)
class Usage:
    capacity: int = 0
    allocatable: int = 0
    allocated: int = 0

    @property
    def free(self) -> int:
        return self.allocatable - self.allocated

    def add(self, other: "Usage") -> None:
        self.capacity += other.capacity
        self.allocatable += other.allocatable
        self.allocated += other.allocated

    def as_dict(self) -> dict[str, int]:
        return {"capacity": self.capacity, "allocatable": self.allocatable, "allocated": self.allocated, "free": self.free}


@dataclass(frozen=True, slots=True)
class Problem:
    code: str
    message: str
    subject: str | None = None  # what the verdict names in a short cell (a condition's type, a taint's key)


PLUGIN_INPUT, XID_INPUT = "device plugin", "XIDs"


@dataclass(frozen=True, slots=True)
class Unknown:
    """A verdict that cannot be given yet, or here: its input is not known. Until every input of a
    node's verdicts is known, it is not `ok`."""

    what: str  # PLUGIN_INPUT, XID_INPUT
    why: str  # "pods not listed yet", "DCGM not read yet", "a dump holds no DCGM readings"
    pending: bool  # True: known once the input comes (`…`); False: cannot be known here (`?`)


# Verdicts, worst first: a node's problems come in this order (the Nodes pane shows the
# first and counts the rest): kube/verdicts.py's order.
SEVERITY_ORDER = tuple(v.value for v in NODE_VERDICTS)


def by_severity(problems: Iterable[Problem]) -> list[Problem]:
    """Worst first (SEVERITY_ORDER); problems of one code keep their order."""
    return sorted(problems, key=lambda p: rank(p.code))


# The kubelet's own node conditions: anything else that is True was set by a health
# monitor (NVIDIA's NVSentinel, node-problem-detector) and is a verdict.
KUBELET_CONDITIONS = frozenset({"Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"})
# Taints that are not health verdicts: the usual one keeping non-GPU pods off GPU nodes,
# and those Kubernetes itself sets (cordoned, not ready, unreachable, pressure).
USUAL_TAINTS = frozenset({GPU})
KUBERNETES_TAINT_PREFIX = "node.kubernetes.io/"


# -- pods ------------------------------------------------------------------
def holds_gpus(pod: Pod) -> bool:
    """Bound and not finished: the pod's devices are taken on its node."""
    return pod.node is not None and not pod.finished


DRIVER_COMPONENT = "nvidia-driver"  # app.kubernetes.io/component of the driver's pods
OPERATOR_MANAGER = "gpu-operator"  # app.kubernetes.io/managed-by of the operator's operands
OPERATOR_PARTS = ("gpu-operator", "nvidia-gpu")  # app.kubernetes.io/part-of
OPERATOR_DRIVER_PREFIX = "nvidia-driver-daemonset-"
# Every label value that makes a pod part of the stack (the driver DaemonSets' apps aside: a prefix). Most pods of a
# big cluster have none of them, told with one look at their labels' values instead of a look per rule.
STACK_LABEL_VALUES = frozenset(
    {*(value for _, value, _ in PLUGIN_LABELS), *OPERATOR_APPS, DRIVER_COMPONENT, *_NAMED_APPS, OPERATOR_MANAGER, *OPERATOR_PARTS}
)


def stack_component(labels: dict[str, str]) -> str | None:
    """Which part of the GPU stack a pod belongs to, from its labels; None if none."""
    try:
        if STACK_LABEL_VALUES.isdisjoint(labels.values()) and not is_operator_driver_app(labels.get("app")):
            return None
    except (TypeError, AttributeError):  # a value no server writes (a list, a number): the rules judge it as before
        pass
    return stack_component_by_rule(labels)


def stack_component_by_rule(labels: dict[str, str]) -> str | None:
    """stack_component, rule by rule (tests/model/test_records_gpu.py checks that STACK_LABEL_VALUES covers them)."""
    if plugin_install_style(labels):
        return "device-plugin"
    app = labels.get("app")
    if app in OPERATOR_APPS:
        return OPERATOR_APPS[app]
    if labels.get("app.kubernetes.io/component") == DRIVER_COMPONENT or is_operator_driver_app(app):
        return "driver"
    named = labels.get("app.kubernetes.io/name")
    if named in _NAMED_APPS:
        return _NAMED_APPS[named]
    if labels.get("app.kubernetes.io/managed-by") == OPERATOR_MANAGER or labels.get("app.kubernetes.io/part-of") in OPERATOR_PARTS:
        return app or named or "gpu-operator"
    return None


def is_operator_driver_app(app: str | None) -> bool:
    """The operator names its driver DaemonSets after the OS (`nvidia-driver-daemonset-<rhcos>` on OpenShift,
    `-<kernel>-<os>` for precompiled drivers) and labels them `app=<name>`."""
    return app is not None and app.startswith(OPERATOR_DRIVER_PREFIX)


def plugin_install_style(labels: dict[str, str]) -> str | None:
    """'static', 'helm', 'operator' or 'gke' when the labels are a device plugin's."""
    for key, value, style in PLUGIN_LABELS:
        if labels.get(key) == value:
            return style
    return None


def is_plugin_pod(pod: Pod) -> bool:
    if plugin_install_style(pod.labels) is None:
        return False
    return not any(c.startswith(_NOT_PLUGIN_CONTAINERS) for c in pod.containers)


def plugin_container(pod: Pod) -> str | None:
    """The container whose logs are the device plugin's (these pods have sidecars)."""
    for name in PLUGIN_CONTAINERS:
        if name in pod.containers:
            return name
    for name in pod.containers:
        if "device-plugin" in name and "sidecar" not in name:
            return name
    return pod.containers[0] if pod.containers else None


def choose_plugin_pod(candidates: Iterable[Pod], *, by_labels: bool = True) -> Pod | None:
    """The node's current plugin pod: not terminating first, then the newest. `by_labels`: the candidates
    are any pods, their labels say which are plugin pods; else each is a plugin DaemonSet's current pod
    (several device plugins: one in trouble comes first, for the verdict and the logs)."""
    def rank(pod: Pod) -> tuple[bool, bool, float]:
        return pod.deleted is None, not by_labels and not pod_is_ready(pod), pod.created or 0.0

    best: Pod | None = None
    for pod in candidates:
        if by_labels and not is_plugin_pod(pod):
            continue
        if best is None or rank(pod) > rank(best):
            best = pod
    return best


def crash_looping(pod: Pod) -> bool:
    statuses = pod.container_statuses + pod.init_container_statuses
    return any(cs.reason == "CrashLoopBackOff" for cs in statuses) or pod.status.endswith("CrashLoopBackOff")


def pod_is_ready(pod: Pod) -> bool:
    return pod.phase == "Running" and pod.deleted is None and pod.total > 0 and pod.ready >= pod.total


def unbound_reason(pod: Pod, events: Iterable[Event] = ()) -> str | None:
    """Why a pod waits for a node: its scheduling gates, else PodScheduled's message, else the latest FailedScheduling event."""
    if pod.node is not None:
        return None
    if pod.gates:
        return gated_reason(pod.gates)
    if pod.scheduled_message:
        return pod.scheduled_message
    latest: Event | None = None
    for ev in events:
        if ev.reason == "FailedScheduling" and (latest is None or (ev.last or 0) >= (latest.last or 0)):
            latest = ev
    return latest.message if latest is not None else None


def gated_reason(gates: tuple[str, ...]) -> str:
    """`held by scheduling gate kueue.x-k8s.io/admission (owner kueue.x-k8s.io): ...`; a gate's owner is its name's prefix."""
    named = ", ".join(f"{g} (owner {g.split('/', 1)[0]})" if "/" in g else g for g in gates)
    several = len(gates) > 1
    return f"held by scheduling gate{'s' if several else ''} {named}: not scheduled until {'they are' if several else 'it is'} removed"


# -- nodes -----------------------------------------------------------------
@dataclass(slots=True)
class GpuFacts:
    """What GPU Feature Discovery (and NFD, the operator) say about a node."""

    product: str | None = None
    memory_mib: int | None = None
    count: int | None = None
    family: str | None = None
    driver: str | None = None
    cuda: str | None = None
    mig_strategy: str | None = None
    mig_capable: bool | None = None
    mig_config: str | None = None
    mig_config_state: str | None = None
    replicas: int | None = None
    sharing: str | None = None
    mig_labels: dict[str, int] = field(default_factory=dict)  # GFD's MIG profile -> count (mixed strategy)


def _int_label(labels: dict[str, str], key: str) -> int | None:
    value = labels.get(key)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def gpu_facts(node: Node) -> GpuFacts:
    labels = node.labels
    driver = labels.get("nvidia.com/cuda.driver-version.full")
    if driver is None and "nvidia.com/cuda.driver.major" in labels:  # pre-2022 GFD labels
        parts = [labels.get(f"nvidia.com/cuda.driver.{p}") for p in ("major", "minor", "rev")]
        driver = ".".join(p for p in parts if p)
    cuda = labels.get("nvidia.com/cuda.runtime-version.full")
    if cuda is None and "nvidia.com/cuda.runtime.major" in labels:
        cuda = ".".join(labels[f"nvidia.com/cuda.runtime.{p}"] for p in ("major", "minor") if f"nvidia.com/cuda.runtime.{p}" in labels)
    mig_capable = labels.get("nvidia.com/mig.capable")
    mig_labels = {}
    for key, value in labels.items():
        if key.startswith(MIG_PREFIX) and key.endswith(".count"):
            try:
                mig_labels[key[len("nvidia.com/"): -len(".count")]] = int(value)
            except ValueError:
                pass
    return GpuFacts(
        product=labels.get("nvidia.com/gpu.product"),
        memory_mib=_int_label(labels, "nvidia.com/gpu.memory"),
        count=_int_label(labels, "nvidia.com/gpu.count"),
        family=labels.get("nvidia.com/gpu.family"),
        driver=driver,
        cuda=cuda,
        mig_strategy=labels.get("nvidia.com/mig.strategy"),
        mig_capable=None if mig_capable is None else mig_capable == "true",
        mig_config=labels.get("nvidia.com/mig.config"),
        mig_config_state=labels.get("nvidia.com/mig.config.state"),
        replicas=_int_label(labels, "nvidia.com/gpu.replicas"),
        sharing=labels.get("nvidia.com/gpu.sharing-strategy"),
        mig_labels=mig_labels,
    )


def has_gpu_hardware(node: Node) -> bool:
    labels = node.labels
    return (
        labels.get("nvidia.com/gpu.present") == "true"
        or labels.get("feature.node.kubernetes.io/pci-10de.present") == "true"
        or "nvidia.com/gpu.product" in labels
    )


def node_usage(node: Node, pods: Iterable[Pod], resources: GpuResources, dra: Mapping[str, Usage] | None = None) -> dict[str, Usage]:
    """Per GPU resource: capacity, allocatable and allocated on this node (pods: those bound to it).

    `dra`: the node's Dynamic Resource Allocation devices per DeviceClass (`gpu.nvidia.com`, `mig.nvidia.com`),
    rows of their own beside the device plugins' resources: the node advertises none of them, and a pod asking
    for nvidia.com/gpu cannot have them (kube-scheduler's NodeResourcesFit reads the node's allocatable).
    """
    usage: dict[str, Usage] = {}
    for name, quantity in node.capacity.items():
        if name in resources:
            usage.setdefault(name, Usage()).capacity = parse_count(quantity)
    for name, quantity in node.allocatable.items():
        if name in resources:
            usage.setdefault(name, Usage()).allocatable = parse_count(quantity)
    for name, extra in (dra or {}).items():
        usage.setdefault(name, Usage()).add(extra)
    for pod in pods:
        if pod.node != node.name or not holds_gpus(pod):
            continue
        for name, n in pod.requests.items():
            if name in resources:
                usage.setdefault(name, Usage()).allocated += n
    return {
        name: usage[name]
        for name in sorted_resources(usage)
        if usage[name].capacity or usage[name].allocatable or usage[name].allocated
    }


def advertises_nvidia_gpus(node: Node) -> bool:
    """Some NVIDIA GPU resource (full, shared or MIG) is in the node's capacity (a resource at 0 is stale, not a GPU)."""
    return any(is_nvidia_resource(name) and parse_count(q) > 0 for name, q in node.capacity.items())


def has_nvidia_gpus(node: Node) -> bool:
    """NVIDIA hardware labelled (GFD, NFD) or NVIDIA GPU resources advertised: the nodes the GPU stack should serve."""
    return has_gpu_hardware(node) or advertises_nvidia_gpus(node)


def is_gpu_node(node: Node, usage: dict[str, Usage]) -> bool:
    return has_gpu_hardware(node) or any(u.capacity or u.allocatable for u in usage.values())


def is_nvidia_resource(name: str) -> bool:
    return name == GPU or name == GPU_SHARED or name.startswith(MIG_PREFIX)


def needs_nvidia_plugin(node: Node, usage: dict[str, Usage]) -> bool:
    """NVIDIA hardware labelled, or an NVIDIA resource advertised (user-added names such as amd.com/gpu do not count)."""
    return has_gpu_hardware(node) or any(u.capacity and is_nvidia_resource(name) for name, u in usage.items())


def _ready_problem(node: Node) -> Problem | None:
    if node.ready:
        return None
    for c in node.conditions:
        if c.type == "Ready":
            detail = ": ".join(p for p in (c.reason, c.message) if p)
            state = "node is not Ready" + (": its status is unknown" if c.status == "Unknown" else "")
            return Problem(Verdict.NOT_READY, state + (f" ({detail})" if detail else ""))
    return Problem(Verdict.NOT_READY, "node reports no Ready condition")


def _plugin_problem(plugin: Pod | None) -> Problem | None:
    if plugin is None:
        return Problem(Verdict.PLUGIN_NOT_RUNNING, "no NVIDIA device-plugin pod runs on this node")
    name = f"{plugin.namespace}/{plugin.name}"
    if crash_looping(plugin):
        return Problem(Verdict.PLUGIN_NOT_RUNNING, f"device-plugin pod {name} is crash-looping ({plugin.restarts} restarts)")
    if not pod_is_ready(plugin):
        return Problem(Verdict.PLUGIN_NOT_RUNNING, f"device-plugin pod {name} is not ready ({plugin.status})")
    return None


def health_condition_problems(node: Node) -> list[Problem]:
    """`health-condition`: one per condition beyond the kubelet's own that is True, in the node's order."""
    out = []
    for c in node.conditions:
        if c.type in KUBELET_CONDITIONS or c.status != "True" or not c.type:
            continue
        detail = ": ".join(p for p in (c.reason, c.message) if p)
        out.append(Problem(Verdict.HEALTH_CONDITION, f"condition {c.type} is True" + (f" ({detail})" if detail else ""), c.type))
    return out


def taint_problems(node: Node) -> list[Problem]:
    """`tainted`: one per NoSchedule/NoExecute taint other than nvidia.com/gpu and node.kubernetes.io/* (GPU nodes)."""
    out = []
    seen = set()
    for t in node.taints:
        if t.effect not in ("NoSchedule", "NoExecute") or t.key in USUAL_TAINTS or t.key.startswith(KUBERNETES_TAINT_PREFIX):
            continue
        shown = f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"
        if shown in seen:
            continue
        seen.add(shown)
        does = "evicts the pods that do not tolerate it" if t.effect == "NoExecute" else "keeps new pods that do not tolerate it off this node"
        out.append(Problem(Verdict.TAINTED, f"taint {shown} {does}", t.key))
    return out


def node_problems(
    node: Node,
    usage: dict[str, Usage],
    plugin: Pod | None,
    *,
    pods_known: bool = True,
    stack_problems: Iterable[Problem] = (),
    dra: bool = False,
    plugin_needed: bool = True,
) -> list[Problem]:
    """The node's verdicts, worst first (SEVERITY_ORDER), with the GPU stack's and the DCGM
    exporter's (component-failing, several-plugins, xid-errors) among them. Without the pods (403, not synced)
    nothing is said about the plugin pod; nor on a node whose GPUs Dynamic
    Resource Allocation hands out (`dra`: no device plugin is needed there), nor where the GPU stack
    says none is expected now (`plugin_needed`: paused for a MIG change, pre-installed on the host)."""
    problems: list[Problem] = []
    advertised = any(u.capacity for u in usage.values())
    if has_gpu_hardware(node) and not advertised and not dra:
        problems.append(Problem(
            Verdict.PLUGIN_NOT_REGISTERED,
            "NVIDIA GPUs are labelled on this node but it advertises no GPU resource: the device plugin has not registered",
        ))
    unhealthy = [f"{name} {u.allocatable}/{u.capacity} allocatable" for name, u in usage.items() if u.allocatable < u.capacity]
    if unhealthy:
        problems.append(Problem(Verdict.UNHEALTHY_GPUS, "fewer GPUs allocatable than installed: " + ", ".join(unhealthy)))
    over = [f"{name} {u.allocated} allocated > {u.allocatable} allocatable" for name, u in usage.items() if u.allocated > u.allocatable]
    if over:
        problems.append(Problem(Verdict.OVERCOMMITTED, "more GPUs allocated than allocatable: " + ", ".join(over)))
    ready = _ready_problem(node)
    if ready:
        problems.append(ready)
    if node.unschedulable:
        problems.append(Problem(Verdict.CORDONED, "node is cordoned: no new pods are scheduled on it"))
    if pods_known and not dra and plugin_needed and needs_nvidia_plugin(node, usage):
        plugin_problem = _plugin_problem(plugin)
        if plugin_problem:
            problems.append(plugin_problem)
    problems.extend(stack_problems)
    problems.extend(health_condition_problems(node))
    if is_gpu_node(node, usage) or dra:
        problems.extend(taint_problems(node))
    return by_severity(problems)


@dataclass(slots=True)
class NodeSummary:
    node: Node
    facts: GpuFacts
    usage: dict[str, Usage]
    problems: list[Problem]
    plugin: Pod | None
    gpu_node: bool
    components: dict[str, ComponentState] = field(default_factory=dict)  # GPU nodes: stack.COMPONENTS -> state
    plugins: tuple[NodePlugin, ...] = ()  # GPU nodes: every device plugin that runs or should run here
    dra_devices: tuple[DraDevice, ...] = ()  # Dynamic Resource Allocation devices, with their holders
    unknown: tuple[Unknown, ...] = ()  # verdicts whose inputs are not known: the node is not `ok` while any is

    @property
    def name(self) -> str:
        return self.node.name


def summary_inputs(pod: Pod) -> object:
    """What a node's summary reads of one of its pods (summarize_node, stack.node_components):
    all of a GPU-stack or DaemonSet pod; of any other only where it runs, whether it finished
    and what it requests. A pod change whose inputs compare equal leaves the summary as it was."""
    if (pod.owner is not None and pod.owner[0] == "DaemonSet") or stack_component(pod.labels):
        return pod
    return (pod.node, pod.finished, pod.requests)


def summarize_node(
    node: Node,
    pods_on_node: list[Pod],
    resources: GpuResources,
    *,
    pods_known: bool = True,
    dra: Mapping[str, Usage] | None = None,
    dra_devices: tuple[DraDevice, ...] = (),
    components: dict[str, ComponentState] | None = None,
    stack_problems: Iterable[Problem] = (),
    plugin_pods: Iterable[Pod] | None = None,
    plugin_needed: bool = True,
    plugins: tuple[NodePlugin, ...] = (),
    pods_unknown: Unknown | None = None,
    xids_unknown: Unknown | None = None,
) -> NodeSummary:
    """`plugin_pods`: the current pods of the device plugins that serve the node's NVIDIA GPUs, as the
    GPU stack found them whoever made them (stack.node_stack), candidates beside the pods labelled as
    NVIDIA's plugin; None: those labels alone say. `pods_unknown`: why the pods are not known (the
    plugin verdict then waits, where a plugin is needed); `xids_unknown`: why the node's XIDs are not."""
    usage = node_usage(node, pods_on_node, resources, dra)
    if plugin_pods is None:
        plugin = choose_plugin_pod(pods_on_node)
    else:
        found = list(plugin_pods)
        keys = {p.key for p in found}
        plugin = choose_plugin_pod([*found, *(p for p in pods_on_node if p.key not in keys and is_plugin_pod(p))], by_labels=False)
    unknown = []
    if pods_unknown is not None and not pods_known and not dra_devices and plugin_needed and needs_nvidia_plugin(node, usage):
        unknown.append(pods_unknown)
    if xids_unknown is not None:
        unknown.append(xids_unknown)
    return NodeSummary(
        node=node,
        facts=gpu_facts(node),
        usage=usage,
        unknown=tuple(unknown),
        problems=node_problems(node, usage, plugin, pods_known=pods_known, stack_problems=stack_problems,
                               dra=bool(dra_devices), plugin_needed=plugin_needed),
        plugin=plugin,
        gpu_node=is_gpu_node(node, usage) or bool(dra_devices),
        components=components or {},
        plugins=plugins,
        dra_devices=dra_devices,
    )


def model_key(product: str, resource: str) -> str:
    """A fleet's `by_model` row: whole GPUs (nvidia.com/gpu) under the GPU model; MIG slices per profile, shared GPUs,
    DRA DeviceClasses and other resources each a row of their own (`NVIDIA-H100-80GB-HBM3 mig-1g.10gb`), so that
    slices and replicas never add up with whole GPUs."""
    return product if resource == GPU else f"{product} {resource.removeprefix('nvidia.com/')}"


def totals(summaries: Iterable[NodeSummary]) -> dict[str, Usage]:
    out: dict[str, Usage] = {}
    for s in summaries:
        for name, u in s.usage.items():
            out.setdefault(name, Usage()).add(u)
    return {name: out[name] for name in sorted_resources(out)}


@dataclass(slots=True)
class GpuPod:
    pod: Pod
    gpu: dict[str, int]  # requested GPU resources, and per DeviceClass the NVIDIA devices its DRA claims hold
    reason: str | None  # why it is not bound, when it is not
    claims: tuple[ClaimHold, ...] = ()  # what it holds through Dynamic Resource Allocation
    asks: tuple[str, ...] = ()  # what its unallocated claims ask for that no count says yet (dra.waiting_asks' words)


def gpu_pod(pod: Pod, resources: GpuResources, events: Iterable[Event] = (), claims: tuple[ClaimHold, ...] = (),
            claimed: Iterable[tuple[str, int]] = (), asks: Iterable[str] = ()) -> GpuPod | None:
    """The pod as a GPU pod, or None when it neither holds nor waits for GPUs (or is finished).

    `claims`: the DRA claims reserved for it (dra.pod_holdings); a pod holding devices only that way is a GPU pod too.
    `gpu` names what it holds through them by DeviceClass (`gpu.nvidia.com`, `mig.nvidia.com`), as the node rows do.
    `claimed`: (DeviceClass, count) its claims not yet allocated ask for: a pod waiting for devices that way is one too;
    `asks`: the words for what they ask for where the count is known only at allocation (`all matching gpu.nvidia.com`).
    """
    gpu = resources.of(pod.requests)
    for hold in claims:
        for name, n in hold.gpu:
            gpu[name] = gpu.get(name, 0) + n
    for name, n in claimed:
        gpu[name] = gpu.get(name, 0) + n
    asks = tuple(asks)
    if (not gpu and not claims and not asks) or pod.finished:
        return None
    return GpuPod(pod, {name: gpu[name] for name in sorted_resources(gpu)}, unbound_reason(pod, events), claims, asks)


def allocated_hours(entry: GpuPod, now: float) -> dict[str, float] | None:
    """The pod's allocated GPU-hours so far, per resource of `entry.gpu`: what it holds times the hours since
    the kubelet took it (status.startTime), its GPUs held from then on. Allocated, not used (its use is the
    Idle GPUs' and Usage screens'). Each resource counts in its own unit: a MIG slice as its profile, a shared
    GPU's replica as one replica, a DRA DeviceClass's devices as devices; none is a whole GPU of another.
    {} for a pod not bound (it holds nothing yet); None when its start is not known, or later than `now` (this
    machine's clock behind the cluster's: kubectl's `<invalid>` age)."""
    pod = entry.pod
    if pod.node is None:
        return {}
    if pod.started is None or pod.started > now:
        return None
    hours = (now - pod.started) / 3600
    return {name: n * hours for name, n in entry.gpu.items()}
