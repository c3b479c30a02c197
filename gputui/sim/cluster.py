"""SimCluster: the simulated GPU cluster, started in-process on a free loopback port.

    async with SimCluster(scenario="demo") as sim:
        sim.kubeconfig_path   # a kubeconfig (context "gputui-sim") for kubectl and the clients
        sim.url               # https://127.0.0.1:PORT (http:// with tls=False)
        sim.store             # the objects (tests may write through it directly)
        sim.faults            # test-only fault hooks
        sim.http_session()    # an aiohttp session that trusts the CA and sends the admin token (tests' raw HTTP)

It serves HTTPS with a certificate from the process's throw-away CA (tls.py) and authenticates every
request as kube-apiserver does (auth.py): client certificates signed by that CA, the static token table
(`tokens`: the admin token ADMIN_TOKEN is always in it), anonymous only with `anonymous=True`. RBAC
objects in the scenario (Role, ClusterRole and their bindings) decide what users outside system:masters
may do; they are policy, not served objects.

The HTTP layer lives in server/, the cluster's behaviour (scheduler,
kubelets, device plugins) in controllers.py, scenarios in scenarios.py.
"""
from __future__ import annotations

import asyncio
import base64
import os
import sys
import tempfile
from pathlib import Path
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import yaml
from aiohttp import web

from .apiserver.features import DEFAULT_MINOR, ApiCounts, features_for
from .behaviour.logs import LogBook
from .apiserver.store import Store

if TYPE_CHECKING:
    from .behaviour.controllers import Controllers

CONTEXT_NAME = "gputui-sim"
ADMIN_TOKEN = "gputui-sim"  # noqa: S105  (a fixed test token) the kubeconfig's token: the user gputui-sim-admin, group system:masters
ADMIN_USER = "gputui-sim-admin"
EXEC_TOKEN = "gputui-sim-exec"  # noqa: S105  (a fixed test token) what the exec plugin context's plugin prints (credential.py)
# `all_credentials`: one context per credential kind, besides gputui-sim (a token).
CERT_CONTEXT, EXEC_CONTEXT = "gputui-sim-cert", "gputui-sim-exec"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig_for(url: str, namespace: str = "default", *, ca: bytes | None = None, token: str = ADMIN_TOKEN,
                   context: str = CONTEXT_NAME) -> dict[str, Any]:
    """A kubeconfig for a simulator at `url`: the admin token, and for https:// the CA (by default the
    process's, which every simulated cluster of the process uses); its one context is named `context`."""
    cluster: dict[str, Any] = {"server": url}
    if url.startswith("https://"):
        if ca is None:
            from .apiserver.tls import authority  # noqa: PLC0415

            ca = authority().pem
        cluster["certificate-authority-data"] = _b64(ca)
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT_NAME, "cluster": cluster}],
        "users": [{"name": CONTEXT_NAME, "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": CONTEXT_NAME, "user": CONTEXT_NAME, "namespace": namespace}}],
        "current-context": context,
        "preferences": {},
    }


def merged_kubeconfig(docs: dict[str, dict[str, Any]], current: str | None = None) -> dict[str, Any]:
    """One kubeconfig holding the first context of each of `docs` (kubeconfig_for's), named by its key:
    a fleet of simulated clusters, as an operator's kubeconfig holds many."""
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": [],
                              "current-context": current or next(iter(docs), ""), "preferences": {}}
    for name, doc in docs.items():
        merged["clusters"].append({"name": name, "cluster": doc["clusters"][0]["cluster"]})
        merged["users"].append({"name": name, "user": doc["users"][0]["user"]})
        merged["contexts"].append({"name": name, "context": {"cluster": name, "user": name}})
    return merged


def _add_context(doc: dict[str, Any], name: str, user: dict[str, Any], namespace: str = "default") -> None:
    doc["users"].append({"name": name, "user": user})
    doc["contexts"].append({"name": name, "context": {"cluster": CONTEXT_NAME, "user": name, "namespace": namespace}})


