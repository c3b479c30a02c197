"""Connecting to a cluster: kubeconfig (as kubectl reads it) or in-cluster config.

Every failure is a ConnectError whose str() is one line fit for stderr; no
message ever contains a credential.

`resolve()` reads the kubeconfig and picks the context without the network
and without the Kubernetes client: the app calls it before drawing anything.
The client, aiohttp and PyYAML are imported by the functions that use them,
so that importing this module (the app does, before its first frame) is cheap.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from typing import TYPE_CHECKING

import orjson

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient

DEFAULT_KUBECONFIG = "~/.kube/config"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
IN_CLUSTER_TOKEN_FILE = f"{SERVICE_ACCOUNT_DIR}/token"
IN_CLUSTER_NAMESPACE_FILE = f"{SERVICE_ACCOUNT_DIR}/namespace"


class ConnectError(Exception):
    """A connection problem; str() is one clear line."""


class KubeconfigError(ConnectError):
    pass


class ContextError(ConnectError):
    pass


class Unreachable(ConnectError):
    pass


class Unauthorized(ConnectError):
    pass


class Forbidden(ConnectError):
    pass


@dataclass
class Connection:
    api: ApiClient
    context: str | None  # None in-cluster
    server: str
    namespace: str  # the context's default namespace
    # Renews short-lived credentials (exec plugins, GCP) for a long-running app.
    token_refresh: asyncio.Task[None] | None = field(default=None, repr=False)

    async def close(self) -> None:
        if self.token_refresh is not None:
            self.token_refresh.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.token_refresh
        await self.api.close()

    async def __aenter__(self) -> "Connection":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def add_connection_args(parser: argparse.ArgumentParser) -> None:
    """The connection flags shared by every command that talks to a cluster."""
    parser.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
    parser.add_argument("--context", metavar="NAME", help="kubeconfig context (default: the current context)")


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
        text = Path(path).read_text()
    except OSError as exc:
        raise KubeconfigError(f"kubeconfig {path}: cannot read: {exc.strerror or exc}") from None
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


def _names(docs: list[dict], section: str) -> dict[str, dict]:
    """Merge as kubectl does: for each name the first file wins."""
    out: dict[str, dict] = {}
    for doc in docs:
        for item in doc.get(section) or []:
            out.setdefault(item["name"], item)
    return out


def _resolve_kubeconfig(paths: list[str], context: str | None) -> Target:
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
    clusters = _names(docs, "clusters")
    cluster_name = ctx.get("cluster")
    if cluster_name not in clusters:
        raise KubeconfigError(f'context "{name}" refers to cluster "{cluster_name}", which is not in {where}')
    server = (clusters[cluster_name].get("cluster") or {}).get("server")
    if not server:
        raise KubeconfigError(f'cluster "{cluster_name}" in {where} has no server address')
    if ctx.get("user") and ctx["user"] not in _names(docs, "users"):
        raise KubeconfigError(f'context "{name}" refers to user "{ctx["user"]}", which is not in {where}')
    return Target(tuple(paths), name, server, ctx.get("namespace") or "default")


def resolve(kubeconfig: str | None = None, context: str | None = None) -> Target:
    """Read the kubeconfig (--kubeconfig, else $KUBECONFIG, else ~/.kube/config) and pick the
    context, or the pod's service account when running in a cluster. No network, no client:
    cheap enough to run before the app's first frame. KubeconfigError/ContextError otherwise."""
    paths = _kubeconfig_paths(kubeconfig)
    if paths:
        return _resolve_kubeconfig(paths, context)
    if context is None and _in_cluster_available():
        return Target((), None, "", "")
    raise KubeconfigError(
        "no kubeconfig found: pass --kubeconfig PATH, set KUBECONFIG, or create ~/.kube/config"
    )


def context_names(kubeconfig: str | None = None) -> list[str]:
    """Every context the kubeconfig names, first file first (the palette's choices)."""
    return list(_names([_read_yaml(p) for p in _kubeconfig_paths(kubeconfig)], "contexts"))


