"""Namespace objects."""
from __future__ import annotations

from typing import Any

from .ids import ago, stable_uid

Obj = dict[str, Any]


def namespace(name: str, age_s: float = 86400 * 60) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "uid": stable_uid("namespace", name),
            "creationTimestamp": ago(age_s),
            "labels": {"kubernetes.io/metadata.name": name},
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }
