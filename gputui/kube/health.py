"""Bad GPUs and the work on them: for each GPU some signal calls unhealthy, the pods that hold that very GPU
now, and how that is known.

Signals, per GPU (a GPU UUID, or a DRA device):

- `dcgm`: the DCGM exporter's last XID (DCGM_FI_DEV_XID_ERRORS, never reset by the exporter). `XidMemory`
  remembers when each GPU's value last changed; a value already there at the first read has an unknown age
  (at least as old as that read). An XID that has not changed for `old_after` seconds reads as old, never new.
- `pod-status`: a container's allocatedResourcesStatus (KEP-4680) says one of its devices is Unhealthy.
- `dra-taint`: the DRA driver (or an admin) tainted the device on its ResourceSlice (KEP-5055).

Per node, when no GPU is named (the pods cannot be told): the device plugin advertising fewer devices than the
node has (capacity > allocatable) without any pod saying which, and a health monitor's node condition.

Who holds a GPU: the exporter's pod attribution (`pod`/`namespace` labels), the pods whose
allocatedResourcesStatus lists a device of it, and the pods a ResourceClaim allocated it to is reserved for.
Pure functions of records and readings, and XidMemory's clock; nothing here imports Textual.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from .dcgm import GpuReading, xid_meaning
from .duration import human_duration
from .dra import DraDevice
from .gpu import has_nvidia_gpus, health_condition_problems, is_nvidia_resource
from .records import Node, Pod

if TYPE_CHECKING:
    from .metrics import NodeMetrics

DEFAULT_XID_OLD_AFTER = 24 * 3600.0  # an XID unchanged this long reads as old
DCGM, POD_STATUS, DRA_TAINT, PLUGIN, CONDITION = "dcgm", "pod-status", "dra-taint", "device-plugin", "node-condition"
BY_DCGM, BY_POD_STATUS, BY_CLAIM = "DCGM attribution", "its allocatedResourcesStatus", "claim allocation"


@dataclass(frozen=True)
class XidState:
    value: int
    since: float  # when the value was first read, or last seen changing
    changed: bool  # True: `since` is when it changed; False: it was there at the first read (older, by how much unknown)


class XidMemory:
    """When each GPU's XID value last changed, as seen in the exporters' readings (`record` is a
    MetricsPoller.on_readings listener). `clock` gives the time (tests move it)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._states: dict[tuple[str, str], XidState] = {}  # (node, GPU UUID) -> state

    def record(self, node: str, readings: Iterable[GpuReading], at: float | None = None) -> None:
        now = self.clock()
        seen: dict[str, int] = {}
        for reading in readings:  # every MIG instance of a GPU reports the GPU's XID
            seen[reading.uuid] = max(seen.get(reading.uuid, 0), reading.xid or 0)
        for uuid, value in seen.items():
            before = self._states.get((node, uuid))
            if before is None:
                self._states[(node, uuid)] = XidState(value, now, changed=False)
            elif before.value != value:
                self._states[(node, uuid)] = XidState(value, now, changed=True)
        for gone in [key for key in self._states if key[0] == node and key[1] not in seen]:
            del self._states[gone]

    def state(self, node: str, uuid: str) -> XidState | None:
        return self._states.get((node, uuid))


@dataclass(frozen=True)
class Signal:
    source: str  # DCGM, POD_STATUS, DRA_TAINT, PLUGIN, CONDITION
    text: str  # "XID 79 (GPU has fallen off the bus)"; cluster text in it is untrusted
    since: float | None  # when it began or last changed, where known
    exact: bool = True  # False: `since` is when gputui first read it, it began earlier
    old: bool = False  # an XID unchanged for longer than old_after

    def age(self, now: float) -> float | None:
        return None if self.since is None else max(0.0, now - self.since)

    def to_json(self, now: float) -> dict:
        """age_s: since it began or last changed (null: unknown); age_at_least_s: it began before gputui first read
        it, that long ago."""
        age = self.age(now)
        return {"source": self.source, "text": self.text, "age_s": round(age) if age is not None and self.exact else None,
                "age_at_least_s": round(age) if age is not None and not self.exact else None, "old": self.old}


