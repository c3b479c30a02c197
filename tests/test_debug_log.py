"""`gputui --debug` in the app: its log goes to $XDG_STATE_HOME/gputui/debug.log (0600), not to the
terminal the screen is drawn on."""
from __future__ import annotations

import logging
import stat
import sys
from pathlib import Path

from gputui.cli import app as cli_app


def test_the_debug_log_is_a_private_file_under_xdg_state_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    logger = logging.getLogger("gputui")
    stderr_handler = logging.StreamHandler(sys.stderr)  # what main() sets up for --debug
    logger.addHandler(stderr_handler)
    before = list(logger.handlers)
    try:
        path = cli_app.log_to_file()
        assert path == tmp_path / "gputui" / "debug.log"
        assert stderr_handler not in logger.handlers
        logging.getLogger("gputui.kube.watch").warning("watch of pods restarted")
        assert "WARNING gputui.kube.watch: watch of pods restarted" in path.read_text()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        for handler in [h for h in logger.handlers if h not in before]:
            logger.removeHandler(handler)
            handler.close()
        logger.removeHandler(stderr_handler)


def test_without_xdg_state_home_it_is_under_local_state(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    for value in (None, "", "relative/state"):  # unset, empty, relative: the default, as the XDG spec says
        if value is None:
            monkeypatch.delenv("XDG_STATE_HOME", raising=False)
        else:
            monkeypatch.setenv("XDG_STATE_HOME", value)
        assert cli_app.debug_log_path() == Path(tmp_path) / ".local" / "state" / "gputui" / "debug.log"
