"""The kinds of object the simulated API server serves.

Adding a kind is one entry in RESOURCES: discovery, list/watch/get/create/delete
and Table printing all read from here.  The kinds the simulator models come
first; then every other kind kube-apiserver 1.34 serves (as its discovery lists
them), kept as given and served read-only (get, list, watch), so that a dump of a
real cluster is served whole.  A CustomResourceDefinition in a scenario adds its
custom resource (`from_crd`) to that cluster's store.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

Obj = dict[str, Any]
ALL_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")
READ_ONLY = ("get", "list", "watch")  # kinds kept as given: nothing in the simulator acts on them


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    singular: str = field(default="")
    # A custom resource: served (discovery, every path) only while its CustomResourceDefinition,
    # named after `key`, exists, as on a real cluster where the CRD may not be installed.
    custom: bool = False
    categories: tuple[str, ...] = ()
    # A custom resource's additionalPrinterColumns: (name, type, jsonPath, priority).
    printer_columns: tuple[tuple[str, str, str, int], ...] = ()

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


def _kept(api_version: str, plural: str, kind: str, namespaced: bool, *short_names: str, all_category: bool = False,
          verbs: tuple[str, ...] = READ_ONLY) -> ResourceType:
    group, _, version = api_version.rpartition("/")
    return ResourceType(group, version, plural, kind, namespaced, short_names, verbs=verbs,
                        categories=("all",) if all_category else ())


RESOURCES: list[ResourceType] = [
    ResourceType("", "v1", "namespaces", "Namespace", False, ("ns",), ("status",)),
    ResourceType("", "v1", "nodes", "Node", False, ("no",), ("status", "proxy")),
    ResourceType("", "v1", "pods", "Pod", True, ("po",), ("status", "log", "binding", "proxy"), categories=("all",)),
    ResourceType("", "v1", "events", "Event", True, ("ev",)),
    ResourceType("", "v1", "services", "Service", True, ("svc",), ("status", "proxy"), categories=("all",)),
    ResourceType("apps", "v1", "daemonsets", "DaemonSet", True, ("ds",), ("status",), categories=("all",)),
    ResourceType("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False,
                 ("crd", "crds"), ("status",)),
    ResourceType("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False),
    ResourceType("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True, (), ("status",)),
    ResourceType("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False),
    ResourceType("nvidia.com", "v1", "clusterpolicies", "ClusterPolicy", False, (), ("status",), custom=True),
    # Reviews of one's own access, answered from RBAC (server/reviews.py), never stored.
    ResourceType("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False, verbs=("create",)),
    ResourceType("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", False, verbs=("create",)),
    # The admission plugins' policy (admission_plugins.py, quota.py): served whole, writable.
    ResourceType("", "v1", "limitranges", "LimitRange", True, ("limits",)),
    ResourceType("", "v1", "resourcequotas", "ResourceQuota", True, ("quota",), ("status",)),
    # Plain data, stored as given and writable (`kubectl create configmap|secret|serviceaccount`); nothing acts on them.
    _kept("v1", "configmaps", "ConfigMap", True, "cm", verbs=ALL_VERBS),
    _kept("v1", "secrets", "Secret", True, verbs=ALL_VERBS),
    _kept("v1", "serviceaccounts", "ServiceAccount", True, "sa", verbs=ALL_VERBS),
    # Kept as given (read-only).  RBAC objects are also the authorizer's policy (auth.py).
    _kept("v1", "endpoints", "Endpoints", True, "ep"),
    _kept("v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, "pvc"),
    _kept("v1", "persistentvolumes", "PersistentVolume", False, "pv"),
    _kept("v1", "podtemplates", "PodTemplate", True),
    _kept("v1", "replicationcontrollers", "ReplicationController", True, "rc", all_category=True),
    _kept("admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False),
    _kept("admissionregistration.k8s.io/v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", False),
    _kept("admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", False),
    _kept("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False),
    _kept("apiregistration.k8s.io/v1", "apiservices", "APIService", False),
    _kept("apps/v1", "controllerrevisions", "ControllerRevision", True),
    _kept("apps/v1", "deployments", "Deployment", True, "deploy", all_category=True),
    _kept("apps/v1", "replicasets", "ReplicaSet", True, "rs", all_category=True),
    _kept("apps/v1", "statefulsets", "StatefulSet", True, "sts", all_category=True),
    _kept("autoscaling/v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True, "hpa", all_category=True),
    _kept("batch/v1", "cronjobs", "CronJob", True, "cj", all_category=True),
    _kept("batch/v1", "jobs", "Job", True, all_category=True),
    _kept("certificates.k8s.io/v1", "certificatesigningrequests", "CertificateSigningRequest", False, "csr"),
    _kept("coordination.k8s.io/v1", "leases", "Lease", True),
    _kept("discovery.k8s.io/v1", "endpointslices", "EndpointSlice", True),
    ResourceType("events.k8s.io", "v1", "events", "Event", True, ("ev",)),  # a view of the core Events (event_views.py)
    _kept("flowcontrol.apiserver.k8s.io/v1", "flowschemas", "FlowSchema", False),
    _kept("flowcontrol.apiserver.k8s.io/v1", "prioritylevelconfigurations", "PriorityLevelConfiguration", False),
    _kept("networking.k8s.io/v1", "ingressclasses", "IngressClass", False),
    _kept("networking.k8s.io/v1", "ingresses", "Ingress", True, "ing"),
    _kept("networking.k8s.io/v1", "ipaddresses", "IPAddress", False, "ip"),
    _kept("networking.k8s.io/v1", "networkpolicies", "NetworkPolicy", True, "netpol"),
    _kept("networking.k8s.io/v1", "servicecidrs", "ServiceCIDR", False),
    _kept("node.k8s.io/v1", "runtimeclasses", "RuntimeClass", False),
    _kept("policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", True, "pdb"),
    _kept("rbac.authorization.k8s.io/v1", "clusterrolebindings", "ClusterRoleBinding", False),
    _kept("rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", False),
    _kept("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding", True),
    _kept("rbac.authorization.k8s.io/v1", "roles", "Role", True),
    _kept("resource.k8s.io/v1", "resourceclaimtemplates", "ResourceClaimTemplate", True),
    _kept("scheduling.k8s.io/v1", "priorityclasses", "PriorityClass", False, "pc"),
    _kept("storage.k8s.io/v1", "csidrivers", "CSIDriver", False),
    _kept("storage.k8s.io/v1", "csinodes", "CSINode", False),
    _kept("storage.k8s.io/v1", "csistoragecapacities", "CSIStorageCapacity", True),
    _kept("storage.k8s.io/v1", "storageclasses", "StorageClass", False, "sc"),
    _kept("storage.k8s.io/v1", "volumeattachments", "VolumeAttachment", False),
    _kept("storage.k8s.io/v1", "volumeattributesclasses", "VolumeAttributesClass", False, "vac"),
]

CRD_KEY = "customresourcedefinitions.apiextensions.k8s.io"
CRD_API_VERSION = "apiextensions.k8s.io/v1"
BUILTIN_GROUPS = frozenset(r.group for r in RESOURCES if not r.custom)


def by_key() -> dict[str, ResourceType]:
    return {r.key: r for r in RESOURCES}


def find(group: str, version: str, plural: str, resources: Iterable[ResourceType] = RESOURCES) -> ResourceType | None:
    for r in resources:
        if r.group == group and r.version == version and r.plural == plural:
            return r
    return None


def for_kind(api_version: str, kind: str) -> ResourceType | None:
    for r in RESOURCES:
        if r.api_version == api_version and r.kind == kind:
            return r
    return None


def groups(served: Callable[[ResourceType], bool] = lambda r: True,
           resources: Iterable[ResourceType] = RESOURCES) -> dict[str, list[str]]:
    """Named groups (not core) and their versions, in registration order (only the served resources')."""
    out: dict[str, list[str]] = {}
    for r in resources:
        if r.group and served(r):
            versions = out.setdefault(r.group, [])
            if r.version not in versions:
                versions.append(r.version)
    return out


# -- custom resources from their definitions ----------------------------------------------
def _object(value: Any) -> Obj:
    """value where it is an object, else {}."""
    return value if isinstance(value, dict) else {}


def _required(value: Any, label: str) -> str:
    """value where it is a string that is not empty, else ValueError."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{label} is required")
    return value


def crd_names(crd: Obj) -> tuple[str, str]:
    """(spec.group, spec.names.kind) of a CustomResourceDefinition ("" where absent)."""
    spec = _object(crd.get("spec"))
    names = _object(spec.get("names"))
    return str(spec.get("group") or ""), str(names.get("kind") or "")


def from_crd(crd: Obj, version: str | None = None) -> ResourceType:
    """The custom resource a CustomResourceDefinition defines, served at `version` (by default its storage
    version); ValueError says what the definition lacks."""
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        raise ValueError("no spec")
    names = _object(spec.get("names"))
    group = _required(spec.get("group"), "spec.group")
    plural = _required(names.get("plural"), "spec.names.plural")
    kind = _required(names.get("kind"), "spec.names.kind")
    if crd["metadata"]["name"] != f"{plural}.{group}":
        raise ValueError(f'metadata.name must be spec.names.plural+"."+spec.group ({plural}.{group})')
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        raise ValueError(f'spec.scope must be "Namespaced" or "Cluster", not {spec.get("scope")!r}')
    served = [v for v in spec.get("versions") or [] if isinstance(v, dict) and v.get("served") and isinstance(v.get("name"), str)]
    if not served:
        raise ValueError("no served version in spec.versions")
    chosen: Obj | None
    if version is None:
        chosen = next((v for v in served if v.get("storage")), served[0])
    else:
        chosen = next((v for v in served if v["name"] == version), None)
        if chosen is None:
            raise ValueError(f"version {version} is not served (served: {', '.join(v['name'] for v in served)})")
    subresources = tuple(s for s in ("status", "scale") if s in (chosen.get("subresources") or {}))
    columns = tuple(
        (str(c.get("name", "")), str(c.get("type", "string")), str(c.get("jsonPath", "")), int(c.get("priority") or 0))
        for c in chosen.get("additionalPrinterColumns") or [] if isinstance(c, dict)
    ) or (("Age", "date", ".metadata.creationTimestamp", 0),)
    short_names = tuple(s for s in names.get("shortNames") or [] if isinstance(s, str))
    categories = tuple(s for s in names.get("categories") or [] if isinstance(s, str))
    return ResourceType(group, chosen["name"], plural, kind, spec["scope"] == "Namespaced", short_names, subresources,
                        singular=str(names.get("singular") or kind.lower()), custom=True, categories=categories,
                        printer_columns=columns)
