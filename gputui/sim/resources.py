"""The kinds of object the simulated API server serves.

Adding a kind is one entry in RESOURCES: discovery, list/watch/get/create/delete
and Table printing all read from here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ("create", "delete", "get", "list", "patch", "update", "watch")
    singular: str = field(default="")
    # A custom resource: served (discovery, every path) only while its CustomResourceDefinition,
    # named after `key`, exists, as on a real cluster where the CRD may not be installed.
    custom: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def key(self) -> str:
        """Unique name of the resource, e.g. 'pods' or 'daemonsets.apps'."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


RESOURCES: list[ResourceType] = [
    ResourceType("", "v1", "namespaces", "Namespace", False, ("ns",), ("status",)),
    ResourceType("", "v1", "nodes", "Node", False, ("no",), ("status", "proxy")),
    ResourceType("", "v1", "pods", "Pod", True, ("po",), ("status", "log", "binding", "proxy")),
    ResourceType("", "v1", "events", "Event", True, ("ev",)),
    ResourceType("", "v1", "services", "Service", True, ("svc",), ("status", "proxy")),
    ResourceType("apps", "v1", "daemonsets", "DaemonSet", True, ("ds",), ("status",)),
    ResourceType("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False,
                 ("crd", "crds"), ("status",)),
    ResourceType("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False),
    ResourceType("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True, (), ("status",)),
    ResourceType("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False),
    ResourceType("nvidia.com", "v1", "clusterpolicies", "ClusterPolicy", False, (), ("status",), custom=True),
]

CRD_KEY = "customresourcedefinitions.apiextensions.k8s.io"


def by_key() -> dict[str, ResourceType]:
    return {r.key: r for r in RESOURCES}


def find(group: str, version: str, plural: str) -> ResourceType | None:
    for r in RESOURCES:
        if r.group == group and r.version == version and r.plural == plural:
            return r
    return None


def for_kind(api_version: str, kind: str) -> ResourceType | None:
    for r in RESOURCES:
        if r.api_version == api_version and r.kind == kind:
            return r
    return None


def groups(served: Callable[[ResourceType], bool] = lambda r: True) -> dict[str, list[str]]:
    """Named groups (not core) and their versions, in registration order (only the served resources')."""
    out: dict[str, list[str]] = {}
    for r in RESOURCES:
        if r.group and served(r):
            versions = out.setdefault(r.group, [])
            if r.version not in versions:
                versions.append(r.version)
    return out
