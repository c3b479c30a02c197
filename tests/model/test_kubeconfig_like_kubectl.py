"""gputui resolves a kubeconfig as kubectl does, over fixtures that exercise the merge and the paths: two files merged
through KUBECONFIG (the first file's entries win; relative paths are relative to the file that names them), a
tokenFile ending in a newline, an exec plugin named by a relative command, and each credential kind. For every
context the connection is compared twice with kubectl's: what `kubectl config view --minify --flatten` resolves
(server, certificate authority, proxy, namespace, impersonation) against gputui's resolved target and credentials,
and what each sends at the wire to the same HTTPS server (Authorization and Impersonate-* headers, the client
certificate presented)."""
from __future__ import annotations

import asyncio
import base64
import ssl
import subprocess
import sys
import textwrap
import time
from typing import Any

import orjson
import pytest
import pytest_asyncio
import yaml
from aiohttp import web

from gputui.kube.config import ConnectError, check, connect, resolve
from gputui.sim.apiserver.tls import authority, server_context
from tests.model.test_transport import Tunnels

pytestmark = pytest.mark.asyncio(loop_scope="module")
CONTEXTS = ("token", "token-file", "client-files", "client-data", "exec", "basic", "impersonated", "oidc", "proxied", "from-second-file")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def id_token() -> str:
    def part(doc: dict) -> str:
        return base64.urlsafe_b64encode(orjson.dumps(doc)).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256'})}.{part({'sub': 'u', 'exp': int(time.time()) + 3600})}.c2ln"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def wire():
    """An HTTPS server on loopback (the simulator's CA; a client certificate is asked for, not required) that notes
    each request's headers and the client certificate presented, and answers 404."""
    seen: list[tuple[list[tuple[str, str]], bytes | None]] = []

    async def record(request: web.Request) -> web.Response:
        tls = request.transport.get_extra_info("ssl_object") if request.transport is not None else None
        seen.append((list(request.headers.items()), tls.getpeercert(binary_form=True) if tls is not None else None))
        return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "not here",
                                  "reason": "NotFound", "code": 404}, status=404)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_context())
    await site.start()
    yield f"https://127.0.0.1:{site._server.sockets[0].getsockname()[1]}", seen  # type: ignore[union-attr]  # started
    await runner.cleanup()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def tunnels():
    proxies = await Tunnels().start()
    yield proxies
    await proxies.stop()


@pytest.fixture(scope="module")
def fixtures(wire, tunnels, tmp_path_factory) -> str:
    """The kubeconfig files (KUBECONFIG's value): first.yaml, and sub/second.yaml whose same-named entries lose."""
    url, _ = wire
    root = tmp_path_factory.mktemp("kubeconfigs")
    (root / "certs").mkdir()
    (root / "bin").mkdir()
    (root / "sub").mkdir()
    ca = authority()
    (root / "certs" / "ca.crt").write_bytes(ca.pem)
    (root / "sub" / "ca.crt").write_bytes(ca.pem)  # second.yaml's relative CA: beside it
    cert, key = ca.issue_client("carol", ["gpu-viewers"])
    (root / "certs" / "carol.crt").write_bytes(cert)
    (root / "certs" / "carol.key").write_bytes(key)
    dana_cert, dana_key = ca.issue_client("dana")
    (root / "certs" / "token").write_text("file-t0ken\n")  # a newline at the end, as editors leave it
    plugin = root / "bin" / "plugin"
    plugin.write_text("#!" + sys.executable + "\n" + textwrap.dedent("""
        import json, os
        info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
        print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential", "status": {"token": "exec-t0ken"}}))
    """))
    plugin.chmod(0o755)

    def context(name: str, cluster: str = "main", **extra: Any) -> dict:
        return {"name": name, "context": {"cluster": cluster, "user": name, **extra}}

    first = {
        "apiVersion": "v1", "kind": "Config", "current-context": "token",
        "clusters": [{"name": "main", "cluster": {"server": url, "certificate-authority": "certs/ca.crt"}},
                     {"name": "proxied", "cluster": {"server": url, "certificate-authority": "certs/ca.crt", "proxy-url": tunnels.http_url}}],
        "users": [
            {"name": "token", "user": {"token": "inline-t0ken"}},
            {"name": "token-file", "user": {"tokenFile": "certs/token"}},
            {"name": "client-files", "user": {"client-certificate": "certs/carol.crt", "client-key": "certs/carol.key"}},
            {"name": "client-data", "user": {"client-certificate-data": b64(dana_cert), "client-key-data": b64(dana_key)}},
            {"name": "exec", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "./bin/plugin",
                                               "interactiveMode": "Never"}}},
            {"name": "basic", "user": {"username": "admin", "password": "pa:ss w0rd"}},
            {"name": "impersonated", "user": {"token": "inline-t0ken", "as": "readonly-auditor", "as-groups": ["auditors", "b"],
                                              "as-uid": "42", "as-user-extra": {"scopes": ["view"], "Example.com/Team": ["gpu"]}}},
            {"name": "oidc", "user": {"auth-provider": {"name": "oidc", "config": {
                "client-id": "gputui", "idp-issuer-url": "https://issuer.invalid", "id-token": id_token(), "refresh-token": "r"}}}},
            {"name": "proxied", "user": {"token": "proxied-t0ken"}},
        ],
        "contexts": [context("token", namespace="ml"), *(context(name) for name in CONTEXTS[1:-2]), context("proxied", "proxied")],
    }
    second = {
        "apiVersion": "v1", "kind": "Config", "current-context": "from-second-file",
        "clusters": [{"name": "main", "cluster": {"server": "https://shadowed.invalid"}},
                     {"name": "second", "cluster": {"server": url, "certificate-authority": "ca.crt"}}],
        "users": [{"name": "token", "user": {"token": "shadowed"}}, {"name": "from-second-file", "user": {"token": "second-t0ken"}}],
        "contexts": [context("token", namespace="shadowed"), context("from-second-file", "second")],
    }
    (root / "first.yaml").write_text(yaml.safe_dump(first))
    (root / "sub" / "second.yaml").write_text(yaml.safe_dump(second))
    return f"{root / 'first.yaml'}:{root / 'sub' / 'second.yaml'}"


