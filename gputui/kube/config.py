"""Connecting to a cluster: kubeconfig (as kubectl reads it) or in-cluster config.

Every failure is a ConnectError whose str() is one line fit for stderr; no
message ever contains a credential.

`resolve()` reads the kubeconfig and picks the context without the network:
the app calls it before drawing anything. `connect()` then loads the
credentials (`credentials.py`: TLS, tokens, client certificates, exec
plugins) and makes the HTTP client (`client.py`). The client and PyYAML are
imported by the functions that use them, so that importing this module (the
app does, before its first frame) is cheap.
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path

from typing import TYPE_CHECKING, Callable

import orjson

if TYPE_CHECKING:
    from .client import Client

DEFAULT_KUBECONFIG = "~/.kube/config"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
IN_CLUSTER_TOKEN_FILE = f"{SERVICE_ACCOUNT_DIR}/token"
IN_CLUSTER_NAMESPACE_FILE = f"{SERVICE_ACCOUNT_DIR}/namespace"
IN_CLUSTER_CA_FILE = f"{SERVICE_ACCOUNT_DIR}/ca.crt"


class ConnectError(Exception):
    """A connection problem; str() is one clear line."""


class KubeconfigError(ConnectError):
    pass


class ContextError(ConnectError):
    pass


class Unreachable(ConnectError):
    """transient: refused, reset or timed out (an API server restarting), as opposed to a name that does
    not resolve or a certificate not trusted, which waiting does not mend."""

    def __init__(self, message: str, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class Unauthorized(ConnectError):
    pass


class Forbidden(ConnectError):
    pass


@dataclass(frozen=True)
class Impersonation:
    """Whom the requests act as (kube-apiserver checks that the credentials may): a kubeconfig user's `as`,
    `as-uid`, `as-groups` and `as-user-extra`, or kubectl's --as, --as-uid and --as-group; empty: nobody."""

    user: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (key, values), in the kubeconfig's order

    def __bool__(self) -> bool:
        return bool(self.user or self.uid or self.groups or self.extra)

    def headers(self) -> list[tuple[str, str]]:
        """The request headers, as client-go sends them (Impersonate-Group and each extra key repeated)."""
        if not self:
            return []
        fields = [("Impersonate-User", self.user)]
        if self.uid:
            fields.append(("Impersonate-Uid", self.uid))
        fields += [("Impersonate-Group", group) for group in self.groups]
        fields += [(f"Impersonate-Extra-{_header_key(key)}", value) for key, values in self.extra for value in values]
        return fields


