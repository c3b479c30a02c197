"""Dynamic Resource Allocation in the simulated cluster, as kube-scheduler's DynamicResources plugin and the
resource claim controller do it (resource.k8s.io/v1, structured parameters).

Scheduler side (`ClaimAllocator`):
  PreFilter  every claim a pending pod references must exist, not be being deleted, and (for a claim made
             from a template) be named in the pod's status.resourceClaimStatuses; otherwise the pod is
             unschedulable with the plugin's message (`resourceclaim.resource.k8s.io "x" not found`, ...).
  Filter     an allocated claim fits a node only if its allocation's node selector matches it ("resourceclaim
             not available on the node"); an unallocated one needs, for each request, `count` devices (or all,
             allocationMode All) published for the node by a ResourceSlice, not allocated to any claim, without
             a NoSchedule or NoExecute device taint the request does not tolerate, that match the DeviceClass's
             selectors and the request's ("cannot allocate all claims").
  Reserve/PreBind  the claim gets the finalizer resource.kubernetes.io/delete-protection, status.allocation
             (devices.results and a nodeSelector naming the node) and the pod in status.reservedFor, before
             the pod is bound.

Controller side (`ClaimController`): a pod that is deleted or has finished leaves the reservedFor of its
claims; a claim reserved for nobody is deallocated and loses the finalizer; a claim being deleted goes once
it has no finalizers; a claim owned by a deleted pod (made from a template) is deleted with it.

Selectors are CEL; this understands the part device classes and claims use in practice: `device.driver`,
`device.attributes['domain'].name` and `device.attributes['domain'].name`-style lookups, string, int and
bool literals, == != < <= > >=, && || ! and parentheses. An expression outside that matches no device.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .. import builders as b
from ..apiserver.selectors import node_selector_matches
from ..apiserver.store import NotFound

if TYPE_CHECKING:
    from ..apiserver.store import Store

Obj = dict[str, Any]

CLAIMS = "resourceclaims.resource.k8s.io"
SLICES = "resourceslices.resource.k8s.io"
CLASSES = "deviceclasses.resource.k8s.io"
DRA_KEYS = (CLAIMS, SLICES, CLASSES)
FINALIZER = "resource.kubernetes.io/delete-protection"
CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_ON_NODE = "resourceclaim not available on the node"
FINISHED = ("Succeeded", "Failed")


# -- a small CEL ------------------------------------------------------------------------------------
_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")|(?P<num>-?\d+)|(?P<op>&&|\|\||==|!=|<=|>=|[<>!()\[\].])"
                    r"|(?P<id>[A-Za-z_][A-Za-z0-9_]*))")


class _Unsupported(Exception):
    pass


def _tokens(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise _Unsupported(text[pos:])
        pos = m.end()
        if m.group("str") is not None:
            out.append(("lit", m.group("str")[1:-1]))
        elif m.group("num") is not None:
            out.append(("lit", int(m.group("num"))))
        elif m.group("op") is not None:
            out.append(("op", m.group("op")))
        elif m.group("id") in ("true", "false"):
            out.append(("lit", m.group("id") == "true"))
        else:
            out.append(("id", m.group("id")))
    return out


class _Eval:
    def __init__(self, tokens: list[tuple[str, Any]], device: Obj, driver: str) -> None:
        self.t, self.i, self.device, self.driver = tokens, 0, device, driver

    def peek(self) -> tuple[str, Any] | None:
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self, value: str | None = None) -> tuple[str, Any]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            raise _Unsupported(str(tok))
        self.i += 1
        return tok

    def run(self) -> bool:
        value = self.or_()
        if self.peek() is not None:
            raise _Unsupported(str(self.peek()))
        return value is True

    def or_(self) -> Any:
        left = self.and_()
        while self.peek() == ("op", "||"):
            self.take()
            right = self.and_()
            left = left is True or right is True
        return left

    def and_(self) -> Any:
        left = self.compare()
        while self.peek() == ("op", "&&"):
            self.take()
            right = self.compare()
            left = left is True and right is True
        return left

    def compare(self) -> Any:
        left = self.unary()
        tok = self.peek()
        if tok and tok[0] == "op" and tok[1] in ("==", "!=", "<", "<=", ">", ">="):
            self.take()
            right = self.unary()
            if tok[1] == "==":
                return left == right and type(left) is type(right)
            if tok[1] == "!=":
                return not (left == right and type(left) is type(right))
            if not (isinstance(left, int) and isinstance(right, int)):
                return None  # a runtime error in CEL: no match
            return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[tok[1]]
        return left

    def unary(self) -> Any:
        if self.peek() == ("op", "!"):
            self.take()
            return self.unary() is not True
        if self.peek() == ("op", "("):
            self.take()
            value = self.or_()
            self.take(")")
            return value
        kind, value = self.take()
        if kind == "lit":
            return value
        if kind != "id" or value != "device":
            raise _Unsupported(str(value))
        self.take(".")
        _, field = self.take()
        if field == "driver":
            return self.driver
        if field not in ("attributes", "capacity"):
            raise _Unsupported(field)
        self.take("[")
        kind, domain = self.take()
        if kind != "lit":
            raise _Unsupported(str(domain))
        self.take("]")
        self.take(".")
        _, name = self.take()
        table = self.device.get(field) or {}
        entry = table.get(f"{domain}/{name}") or (table.get(name) if domain == self.driver else None)
        if not isinstance(entry, dict):
            return None
        if field == "capacity":
            return entry.get("value")
        for key in ("string", "int", "bool", "version"):
            if key in entry:
                return entry[key]
        return None


def matches(expression: str, device: Obj, driver: str) -> bool:
    """Whether a CEL selector selects the device (False for what this subset cannot read)."""
    try:
        return _Eval(_tokens(expression), device, driver).run()
    except _Unsupported:
        return False


def _selected(selectors: list[Obj], device: Obj, driver: str) -> bool:
    return all(matches(((s.get("cel") or {}).get("expression") or ""), device, driver) for s in selectors or [])


# -- claims of a pod ---------------------------------------------------------------------------------
def _tolerates(toleration: Obj, taint: Obj) -> bool:
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return not toleration.get("key") or toleration.get("key") == taint.get("key")
    return toleration.get("key") == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def _untainted(device: Obj, tolerations: list[Obj]) -> bool:
    """KEP-5055: a device with a NoSchedule or NoExecute taint the request does not tolerate is not allocated
    (effect None, or one unknown, keeps nobody away)."""
    return all(t.get("effect") not in ("NoSchedule", "NoExecute") or any(_tolerates(tol, t) for tol in tolerations)
               for t in device.get("taints") or [])


def claim_name(pod: Obj, entry: Obj) -> tuple[str | None, str | None]:
    """(claim name, error) for one entry of pod.spec.resourceClaims (resourceclaim.Name)."""
    if entry.get("resourceClaimName"):
        return entry["resourceClaimName"], None
    if entry.get("resourceClaimTemplateName"):
        for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
            if status.get("name") == entry.get("name"):
                return status.get("resourceClaimName"), None  # None: no claim needed
        return None, f'pod "{pod["metadata"].get("namespace", "")}/{pod["metadata"]["name"]}": no resource claim name in status'
    return None, None


class ClaimAllocator:
    """The DynamicResources plugin of the simulated scheduler."""

    def __init__(self, store: "Store") -> None:
        self.store = store

    def pod_claims(self, pod: Obj) -> tuple[list[Obj], str | None]:
        """PreFilter: the pod's claims, or why the pod cannot be scheduled anywhere."""
        claims = []
        namespace = pod["metadata"].get("namespace", "")
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
            name, error = claim_name(pod, entry)
            if error:
                return [], error
            if name is None:
                continue
            claim = self.store.find(CLAIMS, namespace, name)
            if claim is None:
                return [], f'resourceclaim.resource.k8s.io "{name}" not found'
            if claim["metadata"].get("deletionTimestamp"):
                return [], f'resourceclaim "{name}" is being deleted'
            claims.append(claim)
        return claims, None

    def _allocated(self) -> set[tuple[str, str, str]]:
        taken = set()
        for claim in self.store.objects(CLAIMS):
            for result in (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []:
                taken.add((result.get("driver", ""), result.get("pool", ""), result.get("device", "")))
        return taken

    def _node_devices(self, node: Obj) -> list[tuple[str, str, Obj]]:
        """(driver, pool, device) published for the node: by nodeName, allNodes or a matching nodeSelector."""
        name = node["metadata"]["name"]
        out = []
        for slice_obj in sorted(self.store.objects(SLICES), key=lambda s: s["metadata"]["name"]):
            spec = slice_obj.get("spec") or {}
            if spec.get("nodeName"):
                if spec["nodeName"] != name:
                    continue
            elif not spec.get("allNodes") and not (spec.get("nodeSelector") and node_selector_matches(spec["nodeSelector"], node)):
                continue
            for device in spec.get("devices") or []:
                out.append((spec.get("driver", ""), (spec.get("pool") or {}).get("name", ""), device))
        return out

    def filter(self, claims: list[Obj], node: Obj) -> tuple[str | None, dict[str, list[Obj]]]:
        """Filter: (why not, None if it fits) and, per unallocated claim name, the results to write."""
        pending = [c for c in claims if not (c.get("status") or {}).get("allocation")]
        for claim in claims:
            allocation = (claim.get("status") or {}).get("allocation")
            if allocation and not node_selector_matches(allocation.get("nodeSelector"), node):
                return NOT_ON_NODE, {}
        if not pending:
            return None, {}
        taken = self._allocated()
        devices = self._node_devices(node)
        plans: dict[str, list[Obj]] = {}
        for claim in pending:
            results = []
            for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
                exactly = request.get("exactly") or {}
                device_class = self.store.find(CLASSES, "", exactly.get("deviceClassName") or "")
                if device_class is None:
                    return CANNOT_ALLOCATE, {}
                class_selectors = (device_class.get("spec") or {}).get("selectors") or []
                fitting = [(driver, pool, d) for driver, pool, d in devices
                           if (driver, pool, d.get("name", "")) not in taken and _untainted(d, exactly.get("tolerations") or [])
                           and _selected(class_selectors, d, driver) and _selected(exactly.get("selectors") or [], d, driver)]
                if exactly.get("allocationMode", "ExactCount") == "All":
                    wanted = len(fitting)
                    if not wanted:
                        return CANNOT_ALLOCATE, {}
                else:
                    wanted = int(exactly.get("count") or 1)
                if len(fitting) < wanted:
                    return CANNOT_ALLOCATE, {}
                for driver, pool, d in fitting[:wanted]:
                    taken.add((driver, pool, d.get("name", "")))
                    results.append({"request": request.get("name", ""), "driver": driver, "pool": pool, "device": d.get("name", "")})
            plans[claim["metadata"]["name"]] = results
        return None, plans

    def reserve(self, pod: Obj, node: str, claims: list[Obj], plans: dict[str, list[Obj]]) -> bool:
        """Write the allocations and reservations; False if a claim went away meanwhile."""
        meta = pod["metadata"]
        reference = {"resource": "pods", "name": meta["name"], "uid": meta.get("uid", "")}
        selector = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
        for claim in claims:
            name = claim["metadata"]["name"]
            planned = plans.get(name)

            def allocate(c: Obj, results: list[Obj] | None = planned) -> None:
                status = c.setdefault("status", {})
                if results is not None and not status.get("allocation"):
                    finalizers = c["metadata"].setdefault("finalizers", [])
                    if FINALIZER not in finalizers:
                        finalizers.append(FINALIZER)
                    status["allocation"] = {"devices": {"results": results}, "nodeSelector": selector}
                reserved = status.setdefault("reservedFor", [])
                if not any(r.get("uid") == reference["uid"] for r in reserved):
                    reserved.append(dict(reference))

            try:
                self.store.mutate(CLAIMS, meta.get("namespace", ""), name, allocate)
            except NotFound:
                return False
        return True


# -- the resource claim controller ------------------------------------------------------------------
class ClaimController:
    """Reservations follow their pods; unreserved claims are deallocated; deleted claims go when free."""

    def __init__(self, store: "Store") -> None:
        self.store = store

    def on_event(self, event: Any) -> None:
        key = event.resource.key
        if key == "pods":
            pod = event.obj
            done = event.type == "DELETED" or (pod.get("status") or {}).get("phase") in FINISHED
            if done:
                self._release(pod, deleted=event.type == "DELETED")
        elif key == CLAIMS and event.type != "DELETED":
            self._settle(event.obj)

    def _release(self, pod: Obj, deleted: bool) -> None:
        meta = pod["metadata"]
        uid, namespace = meta.get("uid", ""), meta.get("namespace", "")
        for claim in self.store.objects(CLAIMS, namespace):
            status = claim.get("status") or {}
            owned = any(o.get("kind") == "Pod" and o.get("uid") == uid and o.get("controller")
                        for o in claim["metadata"].get("ownerReferences") or [])
            if any(r.get("uid") == uid for r in status.get("reservedFor") or []):
                def unreserve(c: Obj) -> None:
                    c["status"]["reservedFor"] = [r for r in c["status"].get("reservedFor") or [] if r.get("uid") != uid]
                    if not c["status"]["reservedFor"]:
                        del c["status"]["reservedFor"]
                self.store.mutate(CLAIMS, namespace, claim["metadata"]["name"], unreserve)
            if owned and deleted:
                current = self.store.find(CLAIMS, namespace, claim["metadata"]["name"])
                if current is not None and not current["metadata"].get("deletionTimestamp"):
                    self.delete(namespace, claim["metadata"]["name"])

    def delete(self, namespace: str, name: str) -> Obj:
        """A DELETE of a claim: gone at once without finalizers, else marked and left to _settle."""
        claim = self.store.get(CLAIMS, namespace, name)
        if not claim["metadata"].get("finalizers"):
            return self.store.delete(CLAIMS, namespace, name)
        if claim["metadata"].get("deletionTimestamp"):
            return claim

        def mark(c: Obj) -> None:
            c["metadata"]["deletionTimestamp"] = b.rfc3339(b.utcnow())
            c["metadata"]["deletionGracePeriodSeconds"] = 0
        return self.store.mutate(CLAIMS, namespace, name, mark)

    def _settle(self, claim: Obj) -> None:
        meta, status = claim["metadata"], claim.get("status") or {}
        namespace, name = meta.get("namespace", ""), meta["name"]
        if status.get("allocation") and not status.get("reservedFor"):
            def deallocate(c: Obj) -> None:
                c.get("status", {}).pop("allocation", None)
                c["metadata"]["finalizers"] = [f for f in c["metadata"].get("finalizers") or [] if f != FINALIZER]
                if not c["metadata"]["finalizers"]:
                    del c["metadata"]["finalizers"]
            self.store.mutate(CLAIMS, namespace, name, deallocate)  # its MODIFIED event settles it again
            return
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            try:
                self.store.delete(CLAIMS, namespace, name)
            except NotFound:
                pass

    def settle_all(self) -> None:
        for claim in self.store.objects(CLAIMS):
            self._settle(claim)


def claim_devices(store: "Store", pod: Obj, container: Obj) -> list[tuple[str, str, Obj]]:
    """The ResourceSlice devices (driver, pool, device) allocated to the claims a container names (kubelet side:
    only claims allocated and reserved for the pod)."""
    namespace, uid = pod["metadata"].get("namespace", ""), pod["metadata"].get("uid", "")
    entries = {e.get("name"): e for e in (pod.get("spec") or {}).get("resourceClaims") or []}
    published = {}
    for slice_obj in store.objects(SLICES):
        spec = slice_obj.get("spec") or {}
        for d in spec.get("devices") or []:
            published[(spec.get("driver", ""), (spec.get("pool") or {}).get("name", ""), d.get("name", ""))] = d
    out = []
    for ref in (container.get("resources") or {}).get("claims") or []:
        entry = entries.get(ref.get("name"))
        name = claim_name(pod, entry)[0] if entry else None
        claim = store.find(CLAIMS, namespace, name) if name else None
        if claim is None:
            continue
        status = claim.get("status") or {}
        if not any(r.get("uid") == uid for r in status.get("reservedFor") or []):
            continue
        for result in ((status.get("allocation") or {}).get("devices") or {}).get("results") or []:
            if ref.get("request") and result.get("request", "").split("/")[0] != ref["request"]:
                continue
            ident = (result.get("driver", ""), result.get("pool", ""), result.get("device", ""))
            if ident in published:
                out.append((ident[0], ident[1], published[ident]))
    return out
