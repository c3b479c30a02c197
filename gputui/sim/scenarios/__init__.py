"""Scenarios: the objects a simulated cluster starts with.

    load("demo")                 the built-in GPU cluster (demo.py)
    load("xid-injected")         a GPU stack scenario by name (stacks.SCENARIOS); builtin.BUILTIN names both
    load("cluster.yaml")         a file: a Kubernetes List (YAML or JSON, as `kubectl get -o yaml` prints
                                 it), a single object, or multi-document YAML
    load("must-gather/")         a directory: every *.yaml, *.yml and *.json under it, as a dump of a real
                                 cluster (the GPU Operator's must-gather writes one); other files, and files
                                 holding no Kubernetes object (logs, text), are skipped and counted
    load(["a.yaml", "dir/"])     several files and directories: one cluster
    read(paths)                  the same, with what was read and skipped (Loaded)
    load([{...}, {...}])         objects given directly
    populate(store, objects)     creates them (namespaces implicitly), in dependency order
    synthetic(nodes, pods)       a generated cluster for benchmarks (generated.py)

Every kind in resources.RESOURCES is taken, and the custom resources whose
CustomResourceDefinition is among the objects; anything else is refused, naming
the file, the item and why.  Objects keep what they are given (status, uid,
managedFields; the store assigns its own resourceVersions).  The same object in
two files (one uid: a must-gather writes the operator's pod twice) is kept once,
in its later state.  The simulated kubelets then run the pods (see controllers.py
for the annotations that steer them).
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import orjson
import yaml

from .. import builders
from ..apiserver import decoding
from . import generated as generator
from ..apiserver.auth import RBAC_API_VERSION, RBAC_KINDS
from .builtin import BUILTIN
from ..behaviour.daemonsets import daemonset_status_for
from ..apiserver.resources import BUILTIN_GROUPS, CRD_API_VERSION, RESOURCES, ResourceType, crd_names, from_crd
from ..apiserver.store import Store

Obj = dict[str, Any]
Entry = tuple[str, int, Any]  # (file, item index in it, the item)

# Every cluster has these.
BASE_NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")
DUMP_SUFFIXES = (".yaml", ".yml", ".json")

# Created first to last; kinds not listed come after these, in registry order.
_ORDER = ["namespaces", "customresourcedefinitions.apiextensions.k8s.io", "nodes", "daemonsets.apps", "pods", "events"]


class ScenarioError(Exception):
    """A scenario that cannot be loaded: says which file, which item and why."""


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]  # the C loader where PyYAML has it, chosen at import
    """YAML as the API server reads it: an unquoted timestamp stays a string."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


@dataclass
class Loaded:
    """What `read` found: the objects, the files they came from, and what was left out."""

    objects: list[Obj]
    files: int = 0  # files read
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, why) in a directory, not Kubernetes objects
    merged: int = 0  # objects found in more than one file, kept once

    def summary(self) -> str:
        """'412 objects from 9 files; 6 files skipped (not Kubernetes objects); 1 object in two files kept once'."""
        line = f"{len(self.objects)} object{'s' * (len(self.objects) != 1)} from {self.files} file{'s' * (self.files != 1)}"
        if self.skipped:
            line += f"; {len(self.skipped)} file{'s' * (len(self.skipped) != 1)} skipped (not Kubernetes objects)"
        if self.merged:
            line += f"; {self.merged} object{'s' * (self.merged != 1)} in several files kept once"
        return line


def load(scenario: str | Path | list[str | Path] | tuple[str | Path, ...] | list[Obj] | Loaded) -> list[Obj]:
    """The objects of a scenario (see the module docstring); raises ScenarioError. A Loaded (what `read`
    returned) is taken as it is: its objects were checked then."""
    if isinstance(scenario, Loaded):
        return scenario.objects
    if isinstance(scenario, (list, tuple)):
        paths = [s for s in scenario if isinstance(s, (str, Path))]
        if scenario and len(paths) == len(scenario):
            return read(paths).objects
        return _validated([("<objects>", i, item) for i, item in enumerate(scenario)], copied=True)
    if str(scenario) in BUILTIN:
        return BUILTIN[str(scenario)]()
    return read([scenario], builtin_hint=True).objects


def read(paths: Sequence[str | Path], *, builtin_hint: bool = False) -> Loaded:
    """Files and directories (see the module docstring) as one cluster's objects; raises ScenarioError."""
    if not paths:
        raise ScenarioError("no file or directory to read")
    entries: list[Entry] = []
    loaded = Loaded([])
    read_already: set[Path] = set()  # a file named twice (itself and its directory) is read once
    for given in paths:
        path = Path(given)
        if not path.is_dir():
            if _resolved(path) not in read_already:
                read_already.add(_resolved(path))
                entries += [(str(path), i, item) for i, item in enumerate(_parse(_text(path, builtin_hint), str(path)))]
                loaded.files += 1
            continue
        for file in _files_under(path):
            if _resolved(file) in read_already:
                continue
            read_already.add(_resolved(file))
            if not file.name.lower().endswith(DUMP_SUFFIXES):
                loaded.skipped.append((str(file), "not YAML or JSON"))
                continue
            items = _parse(_text(file), str(file))
            if items and not any(_is_object(item) for item in items):
                loaded.skipped.append((str(file), "no Kubernetes object in it"))
                continue
            entries += [(str(file), i, item) for i, item in enumerate(items)]
            loaded.files += 1
    loaded.objects = _validated(entries, loaded)
    return loaded


