"""kube-apiserver's admission plugins on a create, in its order (server/writing.py runs them):

    mutating    NamespaceLifecycle   the namespace must exist (404 namespaces "x" not found) and not be
                                     terminating (403, cause NamespaceTerminating)
                LimitRanger          a pod's containers get the namespace's LimitRange defaults (limits from
                                     `default`, requests from `defaultRequest`), and an annotation saying so
    (then the object's validation: admission.py, 422 Invalid)
    validating  LimitRanger          a container's min and max (403)
                PodSecurity          the namespace's Pod Security Standards (podsecurity.py: 403, or warnings)
                ResourceQuota        the namespace's quotas (quota.py: 403)

A refusal is `Refused`, answered as the Status kube-apiserver sends: `pods "x" is forbidden: ...` with
reason Forbidden and details naming the object. Objects the simulator's own controllers write go straight to
the store, as a real cluster's controllers are not refused what they already did.
"""
from __future__ import annotations

from typing import Any

from . import podsecurity, quota
from . import quantity as q
from .quantity import Quantity, QuantityError
from .resources import ResourceType

Obj = dict[str, Any]
LIMIT_RANGES = "limitranges"
LIMIT_RANGER_ANNOTATION = "kubernetes.io/limit-ranger"
IMMORTAL_NAMESPACES = ("default", "kube-system", "kube-public")


class Refused(Exception):
    """An admission plugin's refusal, answered as a Status (code, reason, message, details)."""

    def __init__(self, code: int, reason: str, message: str, details: Obj) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details


def _details(resource: ResourceType, name: str) -> Obj:
    details: Obj = {"name": name} if name else {}
    if resource.group:
        details["group"] = resource.group
    details["kind"] = resource.plural
    return details


def forbidden(resource: ResourceType, name: str, why: str, causes: list[Obj] | None = None) -> Refused:
    """apierrors.NewForbidden: `pods "x" is forbidden: why` (`pods is forbidden: why` before the name is known)."""
    subject = f'{resource.key} "{name}"' if name else resource.key
    details = _details(resource, name)
    if causes:
        details["causes"] = causes
    return Refused(403, "Forbidden", f"{subject} is forbidden: {why}", details)


def _containers(pod: Obj, *fields: str) -> list[tuple[str, Obj]]:
    """(field, container) of the pod's containers in those fields, skipping what is not one (validation says so)."""
    spec = pod.get("spec")
    out = []
    for field_name in fields or ("containers", "initContainers"):
        items = spec.get(field_name) if isinstance(spec, dict) else None
        out += [(field_name, c) for c in items or [] if isinstance(c, dict)] if isinstance(items, list) else []
    return out