class SimCluster:
    def __init__(
        self,
        scenario: Any = None,  # what scenarios.load takes: a name, paths, objects, or a Loaded dump
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        kubeconfig_out: str | Path | None = None,
        speed: float = 1.0,
        bookmark_interval: float = 10.0,
        faults: bool = False,
        nodes: int | None = None,
        pods: int | None = None,
        run_controllers: bool = True,
        tls: bool = True,
        anonymous: bool = False,
        tokens: Mapping[str, str | tuple[str, Iterable[str]]] | None = None,
        all_credentials: bool = False,
        cert_hosts: Iterable[str] | None = None,
        server_minor: int = DEFAULT_MINOR,
        exporters: bool = True,
        context: str = CONTEXT_NAME,
        version_unknown: bool = False,
        events_lag: int | None = None,
    ) -> None:
        from .faults import Faults  # noqa: PLC0415  (kept local: small import graph for the CLI)

        # The kube-apiserver release played (1.server_minor): its list and watch features, and what each
        # read would have cost it (features.py).
        self.server_minor = server_minor
        self.features = features_for(server_minor)
        self.api_counts = ApiCounts()

        self.host = host
        self.port = port
        self.speed = speed  # >1 makes simulated kubelets faster (tests), <1 slower (demo realism)
        self.bookmark_interval = bookmark_interval
        # How long a list or watch from a resourceVersion in the future waits for it before failing with
        # "Too large resource version" (kube-apiserver's watch cache waits 3 s).
        self.too_large_wait = 3.0
        # kube-controller-manager's --node-monitor-grace-period and --node-monitor-period, in simulated seconds
        # (node_lifecycle.py): how long a kubelet may be silent before its node is Unknown, how often nodes are looked at.
        self.node_monitor_grace_period = 50.0
        self.node_monitor_period = 5.0
        # Events in an etcd of their own (kube-apiserver's --etcd-servers-overrides), whose revision is this
        # far behind the main etcd's (ahead when negative): their resourceVersions are a sequence apart.
        self.events_lag = events_lag
        self.store = self._new_store()
        self.logs = LogBook()
        self.faults = Faults(enabled=faults, cluster=self)
        self._scenario = scenario
        self._synthetic = (nodes, pods or 0) if nodes is not None else None
        self._kubeconfig_out = Path(kubeconfig_out) if kubeconfig_out else None
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None
        self._runner: web.AppRunner | None = None
        self.controllers: Controllers | None = None
        # False: a static cluster (no scheduler, no kubelets), for tests of the HTTP layer alone.
        self._run_controllers = run_controllers
        # False: nothing listens behind the pod and service proxy (a dump: no DCGM exporter is running).
        self.exporters = exporters
        self.context = context  # the kubeconfig's context name
        self.version_unknown = version_unknown  # True: /version answers empty strings (a dump does not say)
        self.url = ""
        self.kubeconfig_path: Path | None = None
        from .apiserver.auth import MASTERS, Authenticator, Authorizer, User  # noqa: PLC0415

        self.tls = tls
        table = {ADMIN_TOKEN: User(ADMIN_USER, (MASTERS,)), EXEC_TOKEN: User(ADMIN_USER, (MASTERS,))}
        for token, who in (tokens or {}).items():
            name, groups = (who, ()) if isinstance(who, str) else (who[0], tuple(who[1]))
            table[token] = User(name, groups)
        # Plain HTTP is kube-apiserver's old insecure port: no authentication, no authorization (kubectl sends
        # no credentials over plain HTTP).
        self.authenticator: Authenticator | None = Authenticator(table, anonymous=anonymous) if tls else None
        self.authorizer = Authorizer()
        self._all_credentials = all_credentials
        self._cert_hosts = tuple(cert_hosts) if cert_hosts is not None else None  # default: loopback and host
        self._ssl: Any = None  # the server's SSLContext (tls.py), made on start

    def _new_store(self) -> Store:
        lag = self.events_lag
        if lag is None:
            return Store()
        return Store(own_etcd={"events": 1 + max(0, -lag)}, first_revision=1 + max(0, lag))

    async def start(self) -> "SimCluster":
        from .behaviour.controllers import Controllers  # noqa: PLC0415

        self._populate()
        self.controllers = Controllers(self)
        if self.tls:
            from .apiserver.tls import LOOPBACK_NAMES, server_context  # noqa: PLC0415

            self._ssl = server_context(self._cert_hosts if self._cert_hosts is not None else (*LOOPBACK_NAMES, self.host))
        await self._serve()
        self.url = f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"
        if self._run_controllers:
            self.controllers.start()
        self.kubeconfig_path = self.write_kubeconfig(self._kubeconfig_out)
        return self

    def _populate(self) -> None:
        from . import scenarios  # noqa: PLC0415

        if self._synthetic is not None:
            objects = scenarios.synthetic(*self._synthetic)
        elif self._scenario is not None:
            objects = scenarios.load(self._scenario)
        else:
            objects = []
        from .apiserver.auth import Authorizer  # noqa: PLC0415

        self.authorizer = Authorizer(scenarios.policy_of(objects))
        scenarios.populate(self.store, objects)

    async def _serve(self) -> None:
        from .apiserver import http as server  # noqa: PLC0415

        # handler_cancellation: a client that goes away ends its watch or log stream at once.
        self._runner = web.AppRunner(
            server.make_app(self), access_log=None, handle_signals=False, handler_cancellation=True, shutdown_timeout=1.0
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True, ssl_context=self._ssl)
        try:
            await site.start()
        except BaseException:
            await self._runner.cleanup()
            self._runner = None
            raise
        sock = site._server.sockets[0]  # type: ignore[union-attr]  # aiohttp's TCPSite has no public accessor for its bound port
        self.port = sock.getsockname()[1]

    async def restart(self, downtime: float = 0.5, *, fresh: bool = False, writes_while_down: int = 0,
                      back: asyncio.Event | None = None) -> None:
        """Stop serving (connections refused, open streams end), then serve again on the same port and state,
        after `downtime` seconds or, given `back`, once it is set. Served again, the watch caches start from the
        current resourceVersion: a watch from before it gets 410 and its client lists again, as on a restarted
        kube-apiserver.

        fresh=True: the state starts again from the scenario, resourceVersions low again (an etcd restore, a
        rebuilt test cluster): what clients knew is gone, and their resourceVersions are from its future.
        writes_while_down: that many writes (an annotation of the first node) before serving again; after a
        fresh start, enough of them carry the resourceVersion past what clients hold, so that only a fresh
        list, not the version's order, tells them their state is not the server's."""
        from .behaviour.controllers import Controllers  # noqa: PLC0415

        self.store.drop_watches()
        self.logs.end_streams()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        controllers = None
        if fresh:
            if self.controllers is not None and self._run_controllers:
                await self.controllers.stop()
            self.store = self._new_store()
            self.logs = LogBook()
            self._populate()
            self.controllers = controllers = Controllers(self)
        nodes = self.store.objects("nodes")
        for n in range(writes_while_down if nodes else 0):
            name = nodes[0]["metadata"]["name"]

            def write(node: dict[str, Any], n: int = n) -> None:
                node["metadata"].setdefault("annotations", {}).update({"sim.gputui.dev/written-while-down": str(n)})

            self.store.mutate("nodes", "", name, write)
        if back is None:
            await asyncio.sleep(downtime)
        else:
            await back.wait()
        self.store.start_watch_cache()
        await self._serve()
        if controllers is not None and self._run_controllers:
            controllers.start()

    def write_kubeconfig(self, path: Path | None = None) -> Path:
        if path is None:
            if self._tmpdir is None:
                self._tmpdir = tempfile.TemporaryDirectory(prefix="gputui-sim-")
            path = Path(self._tmpdir.name) / "kubeconfig"
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = kubeconfig_for(self.url, context=self.context)
        if self._all_credentials:
            if self.tls:
                from .apiserver.auth import MASTERS  # noqa: PLC0415
                from .apiserver.tls import authority  # noqa: PLC0415

                cert, key = authority().issue_client(ADMIN_USER, [MASTERS])
                _add_context(doc, CERT_CONTEXT, {"client-certificate-data": _b64(cert), "client-key-data": _b64(key)})
            _add_context(doc, EXEC_CONTEXT, {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                "args": ["-m", "gputui.sim.credential"], "env": [{"name": "GPUTUI_SIM_TOKEN", "value": EXEC_TOKEN}],
                "interactiveMode": "Never", "provideClusterInfo": False,
            }})
        # created private: the file holds credentials
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(yaml.safe_dump(doc))
        os.chmod(path, 0o600)
        return path

    def client_ssl(self) -> Any:
        """An SSLContext that trusts the simulator's CA (None over plain HTTP), for raw HTTP clients."""
        if not self.tls:
            return None
        from .apiserver.tls import authority  # noqa: PLC0415

        return authority().client_context()

    def http_session(self, **options: Any) -> Any:
        """An aiohttp.ClientSession for raw HTTP to the API server: it trusts the CA and sends the admin token."""
        import aiohttp  # noqa: PLC0415

        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}", **options.pop("headers", {})}
        connector = aiohttp.TCPConnector(ssl=self.client_ssl() if self.tls else False)
        return aiohttp.ClientSession(connector=connector, headers=headers, **options)

    async def stop(self) -> None:
        if self.controllers is not None and self._run_controllers:
            await self.controllers.stop()
        self.store.drop_watches()
        self.logs.end_streams()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    async def __aenter__(self) -> "SimCluster":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
