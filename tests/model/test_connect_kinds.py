"""gputui connects wherever kubectl does: every kubeconfig credential kind against the simulator over HTTPS,
each kubeconfig also run through the real kubectl; and each failure is one clear line without a credential."""
from __future__ import annotations

import asyncio
import base64
import datetime
import json
import sys
import textwrap
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from gputui.kube.config import ConnectError, check, connect
from gputui.sim.apiserver.auth import MASTERS
from gputui.sim.cluster import ADMIN_TOKEN, SimCluster, kubeconfig_for
from gputui.sim.apiserver.tls import Authority, authority
from tests.model.objects import node, plugin_pod
from tests.model.test_report import report_of

pytestmark = pytest.mark.asyncio(loop_scope="module")
SECRET = "t0ken-that-must-not-be-printed"  # the sim knows it as user "tester" (system:masters)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class ConnectProxy:
    """An HTTP CONNECT proxy on loopback (as on a bastion host): tunnels bytes, counts tunnels."""

    def __init__(self) -> None:
        self.tunnels: list[str] = []
        self.url = ""

    async def start(self) -> "ConnectProxy":
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            method, target, _ = head.split(b"\r\n")[0].decode().split(" ", 2)
            if method != "CONNECT":
                writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                return
            host, port = target.rsplit(":", 1)
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            self.tunnels.append(target)
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            await writer.drain()

            async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
                try:
                    while data := await src.read(65536):
                        dst.write(data)
                        await dst.drain()
                finally:
                    dst.close()

            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True)
        except (OSError, ValueError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def stop(self) -> None:
        self.server.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sim():
    tokens = {SECRET: ("tester", [MASTERS])} | {f"exec-token-{n}": ("tester", [MASTERS]) for n in range(1, 30)}
    async with SimCluster([node("gpu-1", capacity={"nvidia.com/gpu": 2}), plugin_pod("gpu-1")], tokens=tokens) as cluster:
        yield cluster


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def elsewhere():
    """A simulator whose certificate names only kube.example (as behind a load balancer)."""
    async with SimCluster([node("gpu-1", capacity={"nvidia.com/gpu": 2}), plugin_pod("gpu-1")], tokens={SECRET: ("tester", [MASTERS])},
                          cert_hosts=("kube.example",)) as cluster:
        yield cluster


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def proxy():
    server = await ConnectProxy().start()
    yield server
    await server.stop()


EXEC_PLUGIN = """
    import datetime, json, os
    count_file = os.path.join(os.path.dirname(os.path.abspath(__file__)), "count")
    n = int(open(count_file).read()) + 1 if os.path.exists(count_file) else 1
    open(count_file, "w").write(str(n))
    info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
    offset_file = os.path.join(os.path.dirname(os.path.abspath(__file__)), "offset")  # the test's clock, ahead of ours
    offset = float(open(offset_file).read()) if os.path.exists(offset_file) else 0.0
    expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=offset + int(os.environ.get("LIFETIME", "3600")))
    print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential",
                      "status": {"token": f"exec-token-{n}", "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")}}))
"""


def script(directory: Path, name: str, body: str) -> Path:
    path = directory / name
    path.write_text("#!" + sys.executable + "\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def write_kubeconfig(directory: Path, server: str, cluster: dict | None = None, user: dict | None = None) -> Path:
    doc = kubeconfig_for(server)
    entry = {"server": server, **(cluster if cluster is not None else {"certificate-authority-data": b64(authority().pem)})}
    doc["clusters"][0]["cluster"] = entry
    doc["users"][0]["user"] = user if user is not None else {"token": SECRET}
    path = directory / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def kinds(tmp_path: Path, server: str) -> dict[str, tuple[dict, dict]]:
    """(cluster entry, user entry) for each way in."""
    ca = authority()
    (tmp_path / "ca.crt").write_bytes(ca.pem)
    cert, key = ca.issue_client("tester", [MASTERS])
    (tmp_path / "client.crt").write_bytes(cert)
    (tmp_path / "client.key").write_bytes(key)
    (tmp_path / "token").write_text(SECRET + "\n")
    script(tmp_path, "plugin.py", EXEC_PLUGIN)
    ca_data = {"certificate-authority-data": b64(ca.pem)}
    return {
        "certificate-authority file": ({"certificate-authority": "ca.crt"}, {"token": SECRET}),
        "certificate-authority-data": (ca_data, {"token": SECRET}),
        "client certificate files": (ca_data, {"client-certificate": "client.crt", "client-key": "client.key"}),
        "client certificate data": (ca_data, {"client-certificate-data": b64(cert), "client-key-data": b64(key)}),
        "tokenFile": (ca_data, {"tokenFile": "token"}),
        "exec plugin": (ca_data, {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "./plugin.py",
                                           "interactiveMode": "Never"}}),
    }


KINDS = ["certificate-authority file", "certificate-authority-data", "client certificate files", "client certificate data",
         "tokenFile", "exec plugin"]


async def kubectl_nodes(make_kubectl, path: Path) -> list[str]:
    out = await asyncio.to_thread(make_kubectl(path), "get", "nodes", "-o", "name")
    return out.split()


@pytest.mark.parametrize("kind", KINDS)
async def test_each_credential_kind_works_for_gputui_and_kubectl(sim, tmp_path, make_kubectl, kind):
    cluster, user = kinds(tmp_path, sim.url)[kind]
    path = write_kubeconfig(tmp_path, sim.url, cluster, user)
    rc, out, err = await report_of("--kubeconfig", str(path), "-o", "json")
    assert rc == 0, err
    assert [n["name"] for n in json.loads(out)["nodes"]] == ["gpu-1"] and err == ""
    assert await kubectl_nodes(make_kubectl, path) == ["node/gpu-1"]
    if kind == "exec plugin":
        assert int((tmp_path / "count").read_text()) == 2  # once for gputui, once for kubectl


async def test_insecure_skip_tls_verify_works_and_is_said_once(sim, tmp_path, make_kubectl):
    path = write_kubeconfig(tmp_path, sim.url, {"insecure-skip-tls-verify": True})
    rc, out, err = await report_of("--kubeconfig", str(path), "-o", "json")
    assert rc == 0 and json.loads(out)["nodes"][0]["name"] == "gpu-1"
    assert err == ("gputui report: warning: the server's TLS certificate is not checked "
                   '(insecure-skip-tls-verify in context "gputui-sim")\n')
    async with await connect(str(path)) as conn:
        assert len(conn.warnings) == 1 and "not checked" in conn.warnings[0]
    async with await connect(str(write_kubeconfig(tmp_path, sim.url))) as conn:
        assert conn.warnings == []  # a checked certificate: nothing to say
    assert await kubectl_nodes(make_kubectl, path) == ["node/gpu-1"]


async def test_tls_server_name_checks_the_certificate_against_that_name(elsewhere, tmp_path, make_kubectl):
    path = write_kubeconfig(tmp_path, elsewhere.url, {"certificate-authority-data": b64(authority().pem),
                                                      "tls-server-name": "kube.example"})
    rc, out, err = await report_of("--kubeconfig", str(path), "-o", "json")
    assert rc == 0 and json.loads(out)["nodes"][0]["name"] == "gpu-1", err
    assert await kubectl_nodes(make_kubectl, path) == ["node/gpu-1"]


async def test_proxy_url_tunnels_through_an_http_connect_proxy(sim, proxy, tmp_path, make_kubectl):
    path = write_kubeconfig(tmp_path, sim.url, {"certificate-authority-data": b64(authority().pem), "proxy-url": proxy.url})
    before = len(proxy.tunnels)
    rc, out, err = await report_of("--kubeconfig", str(path), "-o", "json")
    assert rc == 0 and json.loads(out)["nodes"][0]["name"] == "gpu-1", err
    through_gputui = len(proxy.tunnels)
    assert through_gputui > before and set(proxy.tunnels[before:]) == {f"127.0.0.1:{sim.port}"}
    assert await kubectl_nodes(make_kubectl, path) == ["node/gpu-1"]
    assert len(proxy.tunnels) > through_gputui  # kubectl went through it too


async def test_an_exec_token_is_renewed_during_a_long_session(sim, tmp_path, make_kubectl):
    plugin = script(tmp_path, "plugin.py", EXEC_PLUGIN)
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin), "interactiveMode": "Never",
                     "env": [{"name": "LIFETIME", "value": "600"}]}}
    path = write_kubeconfig(tmp_path, sim.url, user=user)
    async with await connect(str(path)) as conn:
        creds = conn.api.credentials
        for hour in range(3):  # a session of hours, each token living 10 minutes
            (tmp_path / "offset").write_text(str(3600 * hour))
            creds.clock = lambda hour=hour: datetime.datetime.now().timestamp() + 3600 * hour + 1
            sim.authenticator.tokens.pop(f"exec-token-{hour}", None)  # the expired token is refused from now on
            await check(conn)
            nodes = await conn.api.json("GET", "/api/v1/nodes")
            assert [n["metadata"]["name"] for n in nodes["items"]] == ["gpu-1"]
        assert (tmp_path / "count").read_text() == "3"  # renewed twice, before each expiry
    assert await kubectl_nodes(make_kubectl, path) == ["node/gpu-1"]


