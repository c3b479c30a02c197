"""Authentication and authorization, as kube-apiserver does them.

Authentication (`Authenticator.authenticate`): a client certificate signed by the cluster CA (CN the user,
each O a group; an expired or not yet valid one is a 401), else a bearer token from the static token
table (kube-apiserver's --token-auth-file), else, with `anonymous`, the user system:anonymous (group
system:unauthenticated); anything else is a 401 Status "Unauthorized". An authenticated user also has
the group system:authenticated.

Impersonation (`impersonated`): Impersonate-User (a `system:serviceaccount:NS:NAME` one is that service
account), Impersonate-Group (repeated), Impersonate-Uid and Impersonate-Extra-KEY headers, each allowed only by
the `impersonate` verb on users, serviceaccounts, groups, uids and userextras/KEY (authentication.k8s.io) in
the requester's RBAC (403 with kube-apiserver's words otherwise; groups, a uid or extras without a user: 500);
the request then acts as the impersonated user, with that user's RBAC.

Authorization (`Authorizer.allowed`): RBAC from the scenario's ClusterRoles, ClusterRoleBindings, Roles
and RoleBindings (rbac.authorization.k8s.io/v1): rules with verbs, apiGroups, resources (`pods/log` for a
subresource, `*`), resourceNames and nonResourceURLs; subjects User, Group and ServiceAccount. The group
system:masters may do everything (the simulator's own credentials are in it). kube-apiserver's bootstrap policy
is there too: every authenticated user may read discovery (/api, /apis, /version, health) and review its own
access (system:discovery, system:basic-user), an anonymous one only /version and health
(system:public-info-viewer). `decide` gives RBAC's reason for an allowed request and `rules_for` a user's rules
in a namespace, as SelfSubjectAccessReview and SelfSubjectRulesReview answer them (server/reviews.py).
"""
from __future__ import annotations

import re
import ssl
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

Obj = dict[str, Any]

RBAC_API_VERSION = "rbac.authorization.k8s.io/v1"
RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()


class Unauthenticated(Exception):
    """401: no credential the server takes."""


def _subject_field(subject: Iterable[Any], key: str) -> list[str]:
    values = []
    for rdn in subject:
        for name, value in rdn:
            if name == key:
                values.append(value)
    return values


@dataclass
class Authenticator:
    tokens: dict[str, User] = field(default_factory=dict)  # the static token table: token -> user
    anonymous: bool = False

    def authenticate(self, peercert: Mapping[str, Any] | None, authorization: str | None) -> User:
        if peercert:
            user = self._from_certificate(peercert)
            if user is not None:
                return user
        if authorization:
            scheme, _, credential = authorization.partition(" ")
            if scheme.lower() == "bearer" and credential.strip() in self.tokens:
                user = self.tokens[credential.strip()]
                return User(user.name, tuple(dict.fromkeys([*user.groups, AUTHENTICATED])))
            raise Unauthenticated  # a credential was given and it is wrong: never anonymous
        if peercert:
            raise Unauthenticated  # an expired certificate is a 401, not anonymous
        if self.anonymous:
            return User(ANONYMOUS, (UNAUTHENTICATED,))
        raise Unauthenticated

    @staticmethod
    def _from_certificate(cert: Mapping[str, Any]) -> User | None:
        now = time.time()
        try:
            if ssl.cert_time_to_seconds(cert["notBefore"]) > now or ssl.cert_time_to_seconds(cert["notAfter"]) < now:
                return None
        except (KeyError, ValueError):
            return None
        names = _subject_field(cert.get("subject", ()), "commonName")
        if not names or not names[0]:
            return None
        groups = _subject_field(cert.get("subject", ()), "organizationName")
        return User(names[0], tuple(dict.fromkeys([*groups, AUTHENTICATED])))


