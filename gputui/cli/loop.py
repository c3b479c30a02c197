"""The event loop gputui's commands run on: uvloop where it is installed (its platforms: Linux and macOS), else
asyncio's own. uvloop does sockets and TLS in Cython where asyncio does them in Python, and the model's initial
sync is mostly reading TLS (ARCHITECTURE.md, "The connection", gives the measurement)."""
from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop  # noqa: PLC0415  (optional: not built for Windows)
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def runner() -> asyncio.Runner:
    """asyncio.run's runner, on new_loop: several runs on one loop (verify asks the user between them)."""
    return asyncio.Runner(loop_factory=new_loop)


def run(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run(main), on new_loop."""
    with runner() as each:
        return each.run(main)
