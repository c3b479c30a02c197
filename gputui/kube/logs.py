"""Streaming a container's log, line by line, from the raw response.

    async for line in stream_logs(api, "kube-system", pod, "nvidia-device-plugin-ctr", tail=50):
        ...  # bytes, without the newline; cluster text: never markup

The generator ends when the container's stream ends (it exited or restarted):
to follow a pod onto its new instance, watch the model and start again.
Cancel it (or aclose() it) to stop; the connection is released either way.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, AsyncIterator

from .client import path
from .config import describe_network_error, status_message
from .http import Disconnected, HttpError, PayloadError

if TYPE_CHECKING:
    from .client import Client

MAX_LINE_BYTES = 1 << 20  # a longer line is handed out in pieces of this size


class LogError(Exception):
    """The log cannot be read; str() is one line (the server's reason)."""


async def stream_logs(
    api: Client,
    namespace: str,
    pod: str,
    container: str | None,
    *,
    tail: int | None = 50,
    follow: bool = True,
    previous: bool = False,
    max_line: int = MAX_LINE_BYTES,
) -> AsyncIterator[bytes]:
    from .credentials import CredentialError  # noqa: PLC0415

    params: dict = {}
    if follow and not previous:
        params["follow"] = "true"
    if previous:
        params["previous"] = "true"
    if container:
        params["container"] = container
    if tail is not None:
        params["tailLines"] = tail
    try:
        resp = await api.request(
            "GET", path("v1", "pods", pod, namespace=namespace, sub="log"), params=params,
            accept="*/*",
        )
    except CredentialError as exc:
        raise LogError(f"cannot read logs of {namespace}/{pod}: {exc}") from None
    except (HttpError, OSError) as exc:
        raise LogError(f"cannot read logs of {namespace}/{pod}: {describe_network_error(exc)}") from None
    async with resp:
        if resp.status != 200:
            message = status_message(await resp.read())
            raise LogError(message or f"cannot read logs of {namespace}/{pod} ({resp.status})")
        pending = bytearray()
        try:
            while True:
                chunk = await resp.read_some()
                if not chunk:
                    break
                pending += chunk
                if b"\n" in chunk:
                    lines = pending.split(b"\n")
                    pending = lines.pop()
                    for line in lines:
                        yield bytes(line)
                while len(pending) > max_line:
                    yield bytes(pending[:max_line])
                    del pending[:max_line]
        except (PayloadError, Disconnected):
            pass  # the stream was cut: what was read is all there is
        if pending:
            yield bytes(pending)
