"""CustomResourceDefinition objects."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Sequence

from .ids import ago, stable_uid

Obj = dict[str, Any]


def custom_resource_definition(
    group: str,
    version: str,
    plural: str,
    kind: str,
    *,
    namespaced: bool,
    printer_columns: Sequence[tuple[str, str, str]] = (),
    labels: dict[str, str] | None = None,
    age_s: float = 86400 * 30,
    now: datetime | None = None,
) -> Obj:
    """An established CRD with one served version, a status subresource and an open schema.
    printer_columns: (name, type, jsonPath)."""
    name = f"{plural}.{group}"
    names = {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()}
    created = ago(age_s, now)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name, "uid": stable_uid("crd", name), "creationTimestamp": created, "generation": 1,
                     "labels": dict(labels or {}), "annotations": {"controller-gen.kubebuilder.io/version": "v0.14.0"}},
        "spec": {
            "conversion": {"strategy": "None"},
            "group": group,
            "names": names,
            "scope": "Namespaced" if namespaced else "Cluster",
            "versions": [{
                "name": version,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [{"name": n, "type": t, "jsonPath": p} for n, t, p in printer_columns],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": f"{kind} is the Schema for the {plural} API",
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    },
                }},
            }],
        },
        "status": {
            "acceptedNames": names,
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found",
                 "lastTransitionTime": created},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted", "lastTransitionTime": created},
            ],
            "storedVersions": [version],
        },
    }
