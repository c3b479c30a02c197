"""What a new user does first, on a fresh virtual environment: the README's install, then the demo,
the simulator and a report. Standard library only: it runs before anything of gputui is installed.

    python3 .ci/fresh_install.py        (from the repository root; exit 0 when every step worked)

Each failing step prints the last lines of what it ran (an ImportError of a missing runtime
dependency among them) and exits 1, so those lines end CI's log.
"""
from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO_NODES = ("h100-1", "h100-mig-1", "a100-1")  # on the demo's first screen at 120x40
ESCAPES = re.compile(rb"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|[=>78DEHMNOc])")


def fail(step: str, output: str) -> None:
    print(f"fresh install: FAILED: {step}; its last lines:", flush=True)
    for line in [line for line in output.splitlines() if line.strip()][-25:]:
        print(f"  {line}")
    sys.exit(1)


def run(step: str, *command: str | Path, ok: tuple[int, ...] = (0,), timeout: float = 300) -> str:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if done.returncode not in ok:
        fail(f"{step} exited {done.returncode}", done.stdout + done.stderr)
    return done.stdout


def session_members(sid: int) -> list[int]:
    """Processes still in the session the demo led (pty.fork makes the child a session leader)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                members.append(int(entry.name))
    return members


def demo_on_a_pty(gputui: Path) -> None:
    """`gputui --demo` on a 120x40 terminal until the Nodes pane lists the demo's nodes, then `q`."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NO_COLOR")} | {"TERM": "xterm-256color"}
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir("/")  # not the checkout: the installed package, not the source tree, must be what runs
        os.execve(str(gputui), [str(gputui), "--demo"], env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    written, quit_sent_at, status = bytearray(), None, None
    deadline = time.monotonic() + 90
    while status is None and time.monotonic() < deadline:
        if quit_sent_at is None and all(name.encode() in ESCAPES.sub(b"", written) for name in DEMO_NODES):
            os.write(fd, b"q")
            quit_sent_at = time.monotonic()
            deadline = min(deadline, quit_sent_at + 20)
        try:
            if select.select([fd], [], [], 0.1)[0]:
                written += os.read(fd, 65536)  # read on to the end: a terminal nobody reads blocks the app
        except OSError:  # the pty closed: the app has gone
            pass
        finished, wait_status = os.waitpid(pid, os.WNOHANG)
        if finished:
            status = os.waitstatus_to_exitcode(wait_status)
    screen = ESCAPES.sub(b"", written).decode("utf-8", "replace")
    if status is None:
        os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        step = "gputui --demo did not end 20 s after q" if quit_sent_at else "gputui --demo never listed the demo's nodes"
        fail(step, screen)
    os.close(fd)
    if quit_sent_at is None:
        fail(f"gputui --demo exited {status} before listing the demo's nodes", screen)
    if status != 0:
        fail(f"gputui --demo exited {status} after q", screen)
    left = session_members(pid)
    if left:
        ps = subprocess.run(["ps", "-o", "pid,args", "-p", ",".join(map(str, left))], capture_output=True, text=True)
        fail("gputui --demo left processes behind", ps.stdout)
    print(f"fresh install: gputui --demo listed {', '.join(DEMO_NODES)}, ended on q with exit 0, left no process")


def simulator_and_report(gputui: Path, work: Path) -> None:
    kubeconfig = work / "kubeconfig"
    sim = subprocess.Popen([str(gputui), "sim", "--scenario", "demo", "--kubeconfig-out", str(kubeconfig)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not kubeconfig.exists() and sim.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        if not kubeconfig.exists():
            sim.kill()
            fail("gputui sim --scenario demo wrote no kubeconfig", sim.communicate()[0])
        nodes = run("kubectl get nodes", "kubectl", "--kubeconfig", kubeconfig, "get", "nodes", "-o", "name")
        if not all(f"node/{name}" in nodes.split() for name in DEMO_NODES):
            fail("kubectl get nodes did not list the demo's nodes", nodes)
        # Exit 1 says some node has a problem, which the demo's nodes have by design.
        report = run("gputui report", gputui, "report", "--kubeconfig", kubeconfig, ok=(0, 1))
        if not all(name in report for name in DEMO_NODES):
            fail("gputui report did not list the demo's nodes", report)
    finally:
        if sim.poll() is None:
            sim.send_signal(signal.SIGTERM)
            try:
                sim.wait(20)
            except subprocess.TimeoutExpired:
                sim.kill()
                fail("gputui sim did not end on SIGTERM", sim.communicate()[0])
    if sim.returncode != 0:
        fail(f"gputui sim exited {sim.returncode} on SIGTERM", sim.communicate()[0])
    print("fresh install: gputui sim --scenario demo answered kubectl get nodes, and gputui report listed its nodes")


def served_page(gputui: Path) -> None:
    """`gputui serve -- --demo`: the printed address answers with the page, and the server ends on SIGTERM."""
    import urllib.request  # noqa: PLC0415

    server = subprocess.Popen([str(gputui), "serve", "--port", "0", "--", "--demo"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        lines = [server.stdout.readline() for _ in range(2)] if select.select([server.stdout], [], [], 60)[0] else []
        url = lines[-1].strip() if lines else ""
        if not url.startswith("http://127.0.0.1:"):
            fail("gputui serve printed no address", "".join(lines))
        with urllib.request.urlopen(url, timeout=30) as page:  # noqa: S310  (the address it printed, on loopback)
            if b"textual.js" not in page.read():
                fail("gputui serve's page names no terminal script", url)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            output = server.communicate(timeout=20)[0]
        except subprocess.TimeoutExpired:
            server.kill()
            fail("gputui serve did not end on SIGTERM", server.communicate()[0])
    if server.returncode != 0:
        fail(f"gputui serve exited {server.returncode} on SIGTERM", output)
    print("fresh install: gputui serve answered with its page on loopback, and ended on SIGTERM")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="gputui-fresh-") as tmp:
        work = Path(tmp)
        venv = work / "venv"
        run("python3 -m venv", sys.executable, "-m", "venv", venv)
        # The README's first command, in the new environment (its python3 is the venv's).
        run("python3 -m pip install .", venv / "bin" / "python3", "-m", "pip", "install", "-q", ".", timeout=900)
        print(f"fresh install: python3 -m pip install . into a new virtual environment ({venv})")
        gputui = venv / "bin" / "gputui"
        demo_on_a_pty(gputui)
        simulator_and_report(gputui, work)
        served_page(gputui)


if __name__ == "__main__":
    main()
