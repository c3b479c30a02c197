"""Connecting to a cluster: kubeconfig (as kubectl reads it) or in-cluster config.

Every failure is a ConnectError whose str() is one line fit for stderr; no
message ever contains a credential.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson
import yaml
from kubernetes_asyncio.client import ApiClient, Configuration, VersionApi
from kubernetes_asyncio.config import ConfigException
from kubernetes_asyncio.config.incluster_config import (
    SERVICE_CERT_FILENAME,
    SERVICE_TOKEN_FILENAME,
    InClusterConfigLoader,
)
from kubernetes_asyncio.config.kube_config import KubeConfigLoader, KubeConfigMerger, refresh_token

DEFAULT_KUBECONFIG = "~/.kube/config"
IN_CLUSTER_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


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
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise KubeconfigError(f"kubeconfig {path}: cannot read: {exc.strerror or exc}") from None
    try:
        doc = yaml.safe_load(text)
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


def _merged(paths: list[str]) -> tuple[KubeConfigMerger, dict]:
    """Merge as kubectl does: for each name the first file wins, and so does the first current-context."""
    docs = [_read_yaml(p) for p in paths]
    merger = KubeConfigMerger(os.pathsep.join(paths))  # keeps each entry's file, for relative cert paths
    assert merger.config is not None
    current = next((d.get("current-context") for d in docs if d.get("current-context")), None)
    merger.config.value["current-context"] = current
    return merger, merger.config.value


def _names(merged: dict, section: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for item in merged.get(section) or []:
        value = item.value if hasattr(item, "value") else item
        out.setdefault(value["name"], value)
    return out


async def _from_kubeconfig(paths: list[str], context: str | None) -> Connection:
    merger, merged = _merged(paths)
    where = paths[0] if len(paths) == 1 else "the merged kubeconfig"
    contexts = _names(merged, "contexts")
    name = context or merged.get("current-context")
    if not name:
        raise ContextError(f"{where} has no current context: pass --context NAME" + _choices(contexts))
    if name not in contexts:
        raise ContextError(f'context "{name}" not found in {where}' + _choices(contexts))
    ctx = contexts[name].get("context") or {}
    clusters = _names(merged, "clusters")
    cluster_name = ctx.get("cluster")
    if cluster_name not in clusters:
        raise KubeconfigError(f'context "{name}" refers to cluster "{cluster_name}", which is not in {where}')
    server = (clusters[cluster_name].get("cluster") or {}).get("server")
    if not server:
        raise KubeconfigError(f'cluster "{cluster_name}" in {where} has no server address')
    if ctx.get("user") and ctx["user"] not in _names(merged, "users"):
        raise KubeconfigError(f'context "{name}" refers to user "{ctx["user"]}", which is not in {where}')

    configuration = Configuration()
    loader = KubeConfigLoader(config_dict=merger.config, active_context=name, config_base_path=None)
    try:
        await loader.load_and_set(configuration)
    except ConfigException as exc:
        raise KubeconfigError(f'context "{name}": {_first_line(exc)}') from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise KubeconfigError(f'context "{name}": cannot load credentials ({type(exc).__name__})') from None
    conn = Connection(ApiClient(configuration), name, server, ctx.get("namespace") or "default")
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
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.isfile(SERVICE_TOKEN_FILENAME)


def _from_in_cluster() -> Connection:
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
    paths = _kubeconfig_paths(kubeconfig)
    if paths:
        return await _from_kubeconfig(paths, context)
    if context is None and _in_cluster_available():
        return _from_in_cluster()
    raise KubeconfigError(
        "no kubeconfig found: pass --kubeconfig PATH, set KUBECONFIG, or create ~/.kube/config"
    )


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