@dataclass(frozen=True)
class Holder:
    namespace: str
    name: str
    owner: str | None  # "Job llm-train"
    workload: str | None  # the Kueue Workload's name
    how: tuple[str, ...]  # BY_DCGM, BY_POD_STATUS, BY_CLAIM

    def to_json(self) -> dict:
        return {"namespace": self.namespace, "name": self.name, "owner": self.owner, "workload": self.workload, "how": list(self.how)}


@dataclass
class BadGpu:
    node: str
    device: str | None  # "GPU 1", "GPU 0 (MIG)", "gpu-0" (DRA); None: the node's, which GPU unknown
    uuid: str | None
    signals: list[Signal] = field(default_factory=list)
    holders: list[Holder] = field(default_factory=list)
    holders_known: bool = True  # False: a node-level signal, which pods it touches cannot be told

    @property
    def newest(self) -> float:
        """The latest known start of its signals (for newest first); signals of unknown age count as oldest."""
        return max((s.since for s in self.signals if s.since is not None and s.exact and not s.old), default=-1.0)

    @property
    def old(self) -> bool:
        return all(s.old for s in self.signals)

    def to_json(self, now: float) -> dict:
        return {"node": self.node, "device": self.device, "uuid": self.uuid, "signals": [s.to_json(now) for s in self.signals],
                "pods": [h.to_json() for h in self.holders] if self.holders_known else None}


def age_words(age_s: float | None, at_least_s: float | None, old: bool) -> str:
    """How long a signal has been so: "3m ago", "last change 3d ago" (old), "unchanged for 2m or more" (it was
    there when gputui first read it), "" when unknown."""
    if age_s is not None:
        return f"last change {human_duration(age_s)} ago" if old else f"{human_duration(age_s)} ago"
    if at_least_s is not None:
        return f"unchanged for {human_duration(at_least_s)} or more" if at_least_s >= 1 else "there at gputui's first read"
    return ""


def signal_words(signal: Signal, now: float) -> str:
    """"XID 79 (GPU has fallen off the bus), 3m ago"."""
    shown = signal.to_json(now)
    when = age_words(shown["age_s"], shown["age_at_least_s"], signal.old)
    return f"{signal.text}, {when}" if when else signal.text


def _gpu_of(device: str) -> str:
    """The GPU a device-plugin device id is on: a time-slicing replica `UUID::n` is its GPU's UUID."""
    return device.split("::", 1)[0]


class _Found:
    """The bad GPUs being gathered, by (node, GPU key)."""

    def __init__(self) -> None:
        self.gpus: dict[tuple[str, str], BadGpu] = {}

    def gpu(self, node: str, key: str, device: str | None, uuid: str | None) -> BadGpu:
        found = self.gpus.get((node, key))
        if found is None:
            found = self.gpus[(node, key)] = BadGpu(node, device, uuid)
        return found


def xid_signal(state: XidState | None, reading: GpuReading, now: float, old_after: float) -> Signal:
    code = reading.xid or 0
    meaning = xid_meaning(code, reading.xid_message)
    text = f"XID {code}" + (f" ({meaning})" if meaning else "")
    if state is None or state.value != code:  # read, not yet remembered (a report's single read)
        return Signal(DCGM, text, None, exact=False)
    return Signal(DCGM, text, state.since, exact=state.changed, old=now - state.since > old_after)