def assert_one_line(rc: int, out: str, err: str, *fragments: str) -> None:
    assert rc == 2 and out == "", (rc, err)
    assert err.count("\n") == 1 and err.startswith("gputui report: "), err
    assert "Traceback" not in err and SECRET not in err and "BEGIN" not in err, err
    for fragment in fragments:
        assert fragment in err, err


async def kubectl_fails(make_kubectl, path: Path) -> str:
    done = await asyncio.to_thread(make_kubectl(path).run, "get", "nodes", timeout=60)
    assert done.returncode != 0
    return done.stderr


async def test_an_untrusted_certificate(sim, tmp_path, make_kubectl):
    path = write_kubeconfig(tmp_path, sim.url, {"certificate-authority-data": b64(Authority.create("other").pem)})
    assert_one_line(*await report_of("--kubeconfig", str(path)), f"cannot reach {sim.url}",
                    "TLS certificate not trusted (unknown authority)")
    assert "certificate signed by unknown authority" in await kubectl_fails(make_kubectl, path)


async def test_a_wrong_token(sim, tmp_path, make_kubectl):
    path = write_kubeconfig(tmp_path, sim.url, user={"token": "not-" + SECRET})
    assert_one_line(*await report_of("--kubeconfig", str(path)), "unauthorized (401)", 'context "gputui-sim"')
    assert "You must be logged in to the server" in await kubectl_fails(make_kubectl, path)


