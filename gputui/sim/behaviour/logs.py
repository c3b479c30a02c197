"""Container logs of the simulated kubelets, read by the pods/log endpoint.

Lines are kept per container instance: `previous` reads the instance before
the current one, as `kubectl logs --previous` does. A follower waits for new
lines until the instance ends (the container exited or restarted, or the pod
was deleted). Each line keeps the time it was written, as the CRI log file
does, for `sinceSeconds`, `sinceTime` and `timestamps`.
"""
from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import AsyncIterator

MAX_LINES = 5_000  # per container instance

Line = tuple[datetime, bytes]  # when it was written, the line with its newline


@dataclass(frozen=True)
class LogOptions:
    """What of an instance's lines a read returns (PodLogOptions as the kubelet applies them): the last `tail`,
    then those written at or after `since`, each after its time when `timestamps`."""

    tail: int | None = None
    since: datetime | None = None
    timestamps: bool = False

    def shown(self, lines: list[Line]) -> list[bytes]:
        if self.tail is not None:
            lines = lines[-self.tail:] if self.tail > 0 else []
        return [self.line(line) for line in lines if self.since is None or line[0] >= self.since]

    def line(self, line: Line) -> bytes:
        """One line as read: after its RFC 3339 time with nine fraction digits (the kubelet's RFC3339NanoFixed)."""
        at, text = line
        if not self.timestamps:
            return text
        return at.strftime("%Y-%m-%dT%H:%M:%S.%f").encode() + b"000Z " + text


class StreamCut(Exception):
    """A follow stream's connection went with the API server (end_streams)."""


@dataclass
class _Instance:
    lines: deque[Line] = field(default_factory=lambda: deque(maxlen=MAX_LINES))
    ended: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    total: int = 0  # lines ever appended, so followers survive the deque rolling over


class LogBook:
    def __init__(self) -> None:
        # (namespace, pod, container) -> instances, oldest first
        self._logs: dict[tuple[str, str, str], list[_Instance]] = {}
        self._streams_cut = 0  # end_streams() so far: a follower from before one returns

    def end_streams(self) -> None:
        """The API server goes away: every follow stream is cut (StreamCut), as its connection would be; the
        logs stay."""
        self._streams_cut += 1
        for instances in self._logs.values():
            for inst in instances:
                inst.changed.set()
                inst.changed = asyncio.Event()

    def _current(self, ns: str, pod: str, container: str) -> _Instance:
        instances = self._logs.setdefault((ns, pod, container), [])
        if not instances or instances[-1].ended:
            instances.append(_Instance())
            del instances[:-2]  # the current and the previous are all anyone can read
        return instances[-1]

    def append(self, ns: str, pod: str, container: str, text: str | bytes, *, at: datetime | None = None) -> None:
        """Append one or more lines to the container's current instance, written now (or at `at`)."""
        inst = self._current(ns, pod, container)
        data = text.encode() if isinstance(text, str) else text
        written = at or datetime.now(timezone.utc)
        for line in data.splitlines():
            inst.lines.append((written, line + b"\n"))
            inst.total += 1
        inst.changed.set()
        inst.changed = asyncio.Event()

    def end(self, ns: str, pod: str, container: str) -> None:
        """The container instance exited: followers stop; the next append starts a new instance."""
        instances = self._logs.get((ns, pod, container))
        if instances and not instances[-1].ended:
            inst = instances[-1]
            inst.ended = True
            inst.changed.set()

    def forget_pod(self, ns: str, pod: str) -> None:
        for key in [k for k in self._logs if k[0] == ns and k[1] == pod]:
            for inst in self._logs.pop(key):
                inst.ended = True
                inst.changed.set()

    def _instance(self, ns: str, pod: str, container: str, previous: bool) -> _Instance | None:
        instances = self._logs.get((ns, pod, container), [])
        if previous:
            return instances[-2] if len(instances) >= 2 else None
        return instances[-1] if instances else None

    def read(self, ns: str, pod: str, container: str, *, previous: bool = False, options: LogOptions = LogOptions()) -> list[bytes] | None:
        """The instance's lines (each ending in a newline) as options show them; None when there is no such instance."""
        inst = self._instance(ns, pod, container, previous)
        if inst is None:
            return None
        return options.shown(list(inst.lines))

    async def follow(self, ns: str, pod: str, container: str, *, options: LogOptions = LogOptions()) -> AsyncIterator[bytes]:
        """Yield the lines options show, then new ones, until the instance ends or the pod is forgotten."""
        # A running container that has not logged yet still has a current instance to wait on.
        inst = self._current_or_none(ns, pod, container) or self._current(ns, pod, container)
        for line in options.shown(list(inst.lines)):
            yield line
        seen, cut = inst.total, self._streams_cut
        while True:
            if self._streams_cut != cut:
                raise StreamCut
            if inst.total > seen:
                fresh = min(inst.total - seen, len(inst.lines))
                for written in list(inst.lines)[-fresh:]:
                    if options.since is None or written[0] >= options.since:
                        yield options.line(written)
                seen = inst.total
                continue
            if inst.ended:
                return
            await inst.changed.wait()

    def _current_or_none(self, ns: str, pod: str, container: str) -> _Instance | None:
        instances = self._logs.get((ns, pod, container), [])
        return instances[-1] if instances else None