def bad_gpus(
    nodes: Iterable[Node],
    pods_on: Callable[[str], list[Pod]],
    readings: Mapping[str, tuple[GpuReading, ...]],
    dra_devices: Mapping[str | None, list[DraDevice]],
    xids: XidMemory,
    owners: Callable[[Pod], tuple[str | None, str | None]],
    *,
    now: float,
    old_after: float = DEFAULT_XID_OLD_AFTER,
) -> list[BadGpu]:
    """Every bad GPU, newest first, with the pods holding it. readings: per node, its exporter's last good
    readings; owners(pod): (its owner as "Kind name", its Kueue Workload's name)."""
    found = _Found()
    holders: dict[tuple[str, str], dict[tuple[str, str], list[str]]] = {}  # (node, GPU key) -> pod -> how

    def hold(node: str, key: str, pod: tuple[str, str], how: str) -> None:
        ways = holders.setdefault((node, key), {}).setdefault(pod, [])
        if how not in ways:
            ways.append(how)

    pods_by_key: dict[tuple[str, str], Pod] = {}
    for node in nodes:
        name = node.name
        pods = [p for p in pods_on(name) if not p.finished]
        for pod in pods:
            pods_by_key[pod.key] = pod
            for device in pod.devices:
                if not device.resource.startswith("claim:"):
                    hold(name, _gpu_of(device.device), pod.key, BY_POD_STATUS)
        # DCGM: the XID of each GPU (every MIG instance reports its GPU's), and the pods it attributes.
        by_uuid: dict[str, list[GpuReading]] = {}
        for reading in readings.get(name, ()):
            by_uuid.setdefault(reading.uuid, []).append(reading)
            for pod_name in reading.pods:
                namespace, _, pod_name = pod_name.rpartition("/")
                hold(name, reading.uuid, (namespace, pod_name), BY_DCGM)
        for uuid, instances in by_uuid.items():
            first = instances[0]
            if first.xid:
                label = f"GPU {first.index}" if first.index is not None else uuid
                if any(r.mig_profile for r in instances):
                    label += " (MIG)"
                found.gpu(name, uuid, label, uuid).signals.append(xid_signal(xids.state(name, uuid), first, now, old_after))
        # The kubelet: a container's device reported Unhealthy.
        unhealthy_resources = set()
        for pod in pods:
            for device in pod.devices:
                if device.health == "Unhealthy" and not device.resource.startswith("claim:"):
                    unhealthy_resources.add(device.resource)
                    key = _gpu_of(device.device)
                    index = next((r.index for r in readings.get(name, ()) if r.uuid == key), None)
                    bad = found.gpu(name, key, f"GPU {index}" if index is not None else None, key)
                    text = f"{device.resource} device Unhealthy (the kubelet, in the pod's status)"
                    if not any(s.source == POD_STATUS for s in bad.signals):
                        bad.signals.append(Signal(POD_STATUS, text, None, exact=False))
        # DRA: a tainted device, held by the pods its claim is reserved for.
        for published in dra_devices.get(name, ()):
            key = published.uuid or "/".join(published.id)
            for pod_name in published.pods:
                namespace, _, pod_name = pod_name.partition("/")
                hold(name, key, (namespace, pod_name), BY_CLAIM)
            for taint in published.taints:
                bad = found.gpu(name, key, published.name, published.uuid)
                bad.signals.append(Signal(DRA_TAINT, f"device taint {taint}", taint.added, exact=taint.added is not None))
        if not has_nvidia_gpus(node):
            continue
        # The node's, no GPU named: the plugin's unhealthy devices no pod explains, a monitor's condition.
        node_level: list[Signal] = []
        for resource, capacity in node.capacity.items():
            if not is_nvidia_resource(resource) or resource in unhealthy_resources:
                continue
            try:
                short = int(capacity) - int(node.allocatable.get(resource, capacity))
            except ValueError:
                continue
            if short > 0:
                node_level.append(Signal(PLUGIN, f"{short} {resource} device{'s' * (short != 1)} unhealthy "
                                                 f"(capacity {capacity}, allocatable {node.allocatable.get(resource)})", None, exact=False))
        for problem in health_condition_problems(node):
            since = next((c.since for c in node.conditions if c.type == problem.subject), None)
            node_level.append(Signal(CONDITION, problem.message, since, exact=since is not None))
        if node_level:
            bad = found.gpu(name, "", None, None)
            bad.signals.extend(node_level)
            bad.holders_known = False

    for (node_name, key), bad in found.gpus.items():
        for pod_key, how in sorted(holders.get((node_name, key), {}).items()):
            held = pods_by_key.get(pod_key)
            owner, workload = owners(held) if held is not None else (None, None)
            bad.holders.append(Holder(pod_key[0], pod_key[1], owner, workload, tuple(how)))
    return sorted(found.gpus.values(), key=lambda g: (g.old, -g.newest, g.node, g.device or ""))


def by_pod(gpus: Iterable[BadGpu]) -> dict[tuple[str, str], list[BadGpu]]:
    """The bad GPUs each pod holds."""
    out: dict[tuple[str, str], list[BadGpu]] = {}
    for bad in gpus:
        for holder in bad.holders:
            out.setdefault((holder.namespace, holder.name), []).append(bad)
    return out


# -- per GPU, on one node: the details screen's list ---------------------------------------------------------------
OK, BAD, UNKNOWN = "ok", "bad", "unknown"


