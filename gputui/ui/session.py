"""The session ends with its terminal.

A closed terminal (tmux pane killed, ssh dropped) does not always reach the app
as SIGHUP: when gputui runs under a wrapper (a shell script, pyenv's shims), the
hangup goes to the wrapper and gputui is left with a terminal that is gone:
every read returns at once with nothing, and Textual's input thread spins. So
the app also looks at its terminal once a second (poll(2), no read, no write).

Either way (SIGHUP, or the terminal seen hung up) the app ends, and its unmount,
which every way out passes through (`q`, a signal, a hangup, Textual ending the
app on an error of its own), deletes running verification pods within a bounded
wait and closes the connection. Then the process exits; Textual's own shutdown
writes to the terminal to restore it and can wait for good on a terminal that is
gone, so after a hangup the process ends regardless, a second after the cleanup.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Awaitable, Callable, Protocol

QUIT_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)  # SIGINT: kill -INT (ctrl+c is a key in the app)
HANGUP_CHECK_INTERVAL = 1.0  # seconds between looks at the terminal
EXIT_GRACE = 1.0  # seconds Textual's shutdown may take once our cleanup is done (it restores a live terminal in well under that)
HANGUP_EXIT_STATUS = 128 + signal.SIGHUP
_GONE = select.POLLHUP | select.POLLERR | select.POLLNVAL

if TYPE_CHECKING:
    from textual.timer import Timer


def terminal_gone(fds: tuple[int, ...]) -> bool:
    """True when one of these descriptors is a terminal that has hung up (or was closed)."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    return any(mask & _GONE for _fd, mask in poller.poll(0))


def _terminal_fds() -> tuple[int, ...]:
    fds = []
    for stream in (sys.__stdin__, sys.__stdout__):
        try:
            fd = stream.fileno() if stream is not None else -1
        except (OSError, ValueError):
            continue
        if fd >= 0 and os.isatty(fd):
            fds.append(fd)
    return tuple(fds)


def _exit_soon(delay: float, status: int) -> None:
    def end() -> None:
        time.sleep(delay)
        os._exit(status)  # the pods are deleted and the connection closed: nothing is left to undo

    threading.Thread(target=end, name="gputui-exit", daemon=True).start()


class SessionHost(Protocol):
    """The app, as the terminal watch needs it."""

    @property
    def is_headless(self) -> bool: ...
    def set_interval(self, interval: float, callback: Callable[[], object], *, name: str | None = None) -> Timer: ...
    def call_later(self, callback: Callable[[], Awaitable[None]]) -> bool: ...
    async def action_quit(self) -> None: ...
    def stop_drawing(self) -> None:
        """The app is ending: no refresh draws from here on."""
    def exit(self, result: None = None, return_code: int = 0) -> None: ...


class TerminalWatch:
    """The app's: when the terminal hangs up (SIGHUP, or seen gone), clean up and end."""

    def __init__(self, host: SessionHost) -> None:
        self._host = host
        self._hung_up = False
        self._terminal_fds: tuple[int, ...] = ()

    def start(self) -> None:
        """The app is mounted: the quit signals and a look at the terminal once a second."""
        loop = asyncio.get_running_loop()
        for sig in QUIT_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
                loop.add_signal_handler(sig, self._quit_on_signal, sig)
        self._terminal_fds = _terminal_fds()
        if self._terminal_fds and not self._host.is_headless:  # tests and pipes have no terminal to lose
            self._host.set_interval(HANGUP_CHECK_INTERVAL, self._look_at_terminal, name="gputui-terminal-watch")

    def _quit_on_signal(self, sig: int) -> None:
        if sig == signal.SIGHUP:
            self.lost()
        else:
            self._host.call_later(self._host.action_quit)  # as `q`: verification pods deleted first

    def _look_at_terminal(self) -> None:
        if terminal_gone(self._terminal_fds):
            self.lost()

    def lost(self) -> None:
        """End the app, once; its unmount deletes running verification pods and closes the connection."""
        if self._hung_up:
            return
        self._hung_up = True
        self._host.stop_drawing()
        self._host.exit(return_code=HANGUP_EXIT_STATUS)

    def cleaned_up(self) -> None:
        """Called last by the app's unmount, on every way out, once its pods and connection are dealt with:
        the signals go back to their defaults and, after a hangup, the process ends a little later
        whatever Textual's restore of the terminal that is gone does."""
        loop = asyncio.get_running_loop()
        for sig in QUIT_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)
        if self._hung_up:
            _exit_soon(EXIT_GRACE, HANGUP_EXIT_STATUS)
