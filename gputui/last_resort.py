"""The last resort for an error nobody expected: one line naming where it happened, never a
traceback (a traceback's locals may hold a token); `--debug` lets the traceback through."""
from __future__ import annotations

import traceback
from pathlib import Path

DEBUG_FLAG = "--debug"  # any command: let an unexpected error's traceback through


def last_resort_line(exc: BaseException) -> str:
    """'unexpected ValueError in gputui/kube/gpu.py:120: <message>; run with --debug for the traceback'."""
    where = ""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        parts = Path(frame.filename).parts
        if "gputui" in parts:
            where = f" in {'/'.join(parts[len(parts) - parts[::-1].index('gputui') - 1:])}:{frame.lineno}"
            break
    message = (str(exc).strip().splitlines() or [""])[0][:200]
    return f"unexpected {type(exc).__name__}{where}" + (f": {message}" if message else "") + f"; run with {DEBUG_FLAG} for the traceback"
