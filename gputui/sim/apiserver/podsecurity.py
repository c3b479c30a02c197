"""PodSecurity admission: the Pod Security Standards a namespace's labels ask for, checked as kube-apiserver's
built-in plugin (k8s.io/pod-security-admission) checks a new pod.

    pod-security.kubernetes.io/enforce: restricted      refuse a pod that violates the level (403 Forbidden)
    pod-security.kubernetes.io/warn: baseline           admit it with a Warning header kubectl prints
    pod-security.kubernetes.io/audit: restricted        an audit annotation only (the simulator keeps no audit log)
    pod-security.kubernetes.io/<mode>-version: v1.34    the version quoted ("restricted:v1.34"); default latest

Levels: privileged (everything), baseline (no known privilege escalation), restricted (hardened). A level
that is not one of these is read as restricted (the plugin fails closed). Without an explicit warn label the
warn level follows a stricter enforce level. Each check words its reason and detail as the plugin does, and
the reasons are listed baseline checks first, then restricted ones, each family in the plugin's order:

    pods "x" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false
    (container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (...), ...

Not modelled: AppArmor, SELinux, /proc mount, sysctls and Windows host-process checks (the simulator's
pods do not set them), per-version differences of the checks, and the cluster-wide exemptions.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

Obj = dict[str, Any]
Check = Callable[[Obj], "tuple[str, str] | None"]  # (reason, detail) when the pod violates it

LABEL_PREFIX = "pod-security.kubernetes.io/"
LEVELS = ("privileged", "baseline", "restricted")
MODES = ("enforce", "audit", "warn")
BASELINE_CAPABILITIES = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
                                   "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
RESTRICTED_VOLUME_TYPES = frozenset({"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected",
                                     "secret"})


def _quote(items: list[str]) -> str:
    return '"' + '", "'.join(items) + '"' if items else ""


def _plural(singular: str, plural: str, n: int) -> str:
    return singular if n == 1 else plural


def _containers(spec: Obj) -> Iterator[Obj]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from (c for c in spec.get(key) or [] if isinstance(c, dict))


def _security(obj: Obj) -> Obj:
    context = obj.get("securityContext")
    return context if isinstance(context, dict) else {}


# -- baseline checks ------------------------------------------------------------
def _host_namespaces(spec: Obj) -> tuple[str, str] | None:
    used = [f"{key}=true" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key) is True]
    return ("host namespaces", ", ".join(used)) if used else None


def _privileged(spec: Obj) -> tuple[str, str] | None:
    bad = [c.get("name", "") for c in _containers(spec) if _security(c).get("privileged") is True]
    if not bad:
        return None
    return "privileged", f"{_plural('container', 'containers', len(bad))} {_quote(bad)} must not set securityContext.privileged=true"


def _host_ports(spec: Obj) -> tuple[str, str] | None:
    bad: list[str] = []
    ports: set[str] = set()
    for c in _containers(spec):
        used = [int(p["hostPort"]) for p in c.get("ports") or [] if isinstance(p, dict) and p.get("hostPort")]
        if used:
            bad.append(c.get("name", ""))
            ports.update(str(p) for p in used)
    if not bad:
        return None
    return "hostPort", (f"{_plural('container', 'containers', len(bad))} {_quote(bad)} {_plural('uses', 'use', len(bad))} "
                        f"{_plural('hostPort', 'hostPorts', len(ports))} {', '.join(sorted(ports))}")


# checks of the baseline level that the restricted level replaces with its own (the plugin's "overlap")
def _capabilities_baseline(spec: Obj) -> tuple[str, str] | None:
    bad, added = [], set()
    for c in _containers(spec):
        extra = [a for a in (_security(c).get("capabilities") or {}).get("add") or [] if a not in BASELINE_CAPABILITIES]
        if extra:
            bad.append(c.get("name", ""))
            added.update(extra)
    if not bad:
        return None
    return "non-default capabilities", (f"{_plural('container', 'containers', len(bad))} {_quote(bad)} must not include "
                                        f"{_quote(sorted(added))} in securityContext.capabilities.add")


def _host_path_volumes(spec: Obj) -> tuple[str, str] | None:
    bad = [v.get("name", "") for v in spec.get("volumes") or [] if isinstance(v, dict) and v.get("hostPath") is not None]
    return ("hostPath volumes", f"{_plural('volume', 'volumes', len(bad))} {_quote(bad)}") if bad else None


def _seccomp_baseline(spec: Obj) -> tuple[str, str] | None:
    def bad(context: Obj) -> bool:
        profile = context.get("seccompProfile")
        return isinstance(profile, dict) and profile.get("type") not in ("RuntimeDefault", "Localhost")

    setters = ["pod"] if bad(_security(spec)) else []
    values = {str(_security(spec)["seccompProfile"].get("type"))} if setters else set()
    containers = [c for c in _containers(spec) if bad(_security(c))]
    if containers:
        setters.append(f"{_plural('container', 'containers', len(containers))} {_quote([c.get('name', '') for c in containers])}")
        values.update(str(_security(c)["seccompProfile"].get("type")) for c in containers)
    if not setters:
        return None
    return "seccompProfile", f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to {_quote(sorted(values))}"


# -- restricted checks -------------------------------------------------------------
def _allow_privilege_escalation(spec: Obj) -> tuple[str, str] | None:
    bad = [c.get("name", "") for c in _containers(spec) if _security(c).get("allowPrivilegeEscalation") is not False]
    if not bad:
        return None
    return "allowPrivilegeEscalation != false", (f"{_plural('container', 'containers', len(bad))} {_quote(bad)} "
                                                 "must set securityContext.allowPrivilegeEscalation=false")


def _capabilities_restricted(spec: Obj) -> tuple[str, str] | None:
    missing_drop, adding, added = [], [], set()
    for c in _containers(spec):
        capabilities = _security(c).get("capabilities")
        if not isinstance(capabilities, dict):
            missing_drop.append(c.get("name", ""))
            continue
        if "ALL" not in (capabilities.get("drop") or []):
            missing_drop.append(c.get("name", ""))
        extra = [a for a in capabilities.get("add") or [] if a != "NET_BIND_SERVICE"]
        if extra:
            adding.append(c.get("name", ""))
            added.update(extra)
    details = []
    if missing_drop:
        details.append(f'{_plural("container", "containers", len(missing_drop))} {_quote(missing_drop)} '
                       'must set securityContext.capabilities.drop=["ALL"]')
    if adding:
        details.append(f"{_plural('container', 'containers', len(adding))} {_quote(adding)} must not include "
                       f"{_quote(sorted(added))} in securityContext.capabilities.add")
    return ("unrestricted capabilities", "; ".join(details)) if details else None


def _restricted_volumes(spec: Obj) -> tuple[str, str] | None:
    bad = sorted({v.get("name", "") for v in spec.get("volumes") or []
                  if isinstance(v, dict) and not any(v.get(kind) is not None for kind in RESTRICTED_VOLUME_TYPES)})
    if not bad:
        return None
    return "restricted volume types", "volumes [" + " ".join(f'"{name}"' for name in bad) + "] have restricted types"


def _explicit_and_implicit(spec: Obj, field: str, good: Callable[[Any], bool]) -> tuple[list[str], list[str]]:
    """(who sets `field` to a bad value: "pod", 'container(s) "a", "b"'; containers that leave it unset while the
    pod does not set a good value either)."""
    setters: list[str] = []
    pod_value = _security(spec).get(field)
    pod_good = False
    if pod_value is not None:
        if good(pod_value):
            pod_good = True
        else:
            setters.append("pod")
    explicit, implicit = [], []
    for c in _containers(spec):
        value = _security(c).get(field)
        if value is not None:
            if not good(value):
                explicit.append(c.get("name", ""))
        elif not pod_good:
            implicit.append(c.get("name", ""))
    if explicit:
        setters.append(f"{_plural('container', 'containers', len(explicit))} {_quote(explicit)}")
    return setters, implicit


def _run_as_non_root(spec: Obj) -> tuple[str, str] | None:
    setters, implicit = _explicit_and_implicit(spec, "runAsNonRoot", lambda v: v is True)
    if setters:
        return "runAsNonRoot != true", f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false"
    if implicit:
        return "runAsNonRoot != true", (f"pod or {_plural('container', 'containers', len(implicit))} {_quote(implicit)} "
                                        "must set securityContext.runAsNonRoot=true")
    return None


def _run_as_user(spec: Obj) -> tuple[str, str] | None:
    setters = ["pod"] if _security(spec).get("runAsUser") == 0 else []
    containers = [c.get("name", "") for c in _containers(spec) if _security(c).get("runAsUser") == 0]
    if containers:
        setters.append(f"{_plural('container', 'containers', len(containers))} {_quote(containers)}")
    return ("runAsUser=0", f"{' and '.join(setters)} must not set runAsUser=0") if setters else None


def _seccomp_restricted(spec: Obj) -> tuple[str, str] | None:
    def kind(profile: Any) -> Any:
        return profile.get("type") if isinstance(profile, dict) else None

    bad_values = sorted({str(kind(p)) for p in [_security(spec).get("seccompProfile"), *(_security(c).get("seccompProfile") for c in _containers(spec))]
                         if p is not None and kind(p) not in ("RuntimeDefault", "Localhost")})
    setters, implicit = _explicit_and_implicit(spec, "seccompProfile", lambda p: kind(p) in ("RuntimeDefault", "Localhost"))
    if setters:
        return "seccompProfile", f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to {_quote(bad_values)}"
    if implicit:
        return "seccompProfile", (f"pod or {_plural('container', 'containers', len(implicit))} {_quote(implicit)} must set "
                                  'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"')
    return None


# In the plugin's order: its checks register file by file, alphabetically.
BASELINE: tuple[Check, ...] = (_host_namespaces, _host_ports, _privileged)
BASELINE_ONLY: tuple[Check, ...] = (_capabilities_baseline, _host_path_volumes, _seccomp_baseline)  # replaced by restricted checks
RESTRICTED: tuple[Check, ...] = (_allow_privilege_escalation, _capabilities_restricted, _restricted_volumes, _run_as_non_root,
                                 _run_as_user, _seccomp_restricted)


def violations(level: str, pod: Obj) -> list[str]:
    """The pod's violations of a level, each `reason (detail)`."""
    if level == "privileged":
        return []
    spec = pod.get("spec") or {}
    checks = BASELINE + (BASELINE_ONLY if level == "baseline" else RESTRICTED)
    found = []
    for check in checks:
        result = check(spec)
        if result is not None:
            reason, detail = result
            found.append(f"{reason} ({detail})" if detail else reason)
    return found


