"""A command's output on stdout: a write that fails (a full disk, a file system gone) is one line and
exit status 2, with or without --debug, since it is the machine's state, not a bug of ours. A reader
that went away (`| head`) is BrokenPipeError, left to main to end quietly."""
from __future__ import annotations

import contextlib
import sys
from typing import Iterator


class OutputError(Exception):
    """str(): one line for the user."""


@contextlib.contextmanager
def writing_stdout() -> Iterator[None]:
    """Around the writes of a command's output; flushes them, so that the failure comes here, not at exit."""
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputError(f"cannot write the output: {(exc.strerror or str(exc)).lower()}") from None
