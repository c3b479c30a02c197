"""GPUs handed out by Dynamic Resource Allocation (`resource.k8s.io`).

Works on raw objects of any served version: v1 and v1beta2 put a device's
fields directly on it, v1beta1 wraps them in `basic:`.  ResourceSlices give the
devices of each node; ResourceClaims say which devices are allocated and to
which pods; DeviceClasses with `spec.extendedResourceName` (Kubernetes >= 1.34)
say which allocations also count as an extended resource like nvidia.com/gpu.
"""
from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass, field as dataclass_field, replace
from typing import Any, Callable, Iterable

from .quantities import parse_time

NVIDIA_GPU_DRIVER = "gpu.nvidia.com"

DeviceId = tuple[str, str, str]  # (driver, pool, device name)


@dataclass(frozen=True)
class DeviceTaint:
    """A taint on a published device (KEP-5055): what the driver or an admin says is wrong with it."""

    key: str
    value: str
    effect: str  # NoSchedule, NoExecute, None
    added: float | None  # timeAdded

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True)
class DraDevice:
    node: str | None  # None for network-attached or multi-node slices
    driver: str
    pool: str
    name: str
    type: str | None  # "gpu", "mig", "vfio"... (the NVIDIA driver's `type` attribute)
    product: str | None
    memory_mib: int | None
    mig_profile: str | None
    uuid: str | None
    claim: str | None = None  # "namespace/name" of the claim it is allocated to
    pods: tuple[str, ...] = ()  # "namespace/name" of the pods the claim is reserved for
    taints: tuple[DeviceTaint, ...] = ()
    attributes: tuple[tuple[str, object], ...] = ()  # qualified name ("gpu.nvidia.com/type") -> value, as CEL reads them
    capacity: tuple[tuple[str, str], ...] = ()  # qualified name -> quantity

    @property
    def id(self) -> DeviceId:
        return (self.driver, self.pool, self.name)

    @property
    def blocking_taints(self) -> tuple[DeviceTaint, ...]:
        """The taints that keep a new claim off the device (NoSchedule, NoExecute): a claim that does not tolerate them."""
        return tuple(t for t in self.taints if t.effect in ("NoSchedule", "NoExecute"))


@dataclass(frozen=True)
class Allocation:
    """One allocated device of one claim."""

    device: DeviceId
    claim: str  # "namespace/name"
    request: str
    device_class: str | None
    pods: tuple[str, ...]
    node: str | None  # from the claim's allocation node selector, when it names one node
    domain: str | None = None  # the ComputeDomain (its uid) a compute-domain channel claim joins (compute_domains.py)


_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$")
_FACTORS = {
    None: 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}


def quantity_to_mib(value: object) -> int | None:
    """A Kubernetes quantity of bytes ("80Gi", "40960Mi", "42949672960") in MiB; None if unreadable."""
    match = _QUANTITY.match(str(value).strip()) if value is not None else None
    if not match:
        return None
    return round(float(match.group(1)) * _FACTORS[match.group(2)] / 2**20)


def _attribute(attributes: dict, name: str, driver: str) -> object:
    """An attribute's value, by plain name or qualified with the driver's domain."""
    entry = attributes.get(name) or attributes.get(f"{driver}/{name}")
    if not isinstance(entry, dict):
        return None
    for kind in ("string", "int", "version", "bool"):
        if kind in entry:
            return entry[kind]
    return None


def _typed(entry: dict) -> object:
    for kind in ("string", "int", "version", "bool"):
        if kind in entry:
            return entry[kind]
    return None


def _qualified(name: str, driver: str) -> str:
    """An attribute's name with its domain: a bare name is the driver's."""
    return name if "/" in name else f"{driver}/{name}"


def _capacity(capacity: dict, name: str) -> object:
    entry = capacity.get(name)
    return entry.get("value") if isinstance(entry, dict) else entry  # v1alpha3 had bare quantities


def _slice_node(spec: dict) -> str | None:
    if spec.get("nodeName"):
        return spec["nodeName"]
    return _single_node((spec.get("nodeSelector") or {}))