def sent(request: tuple[list[tuple[str, str]], bytes | None]) -> tuple[dict[str, list[str]], bytes | None]:
    """The credential-bearing headers by lower-cased name, and the client certificate presented."""
    headers: dict[str, list[str]] = {}
    for name, value in request[0]:
        if name.lower() == "authorization" or name.lower().startswith("impersonate-"):
            headers.setdefault(name.lower(), []).append(value)
    return headers, request[1]


@pytest.mark.parametrize("name", CONTEXTS)
async def test_the_connection_is_kubectls(wire, tunnels, fixtures, make_kubectl, monkeypatch, tmp_path, name):
    url, seen = wire
    tunnelled = len(tunnels.seen)
    monkeypatch.setenv("KUBECONFIG", fixtures)
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    kubectl = make_kubectl(tmp_path / "unused")  # its --kubeconfig is replaced by KUBECONFIG below

    def kubectl_run(*args: str) -> Any:
        return subprocess.run([kubectl.binary, "--cache-dir", str(kubectl.cache_dir), "--context", name, *args],
                              capture_output=True, text=True, timeout=30)

    view = yaml.safe_load((await asyncio.to_thread(kubectl_run, "config", "view", "--minify", "--flatten", "--raw")).stdout)
    cluster, user = view["clusters"][0]["cluster"], view["users"][0]["user"]
    target = resolve(None, name)
    assert target.server == cluster["server"] == url
    assert target.namespace == (view["contexts"][0]["context"].get("namespace") or "default")
    wanted_as = (user.get("as", ""), user.get("as-uid", ""), tuple(user.get("as-groups") or ()),
                 {k: tuple(v) for k, v in (user.get("as-user-extra") or {}).items()})
    ours = target.impersonation
    assert (ours.user, ours.uid, ours.groups, dict(ours.extra)) == wanted_as
    # at the wire: kubectl's request, then gputui's
    done = await asyncio.to_thread(kubectl_run, "get", "--raw", "/version")
    assert "not here" in done.stderr, done.stderr
    theirs = sent(seen[-1])
    tunnels_of = {"kubectl": len(tunnels.seen) - tunnelled}
    async with await connect(None, name) as conn:
        creds = conn.api.credentials
        assert creds is not None
        assert (creds.proxy or "") == (cluster.get("proxy-url") or "")
        authorities = creds.ssl.get_ca_certs(binary_form=True) if isinstance(creds.ssl, ssl.SSLContext) else []
        assert authorities == [ssl.PEM_cert_to_DER_cert(base64.b64decode(cluster["certificate-authority-data"]).decode())]
        with pytest.raises(ConnectError):
            await check(conn)
    assert sent(seen[-1]) == theirs
    tunnels_of["gputui"] = len(tunnels.seen) - tunnelled - tunnels_of["kubectl"]
    assert all(tunnels_of.values()) if name == "proxied" else not any(tunnels_of.values()), tunnels_of  # its proxy-url, by both
    if "client" in name:
        assert theirs[1] is not None and theirs[0] == {}
    else:
        assert theirs[0]["authorization"]