async def _from_kubeconfig(target: Target) -> Connection:
    from kubernetes_asyncio.client import ApiClient, Configuration  # noqa: PLC0415
    from kubernetes_asyncio.config import ConfigException  # noqa: PLC0415
    from kubernetes_asyncio.config.kube_config import KubeConfigLoader, KubeConfigMerger, refresh_token  # noqa: PLC0415

    name = target.context
    merger = KubeConfigMerger(os.pathsep.join(target.paths))  # keeps each entry's file, for relative cert paths
    assert merger.config is not None
    configuration = Configuration()
    loader = KubeConfigLoader(config_dict=merger.config, active_context=name, config_base_path=None)
    try:
        await loader.load_and_set(configuration)
    except ConfigException as exc:
        raise KubeconfigError(f'context "{name}": {_first_line(exc)}') from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise KubeconfigError(f'context "{name}": cannot load credentials ({type(exc).__name__})') from None
    conn = Connection(ApiClient(configuration), name, target.server, target.namespace)
    user = loader._user  # the library keeps the active user private; its refresher needs one
    if loader.provider == "gcp" or (user is not None and "exec" in user):
        conn.token_refresh = asyncio.create_task(refresh_token(loader, configuration), name="gputui-token-refresh")
    return conn


def _choices(contexts: dict[str, dict]) -> str:
    if not contexts:
        return ""
    return " (available: " + ", ".join(sorted(contexts)) + ")"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _in_cluster_available() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.isfile(IN_CLUSTER_TOKEN_FILE)


def _from_in_cluster() -> Connection:
    from kubernetes_asyncio.client import ApiClient, Configuration  # noqa: PLC0415
    from kubernetes_asyncio.config import ConfigException  # noqa: PLC0415
    from kubernetes_asyncio.config.incluster_config import SERVICE_CERT_FILENAME, SERVICE_TOKEN_FILENAME, InClusterConfigLoader  # noqa: PLC0415

    configuration = Configuration()
    try:
        InClusterConfigLoader(token_filename=SERVICE_TOKEN_FILENAME, cert_filename=SERVICE_CERT_FILENAME).load_and_set(configuration)
    except ConfigException as exc:
        raise KubeconfigError(f"in-cluster config: {_first_line(exc)}") from None
    try:
        namespace = Path(IN_CLUSTER_NAMESPACE_FILE).read_text().strip() or "default"
    except OSError:
        namespace = "default"
    return Connection(ApiClient(configuration), None, configuration.host, namespace)


async def connect(kubeconfig: str | None = None, context: str | None = None) -> Connection:
    """An API client for the chosen context: --kubeconfig, else $KUBECONFIG, else
    ~/.kube/config, else the pod's service account when running in a cluster."""
    target = resolve(kubeconfig, context)
    return await connect_to(target)


async def connect_to(target: Target) -> Connection:
    """An API client for a resolved target (credentials are loaded here: exec plugins run)."""
    if target.paths:
        return await _from_kubeconfig(target)
    return _from_in_cluster()


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


def describe_network_error(exc: BaseException) -> str:
    """A short human phrase for a failed connection: 'connection refused', 'timed out'..."""
    import aiohttp  # noqa: PLC0415

    if isinstance(exc, (TimeoutError, aiohttp.ServerTimeoutError)):
        return "timed out"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return "TLS certificate not trusted"
    if isinstance(exc, aiohttp.ClientConnectorError):
        os_error = exc.os_error
        if isinstance(os_error, ConnectionRefusedError):
            return "connection refused"
        return (os_error.strerror if getattr(os_error, "strerror", None) else _first_line(os_error)).lower()
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "server closed the connection"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return "response cut short"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return _first_line(exc) or type(exc).__name__


async def check(conn: Connection, timeout: float = 10.0) -> str:
    """Ask the server its version (proves it is reachable and takes our credentials)."""
    import aiohttp  # noqa: PLC0415
    from kubernetes_asyncio.client import VersionApi  # noqa: PLC0415

    try:
        resp = await VersionApi(conn.api).get_code(
            _preload_content=False, _request_timeout=aiohttp.ClientTimeout(total=timeout)
        )
        async with resp:
            body = await resp.read()
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise Unreachable(f"cannot reach {conn.server}: {describe_network_error(exc)}") from None
    if resp.status != 200:
        raise http_error(resp.status, body, conn)
    try:
        return str(orjson.loads(body).get("gitVersion", ""))
    except (orjson.JSONDecodeError, AttributeError):
        return ""