def _single_node(selector: dict) -> str | None:
    """The node a node selector pins, if it pins exactly one by name."""
    for term in selector.get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("operator") == "In" and len(field.get("values") or []) == 1:
                return field["values"][0]
    return None


def parse_slices(slices: Iterable[dict]) -> list[DraDevice]:
    """Every device published in the given ResourceSlices (not yet joined with claims)."""
    devices = []
    for obj in slices:
        spec = obj.get("spec") or {}
        driver = spec.get("driver") or ""
        pool = (spec.get("pool") or {}).get("name") or ""
        node = _slice_node(spec)
        for device in spec.get("devices") or []:
            fields = device.get("basic") or device  # v1beta1 wraps the fields
            attributes = fields.get("attributes") or {}
            devices.append(DraDevice(
                node=node,
                driver=driver,
                pool=pool,
                name=device.get("name") or "",
                type=_text(_attribute(attributes, "type", driver)),
                product=_text(_attribute(attributes, "productName", driver)),
                memory_mib=quantity_to_mib(_capacity(fields.get("capacity") or {}, "memory")),
                mig_profile=_text(_attribute(attributes, "profile", driver)),
                uuid=_text(_attribute(attributes, "uuid", driver)),
                taints=tuple(DeviceTaint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""),
                                         parse_time(t.get("timeAdded")))
                             for t in fields.get("taints") or () if isinstance(t, dict)),
                attributes=tuple((_qualified(k, driver), v) for k, entry in attributes.items() if isinstance(entry, dict)
                                 for v in [_typed(entry)] if v is not None),
                capacity=tuple((_qualified(k, driver), str(v)) for k in (fields.get("capacity") or {})
                               for v in [_capacity(fields.get("capacity") or {}, k)] if v is not None),
            ))
    return devices


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _request_classes(claim: dict) -> dict[str, str | None]:
    """Request name → device class name; "req/sub" names for firstAvailable sub-requests."""
    classes: dict[str, str | None] = {}
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        name = request.get("name") or ""
        exactly = request.get("exactly") or request  # v1 nests under `exactly`; v1beta1 does not
        classes[name] = exactly.get("deviceClassName")
        for sub in request.get("firstAvailable") or []:
            classes[f"{name}/{sub.get('name')}"] = sub.get("deviceClassName")
    return classes


def parse_claims(claims: Iterable[dict]) -> list[Allocation]:
    """Every allocated device of every allocated claim."""
    allocations = []
    for claim in claims:
        meta = claim.get("metadata") or {}
        namespace = meta.get("namespace") or ""
        claim_name = f"{namespace}/{meta.get('name', '')}"
        status = claim.get("status") or {}
        allocation = status.get("allocation") or {}
        pods = tuple(
            f"{namespace}/{ref.get('name')}"
            for ref in status.get("reservedFor") or []
            if ref.get("resource") == "pods" and not ref.get("apiGroup")
        )
        node = _single_node(allocation.get("nodeSelector") or {})
        classes = _request_classes(claim)
        domain = _domain_of(claim)
        for result in (allocation.get("devices") or {}).get("results") or []:
            request = result.get("request") or ""
            allocations.append(Allocation(
                device=(result.get("driver") or "", result.get("pool") or "", result.get("device") or ""),
                claim=claim_name,
                request=request,
                device_class=classes.get(request, classes.get(request.split("/", 1)[0])),
                pods=pods,
                node=node,
                domain=domain,
            ))
    return allocations


