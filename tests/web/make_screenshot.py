"""Write screenshots/serve.png: `gputui serve -- --demo` in Debian's chromium, as a browser shows it.

    python tests/web/make_screenshot.py [--out screenshots]

It waits until the main screen has every node's verdict (the first seconds read
"… XIDs: DCGM not read yet"), as tests/make_screenshots.py does for the terminal's.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from playwright.sync_api import sync_playwright

from tests.web.browser import CHROMIUM, FLAGS, new_context, serve_demo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("screenshots"))
    out = parser.parse_args().out
    if CHROMIUM is None:
        raise SystemExit("no chromium: apt-get install chromium")
    server, url = serve_demo(sys.stderr)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page = new_context(browser).new_page()
            page.goto(url)
            page.wait_for_function("window.gputuiScreen().includes('h100-mig-1') && !window.gputuiScreen().includes('not read yet')",
                                   timeout=90_000)
            page.focus(".xterm-helper-textarea")  # as a person's click does: the app has focus, its footer its keys
            page.wait_for_timeout(500)  # the last frame drawn
            path = out / "serve.png"
            page.screenshot(path=str(path))
            print(path)
            browser.close()
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    main()
