"""What the model keeps of the pods and events it reads (the rules are listed in model.py's
docstring): the record builders of its pod and event tables, which return None for an object
that does not matter. They read only the fields of decoding.py's shapes, its Lazy ones once a pod is kept.
"""
from __future__ import annotations

from typing import Callable

from . import gpu
from .decoding import filled
from .records import Event, Obj, Pod, PodKey, effective_requests, event_from, mounts_device_plugin_dir, pod_from

FINISHED_PHASES = ("Succeeded", "Failed")


def _labels_matter(labels: dict[str, str]) -> bool:
    """A pod is kept for its labels when it is part of the GPU stack or gputui's own."""
    return bool(gpu.stack_component(labels)) or labels.get(gpu.MANAGED_BY_GPUTUI[0]) == gpu.MANAGED_BY_GPUTUI[1]


class Keep:
    """Which pods and events the model keeps. pod_kept(key): the pod is in the model's pod table;
    pods_listed(): the pods have been listed (until then every pod's events are kept)."""

    def __init__(self, resources: gpu.GpuResources, pod_kept: Callable[[PodKey], bool], pods_listed: Callable[[], bool]) -> None:
        self.resources = resources
        self.pod_kept = pod_kept
        self.pods_listed = pods_listed
        self._gpu_names: dict[str, bool] = {}

    def _is_gpu_name(self, name: str) -> bool:
        known = self._gpu_names.get(name)
        if known is None:
            known = self._gpu_names[name] = name in self.resources
        return known

    def _mentions_gpu(self, spec: Obj) -> bool:
        """Cheap first look (most pods of a big cluster have no GPU): does any container name a GPU resource?"""
        gpu_names = self._gpu_names
        for key in ("containers", "initContainers"):
            for c in spec.get(key) or ():
                resources = c.get("resources")
                if resources:
                    for table in (resources.get("limits"), resources.get("requests")):
                        if table:
                            for name in table:
                                known = gpu_names.get(name)
                                if known or (known is None and self._is_gpu_name(name)):
                                    return True
        return False

    def pod(self, obj: Obj) -> Pod | None:
        """The pod's record when it matters, else None."""
        matters, requests = self._matters(obj)
        return pod_from(filled(obj), requests) if matters else None

    def _matters(self, obj: Obj) -> tuple[bool, dict[str, int] | None]:
        """Whether the pod is kept, and its effective requests where they were worked out to tell."""
        spec = obj.get("spec") or {}
        if self._mentions_gpu(spec):
            requests = effective_requests(spec)
            if any(self._is_gpu_name(name) for name in requests):
                if (obj.get("status") or {}).get("phase") in FINISHED_PHASES:  # kept only as the GPU stack's (validation pods)
                    return _labels_matter((obj.get("metadata") or {}).get("labels") or {}), requests
                return True, requests
        if spec.get("resourceClaims") and (obj.get("status") or {}).get("phase") not in FINISHED_PHASES:
            return True, None  # may hold GPUs through Dynamic Resource Allocation (the claims say)
        if _labels_matter((obj.get("metadata") or {}).get("labels") or {}):
            return True, None
        if mounts_device_plugin_dir(spec) and (obj.get("status") or {}).get("phase") not in FINISHED_PHASES:
            return True, None  # a device plugin's, whoever made it
        return False, None

    def event(self, obj: Obj) -> Event | None:
        """The event's record when it is about a node or a kept pod (any pod until the pods are listed), else None."""
        involved = obj.get("involvedObject") or obj.get("regarding") or {}
        kind = involved.get("kind")
        if kind == "Node":
            return event_from(obj)
        if kind == "Pod":
            pods_listed = self.pods_listed()
            key = (involved.get("namespace") or "", involved.get("name") or "")
            if self.pod_kept(key) or not pods_listed:
                return event_from(obj)
        return None

    def event_matters(self, event: Event) -> bool:
        """A kept event still matters: it is about a node or a pod that is kept."""
        if event.object_kind == "Node":
            return True
        return self.pod_kept((event.object_namespace, event.object_name))