# A header name's characters (RFC 7230's token) that an extra's key keeps as they are; every other byte,
# and `%`, is %-escaped (kube-apiserver unescapes the key).
_TOKEN = frozenset(b"!#$&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def _header_key(key: str) -> str:
    return "".join(chr(b) if b in _TOKEN else f"%{b:02X}" for b in key.encode())


def add_impersonation_args(parser: argparse.ArgumentParser, *, subcommand: bool = False) -> None:
    """kubectl's --as, --as-group and --as-uid: they replace the kubeconfig user's as, as-groups and as-uid.
    subcommand: see add_connection_args."""
    default = argparse.SUPPRESS if subcommand else None
    parser.add_argument("--as", dest="as_user", metavar="USER", default=default,
                        help="act as this user (or system:serviceaccount:NS:NAME), as kubectl --as; the credentials must be allowed to")
    parser.add_argument("--as-group", dest="as_groups", metavar="GROUP", action="append", default=default,
                        help="act as a member of this group (repeatable), as kubectl --as-group")
    parser.add_argument("--as-uid", dest="as_uid", metavar="UID", default=default, help="act as this UID, as kubectl --as-uid")


def impersonation_flags(args: argparse.Namespace) -> Impersonation:
    """--as, --as-group and --as-uid as given (empty where not)."""
    return Impersonation(getattr(args, "as_user", None) or "", getattr(args, "as_uid", None) or "",
                         tuple(getattr(args, "as_groups", None) or ()))


@dataclass
class Connection:
    api: Client
    context: str | None  # None in-cluster
    server: str
    namespace: str  # the context's default namespace

    @property
    def impersonation(self) -> Impersonation:
        """Whom the requests act as (empty: the credentials' own user)."""
        return getattr(self.api, "impersonation", None) or Impersonation()

    @property
    def warnings(self) -> list[str]:
        """What to tell the user once about this connection (one line each, no credential): that
        insecure-skip-tls-verify leaves the server's certificate unchecked, that an OIDC id-token was refreshed."""
        creds = getattr(self.api, "credentials", None)
        where = self._where
        said = [f"{where}: {notice}" for notice in getattr(creds, "notices", [])]  # an OIDC id-token refreshed
        if creds is not None and getattr(creds, "insecure", False):
            return [f"the server's TLS certificate is not checked (insecure-skip-tls-verify in {where})", *said]
        return said

    @property
    def _where(self) -> str:
        return f'context "{self.context}"' if self.context else "this connection"

    def on_later_warning(self, say: Callable[[str], None]) -> None:
        """say(line) for what is to be told once that happens after connecting: an OIDC id-token refreshed in the
        session (told by `warnings` instead when that was on connecting; either way once)."""
        oidc = getattr(getattr(self.api, "credentials", None), "oidc", None)
        if oidc is not None:
            where = self._where
            oidc.on_notice = lambda notice: say(f"{where}: {notice}")

    async def close(self) -> None:
        await self.api.close()

    async def __aenter__(self) -> "Connection":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


CONNECTION_DEFAULTS = {"kubeconfig": None, "context": None, "as_user": None, "as_groups": None, "as_uid": None}


def add_connection_args(parser: argparse.ArgumentParser, *, subcommand: bool = False) -> None:
    """The connection flags shared by every command that talks to a cluster. A subcommand's copy leaves the
    main parser's values alone when not given (`gputui --as auditor report` acts as auditor): argparse lets
    a subcommand's defaults replace them otherwise; `with_connection_defaults` fills in those never given."""
    default = argparse.SUPPRESS if subcommand else None
    parser.add_argument("--kubeconfig", metavar="PATH", default=default, help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
    parser.add_argument("--context", metavar="NAME", default=default, help="kubeconfig context (default: the current context)")
    add_impersonation_args(parser, subcommand=subcommand)


def with_connection_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """args with the connection flags that neither the main parser nor the subcommand's set (a subcommand's
    parser used alone) at their defaults."""
    for name, value in CONNECTION_DEFAULTS.items():
        if not hasattr(args, name):
            setattr(args, name, value)
    return args


def _kubeconfig_paths(explicit: str | None) -> list[str]:
    if explicit:
        path = os.path.expanduser(explicit)
        if not os.path.isfile(path):
            raise KubeconfigError(f"kubeconfig {explicit}: no such file")
        return [path]
    env = os.environ.get("KUBECONFIG")
    if env:
        # kubectl skips missing files in KUBECONFIG; it only fails when none exists.
        paths = [os.path.expanduser(p) for p in env.split(os.pathsep) if p]
        found = [p for p in paths if os.path.isfile(p)]
        if not found:
            raise KubeconfigError(f"KUBECONFIG={env}: none of these files exists")
        return found
    default = os.path.expanduser(DEFAULT_KUBECONFIG)
    return [default] if os.path.isfile(default) else []


def _read_yaml(path: str) -> dict:
    import yaml  # noqa: PLC0415

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise KubeconfigError(f"kubeconfig {path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise KubeconfigError(f"kubeconfig {path}: not UTF-8 text") from None
    try:
        doc = yaml.load(text, Loader=loader)  # noqa: S506  (a safe loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise KubeconfigError(f"kubeconfig {path}: not valid YAML{where}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise KubeconfigError(f"kubeconfig {path}: not a kubeconfig (expected a mapping)")
    for section in ("clusters", "contexts", "users"):
        items = doc.get(section) or []
        if not isinstance(items, list) or not all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items):
            raise KubeconfigError(f"kubeconfig {path}: '{section}' must be a list of named entries")
    return doc


@dataclass(frozen=True)
class Target:
    """Where to connect, as read from the kubeconfig (no network): see resolve()."""

    paths: tuple[str, ...]  # the kubeconfig files, merged in this order; () in-cluster
    context: str | None  # None in-cluster
    server: str
    namespace: str
    # The context's cluster and user entries, and the directories of the files that defined
    # them (relative certificate, key, token-file and exec-command paths start there).
    cluster: dict = field(default_factory=dict, compare=False, repr=False)
    user: dict = field(default_factory=dict, compare=False, repr=False)
    cluster_dir: Path = field(default=Path("."), compare=False, repr=False)
    user_dir: Path = field(default=Path("."), compare=False, repr=False)
    impersonation: Impersonation = Impersonation()


def _names(docs: list[dict], section: str, paths: list[str] | None = None) -> dict[str, dict]:
    """Merge as kubectl does: for each name the first file wins. With paths, each entry
    gains the key "__dir__": the directory of its file."""
    out: dict[str, dict] = {}
    for i, doc in enumerate(docs):
        for item in doc.get(section) or []:
            if item["name"] not in out:
                out[item["name"]] = {**item, "__dir__": _directory(paths[i])} if paths else item
    return out


def _directory(path: str) -> Path:
    """A kubeconfig's directory as kubectl takes it (Go's filepath.Abs of its Dir): absolute, `..` taken
    away by name, symlinks not resolved (a link's paths are relative to where the link is)."""
    return Path(os.path.abspath(path)).parent


def _impersonation(user_name: str, user: dict, flags: Impersonation) -> Impersonation:
    """The kubeconfig user's as, as-uid, as-groups and as-user-extra, each replaced by its flag where given;
    as kubectl, none of them without a user to act as."""
    groups = flags.groups or tuple(str(g) for g in user.get("as-groups") or ())
    extra = user.get("as-user-extra") or {}
    if not isinstance(extra, dict):
        raise KubeconfigError(f'user "{user_name}": as-user-extra must map keys to lists of values')
    wanted = Impersonation(
        flags.user or str(user.get("as") or ""), flags.uid or str(user.get("as-uid") or ""), groups,
        tuple((str(key), tuple(str(v) for v in values or ())) for key, values in extra.items()),
    )
    if wanted and not wanted.user:
        raise KubeconfigError(f'user "{user_name}": requesting uid, groups or user-extra without impersonating a user '
                              "(give as: in the kubeconfig, or --as)")
    return wanted


def _resolve_kubeconfig(paths: list[str], context: str | None, flags: Impersonation) -> Target:
    docs = [_read_yaml(p) for p in paths]
    where = paths[0] if len(paths) == 1 else "the merged kubeconfig"
    contexts = _names(docs, "contexts")
    # the first file that names a current context wins, as in kubectl
    name = context or next((d.get("current-context") for d in docs if d.get("current-context")), None)
    if not name:
        raise ContextError(f"{where} has no current context: pass --context NAME" + _choices(contexts))
    if name not in contexts:
        raise ContextError(f'context "{name}" not found in {where}' + _choices(contexts))
    ctx = contexts[name].get("context") or {}
    clusters = _names(docs, "clusters", paths)
    cluster_name = ctx.get("cluster")
    if cluster_name not in clusters:
        raise KubeconfigError(f'context "{name}" refers to cluster "{cluster_name}", which is not in {where}')
    cluster = clusters[cluster_name].get("cluster") or {}
    server = cluster.get("server")
    if not server:
        raise KubeconfigError(f'cluster "{cluster_name}" in {where} has no server address')
    users = _names(docs, "users", paths)
    if ctx.get("user") and ctx["user"] not in users:
        raise KubeconfigError(f'context "{name}" refers to user "{ctx["user"]}", which is not in {where}')
    user_entry = users.get(ctx.get("user") or "", {})
    if not isinstance(cluster, dict) or not isinstance(user_entry.get("user") or {}, dict):
        raise KubeconfigError(f'context "{name}": its cluster or user entry is not a mapping')
    user = user_entry.get("user") or {}
    return Target(
        tuple(paths), name, str(server), ctx.get("namespace") or "default",
        cluster=cluster, user=user,
        cluster_dir=clusters[cluster_name]["__dir__"], user_dir=user_entry.get("__dir__", _directory(paths[0])),
        impersonation=_impersonation(str(ctx.get("user") or ""), user, flags),
    )


def resolve(kubeconfig: str | None = None, context: str | None = None, impersonate: Impersonation | None = None) -> Target:
    """Read the kubeconfig (--kubeconfig, else $KUBECONFIG, else ~/.kube/config) and pick the
    context, or the pod's service account when running in a cluster. No network, no client:
    cheap enough to run before the app's first frame. KubeconfigError/ContextError otherwise.
    impersonate: --as, --as-group and --as-uid (impersonation_flags), over the kubeconfig user's own."""
    flags = impersonate or Impersonation()
    paths = _kubeconfig_paths(kubeconfig)
    if paths:
        return _resolve_kubeconfig(paths, context, flags)
    if context is None and _in_cluster_available():
        return Target((), None, "", "", impersonation=_impersonation("in-cluster", {}, flags))
    raise KubeconfigError(
        "no kubeconfig found: pass --kubeconfig PATH, set KUBECONFIG, or create ~/.kube/config"
    )


def context_names(kubeconfig: str | None = None) -> list[str]:
    """Every context the kubeconfig names, first file first (the palette's choices)."""
    return list(_names([_read_yaml(p) for p in _kubeconfig_paths(kubeconfig)], "contexts"))


async def _from_kubeconfig(target: Target, exec_timeout: float) -> Connection:
    from .client import Client  # noqa: PLC0415
    from .credentials import CredentialError, load_credentials  # noqa: PLC0415

    try:
        creds = await load_credentials(target.cluster, target.user, target.cluster_dir, target.user_dir, target.server,
                                       exec_timeout=exec_timeout)
        if target.user.get("auth-provider"):  # oidc (load_credentials refuses any other)
            from .oidc import OidcProvider  # noqa: PLC0415

            creds.oidc = OidcProvider(target.user["auth-provider"].get("config") or {}, target.user_dir, describe_network_error)
            await creds.oidc.token()  # an expired one is refreshed now, and said on connecting
    except CredentialError as exc:
        raise KubeconfigError(f'context "{target.context}": {exc}') from None
    return Connection(Client(target.server, creds, target.impersonation), target.context, target.server, target.namespace)


def _choices(contexts: dict[str, dict]) -> str:
    if not contexts:
        return ""
    return " (available: " + ", ".join(sorted(contexts)) + ")"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _in_cluster_available() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.isfile(IN_CLUSTER_TOKEN_FILE)


def _from_in_cluster(impersonation: Impersonation) -> Connection:
    from .client import Client  # noqa: PLC0415
    from .credentials import CredentialError, Credentials, tls_context  # noqa: PLC0415

    host, port = os.environ.get("KUBERNETES_SERVICE_HOST", ""), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise KubeconfigError("in-cluster config: KUBERNETES_SERVICE_HOST is not set")
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    try:
        context, _ = tls_context({"certificate-authority": IN_CLUSTER_CA_FILE}, {}, Path("/"), Path("/"))
    except CredentialError as exc:
        raise KubeconfigError(f"in-cluster config: {exc}") from None
    try:
        namespace = Path(IN_CLUSTER_NAMESPACE_FILE).read_text().strip() or "default"
    except OSError:
        namespace = "default"
    creds = Credentials(ssl=context, token_file=Path(IN_CLUSTER_TOKEN_FILE))
    return Connection(Client(server, creds, impersonation), None, server, namespace)


async def connect(kubeconfig: str | None = None, context: str | None = None, *, exec_timeout: float = 60.0,
                  impersonate: Impersonation | None = None) -> Connection:
    """An API client for the chosen context: --kubeconfig, else $KUBECONFIG, else
    ~/.kube/config, else the pod's service account when running in a cluster."""
    target = resolve(kubeconfig, context, impersonate)
    return await connect_to(target, exec_timeout=exec_timeout)


async def connect_to(target: Target, *, exec_timeout: float = 60.0) -> Connection:
    """An API client for a resolved target (credentials are loaded here: exec plugins run)."""
    if target.paths:
        return await _from_kubeconfig(target, exec_timeout)
    return _from_in_cluster(target.impersonation)


def status_message(body: bytes) -> str:
    """The `message` of a Kubernetes Status body, else a short excerpt of the body."""
    try:
        doc = orjson.loads(body)
        if isinstance(doc, dict) and doc.get("message"):
            return str(doc["message"]).splitlines()[0]
    except orjson.JSONDecodeError:
        pass
    text = body[:200].decode("utf-8", "replace").strip().splitlines()
    return text[0] if text else ""


def http_error(status: int, body: bytes, conn: Connection | None = None) -> ConnectError:
    """The ConnectError for an HTTP answer that stops a command."""
    message = status_message(body)
    who = f'context "{conn.context}"' if conn and conn.context else "these credentials"
    if status == 401:
        return Unauthorized(f"unauthorized (401): the server rejected the credentials of {who}")
    if status == 403:
        return Forbidden(f"forbidden (403): {message}" if message else f"forbidden (403) for {who}")
    return ConnectError(f"server error ({status}): {message}" if message else f"server error ({status})")


def transient_network_error(exc: BaseException) -> bool:
    """A failure that may be gone in a few seconds: refused, reset, timed out, closed before the answer."""
    from . import client as http  # noqa: PLC0415

    if isinstance(exc, (TimeoutError, http.Disconnected, ConnectionRefusedError, ConnectionResetError)):
        return True
    if isinstance(exc, http.ConnectFailed) and not isinstance(exc, http.TlsError):
        return isinstance(exc.os_error, (ConnectionRefusedError, ConnectionResetError, TimeoutError))
    return False


def describe_network_error(exc: BaseException) -> str:
    """A short human phrase for a failed connection: 'connection refused', 'timed out'..."""
    from . import client as http  # noqa: PLC0415

    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, http.CertificateError):
        return _certificate_problem(exc.verify_code)
    if isinstance(exc, http.TlsError):
        return "TLS handshake failed: " + _first_line(exc.os_error or exc).lower()
    if isinstance(exc, http.ConnectFailed):
        os_error = exc.os_error
        if os_error is None:
            return _first_line(exc)
        if isinstance(os_error, ConnectionRefusedError):
            return "connection refused"
        strerror = getattr(os_error, "strerror", None)
        return (strerror if strerror else _first_line(os_error)).lower()
    if isinstance(exc, http.Disconnected):
        return "server closed the connection"
    if isinstance(exc, http.PayloadError):
        return "response cut short"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return _first_line(exc) or type(exc).__name__


_CERT_VERIFY_WORDS = {
    62: "TLS certificate is for another host name",  # X509_V_ERR_HOSTNAME_MISMATCH
    64: "TLS certificate is for another IP address",  # X509_V_ERR_IP_ADDRESS_MISMATCH
    10: "TLS certificate has expired",  # X509_V_ERR_CERT_HAS_EXPIRED
    9: "TLS certificate is not valid yet",  # X509_V_ERR_CERT_NOT_YET_VALID
}


def _certificate_problem(code: int | None) -> str:  # OpenSSL's verify code
    words = _CERT_VERIFY_WORDS.get(code) if code is not None else None
    return words or "TLS certificate not trusted (unknown authority)"


async def check(conn: Connection, timeout: float = 10.0) -> str:
    """Ask the server its version (proves it is reachable and takes our credentials)."""
    from .credentials import CredentialError  # noqa: PLC0415
    from .client import HttpError, Timeout  # noqa: PLC0415

    try:
        resp = await conn.api.get("/version", timeout=Timeout(total=timeout))
        async with resp:
            body = await resp.read()
    except CredentialError as exc:
        raise KubeconfigError(f'context "{conn.context}": {exc}') from None
    except (HttpError, TimeoutError, OSError) as exc:
        raise Unreachable(f"cannot reach {conn.server}: {describe_network_error(exc)}", transient_network_error(exc)) from None
    if resp.status != 200:
        raise http_error(resp.status, body, conn)
    try:
        return str(orjson.loads(body).get("gitVersion", ""))
    except (orjson.JSONDecodeError, AttributeError):
        return ""