async def test_an_expired_client_certificate(sim, tmp_path, make_kubectl):
    now = datetime.datetime.now(datetime.timezone.utc)
    cert, key = authority().issue_client("tester", [MASTERS], not_before=now - datetime.timedelta(days=2),
                                         not_after=now - datetime.timedelta(days=1))
    path = write_kubeconfig(tmp_path, sim.url, user={"client-certificate-data": b64(cert), "client-key-data": b64(key)})
    assert_one_line(*await report_of("--kubeconfig", str(path)), "unauthorized (401)")
    assert "You must be logged in to the server" in await kubectl_fails(make_kubectl, path)


async def test_a_certificate_for_another_host(elsewhere, tmp_path, make_kubectl):
    path = write_kubeconfig(tmp_path, elsewhere.url)  # the certificate names kube.example, not 127.0.0.1
    assert_one_line(*await report_of("--kubeconfig", str(path)), "TLS certificate is for another IP address")
    assert "cannot validate certificate for 127.0.0.1" in await kubectl_fails(make_kubectl, path)
    path = write_kubeconfig(tmp_path, elsewhere.url, {"certificate-authority-data": b64(authority().pem),
                                                      "tls-server-name": "wrong.example"})
    assert_one_line(*await report_of("--kubeconfig", str(path)), "TLS certificate is for another host name")
    assert "not wrong.example" in await kubectl_fails(make_kubectl, path)


@pytest.mark.parametrize(("command", "body", "words"), [
    ("./absent-plugin", None, "exec plugin ./absent-plugin: cannot run it"),
    ("absent-plugin-on-path", None, "exec plugin absent-plugin-on-path: not found on PATH"),
    ("./failing.py", "import sys; print('account locked', file=sys.stderr); sys.exit(4)", "exit status 4: account locked"),
])
async def test_an_exec_plugin_that_is_missing_or_fails(sim, tmp_path, make_kubectl, command, body, words):
    if body is not None:
        script(tmp_path, command[2:], body)
    path = write_kubeconfig(tmp_path, sim.url, user={"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                                               "command": command, "interactiveMode": "Never"}})
    assert_one_line(*await report_of("--kubeconfig", str(path)), words)
    await kubectl_fails(make_kubectl, path)


async def test_an_exec_plugin_that_hangs(sim, tmp_path):
    plugin = script(tmp_path, "hang.py", "import time; time.sleep(60)")
    path = write_kubeconfig(tmp_path, sim.url, user={"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                                               "command": str(plugin), "interactiveMode": "Never"}})
    with pytest.raises(ConnectError) as caught:
        await connect(str(path), exec_timeout=0.5)
    assert str(caught.value) == f'context "gputui-sim": exec plugin {plugin}: no answer within 0.5 s (killed)'


async def test_the_default_kubeconfig_carries_the_ca_and_the_admin_token():
    doc = kubeconfig_for("https://127.0.0.1:1")
    assert doc["users"][0]["user"] == {"token": ADMIN_TOKEN}
    assert base64.b64decode(doc["clusters"][0]["cluster"]["certificate-authority-data"]) == authority().pem