@dataclass(frozen=True)
class GpuHealth:
    """One GPU of a node (or, `device` None, the node's GPUs no signal names), and its health: BAD from its signals,
    OK only where DCGM read it and nothing says otherwise, else UNKNOWN with why."""

    device: str | None  # "GPU 0", "GPU 7 (MIG)", "gpu-3" (a DRA device), a UUID; None: a node-level line
    uuid: str | None
    state: str  # OK, BAD, UNKNOWN
    why: str  # what says so, or why it is not known
    bad: BadGpu | None = None  # its signals and the pods on it, when BAD


def node_gpu_health(node: Node, gpu_count: int | None, bad: Iterable[BadGpu], metrics: NodeMetrics | None,
                    dra_devices: Iterable[DraDevice], now: float, unread_signal: str | None = None) -> list[GpuHealth]:
    """Each GPU of the node with its health. GPUs are named by the DCGM exporter's readings, the DRA driver's devices
    and the signals; `gpu_count` (GPU Feature Discovery's count) says how many more there are that nothing names.
    `bad`: bad_gpus() of this node; metrics: the node's DCGM readings or why there are none (None: not read yet);
    unread_signal: why a signal cannot be read yet (the pods' device health while they list): no GPU is OK then."""
    mine = [b for b in bad if b.node == node.name]
    by_key = {b.uuid or b.device or "": b for b in mine if b.device is not None or b.uuid is not None}
    node_level = [b for b in mine if b.device is None and b.uuid is None]
    if metrics is None:
        unread = "DCGM not read yet"
    elif metrics.error is not None:
        unread = f"no DCGM reading: {metrics.error}"
    else:
        unread = "no DCGM reading of it"
    rows: list[GpuHealth] = []
    named: set[str] = set()
    whole = 0  # rows that are a GPU of their own (not a MIG device of one)

    def add(key: str, label: str, uuid: str | None, fine: str | None, gpu: bool = True) -> None:
        nonlocal whole
        named.add(key)
        whole += gpu
        found = by_key.get(key)
        if found is not None:
            words = "; ".join(signal_words(s, now) for s in found.signals)
            rows.append(GpuHealth(label, uuid, BAD, words, found))
        elif fine is not None and node_level:
            rows.append(GpuHealth(label, uuid, UNKNOWN, "the node's signal below names no GPU"))
        elif fine is not None and unread_signal:
            rows.append(GpuHealth(label, uuid, UNKNOWN, f"{fine}, but {unread_signal}"))
        elif fine is not None:
            rows.append(GpuHealth(label, uuid, OK, fine))
        else:
            rows.append(GpuHealth(label, uuid, UNKNOWN, unread))

    readings = metrics.readings if metrics is not None else ()
    by_uuid: dict[str, list[GpuReading]] = {}
    for reading in readings:
        by_uuid.setdefault(reading.uuid, []).append(reading)
    fine = f"no XID reported by DCGM, read {human_duration(max(0.0, now - metrics.at))} ago" \
        if metrics is not None and metrics.current and metrics.at is not None else None
    for uuid, instances in sorted(by_uuid.items(), key=lambda item: (item[1][0].index is None, item[1][0].index or 0, item[0])):
        first = instances[0]
        label = (f"GPU {first.index}" if first.index is not None else uuid) + (" (MIG)" if any(r.mig_profile for r in instances) else "")
        add(uuid, label, uuid, fine)
    for device in dra_devices:
        key = device.uuid or "/".join(device.id)
        if key in named or (device.type not in (None, "gpu") and key not in by_key):
            continue  # read by DCGM already; a MIG device is its GPU's
        add(key, device.name, device.uuid, None, gpu=device.type in (None, "gpu"))
    for key, found in by_key.items():
        if key not in named:
            add(key, found.device or key, found.uuid, None)
    if gpu_count is not None and gpu_count > whole:
        more = gpu_count - whole
        rows.append(GpuHealth(f"{more} {'more ' if rows else ''}GPU{'s' * (more != 1)}", None, UNKNOWN,
                              f"{unread}; no other signal names {'them' if more != 1 else 'it'}"))
    for found in node_level:
        rows.append(GpuHealth(None, None, BAD, "; ".join(signal_words(s, now) for s in found.signals), found))
    return rows
