"""Never a traceback: each bad input is one line on stderr and exit 2; an unexpected error is one line
naming where it happened (the traceback only with --debug); output to a closed pipe ends quietly."""
from __future__ import annotations

import asyncio
import base64
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SECRET = "s3cret-token-never-printed"


def gputui(*args: str, env: dict[str, str] | None = None, stdout=subprocess.PIPE, code: str | None = None) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"}
    environment.update({"PYTHONPATH": str(ROOT), **(env or {})})
    command = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "gputui", *args]
    return subprocess.run(command, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=90, env=environment,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def demo_kubeconfig():
    from gputui.ui.demo import BackgroundCluster

    cluster = BackgroundCluster(scenario="demo")
    cluster.begin()
    try:
        yield Path(cluster.wait_ready())
    finally:
        cluster.stop()


def with_user(tmp_path: Path, demo_kubeconfig: Path, user: dict, cluster: dict | None = None) -> Path:
    doc = yaml.safe_load(demo_kubeconfig.read_text())
    doc["users"][0]["user"] = user
    doc["clusters"][0]["cluster"].update(cluster or {})
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def errors(stderr: str) -> list[str]:
    """stderr without the report's warnings about optional parts (the demo's crash-looping exporter)."""
    return [line for line in stderr.splitlines() if not line.startswith("gputui report: warning: ")]


def assert_one_line(result: subprocess.CompletedProcess[str], prefix: str, expected: str) -> None:
    assert result.returncode == 2, result
    lines = errors(result.stderr)
    assert len(lines) == 1 and lines[0].startswith(prefix) and expected in lines[0], result.stderr
    assert "Traceback" not in result.stderr and SECRET not in result.stderr


@pytest.mark.parametrize("command", [["report"], ["verify", "--yes", "n1"], []], ids=["report", "verify", "app"])
def test_a_kubeconfig_that_is_not_utf8(tmp_path, command):
    bad = tmp_path / "kubeconfig"
    bad.write_bytes(b"\xff\xfeapiVersion: v1\n")
    prefix = "gputui" + (f" {command[0]}" if command else "")
    assert_one_line(gputui(*command, "--kubeconfig", str(bad), env={"HOME": str(tmp_path)}), prefix + ": ", "not UTF-8 text")


def test_an_empty_file_beside_a_good_one_in_KUBECONFIG(tmp_path, demo_kubeconfig):
    empty = tmp_path / "empty"
    empty.write_text("")
    result = gputui("report", "-o", "tsv", env={"KUBECONFIG": f"{empty}{os.pathsep}{demo_kubeconfig}", "HOME": str(tmp_path)})
    assert result.returncode in (0, 1), result.stderr
    assert "node\th100-1\t" in result.stdout


@pytest.mark.parametrize(
    ("user", "cluster", "expected"),
    [
        ({"token": SECRET, "client-certificate-data": base64.b64encode(b"not a certificate").decode(),
          "client-key-data": base64.b64encode(b"not a key").decode()}, {}, "client certificate and key cannot be used"),
        ({"token": SECRET, "client-key-data": "!!!notbase64"}, {}, "client-key-data is not valid base64"),
        ({"token": SECRET, "client-key-data": base64.b64encode(b"key").decode()}, {}, "a client certificate needs its key"),
        ({"token": SECRET}, {"certificate-authority-data": base64.b64encode(b"garbage").decode()}, "certificate-authority-data is not a PEM certificate"),
        ({"token": SECRET}, {"certificate-authority": "/nonexistent/ca.crt"}, "certificate-authority /nonexistent/ca.crt: no such file"),
        ({"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "gputui-no-such-plugin"}}, {}, "not found on PATH"),
        ({"auth-provider": {"name": "gcp"}}, {}, "auth-provider gcp is not supported"),
    ],
    ids=["corrupt-key", "not-base64", "key-without-cert", "corrupt-ca", "missing-ca", "missing-exec-plugin", "gcp-auth-provider"],
)
def test_unusable_credentials(tmp_path, demo_kubeconfig, user, cluster, expected):
    kubeconfig = with_user(tmp_path, demo_kubeconfig, user, cluster)
    assert_one_line(gputui("report", "--kubeconfig", str(kubeconfig)), "gputui report: ", expected)


@pytest.mark.parametrize("debug", [False, True])
def test_a_full_disk_is_one_line_and_exit_2_with_or_without_debug(demo_kubeconfig, debug):
    with open("/dev/full", "w") as full:
        done = gputui(*(["--debug"] if debug else []), "report", "--kubeconfig", str(demo_kubeconfig), stdout=full)
    said = [line for line in done.stderr.splitlines() if line.startswith("gputui")]
    assert done.returncode == 2, done.stderr
    assert said[-1:] == ["gputui report: cannot write the output: no space left on device"], done.stderr
    assert "Traceback" not in done.stderr


def test_the_app_without_a_terminal_is_one_line_not_a_spinning_screen():
    """From cron or a pipe, the app said nothing and drew into the file (it spun a core for minutes)."""
    done = gputui("--demo")  # stdin /dev/null, stdout a pipe
    assert done.returncode == 2 and done.stdout == "", done.stdout[-300:]
    assert done.stderr.splitlines() == [
        "gputui: the screen needs a terminal, and stdin and stdout are not one; for scripts, use `gputui report`"]


def test_output_to_a_closed_pipe_ends_quietly(demo_kubeconfig):
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte, as `| head -0` leaves it
    try:
        result = gputui("report", "--kubeconfig", str(demo_kubeconfig), stdout=write_end)
    finally:
        os.close(write_end)
    assert result.returncode == 141, result.stderr
    assert errors(result.stderr) == []


UNEXPECTED = (
    "import sys\n"
    "import gputui.report.formats as formats\n"
    "def broken(*args, **kwargs):\n"
    "    raise ValueError('a bug in the table')\n"
    "formats.write_table = broken\n"
    "from gputui.cli.main import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def test_an_unexpected_error_is_one_line_naming_where(demo_kubeconfig):
    result = gputui("report", "--kubeconfig", str(demo_kubeconfig), code=UNEXPECTED)
    assert_one_line(result, "gputui report: unexpected ValueError in ", "a bug in the table; run with --debug for the traceback")
    assert "gputui/cli/report.py:" in result.stderr


def test_debug_lets_the_traceback_through(demo_kubeconfig):
    result = gputui("report", "--debug", "--kubeconfig", str(demo_kubeconfig), code=UNEXPECTED)
    assert result.returncode != 0
    assert "Traceback (most recent call last)" in result.stderr and "ValueError: a bug in the table" in result.stderr


APP_BUG = (
    "import sys\n"
    "from gputui.ui import capacity\n"
    "def broken(*args, **kwargs):\n"
    f"    token = {SECRET!r}  # a local a traceback with locals would print\n"
    "    raise RuntimeError('a bug in the capacity view')\n"
    "capacity.capacity_text = broken\n"
    "from gputui.cli.main import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def app_on_a_pty(*args: str) -> tuple[int, str]:
    """The app on a 100x30 pseudo-terminal with a bug behind `c`: (its exit status, all it wrote)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color"}
    env.pop("KUBECONFIG", None)
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(sys.executable, [sys.executable, "-c", APP_BUG, *args], env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    output, pressed = bytearray(), False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not pressed and b"watches" in output:
            time.sleep(0.5)
            os.write(fd, b"c")
            pressed = True
        try:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                output += chunk
        except OSError:  # the child has gone: the pty is closed
            break
    else:
        os.kill(pid, signal.SIGKILL)
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), output.decode("utf-8", "replace")


def test_a_bug_in_the_app_ends_it_with_one_line_not_textual_traceback(demo_kubeconfig):
    status, output = app_on_a_pty("--kubeconfig", str(demo_kubeconfig))
    after_screen = re.sub(r"\x1b\[[0-9;?<>=]*[A-Za-z]", "", output.rsplit("\x1b[?1049l", 1)[-1])  # once the terminal was back
    lines = [line for line in after_screen.replace("\r", "").splitlines() if line.strip()]
    assert status == 1 and len(lines) == 1, after_screen
    assert lines[0].startswith("gputui: unexpected RuntimeError in gputui/") and "a bug in the capacity view" in lines[0]
    assert "Traceback" not in output and "locals" not in output and SECRET not in output


def test_debug_lets_the_apps_traceback_through(demo_kubeconfig):
    status, output = app_on_a_pty("--debug", "--kubeconfig", str(demo_kubeconfig))
    assert status == 1 and "RuntimeError" in output and "a bug in the capacity view" in output and "Traceback" in output


def test_broken_json_bodies_are_read_again_not_a_traceback(tmp_path):
    """The simulator cuts the next responses' bodies in half: the report retries and ends normally."""
    from gputui.sim import builders as b
    from gputui.sim.cluster import SimCluster

    async def scenario() -> subprocess.CompletedProcess[str]:
        async with SimCluster([b.node("gpu-1", 1, extra_resources={"nvidia.com/gpu": (2, 2)})], faults=True) as sim:
            sim.faults.corrupt_next(8)
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "gputui", "report", "-o", "json", "--kubeconfig", str(sim.kubeconfig_path),
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
            out, err = await asyncio.wait_for(proc.communicate(), 60)
            assert sim.faults.corrupt < 8  # some answers were cut
            return subprocess.CompletedProcess([], proc.returncode, out.decode(), err.decode())

    result = asyncio.run(scenario())
    assert result.returncode in (0, 1), result.stderr
    assert "Traceback" not in result.stderr
    assert [n["name"] for n in json.loads(result.stdout)["nodes"]] == ["gpu-1"]