@dataclass(frozen=True)
class DeviceRequest:
    """One request of a claim (`exactly`), or one of a `firstAvailable` request's subrequests (named "request/sub")."""

    name: str
    device_class: str | None
    count: int  # ExactCount's count (1 unless given)
    all_devices: bool  # allocationMode All: every matching device the node sees, at least one, each free
    selectors: tuple[str, ...] = ()  # the request's own CEL selectors, besides its class's
    tolerations: tuple[tuple[str, str, str, str], ...] = ()  # (key, operator, value, effect) of device taints
    subrequests: tuple[DeviceRequest, ...] = ()  # firstAvailable: the scheduler takes the first it can serve, in order
    admin_access: bool = False  # devices in use may be given too

    @property
    def alternatives(self) -> bool:
        return bool(self.subrequests)

    @property
    def words(self) -> str:
        """What it asks for: `4 gpu.nvidia.com`, `all matching gpu.nvidia.com`, `1 gpu.nvidia.com or 2 mig.nvidia.com`."""
        if self.subrequests:
            return " or ".join(sub.words for sub in self.subrequests)
        return f"all matching {self.device_class}" if self.all_devices else f"{self.count} {self.device_class}"

    def tolerates(self, taint: DeviceTaint) -> bool:
        for key, operator, value, effect in self.tolerations:
            if effect and effect != taint.effect:
                continue
            if operator == "Exists" and (not key or key == taint.key):
                return True
            if operator != "Exists" and key == taint.key and value == taint.value:
                return True
        return False


@dataclass(frozen=True)
class Claim:
    """A ResourceClaim: what it asks for, and what it was given (empty until allocated)."""

    key: str  # "namespace/name"
    requests: tuple[DeviceRequest, ...]
    allocations: tuple[Allocation, ...]
    allocated: bool


def _device_request(name: str, exactly: dict, subrequests: tuple[DeviceRequest, ...] = ()) -> DeviceRequest:
    """An ExactDeviceRequest or a DeviceSubRequest (the same fields, resource.k8s.io/v1)."""
    count = exactly.get("count")
    return DeviceRequest(
        name=name,
        device_class=exactly.get("deviceClassName") or None,
        count=count if isinstance(count, int) and count > 0 else 1,
        all_devices=exactly.get("allocationMode") == "All",
        selectors=tuple(str((s.get("cel") or {}).get("expression") or "") for s in exactly.get("selectors") or [] if isinstance(s, dict)),
        tolerations=tuple((str(t.get("key") or ""), str(t.get("operator") or "Equal"), str(t.get("value") or ""), str(t.get("effect") or ""))
                          for t in exactly.get("tolerations") or [] if isinstance(t, dict)),
        subrequests=subrequests,
        admin_access=exactly.get("adminAccess") is True,
    )


def _device_requests(claim: dict) -> tuple[DeviceRequest, ...]:
    out = []
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        if not isinstance(request, dict):
            continue
        name = str(request.get("name") or "")
        subs = tuple(_device_request(f"{name}/{sub.get('name') or ''}", sub) for sub in request.get("firstAvailable") or [] if isinstance(sub, dict))
        out.append(_device_request(name, {} if subs else request.get("exactly") or request, subs))  # v1beta1 does not nest under `exactly`
    return tuple(out)


def waiting_asks(claims: Iterable[Claim], gpu_class: Callable[[str], bool]) -> tuple[list[tuple[str, int]], list[str]]:
    """What unallocated claims ask for of GPU DeviceClasses: (DeviceClass, count) of the ExactCount requests, and words
    for those whose count is known only at allocation (DeviceRequest.words: allocationMode All, firstAvailable)."""
    counted: list[tuple[str, int]] = []
    words: list[str] = []
    for claim in claims:
        for request in claim.requests:
            options = request.subrequests or (request,)
            if not any(o.device_class and gpu_class(o.device_class) for o in options):
                continue
            if request.subrequests or request.all_devices:
                words.append(request.words)
            elif request.device_class:
                counted.append((request.device_class, request.count))
    return counted, words


def claim_from(obj: dict) -> Claim:
    meta = obj.get("metadata") or {}
    return Claim(f"{meta.get('namespace') or ''}/{meta.get('name', '')}", _device_requests(obj), tuple(parse_claims([obj])),
                 bool((obj.get("status") or {}).get("allocation")))


@dataclass(frozen=True)
class RequestPool:
    """The devices of one pool that one request could be given (its class's and its own selectors)."""

    driver: str
    pool: str
    node: str | None
    devices: int
    allocated: int
    tainted: int  # not allocated, with a NoSchedule/NoExecute taint the request does not tolerate
    free: int
    taints: tuple[str, ...]  # those taints, as written


