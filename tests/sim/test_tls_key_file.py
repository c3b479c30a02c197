"""The simulator's key files (sim/apiserver/tls.py's _readable): nothing left behind when the write fails."""
from __future__ import annotations

import os
import tempfile

import pytest

from gputui.sim.apiserver import tls


def test_a_failed_write_closes_the_descriptor_and_removes_the_file(monkeypatch, tmp_path):
    """Without memfd, a temporary file: on a full disk (/dev/full) the write fails, and neither its
    descriptor nor the file stays."""
    monkeypatch.delattr(os, "memfd_create", raising=False)
    opened: list[tuple[int, str]] = []
    mkstemp = tempfile.mkstemp

    def full_disk(prefix: str = "") -> tuple[int, str]:
        real_fd, path = mkstemp(prefix=prefix, dir=tmp_path)
        os.close(real_fd)
        opened.append((os.open("/dev/full", os.O_WRONLY), path))
        return opened[-1]

    monkeypatch.setattr(tls.tempfile, "mkstemp", full_disk)
    with pytest.raises(OSError), tls._readable(b"-----BEGIN EC PRIVATE KEY-----\n"):
        pytest.fail("a key file that could not be written was handed out")
    (fd, path), = opened
    with pytest.raises(OSError):
        os.fstat(fd)  # closed
    assert not os.path.exists(path)


def test_the_key_is_readable_inside_the_block_and_gone_after():
    with tls._readable(b"key bytes") as path:
        with open(path, "rb") as file:
            assert file.read() == b"key bytes"
    assert not os.path.exists(path) or path.startswith("/proc/self/fd/")
