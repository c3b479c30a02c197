"""Credentials: exec plugins are bounded (timeout, process group killed, token renewed shortly before
it expires, one clear line when they fail), and key material never stays on disk, even after SIGKILL."""
from __future__ import annotations

import asyncio
import base64
import datetime
import json
import os
import pty
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from gputui.kube.credentials import CredentialError, load_credentials

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = {"server": "http://127.0.0.1:9"}


def plugin(tmp_path: Path, body: str) -> Path:
    """An exec credential plugin: a Python script; `count` is how many times it ran."""
    script = tmp_path / "plugin.py"
    script.write_text("#!" + sys.executable + "\n" + textwrap.dedent(body))
    script.chmod(0o755)
    return script


TOKEN_PLUGIN = """
    import json, os, sys, datetime
    count_file = os.path.join(os.path.dirname(__file__), "count")
    n = int(open(count_file).read()) + 1 if os.path.exists(count_file) else 1
    open(count_file, "w").write(str(n))
    info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
    expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=int(os.environ["LIFETIME"]))
    print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential",
                      "status": {"token": f"token-{n}-interactive-{info['spec']['interactive']}",
                                 "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")}}))
"""


def exec_user(script: Path, **extra) -> dict:
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(script), "interactiveMode": "Never", **extra}}


async def test_a_token_is_renewed_shortly_before_it_expires(tmp_path):
    script = plugin(tmp_path, TOKEN_PLUGIN)
    creds = await load_credentials(CLUSTER, exec_user(script, env=[{"name": "LIFETIME", "value": "20"}]), tmp_path, tmp_path, CLUSTER["server"])
    assert await creds.headers() == {"Authorization": "Bearer token-1-interactive-False"}
    issued = time.time()
    creds.clock = lambda: issued + 15  # 5 s left of 20: still good
    assert (await creds.headers())["Authorization"] == "Bearer token-1-interactive-False"
    creds.clock = lambda: issued + 18.5  # within the last tenth of its life: renewed before it runs out
    assert (await creds.headers())["Authorization"] == "Bearer token-2-interactive-False"
    assert (tmp_path / "count").read_text() == "2"
    assert "token-2" not in repr(creds)


HANGING_PLUGIN = """
    import os, subprocess, sys, time
    child = subprocess.Popen(["sleep", "300"])
    open(os.path.join(os.path.dirname(__file__), "pids"), "w").write(f"{os.getpid()} {child.pid}")
    time.sleep(300)
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


async def test_a_hanging_plugin_times_out_and_its_process_group_is_killed(tmp_path):
    script = plugin(tmp_path, HANGING_PLUGIN)
    started = time.monotonic()
    with pytest.raises(CredentialError) as caught:
        await load_credentials(CLUSTER, exec_user(script), tmp_path, tmp_path, CLUSTER["server"], exec_timeout=1.0)
    assert time.monotonic() - started < 5
    assert str(caught.value) == f"exec plugin {script}: no answer within 1 s (killed)"
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    for _ in range(50):
        if not any(alive(p) for p in pids):
            break
        await asyncio.sleep(0.1)
    assert not any(alive(p) for p in pids), "the plugin or its child outlived the timeout"


async def test_a_cancelled_connect_kills_the_plugin(tmp_path):
    script = plugin(tmp_path, HANGING_PLUGIN)
    task = asyncio.ensure_future(load_credentials(CLUSTER, exec_user(script), tmp_path, tmp_path, CLUSTER["server"]))
    for _ in range(100):
        if (tmp_path / "pids").exists():
            break
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    for _ in range(50):
        if not any(alive(p) for p in pids):
            break
        await asyncio.sleep(0.1)
    assert not any(alive(p) for p in pids)


@pytest.mark.parametrize(
    ("body", "extra", "expected"),
    [
        ("import sys; print('no such account', file=sys.stderr); sys.exit(3)", {}, "exit status 3: no such account"),
        ("print('not json')", {}, "did not print an ExecCredential with a status"),
        ("print('{\"status\": {}}')", {}, "has neither a token nor a client certificate"),
        ("print('{}')", {"interactiveMode": "Always"}, "interactiveMode Always needs a terminal"),
        ("print('{}')", {"apiVersion": "client.authentication.k8s.io/v1alpha1"}, "apiVersion client.authentication.k8s.io/v1alpha1 is not supported"),
    ],
    ids=["fails", "not-json", "empty-status", "interactive-always", "old-api-version"],
)
async def test_a_plugin_that_cannot_help_is_one_line(tmp_path, body, extra, expected):
    script = plugin(tmp_path, body)
    with pytest.raises(CredentialError) as caught:
        await load_credentials(CLUSTER, exec_user(script, **extra), tmp_path, tmp_path, CLUSTER["server"])
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def self_signed() -> tuple[bytes, bytes]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gputui-test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    pem_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), pem_key


@pytest.fixture(scope="module")
def demo_kubeconfig():
    from gputui.ui.demo import BackgroundCluster

    cluster = BackgroundCluster(scenario="demo")
    path = cluster.start()
    try:
        yield Path(path)
    finally:
        cluster.stop()


def test_key_data_never_reaches_tmpdir_even_after_sigkill(tmp_path, demo_kubeconfig):
    cert, key = self_signed()
    doc = yaml.safe_load(demo_kubeconfig.read_text())
    doc["users"][0]["user"] = {"client-certificate-data": base64.b64encode(cert).decode(), "client-key-data": base64.b64encode(key).decode()}
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(doc))
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color", "TMPDIR": str(tmpdir)}
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(sys.executable, [sys.executable, "-m", "gputui", "--kubeconfig", str(kubeconfig)], env)
    screen = bytearray()
    try:
        deadline = time.monotonic() + 30
        while b"watches" not in screen and time.monotonic() < deadline:  # connected: the credentials are loaded
            if select.select([fd], [], [], 0.1)[0]:
                screen += os.read(fd, 65536)
        assert b"watches" in screen, "the app never connected"
        time.sleep(1.0)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)
    marker = key.splitlines()[1]  # the first line of the key's base64 body
    leftovers = [p for p in tmpdir.rglob("*") if p.is_file() and (b"PRIVATE KEY" in p.read_bytes() or marker in p.read_bytes())]
    assert leftovers == []


def test_the_same_kubeconfig_works_with_kubectl_and_gputui(tmp_path, demo_kubeconfig, make_kubectl):
    """A client certificate signed by the cluster's CA, over HTTPS: both clients connect as its CN and groups."""
    from gputui.sim.tls import authority

    cert, key = authority().issue_client("gputui-test", ["system:masters"])
    doc = yaml.safe_load(demo_kubeconfig.read_text())
    doc["users"][0]["user"] = {"client-certificate-data": base64.b64encode(cert).decode(), "client-key-data": base64.b64encode(key).decode()}
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(doc))
    assert "h100-1" in make_kubectl(kubeconfig)("get", "nodes", "-o", "name")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    report = subprocess.run([sys.executable, "-m", "gputui", "report", "-o", "json", "--kubeconfig", str(kubeconfig)],
                            capture_output=True, text=True, timeout=60, env=env)
    assert report.returncode in (0, 1), report.stderr
    assert "h100-1" in [n["name"] for n in json.loads(report.stdout)["nodes"]]