def request_pools(request: DeviceRequest, device_class: DeviceClass, devices: Iterable[DraDevice]) -> list[RequestPool]:
    """Per pool, the devices the request could be given and how many are free for it, most free first (any driver:
    the class's selectors choose). SelectorError where a selector cannot be evaluated here."""
    chosen = DeviceClass(device_class.name, device_class.selectors + request.selectors)
    grouped: dict[tuple[str, str, str | None], list[DraDevice]] = {}
    for d in devices:
        if selects(chosen, d):
            grouped.setdefault((d.driver, d.pool, d.node), []).append(d)
    out = []
    for (driver, pool, node), members in grouped.items():
        allocated = sum(1 for d in members if d.claim)
        blocking = [t for d in members if not d.claim for t in d.blocking_taints if not request.tolerates(t)]
        tainted = sum(1 for d in members if not d.claim and any(not request.tolerates(t) for t in d.blocking_taints))
        out.append(RequestPool(driver, pool, node, len(members), allocated, tainted, len(members) - allocated - tainted,
                               tuple(sorted({str(t) for t in blocking}))))
    return sorted(out, key=lambda p: (-p.free, p.driver, _natural(p.pool)))


COMPUTE_DOMAIN_DRIVER = "compute-domain.nvidia.com"


def _domain_of(claim: dict) -> str | None:
    """The ComputeDomain uid in a claim's opaque config for NVIDIA's compute-domain driver (the channel and daemon
    claim templates the driver writes carry `domainID`), None for any other claim."""
    for config in ((claim.get("spec") or {}).get("devices") or {}).get("config") or []:
        opaque = config.get("opaque") if isinstance(config, dict) else None
        if isinstance(opaque, dict) and opaque.get("driver") == COMPUTE_DOMAIN_DRIVER:
            domain = (opaque.get("parameters") or {}).get("domainID")
            if isinstance(domain, str) and domain:
                return domain
    return None


def devices_by_node(slices: Iterable[dict], claims: Iterable[dict]) -> dict[str | None, list[DraDevice]]:
    """DRA devices per node (None: not tied to a node), each with its claim and pods if allocated."""
    return attach_holders(parse_slices(slices), parse_claims(claims))


def attach_holders(devices: Iterable[DraDevice], allocations: Iterable[Allocation]) -> dict[str | None, list[DraDevice]]:
    """`devices_by_node` on parsed slices and claims."""
    holders = {a.device: a for a in allocations}
    by_node: dict[str | None, list[DraDevice]] = {}
    for device in devices:
        holder = holders.get(device.id)
        if holder:
            device = replace(device, claim=holder.claim, pods=holder.pods)
        by_node.setdefault(device.node, []).append(device)
    for listed in by_node.values():
        listed.sort(key=lambda d: (d.driver, d.pool, _natural(d.name)))
    return by_node


def _natural(name: str) -> list[object]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def extended_resource_classes(device_classes: Iterable[dict]) -> dict[str, str]:
    """DeviceClass name → the extended resource it stands for (spec.extendedResourceName)."""
    mapping = {}
    for device_class in device_classes:
        resource = (device_class.get("spec") or {}).get("extendedResourceName")
        if resource:
            mapping[(device_class.get("metadata") or {}).get("name", "")] = resource
    return mapping


def held_extended_resources(
    slices: Iterable[dict], claims: Iterable[dict], device_classes: Iterable[dict]
) -> dict[str, Counter[str]]:
    """Per node, how many devices DRA has allocated per extended resource (see `held_counts`)."""
    return held_counts(parse_slices(slices), parse_claims(claims), extended_resource_classes(device_classes))


def held_counts(devices: Iterable[DraDevice], allocations: Iterable[Allocation], resource_of: dict[str, str]) -> dict[str, Counter[str]]:
    """Per node, how many devices DRA has allocated per extended resource.

    Only classes with `spec.extendedResourceName` count (`resource_of`: class
    name → resource; gpu.nvidia.com → nvidia.com/gpu on the NVIDIA chart), so
    the result adds to a node's allocated `nvidia.com/gpu`.  The node comes
    from the device's slice, or the claim's allocation node selector, or,
    failing both, the pool name (the NVIDIA driver names each node's pool
    after the node).
    """
    node_of = {d.id: d.node for d in devices}
    held: dict[str, Counter[str]] = {}
    for allocation in allocations:
        resource = resource_of.get(allocation.device_class or "")
        if not resource:
            continue
        node = node_of.get(allocation.device) or allocation.node or allocation.device[1]
        held.setdefault(node, Counter())[resource] += 1
    return held