def policy(labels: dict[str, str]) -> dict[str, tuple[str, str]]:
    """mode -> (level, version) from a namespace's labels (the default policy: privileged, latest)."""
    out: dict[str, tuple[str, str]] = {}
    explicit_enforce = False
    for mode in MODES:
        level = labels.get(LABEL_PREFIX + mode)
        version = labels.get(f"{LABEL_PREFIX}{mode}-version") or "latest"
        if level is None:
            out[mode] = ("privileged", "latest")
            continue
        if mode == "enforce" and level in LEVELS:
            explicit_enforce = True
        out[mode] = (level if level in LEVELS else "restricted", version)  # an unknown level fails closed
    enforce, warn = out["enforce"], out["warn"]
    if LABEL_PREFIX + "warn" not in labels and explicit_enforce and LEVELS.index(enforce[0]) > LEVELS.index(warn[0]):
        out["warn"] = (enforce[0], enforce[1] if f"{LABEL_PREFIX}warn-version" not in labels else warn[1])
    return out


def evaluate(labels: dict[str, str], pod: Obj) -> tuple[str | None, list[str]]:
    """(the refusal's reason text, None when admitted; the warnings to send when admitted) for a new pod in a
    namespace with these labels. The refusal is what follows `pods "x" is forbidden: `."""
    modes = policy(labels)
    level, version = modes["enforce"]
    found = violations(level, pod)
    if found:
        return f'violates PodSecurity "{level}:{version}": {", ".join(found)}', []
    level, version = modes["warn"]
    found = violations(level, pod)
    return None, ([f'would violate PodSecurity "{level}:{version}": {", ".join(found)}'] if found else [])