def parse_token_file(text: str, source: str) -> dict[str, User]:
    """kube-apiserver's --token-auth-file: CSV `token,user,uid[,"group1,group2"]`, one a line."""
    import csv  # noqa: PLC0415

    tokens: dict[str, User] = {}
    for number, row in enumerate(csv.reader(text.splitlines()), 1):
        if not row or (len(row) == 1 and not row[0].strip()) or row[0].startswith("#"):
            continue
        if len(row) < 3 or not row[0].strip() or not row[1].strip():
            raise ValueError(f"{source}: line {number}: expected token,user,uid[,\"group1,group2\"]")
        groups = tuple(g.strip() for g in row[3].split(",") if g.strip()) if len(row) > 3 else ()
        if row[0].strip() in tokens:
            raise ValueError(f"{source}: line {number}: this token is already given to another user")
        tokens[row[0].strip()] = User(row[1].strip(), groups)
    return tokens


@dataclass(frozen=True)
class Request:
    """What authorization looks at: a resource request, or a path (nonResourceURL)."""

    verb: str
    group: str = ""
    resource: str = ""
    subresource: str | None = None
    namespace: str | None = None
    name: str | None = None
    path: str | None = None  # a non-resource request


def _matches(values: Iterable[str], wanted: str) -> bool:
    return any(v == "*" or v == wanted for v in values)


def _resource_matches(rule: Obj, request: Request) -> bool:
    full = request.resource + (f"/{request.subresource}" if request.subresource else "")
    for item in rule.get("resources") or []:
        if item in ("*", full):
            return True
        if request.subresource and item == f"*/{request.subresource}":
            return True
    return False


def _rule_allows(rule: Obj, request: Request) -> bool:
    if not _matches(rule.get("verbs") or [], request.verb):
        return False
    if request.path is not None:
        for url in rule.get("nonResourceURLs") or []:
            if url == "*" or url == request.path or (url.endswith("*") and request.path.startswith(url[:-1])):
                return True
        return False
    if not _matches(rule.get("apiGroups") or [], request.group) or not _resource_matches(rule, request):
        return False
    names = rule.get("resourceNames") or []
    return not names or (request.name is not None and request.name in names)


def _subject_is(subject: Obj, user: User, binding_namespace: str | None) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return name == user.name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace or ""
        return user.name == f"system:serviceaccount:{namespace}:{name}"
    return False