def dra_gpus_held(slices: Iterable[dict], claims: Iterable[dict], device_classes: Iterable[dict], resource: str = "nvidia.com/gpu") -> dict[str, int]:
    """Per node, the number of `resource` (default nvidia.com/gpu) held through DRA."""
    return {node: counts[resource] for node, counts in held_extended_resources(slices, claims, device_classes).items() if counts[resource]}


@dataclass(frozen=True)
class ClaimHold:
    """What one pod holds through one allocated claim: the devices, and how many of NVIDIA's GPU devices per DeviceClass."""

    claim: str  # "namespace/name"
    devices: tuple[str, ...]  # device names, in the claim's order
    gpu: tuple[tuple[str, int], ...] = ()  # (DeviceClass, count): only for the first pod the claim is reserved for


def pod_holdings(allocations: Iterable[Allocation]) -> dict[tuple[str, str], tuple[ClaimHold, ...]]:
    """Per pod (namespace, name) in a claim's reservedFor, what it holds through that claim.

    The claim's devices of NVIDIA's GPU driver count toward their request's DeviceClass (`gpu.nvidia.com`,
    `mig.nvidia.com`: the name the node's and the cluster's rows give them) once: for the first pod the claim is
    reserved for (a claim shared by several pods holds its devices once), so the pods add up to a node's allocated.
    """
    by_claim: dict[str, list[Allocation]] = {}
    for allocation in allocations:
        by_claim.setdefault(allocation.claim, []).append(allocation)
    out: dict[tuple[str, str], list[ClaimHold]] = {}
    for claim, held in by_claim.items():
        counts: Counter[str] = Counter()
        for allocation in held:
            if allocation.device[0] == NVIDIA_GPU_DRIVER and allocation.device_class:
                counts[allocation.device_class] += 1
        devices = tuple(a.device[2] for a in held)
        for n, pod in enumerate(held[0].pods):
            namespace, _, name = pod.partition("/")
            gpu = tuple(sorted(counts.items())) if n == 0 else ()
            out.setdefault((namespace, name), []).append(ClaimHold(claim, devices, gpu))
    return {key: tuple(sorted(holds, key=lambda h: h.claim)) for key, holds in out.items()}


# -- DeviceClasses: which devices each selects, and its pools ----------------------------------------
@dataclass(frozen=True)
class DeviceClass:
    """A DeviceClass: its CEL selectors, and the extended resource it stands for (KEP-5004), if any."""

    name: str
    selectors: tuple[str, ...]
    extended_resource: str | None = None


def device_class_from(obj: dict) -> DeviceClass:
    spec = obj.get("spec") or {}
    expressions = tuple(str((s.get("cel") or {}).get("expression") or "") for s in spec.get("selectors") or [] if isinstance(s, dict))
    return DeviceClass((obj.get("metadata") or {}).get("name", ""), expressions, spec.get("extendedResourceName") or None)


class SelectorError(Exception):
    """A class's selector that gputui cannot evaluate (a CEL function it lacks: semver(), quantity()...)."""


@functools.lru_cache(maxsize=256)
def _program(expression: str) -> Any:
    """A selector compiled (celpy: cel-python, pure Python; imported only where there are DeviceClasses)."""
    import celpy  # noqa: PLC0415

    environment = celpy.Environment()
    return environment.program(environment.compile(expression))


