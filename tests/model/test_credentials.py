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
    with pytest.raises(CredentialError) as caught:
        await load_credentials(CLUSTER, exec_user(script), tmp_path, tmp_path, CLUSTER["server"], exec_timeout=1.0)
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
    for _ in range(600):  # a loaded machine starts Python slowly: up to 30 s
        if (tmp_path / "pids").exists():
            break
        await asyncio.sleep(0.05)
    assert (tmp_path / "pids").exists(), "the plugin never started"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    for _ in range(300):
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
    from gputui.sim.apiserver.tls import authority

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


# -- every way out kills the plugin; its stderr is shown without secrets -------------------------

def marked(marker: str) -> list[int]:
    """The processes whose command line holds `marker` (the plugin and its child)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes() and alive(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


SLEEPING_PLUGIN = """
    import subprocess, sys, time
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", sys.argv[1]])
    time.sleep(300)
"""


def sim_kubeconfig(tmp_path: Path, user: dict) -> Path:
    """A kubeconfig for a server that is never reached (the plugin runs first, and hangs)."""
    from gputui.sim.cluster import kubeconfig_for

    doc = kubeconfig_for("http://127.0.0.1:9")
    doc["users"][0]["user"] = user
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


# Python ARGV..., with SIGTERM and SIGHUP at their defaults (a disposition exec keeps)
AT_DEFAULTS = ("import os, signal, sys; [signal.signal(s, signal.SIG_DFL) for s in (signal.SIGTERM, signal.SIGHUP)];"
               " os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")


@pytest.mark.parametrize("command", [("report",), ("verify", "--yes", "gpu-1")], ids=["report", "verify"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_while_the_plugin_runs_leaves_no_plugin_behind(tmp_path, command, sig):
    marker = f"gputui-test-plugin-{os.getpid()}-{time.monotonic_ns()}"
    script = plugin(tmp_path, SLEEPING_PLUGIN)
    kubeconfig = sim_kubeconfig(tmp_path, exec_user(script, args=[marker]))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # Started as from a terminal, the signals at their defaults: under nohup (a test run left in the background)
    # SIGHUP comes ignored, and gputui rightly keeps it so.
    proc = subprocess.Popen([sys.executable, "-c", AT_DEFAULTS, "-m", "gputui", *command, "--kubeconfig", str(kubeconfig)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.monotonic() + 30
        while len(marked(marker)) < 2 and time.monotonic() < deadline:  # the plugin and its child run
            time.sleep(0.05)
        assert len(marked(marker)) == 2, "the plugin never started"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=15)
        deadline = time.monotonic() + 5
        while marked(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marked(marker) == [], f"the plugin outlived gputui {command[0]} after {sig.name}"
        assert b"Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in marked(marker):  # what this test started, by its id
            os.kill(pid, signal.SIGKILL)


def test_kill_plugins_also_ends_a_plugin_started_but_not_yet_known():
    """A signal between the plugin's start and its registration: the child of ours leading a session goes too."""
    code = textwrap.dedent("""
        import subprocess, sys, time
        from gputui.kube.credentials import kill_plugins
        plugin = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
        other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])  # not a plugin: left alone
        time.sleep(0.2)
        kill_plugins()
        print(plugin.wait(timeout=10), other.poll())
        other.kill()
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout.split() == [str(-signal.SIGKILL), "None"], done.stderr


LEAKY = {
    "assigned": ("import sys; print('oidc: refresh failed: token=s3cr3tvalue password: hunter2 client_secret=\"abc\"', file=sys.stderr); sys.exit(1)",
                 ("s3cr3tvalue", "hunter2", "abc\""), "oidc: refresh failed: token="),
    "bearer": ("import sys; print('got 401 with Authorization: Bearer sh0rt-t0k', file=sys.stderr); sys.exit(1)",
               ("sh0rt-t0k",), "got 401 with Authorization: "),
    "runs": ("import sys; print('bad jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U, "
             "key 0123456789abcdef0123456789abcdef, secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY for café 中文', file=sys.stderr); sys.exit(2)",
             ("eyJhbGciOiJIUzI1NiJ9", "dozjgNryP4J3", "0123456789abcdef", "wJalrXUtnFEMI", "EXAMPLEKEY"), "bad jwt "),
    "pem": ("import sys; print('cannot use\\n-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\nBKcwggSjAgEAAoIBAQC7', file=sys.stderr); "
            "sys.exit(1)", ("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "BKcwggSjAgEAAoIBAQC7", "BEGIN"), "exit status 1"),
}


@pytest.mark.parametrize(("body", "secrets", "kept"), LEAKY.values(), ids=LEAKY.keys())
async def test_a_failing_plugins_stderr_is_one_line_without_its_secrets(tmp_path, body, secrets, kept):
    script = plugin(tmp_path, body)
    with pytest.raises(CredentialError) as caught:
        await load_credentials(CLUSTER, exec_user(script), tmp_path, tmp_path, CLUSTER["server"])
    message = str(caught.value)
    assert "\n" not in message and kept in message, message
    assert not [s for s in secrets if s in message], message
    if "café" in body:
        assert "for café 中文" in message  # ordinary words stay


# -- exec plugin paths as kubectl finds them ---------------------------------------------------

def plain_env() -> dict[str, str]:
    """gputui as installed, without PYTHONPATH: a plugin that runs the interpreter resolved through its
    symlinks (out of the virtualenv) would not find gputui."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = subprocess.run([sys.executable, "-c", "import gputui"], cwd="/", env=env, capture_output=True)
    return env if probe.returncode == 0 else {**env, "PYTHONPATH": str(ROOT)}


def gputui_report(kubeconfig: Path, *args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gputui", "report", "-o", "json", "--kubeconfig", str(kubeconfig), *args],
                          capture_output=True, text=True, timeout=60, cwd=cwd, env=env)


def test_every_context_of_the_simulator_and_a_kubeconfig_through_a_symlink_work_as_with_kubectl(tmp_path, make_kubectl):
    from tests.model.objects import node

    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node("gpu-1", capacity={"nvidia.com/gpu": 8})]}))
    out = tmp_path / "sim" / "kubeconfig"
    sim = subprocess.Popen([sys.executable, "-m", "gputui", "sim", "--scenario", str(scenario), "--kubeconfig-out", str(out), "--all-credentials"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    env = plain_env()
    try:
        assert sim.stdout.readline().startswith("serving https://127.0.0.1:")
        sim.stdout.readline()
        doc = yaml.safe_load(out.read_text())
        contexts = [c["name"] for c in doc["contexts"]]
        assert contexts == ["gputui-sim", "gputui-sim-cert", "gputui-sim-exec"]
        for context in contexts:
            done = gputui_report(out, "--context", context, cwd=tmp_path, env=env)
            assert done.returncode in (0, 1), f"{context}: {done.stderr}"
            assert [n["name"] for n in json.loads(done.stdout)["nodes"]] == ["gpu-1"]
        # The exec context's plugin through a symlinked directory: home/kube -> real/conf. kubectl joins
        # ../bin/credential to the kubeconfig's directory as named (home/kube), without resolving the link.
        (tmp_path / "real" / "conf").mkdir(parents=True)
        (tmp_path / "home" / "bin").mkdir(parents=True)
        (tmp_path / "home" / "kube").symlink_to(tmp_path / "real" / "conf")
        wrapper = tmp_path / "home" / "bin" / "credential"
        wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} -m gputui.sim.credential\n")
        wrapper.chmod(0o755)
        exec_user = next(u for u in doc["users"] if "exec" in u["user"])
        exec_user["user"]["exec"].update(command="../bin/credential", args=[])
        (tmp_path / "real" / "conf" / "kubeconfig").write_text(yaml.safe_dump(doc))
        linked = tmp_path / "home" / "kube" / "kubeconfig"
        assert "node/gpu-1" in make_kubectl(linked)("--context", "gputui-sim-exec", "get", "nodes", "-o", "name")
        done = gputui_report(linked, "--context", "gputui-sim-exec", cwd=tmp_path, env=env)
        assert done.returncode in (0, 1), done.stderr
        # A symlinked kubeconfig file: its directory is home/, where the link is, not real/conf.
        exec_user["user"]["exec"].update(command="bin/credential")
        via_link = tmp_path / "home" / "kubeconfig"
        via_link.symlink_to(tmp_path / "real" / "conf" / "other")
        (tmp_path / "real" / "conf" / "other").write_text(yaml.safe_dump(doc))
        assert "node/gpu-1" in make_kubectl(via_link)("--context", "gputui-sim-exec", "get", "nodes", "-o", "name")
        done = gputui_report(via_link, "--context", "gputui-sim-exec", cwd=tmp_path, env=env)
        assert done.returncode in (0, 1), done.stderr
        # no slash: looked up on PATH
        exec_user["user"]["exec"].update(command="credential")
        (tmp_path / "real" / "conf" / "other").write_text(yaml.safe_dump(doc))
        on_path = {**env, "PATH": f"{tmp_path / 'home' / 'bin'}{os.pathsep}{env['PATH']}"}
        done = gputui_report(via_link, "--context", "gputui-sim-exec", cwd=tmp_path, env=on_path)
        assert done.returncode in (0, 1), done.stderr
    finally:
        sim.send_signal(signal.SIGTERM)
        sim.communicate(timeout=15)


async def test_credentials_are_never_sent_over_plain_http_off_this_machine(tmp_path):
    """A bearer token to an http:// server: anyone on the path reads it. Refused before anything is sent
    (an exec plugin is not even run); loopback (a local proxy, a port forward) has no path and is allowed."""
    from gputui.kube.config import ConnectError, connect

    marker = tmp_path / "plugin-ran"
    plugin = {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
              "args": ["-c", f"open({str(marker)!r}, 'w').close()"], "interactiveMode": "Never"}
    for user in ({"token": "s3cret"}, {"exec": plugin}):
        path = tmp_path / "kubeconfig"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": "http://gpu-cluster.example:6443"}}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        }))
        with pytest.raises(ConnectError) as refused:
            await connect(str(path))
        assert "refusing to send credentials" in str(refused.value) and "over plain HTTP" in str(refused.value)
        assert "s3cret" not in str(refused.value)
    assert not marker.exists()
