"""The session ends with its terminal: closing the app's terminal (its pty) mid-verification, or
SIGHUP to `gputui verify`, ends the process within seconds and leaves no verification pod behind.

The app runs as a real process on a pseudo-terminal, started through a shell wrapper, as
pyenv's shims and many site wrappers start it: the wrapper, not gputui, gets the SIGHUP.
"""
from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from gputui.ui.demo import BackgroundCluster
from tests.verify.cluster import objects, verification_pods

ROOT = Path(__file__).resolve().parents[2]
SLOW = 0.5  # the simulated kubelet at half speed: the pod lives for seconds


@pytest.fixture(scope="module")
def slow_cluster():
    cluster = BackgroundCluster(scenario=objects(), speed=SLOW)
    path = cluster.start()
    try:
        yield cluster, path
    finally:
        cluster.stop()


def pods_now(cluster: BackgroundCluster) -> list[str]:
    return cluster.call(verification_pods, cluster.sim)


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class PtyApp:
    """`sh -c 'python -m gputui ...'` on a pty of 120x40; its output is drained as it comes."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = str(kubeconfig)  # unique to the test: finds the process in `pgrep -f`
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color"}
        command = " ".join([sys.executable, "-m", "gputui", "--kubeconfig", self.kubeconfig])
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: a wrapper shell that does not exec gputui (it stays its parent)
            os.execve("/bin/sh", ["sh", "-c", f"{command}; true"], env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.output = bytearray()

    def drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.05)
                if ready:
                    self.output += os.read(self.fd, 65536)
            except OSError:
                return

    def send(self, keys: bytes) -> None:
        os.write(self.fd, keys)
        self.drain(0.5)

    def wait_for_text(self, text: bytes, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output:
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never appeared on the screen")
            self.drain(0.2)

    def close_terminal(self) -> None:
        os.close(self.fd)  # as when tmux kills the pane or ssh drops: the master side is gone

    def exited_within(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                wrapper_done = os.waitpid(self.pid, os.WNOHANG)[0] != 0
            except ChildProcessError:  # already reaped by another waiter
                wrapper_done = True
            if wrapper_done and not self.running():
                return True
            time.sleep(0.1)
        return False

    def running(self) -> list[str]:
        """gputui's processes (the wrapper's child included) still alive."""
        return subprocess.run(["pgrep", "-f", f"gputui --kubeconfig {self.kubeconfig}"], capture_output=True, text=True).stdout.split()

    def kill(self) -> None:
        for pid in self.running():
            os.kill(int(pid), signal.SIGKILL)


def test_closing_the_terminal_mid_verification_ends_the_app_and_deletes_the_pod(slow_cluster, tmp_path):
    cluster, kubeconfig = slow_cluster
    own = tmp_path / "kubeconfig"
    own.write_text(Path(kubeconfig).read_text())
    app = PtyApp(own)
    try:
        app.wait_for_text(b"watches", 30)
        app.drain(2.0)
        app.send(b"jjjjj")  # gpu-ok, the sixth GPU node by name
        app.send(b"v")
        deadline = time.monotonic() + 20
        while not pods_now(cluster):  # `y` once the confirmation (the pod spec) is up; before, it does nothing
            assert time.monotonic() < deadline, "no verification pod was created"
            app.send(b"y")
    finally:
        app.close_terminal()
    try:
        assert app.exited_within(25), "gputui still runs after its terminal closed"  # about 4 s here when idle
    finally:
        app.kill()
    assert pods_now(cluster) == []


def test_sighup_to_gputui_verify_deletes_its_pod(slow_cluster, tmp_path):
    cluster, kubeconfig = slow_cluster
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "gputui", "verify", "--yes", "gpu-ok", "--kubeconfig", str(kubeconfig)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    before = set(pods_now(cluster))  # a pod another test left must not be taken for this one's
    try:
        wait_until(lambda: set(pods_now(cluster)) - before, 30, "the verification pod")
        proc.send_signal(signal.SIGHUP)
        proc.wait(15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, proc.stderr.read() if proc.stderr else ""
    assert pods_now(cluster) == []