@functools.lru_cache(maxsize=65536)
def _selected(expressions: tuple[str, ...], driver: str, attributes: tuple[tuple[str, object], ...],
              capacity: tuple[tuple[str, str], ...]) -> bool:
    """Whether every expression selects a device of these attributes and capacity: each device is evaluated once
    (a claim coming or going changes no device's attributes)."""
    import celpy  # noqa: PLC0415

    def by_domain(items: Iterable[tuple[str, object]]) -> dict[str, dict[str, object]]:
        out: dict[str, dict[str, object]] = {}
        for qualified, value in items:
            domain, _, name = qualified.rpartition("/")
            out.setdefault(domain, {})[name] = value
        return out

    context = {"device": celpy.json_to_cel({"driver": driver, "attributes": by_domain(attributes), "capacity": by_domain(capacity)})}
    for expression in expressions:
        try:
            result = _program(expression).evaluate(context)
        except Exception as error:  # noqa: BLE001  (celpy raises its own errors and returns others: both handled here)
            result = error
        if isinstance(result, Exception):
            if isinstance(result, celpy.CELEvalError) and result.args[:1] == ("no such key",):
                return False  # kube's "no such key": the device lacks what the selector looks up
            raise SelectorError(f"{expression}: {str(result.args[0] if result.args else result)[:200]}")
        if result is not True and not (isinstance(result, celpy.celtypes.BoolType) and bool(result)):
            return False
    return True


def selects(device_class: DeviceClass, device: DraDevice) -> bool:
    """Whether every selector of the class selects the device, as kube-scheduler evaluates them (CEL). A lookup of an
    attribute the device lacks selects nothing; a selector that cannot be evaluated here (a function of Kubernetes'
    own CEL library, semver() or quantity(), that cel-python lacks) raises SelectorError."""
    return _selected(device_class.selectors, device.driver, device.attributes, device.capacity)


@dataclass(frozen=True)
class Pool:
    """The devices of one pool (a ResourceSlice pool: the NVIDIA driver's is its node) that one DeviceClass selects."""

    device_class: str
    driver: str
    pool: str
    node: str | None
    devices: int
    allocated: int
    tainted: int  # with a NoSchedule/NoExecute taint, allocated or not
    free: int  # neither allocated nor tainted: what a new claim could get here

    def as_json(self) -> dict[str, object]:
        return {"class": self.device_class, "driver": self.driver, "pool": self.pool, "node": self.node,
                "devices": self.devices, "allocated": self.allocated, "tainted": self.tainted, "free": self.free}


@dataclass(frozen=True)
class ClassDevices:
    """What each DeviceClass selecting NVIDIA GPU devices selects: its pools, or why that is not known."""

    pools: tuple[Pool, ...] = ()
    unknown: dict[str, str] = dataclass_field(default_factory=dict)  # class -> why its devices are not known (a selector)

    def of(self, device_class: str) -> list[Pool]:
        return [p for p in self.pools if p.device_class == device_class]


def class_devices(classes: Iterable[DeviceClass], devices: Iterable[DraDevice]) -> ClassDevices:
    """Per DeviceClass that selects some device of NVIDIA's GPU driver (gpu.nvidia.com: whole GPUs, MIG devices),
    its pools: devices, allocated, tainted, free. A class whose selectors cannot be evaluated here is `unknown`."""
    gpu_devices = [d for d in devices if d.driver == NVIDIA_GPU_DRIVER]
    pools: list[Pool] = []
    unknown: dict[str, str] = {}
    for device_class in sorted(classes, key=lambda c: c.name):
        try:
            chosen = [d for d in gpu_devices if selects(device_class, d)]
        except SelectorError as error:
            unknown[device_class.name] = f"selector not understood: {error}"
            continue
        grouped: dict[tuple[str, str, str | None], list[DraDevice]] = {}
        for d in chosen:
            grouped.setdefault((d.driver, d.pool, d.node), []).append(d)
        for (driver, pool, node), members in sorted(grouped.items(), key=lambda item: (item[0][0], _natural(item[0][1]))):
            allocated = sum(1 for d in members if d.claim)
            tainted = sum(1 for d in members if d.blocking_taints)
            free = sum(1 for d in members if not d.claim and not d.blocking_taints)
            pools.append(Pool(device_class.name, driver, pool, node, len(members), allocated, tainted, free))
    return ClassDevices(tuple(pools), unknown)
