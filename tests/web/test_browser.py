"""`gputui serve` in a real browser: Debian's chromium, driven headless by Playwright (never a browser of its own).

One server for the module, `gputui serve --port 0 -- --demo` through the real entry point, and
one browser; the tests read the page's terminal as text (browser.py). The app processes are
found by a marker in their environment (inherited from the server), so that one left behind by
its parent is counted too.
"""
from __future__ import annotations

import json
import re
import secrets
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from gputui.sim.scenarios import demo
from gputui.sim.cluster import kubeconfig_for
from gputui.ui.demo import BackgroundCluster
from tests.web.browser import CHROMIUM, FLAGS, new_context, serve_demo

MARK = "GPUTUI_SERVE_TEST"
DEMO_NODES = ("h100-1", "h100-mig-1", "a100-1")


@dataclass
class Served:
    url: str
    process: subprocess.Popen
    marker: str
    log: Path

    @property
    def origin(self) -> str:
        return self.url.split("/", 3)[0] + "//" + self.url.split("/", 3)[2]

    def app_processes(self) -> set[int]:
        """Every live process started from the server (its own aside), wherever it was reparented."""
        found = set()
        needle = f"{MARK}={self.marker}".encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == self.process.pid:
                continue
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    found.add(int(entry.name))
            except OSError:
                continue  # gone meanwhile, or not ours
        return found


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    marker = uuid.uuid4().hex
    log = tmp_path_factory.mktemp("serve") / "server.log"
    with log.open("w") as errors:
        process, url = serve_demo(errors, {MARK: marker})
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/[\w-]{40,}/", url), url
        yield Served(url, process, marker, log)
    finally:
        process.terminate()
        process.wait(30)


@pytest.fixture(scope="module")
def browser():
    """A browser context (one profile, its cache shared by the pages) that reads the terminal of every page it opens."""
    if CHROMIUM is None:
        pytest.skip("no chromium to drive (.ci/run installs Debian's: apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright's Python package is not installed (the test extra)")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield new_context(chromium)
        chromium.close()


def open_page(browser, url: str):
    page = browser.new_page()
    page.goto(url)
    return page


def wait_for_screen(page, condition: str, arg: object = None, timeout: float = 30) -> str:
    """Wait until the JavaScript `condition` (screen, arg) holds of the page's screen; the screen."""
    page.wait_for_function(f"arg => {{ const screen = window.gputuiScreen(); return {condition}; }}", arg=arg, timeout=timeout * 1000)
    return page.evaluate("window.gputuiScreen()")


