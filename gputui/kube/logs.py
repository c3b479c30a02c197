"""Streaming a container's log, line by line, from the raw response.

    async for line in stream_logs(api, "kube-system", pod, "nvidia-device-plugin-ctr", tail=50):
        ...  # bytes, without the newline; cluster text: never markup

The generator ends when the container's stream ends (it exited or restarted):
`LogFollower` below follows a pod onto its new instance, as the model sees it.
Cancel it (or aclose() it) to stop; the connection is released either way.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, AsyncIterator, Callable

from .client import Disconnected, HttpError, PayloadError, path
from .config import describe_network_error, status_message
from .tasks import set_within

if TYPE_CHECKING:
    from .client import Client

MAX_LINE_BYTES = 1 << 20  # a longer line is handed out in pieces of this size


class LogError(Exception):
    """The log cannot be read; str() is one line (the server's reason), `status` the server's answer if it gave one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


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
    whole: bool = False,
) -> AsyncIterator[bytes]:
    """The log's lines as they come. A stream cut before its end stops it, as an end would; with `whole`
    (a reader that judges by the whole log) that is a LogError too."""
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
            raise LogError(message or f"cannot read logs of {namespace}/{pod} ({resp.status})", resp.status)
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
        except (PayloadError, Disconnected) as exc:
            if whole:
                raise LogError(f"the log of {namespace}/{pod} was cut: {describe_network_error(exc)}") from None
            # the stream was cut: what was read is all there is
        except (HttpError, OSError) as exc:  # a timeout mid-stream, say
            raise LogError(f"cannot read logs of {namespace}/{pod}: {describe_network_error(exc)}") from None
        if pending:
            yield bytes(pending)


# -- following a container's log across restarts and replaced pods ---------------------------------
FOLLOW_RETRY = 5.0  # seconds before a failed stream is tried again (unless the pod changes first)
FOLLOW_RETRY_MAX = 60.0


@dataclass(frozen=True)
class LogSource:
    """The container whose log to follow now, as the model sees it."""

    namespace: str
    pod: str
    container: str | None
    uid: str = ""
    restarts: int = 0
    crash_looping: bool = False  # its previous instance's last lines first: why it crashed


class LogNote(str):
    """A line of gputui's own among the log's (a restart, a failed stream), not the container's.
    It holds cluster text (a pod's name, the server's reason): made safe where it is shown."""


class LogFollower:
    """A container's log followed onto its next instance (a restart) and its next pod (a replacement).

        follower = LogFollower(api, lambda: source_from(model), absent="no device-plugin pod on this node")
        async for line in follower.lines():   # bytes from the container, LogNote from gputui
            ...
        follower.changed()                     # the model changed: the source may be another now

    The follower never polls the API for a change: it reads `source()` again when woken by changed(),
    or FOLLOW_RETRY seconds after a stream failed. One error policy: a stream that cannot be read
    (a 403, a lost connection) is a note, tried again after FOLLOW_RETRY seconds, doubling up to
    FOLLOW_RETRY_MAX, or at once when the source changes; the same error twice in a row is said once.
    """

    def __init__(
        self, api: Client, source: Callable[[], LogSource | None], *, tail: int | None = 50, absent: str | None = None,
        retry: float = FOLLOW_RETRY,
    ) -> None:
        self.api = api
        self.source = source
        self.tail = tail
        self.absent = absent  # said when there is no container to follow (None: nothing said)
        self.retry = retry
        self._changed = asyncio.Event()

    def changed(self) -> None:
        """The model changed: look at the source again (cheap when nothing changed)."""
        self._changed.set()

    async def _wait_change(self, timeout: float | None) -> None:
        """Until changed() is called (since the source was last read) or timeout seconds pass."""
        await set_within(self._changed, timeout)

    async def lines(self) -> AsyncIterator[bytes | LogNote]:
        streamed: LogSource | None = None  # the instance streamed last, or being streamed
        said_absent = False
        failed: str | None = None  # the last failure's words, while the same instance keeps failing
        pause = self.retry
        while True:
            self._changed.clear()  # a change from here on wakes the wait below
            source = self.source()
            if source is None:
                if self.absent and not said_absent:
                    yield LogNote(self.absent)
                said_absent, streamed, failed = True, None, None
                await self._wait_change(None)
                continue
            said_absent = False
            if streamed is not None and _instance(source) == _instance(streamed) and failed is None:
                await self._wait_change(None)  # its stream ended (the container exited): wait for the next instance
                continue
            if streamed is not None and _instance(source) != _instance(streamed):
                same_pod = (source.uid, source.namespace, source.pod) == (streamed.uid, streamed.namespace, streamed.pod)
                yield LogNote(f"{'container restarted' if same_pod else 'new pod'}: {source.pod}, restarts {source.restarts}")
                failed, pause = None, self.retry
            elif streamed is None and source.crash_looping and source.restarts:
                yield LogNote(f"previous instance of {source.container or source.pod}")
                try:
                    async for line in stream_logs(self.api, source.namespace, source.pod, source.container, tail=self.tail, previous=True):
                        yield line
                except LogError as error:
                    yield LogNote(f"previous instance: log stream failed: {error}")
                yield LogNote("current instance")
            streamed = source
            try:
                async for line in stream_logs(self.api, source.namespace, source.pod, source.container, tail=self.tail, follow=True):
                    yield line
                failed, pause = None, self.retry
            except LogError as error:
                words = str(error)
                if words != failed:
                    yield LogNote(f"log stream failed: {words}")
                failed = words
                await self._wait_change(pause)
                pause = min(pause * 2, FOLLOW_RETRY_MAX)


def _instance(source: LogSource) -> tuple[str, str, str, int]:
    return source.uid, source.namespace, source.pod, source.restarts