def _cluster_role(name: str, rules: list[Obj]) -> Obj:
    return {"apiVersion": RBAC_API_VERSION, "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules}


def _bound_to_groups(name: str, *groups: str) -> Obj:
    return {"apiVersion": RBAC_API_VERSION, "kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g} for g in groups]}


PUBLIC_INFO = ["/healthz", "/livez", "/readyz", "/version", "/version/"]
# kube-apiserver's bootstrap policy that every cluster has (plugin/pkg/auth/authorizer/rbac/bootstrappolicy), as far
# as the simulator's users meet it: reviews of oneself, discovery, the public paths; everything for system:masters.
BOOTSTRAP_POLICY: list[Obj] = [
    _cluster_role("cluster-admin", [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                                    {"verbs": ["*"], "nonResourceURLs": ["*"]}]),
    _bound_to_groups("cluster-admin", MASTERS),
    _cluster_role("system:basic-user", [
        {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
        {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"]}]),
    _bound_to_groups("system:basic-user", AUTHENTICATED),
    _cluster_role("system:discovery", [{"verbs": ["get"], "nonResourceURLs": sorted(
        ["/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", *PUBLIC_INFO])}]),
    _bound_to_groups("system:discovery", AUTHENTICATED),
    _cluster_role("system:public-info-viewer", [{"verbs": ["get"], "nonResourceURLs": PUBLIC_INFO}]),
    _bound_to_groups("system:public-info-viewer", AUTHENTICATED, UNAUTHENTICATED),
]


def _describe_subject(subject: Obj, binding_namespace: str | None) -> str:
    """rbac's describeSubject: `User "alice"`, `ServiceAccount "ns/name"`."""
    name = subject.get("name", "")
    if subject.get("kind") == "ServiceAccount":
        name = f'{subject.get("namespace") or binding_namespace or ""}/{name}'
    return f'{subject.get("kind")} "{name}"'


class Authorizer:
    """RBAC over the policy objects a scenario gives, with kube-apiserver's bootstrap policy (see the module
    docstring)."""

    def __init__(self, policy: Iterable[Obj] = ()) -> None:
        self.roles: dict[tuple[str, str], list[Obj]] = {}  # (namespace or "", name) -> rules
        self.bindings: list[Obj] = []
        for obj in [*BOOTSTRAP_POLICY, *policy]:
            kind, meta = obj.get("kind"), obj.get("metadata") or {}
            if kind in ("ClusterRole", "Role"):
                namespace = (meta.get("namespace") or "default") if kind == "Role" else ""
                self.roles[(namespace, meta.get("name", ""))] = list(obj.get("rules") or [])
            elif kind in ("ClusterRoleBinding", "RoleBinding"):
                self.bindings.append(obj)

    def _rules(self, binding: Obj) -> list[Obj]:
        ref = binding.get("roleRef") or {}
        if ref.get("kind") == "ClusterRole":
            return self.roles.get(("", ref.get("name", "")), [])
        if ref.get("kind") == "Role" and binding.get("kind") == "RoleBinding":
            namespace = (binding.get("metadata") or {}).get("namespace") or "default"
            return self.roles.get((namespace, ref.get("name", "")), [])
        return []

    def _applying(self, user: User, namespace: str | None) -> Iterable[tuple[Obj, str | None, Obj]]:
        """(binding, its namespace for a RoleBinding, the subject that is the user) of every binding that applies to
        the user: the cluster-wide ones, then the RoleBindings of `namespace` (rbac's visitRulesFor order)."""
        def bound_in(binding: Obj) -> str | None:
            if binding.get("kind") != "RoleBinding":
                return None
            return (binding.get("metadata") or {}).get("namespace") or "default"

        cluster_wide = [b for b in self.bindings if b.get("kind") == "ClusterRoleBinding"]
        local = [b for b in self.bindings if namespace is not None and bound_in(b) == namespace]
        for binding in [*cluster_wide, *local]:
            subject = next((s for s in binding.get("subjects") or [] if _subject_is(s, user, bound_in(binding))), None)
            if subject is not None:
                yield binding, bound_in(binding), subject

    def decide(self, user: User, request: Request) -> str | None:
        """Why the user may do this (RBAC's reason, "" for system:masters), or None when they may not."""
        if MASTERS in user.groups:
            return ""  # the privileged-group authorizer, before RBAC
        namespace = None if request.path is not None else request.namespace
        for binding, bound_in, subject in self._applying(user, namespace):  # a RoleBinding grants only in its namespace
            if any(_rule_allows(rule, request) for rule in self._rules(binding)):
                name = binding["metadata"].get("name", "") + (f"/{bound_in}" if bound_in is not None else "")
                ref = binding.get("roleRef") or {}
                return (f'RBAC: allowed by {binding.get("kind")} "{name}" of {ref.get("kind")} "{ref.get("name")}" '
                        f"to {_describe_subject(subject, bound_in)}")
        return None

    def allowed(self, user: User, request: Request) -> bool:
        return self.decide(user, request) is not None

    def rules_for(self, user: User, namespace: str) -> tuple[list[Obj], list[Obj]]:
        """(resource rules, non-resource rules) of the user in a namespace: what a SelfSubjectRulesReview answers."""
        resource_rules: list[Obj] = []
        non_resource_rules: list[Obj] = []
        for binding, _, _ in self._applying(user, namespace):
            for rule in self._rules(binding):
                if rule.get("resources"):
                    resource_rules.append({key: list(rule[key]) for key in ("verbs", "apiGroups", "resources", "resourceNames") if rule.get(key)})
                    resource_rules[-1].setdefault("verbs", [])
                if rule.get("nonResourceURLs"):
                    non_resource_rules.append({"verbs": list(rule.get("verbs") or []), "nonResourceURLs": list(rule["nonResourceURLs"])})
        return resource_rules, non_resource_rules


def forbidden_message(user: str, request: Request, subject: str) -> str:
    """kube-apiserver's words for a 403, `subject` being e.g. `pods` or `daemonsets.apps "x"`."""
    if request.path is not None:
        return f'forbidden: User "{user}" cannot {request.verb} path "{request.path}"'
    resource = request.resource + (f"/{request.subresource}" if request.subresource else "")
    scope = f'in the namespace "{request.namespace}"' if request.namespace else "at the cluster scope"
    return f'{subject} is forbidden: User "{user}" cannot {request.verb} resource "{resource}" in API group "{request.group}" {scope}'


IMPERSONATE_USER, IMPERSONATE_UID, IMPERSONATE_GROUP = "impersonate-user", "impersonate-uid", "impersonate-group"
IMPERSONATE_EXTRA = "impersonate-extra-"
AUTHENTICATION_GROUP = "authentication.k8s.io"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


class ImpersonationRefused(Exception):
    """The impersonation asked for is not allowed (403) or malformed (500): code, message and the Status details."""

    def __init__(self, code: int, message: str, details: Obj) -> None:
        super().__init__(message)
        self.code, self.message, self.details = code, message, details


def _extra_key(encoded: str) -> str:
    """An Impersonate-Extra- header's key: lower-cased, then %-unescaped (kept as it is when malformed)."""
    key = encoded.lower()
    return key if re.search("%(?![0-9a-f]{2})", key) else unquote(key)


def impersonated(authorizer: "Authorizer", requester: User, headers: Iterable[tuple[str, str]]) -> User | None:
    """The user a request acts as, when it asks to impersonate one (None when it does not), each part authorized
    for `requester` as kube-apiserver's impersonation filter does; ImpersonationRefused otherwise."""
    name, uid, groups, extras = "", "", [], []
    for header, value in headers:
        lower = header.lower()
        if lower == IMPERSONATE_USER and not name:
            name = value
        elif lower == IMPERSONATE_UID and not uid:
            uid = value
        elif lower == IMPERSONATE_GROUP:
            groups.append(value)
        elif lower.startswith(IMPERSONATE_EXTRA):
            extras.append((_extra_key(header[len(IMPERSONATE_EXTRA):]), value))
    if not (name or uid or groups or extras):
        return None
    if not name:
        raise ImpersonationRefused(500, "Internal error occurred: requested groups, a uid or user-extra without impersonating a user",
                                   {"causes": [{"message": "requested impersonation without a user"}]})
    wanted: list[tuple[Request, str]] = []  # each check, with how the refusal names its object
    member_of = list(groups)
    if name.startswith(SERVICE_ACCOUNT_PREFIX) and name.count(":") == 3:
        namespace, account = name[len(SERVICE_ACCOUNT_PREFIX):].split(":")
        wanted.append((Request("impersonate", "", "serviceaccounts", None, namespace, account), f'serviceaccounts "{account}"'))
        if not groups:
            member_of = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
    else:
        wanted.append((Request("impersonate", "", "users", name=name), f'users "{name}"'))
    wanted += [(Request("impersonate", "", "groups", name=group), f'groups "{group}"') for group in groups]
    wanted += [(Request("impersonate", AUTHENTICATION_GROUP, "userextras", key, name=value),
                f'userextras.{AUTHENTICATION_GROUP} "{value}"') for key, value in extras]
    if uid:
        wanted.append((Request("impersonate", AUTHENTICATION_GROUP, "uids", name=uid), f'uids.{AUTHENTICATION_GROUP} "{uid}"'))
    for request, subject in wanted:
        if not authorizer.allowed(requester, request):
            details: Obj = {"name": request.name, **({"group": request.group} if request.group else {}), "kind": request.resource}
            raise ImpersonationRefused(403, forbidden_message(requester.name, request, subject), details)
    if name == ANONYMOUS:
        member_of += [] if UNAUTHENTICATED in member_of else [UNAUTHENTICATED]
    elif AUTHENTICATED not in member_of and UNAUTHENTICATED not in member_of:
        member_of.append(AUTHENTICATED)
    return User(name, tuple(dict.fromkeys(member_of)))