def wait_until(condition, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture(scope="module")
def demo_page(browser, served):
    page = open_page(browser, served.url)
    wait_for_screen(page, "arg.every(name => screen.includes(name))", list(DEMO_NODES))
    page.focus(".xterm-helper-textarea")  # where xterm.js takes the keyboard
    yield page
    page.close()


def node_rows(screen: str) -> list[str]:
    """The node names of the Nodes pane, top to bottom."""
    lines = screen.splitlines()
    header = next(i for i, line in enumerate(lines) if re.match(r"│ NODE\s+STATUS", line))
    names = []
    for line in lines[header + 1:]:
        if not line.startswith("│ "):
            break
        names.append(line[2:].split()[0])
    return names


def test_the_page_shows_the_demos_nodes(demo_page):
    screen = demo_page.evaluate("window.gputuiScreen()")
    assert set(DEMO_NODES) <= set(node_rows(screen))
    assert demo_page.title() == "gputui --demo"


def test_keys_typed_in_the_page_move_the_cursor_and_open_node_details(demo_page):
    names = node_rows(demo_page.evaluate("window.gputuiScreen()"))
    demo_page.keyboard.press("ArrowDown")
    demo_page.keyboard.press("Enter")
    details = wait_for_screen(demo_page, "screen.trimStart().startsWith(arg + ' ')", names[1])  # the second node's details
    assert "GPU (from GPU Feature Discovery labels)" in details
    demo_page.keyboard.press("Escape")
    wait_for_screen(demo_page, "screen.includes('NODE') && screen.includes(arg)", names[0])


def test_the_served_app_is_read_only(demo_page):
    demo_page.keyboard.press("v")
    wait_for_screen(demo_page, "screen.includes('read-only mode: verification creates a pod, disabled')")


def test_closing_the_page_ends_its_app_process(browser, served):
    before = served.app_processes()
    page = open_page(browser, served.url)
    wait_for_screen(page, "screen.includes(arg)", "h100-1")
    started = served.app_processes() - before
    assert len(started) == 1
    page.close()
    assert wait_until(lambda: not served.app_processes() & started), "the closed page's app process is still running"
    assert wait_until(lambda: "closed, its app ended" in served.log.read_text())


@pytest.mark.timeout(480)
def test_twenty_page_loads_and_closes_leave_no_process(browser, served):
    """Four times five pages at once, each closed once its app process is there (most before the app has drawn).
    Five apps starting at once on a loaded machine may take a minute or more: what counts is that none is left."""
    before, closed_before = served.app_processes(), served.log.read_text().count("closed, its app ended")
    for _ in range(4):
        pages = [browser.new_page() for _ in range(5)]
        for page in pages:
            page.goto(served.url, wait_until="commit")
        for page in pages:
            page.wait_for_function("document.body.classList.contains('-loaded')", timeout=90_000)  # its websocket is open
        assert wait_until(lambda: len(served.app_processes() - before) == 5), "not one app process per page"
        for page in pages:
            page.close()
    assert wait_until(lambda: served.app_processes() == before, timeout=30), served.app_processes() - before
    assert wait_until(lambda: served.log.read_text().count("closed, its app ended") == closed_before + 20)


def test_a_request_without_the_token_is_refused(browser, served):
    page = browser.new_page()
    try:
        for path in ("/", "/static/js/textual.js", "/not-the-token/"):
            response = page.goto(served.origin + path)
            assert response is not None and response.status == 403, path
            assert "access token" in page.inner_text("body")
    finally:
        page.close()
    assert "refused GET from 127.0.0.1: the access token is missing or wrong" in served.log.read_text()


def test_the_kubeconfigs_credentials_never_reach_the_browser(browser, tmp_path):
    """A cluster reached with a secret token: every response and websocket frame the page gets, while
    the app draws, details and help open, is free of the token (the page's title names the kubeconfig's path)."""
    secret = secrets.token_hex(24)
    cluster = BackgroundCluster(scenario=demo.build(), tokens={secret: ("viewer", ["system:masters"])})
    cluster.start()
    kubeconfig = tmp_path / "secret-kubeconfig"
    kubeconfig.write_text(json.dumps(kubeconfig_for(cluster.sim.url, token=secret)))
    process, url = serve_demo(subprocess.DEVNULL, app_args=("--kubeconfig", str(kubeconfig)))
    seen: list[bytes] = []
    page = browser.new_page()
    try:
        page.on("response", lambda response: seen.append(response.body()) if response.ok else None)
        page.on("websocket", lambda ws: (ws.on("framereceived", lambda frame: seen.append(frame if isinstance(frame, bytes) else frame.encode())),
                                          ws.on("framesent", lambda frame: seen.append(frame if isinstance(frame, bytes) else frame.encode()))))
        page.goto(url)
        wait_for_screen(page, "arg.every(name => screen.includes(name))", list(DEMO_NODES))
        page.focus(".xterm-helper-textarea")
        for key in ("Enter", "Escape", "?", "Escape"):
            page.keyboard.press(key)
            page.wait_for_timeout(300)
        assert len(seen) > 10, "no traffic seen"
        assert not [chunk for chunk in seen if secret.encode() in chunk]
    finally:
        page.close()
        process.terminate()
        process.wait(30)
        cluster.stop()
