"""`auth-provider: oidc` as kubectl uses it: a good id-token is sent as it is; an expired one is refreshed with the
refresh-token at the issuer's token endpoint (found through discovery), by the same request kubectl makes, the new
token kept in memory (the kubeconfig is not written) and the refresh said once; the simulator takes the new token."""
from __future__ import annotations

import asyncio
import base64
import time
from pathlib import Path

import orjson
import pytest
import pytest_asyncio
import yaml
from aiohttp import web

from gputui.kube.config import ConnectError, connect
from gputui.sim.cluster import SimCluster
from gputui.sim.apiserver.tls import authority, server_context
from tests.model.objects import node, plugin_pod
from tests.model.test_impersonation import b64, write_kubeconfig
from tests.model.test_report import report_of

pytestmark = pytest.mark.asyncio(loop_scope="module")


def jwt(subject: str, expires: float) -> str:
    def part(doc: dict) -> str:
        return base64.urlsafe_b64encode(orjson.dumps(doc)).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256'})}.{part({'sub': subject, 'exp': int(expires)})}.c2lnbmF0dXJl"


EXPIRED = jwt("oidc-user", time.time() - 60)
FRESH = jwt("oidc-user", time.time() + 3600)  # what the issuer hands out; the simulator knows it
STILL_GOOD = jwt("oidc-user-2", time.time() + 3600)


class Issuer:
    """An OIDC issuer on loopback (HTTPS, the simulator's CA): discovery and a token endpoint that refreshes R1
    (answering FRESH and R2) and refuses any other refresh-token; each token request noted."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], str]] = []  # (form, Authorization header)

    async def start(self) -> "Issuer":
        app = web.Application()
        app.router.add_get("/realm/.well-known/openid-configuration", self._discovery)
        app.router.add_post("/realm/protocol/token", self._token)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0, ssl_context=server_context())
        await site.start()
        self.url = f"https://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/realm"  # type: ignore[union-attr]  # started
        return self

    async def _discovery(self, _: web.Request) -> web.Response:
        return web.json_response({"issuer": self.url, "token_endpoint": f"{self.url}/protocol/token",
                                  "authorization_endpoint": f"{self.url}/protocol/auth", "jwks_uri": f"{self.url}/certs"})

    async def _token(self, request: web.Request) -> web.Response:
        form = {k: v for k, v in (await request.post()).items() if isinstance(v, str)}
        self.requests.append((form, request.headers.get("Authorization", "")))
        if form.get("grant_type") != "refresh_token" or form.get("refresh_token") != "R1":
            return web.json_response({"error": "invalid_grant", "error_description": "Token is not active"}, status=400)
        return web.json_response({"access_token": "at", "token_type": "Bearer", "expires_in": 3600, "id_token": FRESH,
                                  "refresh_token": "R2"})


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def issuer():
    server = await Issuer().start()
    yield server
    await server.runner.cleanup()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sim():
    tokens = {FRESH: ("oidc-user", ["system:masters"]), STILL_GOOD: ("oidc-user-2", ["system:masters"])}
    async with SimCluster([node("gpu-1", capacity={"nvidia.com/gpu": 2}), plugin_pod("gpu-1")], tokens=tokens, run_controllers=False) as cluster:
        yield cluster


def oidc_kubeconfig(directory: Path, sim: SimCluster, issuer: Issuer, name: str, **config: str) -> Path:
    provider = {"client-id": "gputui", "client-secret": "s3cret/+", "idp-issuer-url": issuer.url,
                "idp-certificate-authority-data": b64(authority().pem), **config}
    return write_kubeconfig(directory, sim.url, {"auth-provider": {"name": "oidc", "config": provider}}, name)


async def test_an_expired_id_token_is_refreshed_as_kubectl_refreshes_it_and_kept_in_memory(sim, issuer, tmp_path, make_kubectl):
    ours = oidc_kubeconfig(tmp_path, sim, issuer, "ours", **{"id-token": EXPIRED, "refresh-token": "R1"})
    written = ours.read_bytes()
    rc, out, err = await report_of("--kubeconfig", str(ours), "-o", "json")
    assert rc in (0, 1), err
    assert '"gpu-1"' in out
    notices = [line for line in err.splitlines() if "refreshed" in line]
    assert len(notices) == 1 and "kept in memory" in notices[0] and EXPIRED not in err and FRESH not in err
    assert ours.read_bytes() == written  # nothing written back
    gputui_request = issuer.requests[-1]
    # kubectl, on a copy, makes the same refresh request (and writes the new tokens into its kubeconfig)
    theirs = oidc_kubeconfig(tmp_path, sim, issuer, "theirs", **{"id-token": EXPIRED, "refresh-token": "R1"})
    assert (await asyncio.to_thread(make_kubectl(theirs), "get", "nodes", "-o", "name")).split() == ["node/gpu-1"]
    assert issuer.requests[-1] == gputui_request
    assert gputui_request[0] == {"grant_type": "refresh_token", "refresh_token": "R1"}
    kept = yaml.safe_load(theirs.read_text())["users"][0]["user"]["auth-provider"]["config"]
    assert (kept["id-token"], kept["refresh-token"]) == (FRESH, "R2")


async def test_a_good_id_token_is_sent_without_asking_the_issuer(sim, issuer, tmp_path):
    asked = len(issuer.requests)
    kubeconfig = oidc_kubeconfig(tmp_path, sim, issuer, "good", **{"id-token": STILL_GOOD, "refresh-token": "R1"})
    async with await connect(str(kubeconfig)) as conn:
        assert (await conn.api.json("GET", "/api/v1/nodes"))["items"][0]["metadata"]["name"] == "gpu-1"
        assert conn.warnings == []
    assert len(issuer.requests) == asked


@pytest.mark.parametrize(("config", "words"), [
    ({"id-token": EXPIRED, "refresh-token": "stale"}, "refused to refresh the id-token: Token is not active"),
    ({"id-token": EXPIRED}, "the id-token has expired and there is no refresh-token to renew it"),
    ({"id-token": "not-a-jwt", "refresh-token": "R1"}, "the id-token is not a JWT"),
])
async def test_a_token_that_cannot_be_refreshed_is_one_line(sim, issuer, tmp_path, config, words):
    kubeconfig = oidc_kubeconfig(tmp_path, sim, issuer, "bad", **config)
    with pytest.raises(ConnectError) as caught:
        await connect(str(kubeconfig))
    message = str(caught.value)
    assert words in message and "\n" not in message and "stale" not in message and EXPIRED not in message


async def test_a_refresh_later_in_the_session_is_said_once(sim, issuer, tmp_path):
    """The id-token expires while gputui runs: the next request refreshes it, and the app is told once (as on connecting)."""
    kubeconfig = oidc_kubeconfig(tmp_path, sim, issuer, "later", **{"id-token": STILL_GOOD, "refresh-token": "R1"})
    said: list[str] = []
    async with await connect(str(kubeconfig)) as conn:
        assert conn.warnings == []
        conn.on_later_warning(said.append)
        provider = conn.api.credentials.oidc
        provider.clock = lambda: time.time() + 3600  # an hour on: the id-token has expired
        asked = len(issuer.requests)
        await conn.api.json("GET", "/api/v1/nodes")
        assert len(said) == 1 and "refreshed" in said[0] and "kept in memory" in said[0] and FRESH not in said[0]
        provider.refresh_token = "R1"  # the issuer refreshes R1 again: a second refresh is not said again
        await conn.api.json("GET", "/api/v1/nodes")
        assert len(said) == 1 and provider.id_token == FRESH and len(issuer.requests) == asked + 2