def _files_under(directory: Path) -> list[Path]:
    """Every file under a directory, sorted, not following links to directories (a dump holds no loops)."""
    found = []
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        found += [Path(root) / name for name in sorted(files)]
    return found


def _resolved(path: Path) -> Path:
    """The file a path names; a symlink loop is a ScenarioError (Path.resolve raises RuntimeError on one)."""
    try:
        return path.resolve(strict=True)
    except FileNotFoundError:
        return path.resolve()  # reading it says it is missing, with the built-in names
    except (OSError, RuntimeError):
        raise ScenarioError(f"{path}: cannot read: a loop of symbolic links") from None


def _is_object(item: Any) -> bool:
    return isinstance(item, dict) and isinstance(item.get("kind"), str) and isinstance(item.get("apiVersion"), str)


def _text(path: Path, builtin_hint: bool = False) -> str:
    source = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        why = f"{source}: cannot read: {exc.strerror or exc}"
        if builtin_hint and not path.exists():
            why += f"; nor is it a built-in scenario (built-ins: {', '.join(sorted(BUILTIN))})"
        raise ScenarioError(why) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ScenarioError(f"{source}: not UTF-8 text (byte 0x{data[exc.start]:02x} at line {line})") from None


def policy_of(objects: list[Obj]) -> list[Obj]:
    """The RBAC objects (Roles, ClusterRoles and their bindings): the authorizer's policy, served as given too."""
    return [o for o in objects if o.get("apiVersion") == RBAC_API_VERSION and o.get("kind") in RBAC_KINDS]


