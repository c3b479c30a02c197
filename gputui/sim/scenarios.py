"""Scenarios: the objects a simulated cluster starts with.

    load("demo")                 the built-in GPU cluster (demo.py)
    load("xid-injected")         a GPU stack scenario by name (stacks.SCENARIOS); builtin.BUILTIN names both
    load("cluster.yaml")         a Kubernetes List (YAML or JSON, as `kubectl get -o yaml`
                                 prints it), a single object, or multi-document YAML
    load([{...}, {...}])         objects given directly
    populate(store, objects)     creates them (namespaces implicitly), in dependency order
    synthetic(nodes, pods)       a generated cluster for benchmarks (synthetic.py)

Objects keep the status they are given. The simulated kubelets then run the
pods (see controllers.py for the annotations that steer them).
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Iterable

import orjson
import yaml

from . import builders
from .auth import RBAC_API_VERSION, RBAC_KINDS
from . import synthetic as generator
from .builtin import BUILTIN
from .daemonsets import daemonset_status_for
from .resources import RESOURCES, ResourceType
from .store import Store

Obj = dict[str, Any]

# Every cluster has these.
BASE_NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")

# Created first to last; kinds not listed come after these, in registry order.
_ORDER = ["namespaces", "customresourcedefinitions.apiextensions.k8s.io", "nodes", "daemonsets.apps", "pods", "events"]


class ScenarioError(Exception):
    """A scenario that cannot be loaded: says which file, which item and why."""


def load(scenario: str | Path | list[Obj]) -> list[Obj]:
    """The objects of a scenario (see the module docstring); raises ScenarioError."""
    if isinstance(scenario, list):
        return _validated(scenario, "<objects>")
    if str(scenario) in BUILTIN:
        return BUILTIN[str(scenario)]()
    path = Path(scenario)
    source = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        why = f"{source}: cannot read: {exc.strerror or exc}"
        if not path.exists():
            why += f"; nor is it a built-in scenario (built-ins: {', '.join(sorted(BUILTIN))})"
        raise ScenarioError(why) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ScenarioError(f"{source}: not UTF-8 text (byte 0x{data[exc.start]:02x} at line {line})") from None
    return _validated(_parse(text, source), source)


def split_policy(objects: list[Obj]) -> tuple[list[Obj], list[Obj]]:
    """(the RBAC objects: the authorizer's policy, everything else: the store's objects)."""
    policy = [o for o in objects if o.get("apiVersion") == RBAC_API_VERSION and o.get("kind") in RBAC_KINDS]
    return policy, [o for o in objects if not (o.get("apiVersion") == RBAC_API_VERSION and o.get("kind") in RBAC_KINDS)]


def _parse(text: str, source: str) -> list[Any]:
    if source.endswith(".json"):
        try:
            docs = [orjson.loads(text)]
        except orjson.JSONDecodeError as exc:
            raise ScenarioError(f"{source}: not valid JSON: {exc}") from None
    else:
        try:
            docs = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as exc:
            where = getattr(exc, "problem_mark", None)
            at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ScenarioError(f"{source}: not valid YAML{at}: {problem}") from None
    items: list[Any] = []
    for doc in docs:
        if isinstance(doc, dict) and isinstance(doc.get("items"), list) and str(doc.get("kind", "")).endswith("List"):
            items.extend(doc["items"])
        elif isinstance(doc, list):
            items.extend(doc)
        else:
            items.append(doc)
    return items


def _validated(items: list[Any], source: str) -> list[Obj]:
    out = []
    seen: dict[tuple[str, str, str], int] = {}
    for index, item in enumerate(items):
        if isinstance(item, dict) and item.get("kind") in RBAC_KINDS and item.get("apiVersion") in (None, RBAC_API_VERSION):
            kind, namespaced, api_version = item["kind"], item["kind"] in ("Role", "RoleBinding"), RBAC_API_VERSION
            _check_fields(item, kind, source, index)
        else:
            resource = _resource_of(item, source, index)
            kind, namespaced, api_version = resource.kind, resource.namespaced, resource.api_version
            _check_fields(item, kind, source, index)
        meta = item["metadata"]
        namespace = (meta.get("namespace") or "default") if namespaced else ""
        ident = (f"{api_version} {kind}", namespace, meta["name"])
        if ident in seen:
            shown = f"{namespace}/{meta['name']}" if namespaced else meta["name"]
            raise ScenarioError(f"{source}: item {index}: duplicate name: {kind} {shown} is also item {seen[ident]}")
        seen[ident] = index
        obj = copy.deepcopy(item)
        obj.setdefault("apiVersion", api_version)
        out.append(obj)
    return out


def _type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number",
            type(None): "null"}.get(type(value), type(value).__name__)


def _check_fields(item: Obj, kind: str, source: str, index: int) -> None:
    """The fields every object has, of the types kube-apiserver insists on (it refuses the object otherwise)."""
    def fail(reason: str) -> ScenarioError:
        return ScenarioError(f"{source}: item {index}: {kind} {item['metadata'].get('name')!s}: {reason}")

    meta = item.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta.get("name"):
        raise ScenarioError(f"{source}: item {index}: {kind} without metadata.name")
    for key in ("namespace", "generateName", "uid", "resourceVersion", "creationTimestamp"):
        if key in meta and meta[key] is not None and not isinstance(meta[key], str):
            raise fail(f"metadata.{key} must be a string, not {_type_name(meta[key])}")
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise fail(f"metadata.{key} must be a mapping of strings, not {_type_name(value)}")
        for name, text in value.items():
            if not isinstance(name, str) or not isinstance(text, str):
                raise fail(f"metadata.{key}[{name!s}] must be a string, not {_type_name(text)}")
    for key in ("spec", "status", "data"):
        if key in item and item[key] is not None and not isinstance(item[key], dict):
            raise fail(f"{key} must be a mapping, not {_type_name(item[key])}")
    for key in ("rules", "subjects"):
        if kind in RBAC_KINDS and key in item and item[key] is not None and not isinstance(item[key], list):
            raise fail(f"{key} must be a list, not {_type_name(item[key])}")


def _resource_of(item: Any, source: str, index: int) -> ResourceType:
    def fail(reason: str) -> ScenarioError:
        return ScenarioError(f"{source}: item {index}: {reason}")

    if not isinstance(item, dict):
        raise fail(f"not an object (a {type(item).__name__})")
    kind = item.get("kind")
    if not kind or not isinstance(kind, str):
        raise fail("no kind")
    meta = item.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name") or not isinstance(meta.get("name"), str):
        raise fail(f"{kind} without metadata.name")
    api_version = item.get("apiVersion")
    matches = [r for r in RESOURCES if r.kind == kind and (api_version is None or r.api_version == api_version)]
    if not matches:
        shown = f"{api_version} {kind}" if api_version else kind
        raise fail(f"unknown kind {shown} (served: {', '.join(sorted({r.kind for r in RESOURCES}))})")
    return matches[0]


def populate(store: Store, objects: Iterable[Obj]) -> None:
    """Create the objects in the store: namespaces first (the base ones and any a namespaced object
    needs are made when missing), then nodes, daemonsets, pods, events.

    A DaemonSet given without status gets one computed from its pods and the nodes.
    """
    by_key: dict[str, list[Obj]] = {}
    for obj in objects:
        resource = next(
            r for r in RESOURCES if r.kind == obj.get("kind") and r.api_version == obj.get("apiVersion", r.api_version)
        )
        by_key.setdefault(resource.key, []).append(obj)
    pods, nodes = by_key.get("pods", []), by_key.get("nodes", []) + store.objects("nodes")
    for ds in by_key.get("daemonsets.apps", []):
        if not ds.get("status"):
            ds["status"] = daemonset_status_for(ds, pods, nodes)

    existing = {o["metadata"]["name"] for o in store.objects("namespaces")}
    needed: list[str] = [ns for ns in BASE_NAMESPACES if ns not in existing]
    for key, objs in by_key.items():
        if store.resource(key).namespaced:
            for obj in objs:
                ns = obj["metadata"].get("namespace") or "default"
                if ns not in existing and ns not in needed:
                    needed.append(ns)
    declared = {o["metadata"]["name"] for o in by_key.get("namespaces", [])}
    for ns in needed:
        if ns not in declared:
            by_key.setdefault("namespaces", []).append(builders.namespace(ns))

    order = _ORDER + [r.key for r in RESOURCES if r.key not in _ORDER]
    for key in order:
        for obj in by_key.get(key, []):
            store.create(key, obj)


def synthetic(nodes: int, pods: int) -> list[Obj]:
    return generator.generate(nodes, pods)