def _mapping(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _resources(c: Obj) -> Obj:
    resources = c.get("resources")
    if not isinstance(resources, dict):
        resources = c["resources"] = {}
    return resources


# -- NamespaceLifecycle ------------------------------------------------------------
def namespace_lifecycle(store: Any, resource: ResourceType, obj: Obj) -> None:
    """Refuse new content in a namespace that does not exist or is being deleted."""
    if not resource.namespaced:
        return
    namespace = obj["metadata"].get("namespace") or ""
    found = store.find("namespaces", "", namespace)
    if found is None:
        raise Refused(404, "NotFound", f'namespaces "{namespace}" not found', {"name": namespace, "kind": "namespaces"})
    if (found.get("status") or {}).get("phase") == "Terminating":
        raise forbidden(resource, obj["metadata"].get("name") or "",
                        f"unable to create new content in namespace {namespace} because it is being terminated",
                        [{"reason": "NamespaceTerminating", "message": f"namespace {namespace} is being terminated",
                          "field": "metadata.namespace"}])


def namespace_deletable(name: str) -> str | None:
    """Why NamespaceLifecycle refuses to delete a namespace, or None."""
    return "this namespace may not be deleted" if name in IMMORTAL_NAMESPACES else None


# -- LimitRanger -----------------------------------------------------------------------
def _container_items(limit_range: Obj) -> list[Obj]:
    """The LimitRange's Container items with the API's defaulting (default from max, defaultRequest from default
    then min): a LimitRange given in a scenario is read as the API server would have stored it."""
    items = []
    for item in (limit_range.get("spec") or {}).get("limits") or []:
        if not isinstance(item, dict) or item.get("type") != "Container":
            continue
        default = {**(item.get("max") or {}), **(item.get("default") or {})}
        default_request = {**(item.get("min") or {}), **default, **(item.get("defaultRequest") or {})}
        items.append({**item, "default": default, "defaultRequest": default_request})
    return items


def _limit_ranges(store: Any, namespace: str) -> list[Obj]:
    return sorted((e.obj for e in store.entries(LIMIT_RANGES, namespace)), key=lambda o: o["metadata"]["name"])


def limit_ranger_defaults(store: Any, pod: Obj) -> None:
    """Fill each container's missing limits and requests from the namespace's LimitRanges (the first one to
    name a resource wins), and say so in the kubernetes.io/limit-ranger annotation."""
    for limit_range in _limit_ranges(store, pod["metadata"].get("namespace") or ""):
        defaults: Obj = {"limits": {}, "requests": {}}
        for item in _container_items(limit_range):
            defaults["limits"].update(item["default"])
            defaults["requests"].update(item["defaultRequest"])
        if not defaults["limits"] and not defaults["requests"]:
            continue
        notes = []
        for field_name, c in _containers(pod):
            label = "container" if field_name == "containers" else "init container"
            resources = _resources(c)
            set_by = {}
            for kind in ("limits", "requests"):
                present = _mapping(resources.get(kind))
                missing = {k: v for k, v in defaults[kind].items() if k not in present}
                if missing:
                    resources[kind] = {**present, **missing}
                set_by[kind] = sorted(missing)
            if set_by["requests"]:
                notes.append(f"{', '.join(set_by['requests'])} request for {label} {c.get('name', '')}")
            if set_by["limits"]:
                notes.append(f"{', '.join(set_by['limits'])} limit for {label} {c.get('name', '')}")
        if notes:
            pod["metadata"].setdefault("annotations", {})[LIMIT_RANGER_ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)


def _quantity(value: Any) -> Quantity | None:
    try:
        return q.parse(value)
    except QuantityError:
        return None


def limit_ranger_check(store: Any, pod: Obj) -> str | None:
    """Each container within its LimitRanges' min and max (the refusal's text, or None)."""
    errors: list[str] = []
    for limit_range in _limit_ranges(store, pod["metadata"].get("namespace") or ""):
        for item in _container_items(limit_range):
            for _, c in _containers(pod):
                resources = _resources(c)
                requests, limits = _mapping(resources.get("requests")), _mapping(resources.get("limits"))
                for name, bound in (item.get("min") or {}).items():
                    enforced = _quantity(bound)
                    if enforced is None:
                        continue
                    req, lim = _quantity(requests.get(name)), _quantity(limits.get(name))
                    if req is None:
                        errors.append(f"minimum {name} usage per Container is {enforced}.  No request is specified")
                    elif req.value < enforced.value:
                        errors.append(f"minimum {name} usage per Container is {enforced}, but request is {req}")
                    elif lim is not None and lim.value < enforced.value:
                        errors.append(f"minimum {name} usage per Container is {enforced}, but limit is {lim}")
                for name, bound in (item.get("max") or {}).items():
                    enforced = _quantity(bound)
                    if enforced is None:
                        continue
                    req, lim = _quantity(requests.get(name)), _quantity(limits.get(name))
                    if lim is None:
                        errors.append(f"maximum {name} usage per Container is {enforced}.  No limit is specified")
                    elif lim.value > enforced.value:
                        errors.append(f"maximum {name} usage per Container is {enforced}, but limit is {lim}")
                    elif req is not None and req.value > enforced.value:
                        errors.append(f"maximum {name} usage per Container is {enforced}, but request is {req}")
    if not errors:
        return None
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"


# -- the chain ------------------------------------------------------------------------------
def requests_from_limits(pod: Obj) -> None:
    """The API's defaulting at decode, before any plugin: a container's missing requests are its limits."""
    for _, c in _containers(pod):
        resources = _mapping(c.get("resources"))
        limits = _mapping(resources.get("limits"))
        if limits:
            resources["requests"] = {**limits, **_mapping(resources.get("requests"))}


def mutate(store: Any, resource: ResourceType, obj: Obj) -> None:
    """The mutating plugins, before validation. Raises Refused."""
    namespace_lifecycle(store, resource, obj)
    if resource.kind == "Pod":
        requests_from_limits(obj)
        limit_ranger_defaults(store, obj)


def validate(store: Any, resource: ResourceType, obj: Obj) -> list[str]:
    """The validating plugins, after validation; the warnings to send. Raises Refused."""
    name = obj["metadata"].get("name") or ""
    namespace = obj["metadata"].get("namespace") or ""
    warnings: list[str] = []
    if resource.kind == "Pod":
        if (why := limit_ranger_check(store, obj)) is not None:
            raise forbidden(resource, name, why)
        labels = (store.find("namespaces", "", namespace) or {}).get("metadata", {}).get("labels") or {}
        refusal, warnings = podsecurity.evaluate(labels, obj)
        if refusal is not None:
            raise forbidden(resource, name, refusal)
    if resource.namespaced and (why := quota.check(store, resource, obj, namespace)) is not None:
        raise forbidden(resource, name, why)
    return warnings
