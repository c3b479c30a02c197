"""What the browser tests and the served screenshot share: Debian's chromium, its flags, and reading the page's terminal.

The terminal in the page is xterm.js drawing on a canvas: CATCH_TERMINAL, added before the page's
own scripts, catches the terminal object textual.js makes, and `window.gputuiScreen()` returns its
screen as text, the text the page shows.
"""
from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import time
from typing import IO

CHROMIUM = shutil.which("chromium")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]  # Playwright adds --headless and a fresh --user-data-dir

CATCH_TERMINAL = """
Object.defineProperty(Object.prototype, "terminal", {configurable: true, set(value) {
  Object.defineProperty(this, "terminal", {value, writable: true, configurable: true, enumerable: true});
  if (value && value.buffer) window.gputuiTerminal = value;
}});
window.gputuiScreen = () => {
  const terminal = window.gputuiTerminal;
  if (!terminal) return "";
  const buffer = terminal.buffer.active, rows = [];
  for (let y = 0; y < terminal.rows; y++) rows.push(buffer.getLine(buffer.viewportY + y).translateToString(true));
  return rows.join("\\n");
};
"""


def new_context(browser, width: int = 1200, height: int = 800):
    """A browser context (one profile, its cache shared by its pages) whose pages can read their terminal."""
    context = browser.new_context(viewport={"width": width, "height": height})
    context.add_init_script(CATCH_TERMINAL)
    return context


def serve_demo(stderr: IO[str] | int, env: dict[str, str] | None = None, flags: tuple[str, ...] = (),
               app_args: tuple[str, ...] = ("--demo",)) -> tuple[subprocess.Popen, str]:
    """`gputui serve --port 0 FLAGS -- APP_ARGS` through the real entry point; the process and the address it printed."""
    process = subprocess.Popen([sys.executable, "-m", "gputui", "serve", "--port", "0", *flags, "--", *app_args],
                               stdout=subprocess.PIPE, stderr=stderr, env={**os.environ, **(env or {})})
    assert process.stdout is not None
    printed, deadline = b"", time.monotonic() + 30
    while printed.count(b"\n") < 2:  # its first line says what it serves, the second where
        left = deadline - time.monotonic()
        chunk = os.read(process.stdout.fileno(), 4096) if left > 0 and select.select([process.stdout], [], [], left)[0] else b""
        if not chunk:
            process.kill()
            raise AssertionError(f"gputui serve printed no address: {printed!r}")
        printed += chunk
    return process, printed.decode().splitlines()[1].strip()