def _parse(text: str, source: str) -> list[Any]:
    if source.endswith(".json"):
        try:
            docs = [orjson.loads(text)]
        except orjson.JSONDecodeError as exc:
            raise ScenarioError(f"{source}: not valid JSON: {exc}") from None
    else:
        try:
            docs = [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
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


def _validated(entries: list[Entry], loaded: Loaded | None = None, *, copied: bool = False) -> list[Obj]:
    """The entries as objects; `copied`: copies of them (they are the caller's), else themselves (parsed here)."""
    kinds = _Kinds(entries)
    out: list[Obj] = []
    seen: dict[tuple[str, str, str], tuple[str, int, int]] = {}  # identity -> (file, item index, position in out)
    for source, index, item in entries:
        resource = kinds.resource_of(item, source, index)
        _check_fields(item, resource.kind, source, index)
        try:
            decoding.check(resource.kind, resource.version, item)
        except decoding.Undecodable as exc:
            raise ScenarioError(f"{source}: item {index}: {resource.kind} {item['metadata']['name']}: {exc}") from None
        meta = item["metadata"]
        namespace = (meta.get("namespace") or "default") if resource.namespaced else ""
        ident = (resource.key, namespace, meta["name"])
        obj = copy.deepcopy(item) if copied else item
        obj.setdefault("apiVersion", resource.api_version)
        if ident in seen:
            first_source, first_index, at = seen[ident]
            out[at] = _one_of(out[at], obj, f"{resource.kind} {namespace + '/' if namespace else ''}{meta['name']}",
                              (first_source, first_index), (source, index))
            if loaded is not None:
                loaded.merged += 1
            continue
        seen[ident] = (source, index, len(out))
        out.append(obj)
    return out


def _one_of(first: Obj, second: Obj, shown: str, was: tuple[str, int], now: tuple[str, int]) -> Obj:
    """One object written in two files (the same uid): its later state. Else the names clash: ScenarioError."""
    source, index = now
    if was[0] == source:
        raise ScenarioError(f"{source}: item {index}: duplicate name: {shown} is also item {was[1]}")
    a, b = first["metadata"], second["metadata"]
    clash = f"{source}: item {index}: duplicate name: {shown} is also {was[0]} item {was[1]}"
    if not a.get("uid") or a.get("uid") != b.get("uid"):
        raise ScenarioError(f"{clash}, a different object (uid {a.get('uid') or 'none'}, not {b.get('uid') or 'none'})")
    if first == second:
        return first
    versions = (a.get("resourceVersion") or "", b.get("resourceVersion") or "")
    if not all(v.isdigit() for v in versions) or versions[0] == versions[1]:
        raise ScenarioError(f"{clash}, in another state, and which is later is unknown (resourceVersion {versions[0] or 'none'} "
                            f"and {versions[1] or 'none'})")
    return first if int(versions[0]) > int(versions[1]) else second


class _Kinds:
    """Which kind each item is: a built-in one, or a custom resource of a CustomResourceDefinition among the items."""

    def __init__(self, entries: list[Entry]) -> None:
        self.crds: dict[tuple[str, str], Entry] = {}  # (group, kind) -> the CRD's entry
        for entry in entries:
            item = entry[2]
            if isinstance(item, dict) and item.get("kind") == "CustomResourceDefinition" and item.get("apiVersion") in (None, CRD_API_VERSION):
                self.crds.setdefault(crd_names(item), entry)
        self.custom: dict[tuple[str, str], ResourceType] = {}

    def resource_of(self, item: Any, source: str, index: int) -> ResourceType:
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
        if api_version is not None and not isinstance(api_version, str):
            raise fail(f"{kind} {meta['name']}: apiVersion must be a string")
        matches = [r for r in RESOURCES if r.kind == kind and (api_version is None or r.api_version == api_version)]
        if matches and not matches[0].custom:
            if kind == "CustomResourceDefinition":
                try:
                    from_crd(item)
                except ValueError as exc:
                    raise fail(f"CustomResourceDefinition {meta['name']}: {exc}") from None
            return matches[0]
        if api_version is None:
            raise fail(f"unknown kind {kind} (a custom resource needs its apiVersion)")
        group, _, version = api_version.rpartition("/")
        shown = f'{api_version} {kind} "{meta["name"]}"'
        crd = self.crds.get((group, kind))
        if crd is None:
            if matches:  # a custom kind the simulator knows (ClusterPolicy): still only with its CRD
                raise fail(f"{shown}: no CustomResourceDefinition for {matches[0].key} in the dump")
            if group in BUILTIN_GROUPS:
                elsewhere = [r.api_version for r in RESOURCES if r.kind == kind and r.group == group]
                raise fail(f"unknown kind {api_version} {kind}" + (f" (served at {elsewhere[0]})" if elsewhere else ""))
            raise fail(f"{shown}: no CustomResourceDefinition for kind {kind} in group {group or '(core)'} in the dump")
        if matches:
            return matches[0]
        known = self.custom.get((group, kind))
        if known is not None:
            if known.version != version:
                raise fail(f"{shown}: the dump has {kind} objects at {known.api_version} too; one version of a custom "
                           "resource is served")
            return known
        try:
            resource = from_crd(crd[2], version)
        except ValueError as exc:
            raise fail(f"{shown}: CustomResourceDefinition {crd[2]['metadata'].get('name')} ({crd[0]} item {crd[1]}): {exc}") from None
        self.custom[(group, kind)] = resource
        return resource


def custom_resources(objects: Iterable[Obj]) -> list[ResourceType]:
    """The custom resources the CustomResourceDefinitions among (validated) objects define, each at the
    version its objects are at (else the CRD's storage version)."""
    objects = list(objects)
    used = {(o.get("apiVersion", "").rpartition("/")[0], o.get("kind")): o.get("apiVersion", "").rpartition("/")[2] for o in objects}
    out = []
    for crd in objects:
        if crd.get("kind") == "CustomResourceDefinition" and crd.get("apiVersion") == CRD_API_VERSION:
            out.append(from_crd(crd, used.get(crd_names(crd))))
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


def populate(store: Store, objects: Iterable[Obj]) -> None:
    """Create the objects in the store: namespaces first (the base ones and any a namespaced object
    needs are made when missing), then nodes, daemonsets, pods, events; the custom resources of the
    CRDs among them become served kinds of the store.

    A DaemonSet given without status gets one computed from its pods and the nodes.
    """
    objects = list(objects)
    for custom in custom_resources(objects):
        store.add_resource(custom)
    kinds = {(r.api_version, r.kind): r for r in store.resources.values()}
    by_key: dict[str, list[Obj]] = {}
    for obj in objects:
        resource = kinds.get((obj.get("apiVersion", ""), obj.get("kind", "")))
        if resource is None and "apiVersion" not in obj:
            resource = next((r for r in store.resources.values() if r.kind == obj.get("kind")), None)
        if resource is None:
            raise ValueError(f"{obj.get('apiVersion')} {obj.get('kind')}: not a kind this cluster serves")
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

    order = _ORDER + [key for key in store.resources if key not in _ORDER]
    for key in order:
        for obj in by_key.get(key, []):
            meta = obj["metadata"]
            if store.is_view(key) and store.find(key, meta.get("namespace") or "default", meta["name"]) is not None:
                continue  # a dump holding both views of one event (events.k8s.io/v1 and core v1): one object
            store.create(key, obj)


def synthetic(nodes: int, pods: int) -> list[Obj]:
    return generator.generate(nodes, pods)
