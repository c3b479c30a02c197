"""Container logs of the simulated kubelets, read by the pods/log endpoint.

Lines are kept per container instance: `previous` reads the instance before
the current one, as `kubectl logs --previous` does. A follower waits for new
lines until the instance ends (the container exited or restarted, or the pod
was deleted).
"""
from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import AsyncIterator

MAX_LINES = 5_000  # per container instance


@dataclass
class _Instance:
    lines: deque[bytes] = field(default_factory=lambda: deque(maxlen=MAX_LINES))
    ended: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    total: int = 0  # lines ever appended, so followers survive the deque rolling over


class LogBook:
    def __init__(self) -> None:
        # (namespace, pod, container) -> instances, oldest first
        self._logs: dict[tuple[str, str, str], list[_Instance]] = {}

    def _current(self, ns: str, pod: str, container: str) -> _Instance:
        instances = self._logs.setdefault((ns, pod, container), [])
        if not instances or instances[-1].ended:
            instances.append(_Instance())
            del instances[:-2]  # the current and the previous are all anyone can read
        return instances[-1]

    def append(self, ns: str, pod: str, container: str, text: str | bytes, *, timestamp: bool = False) -> None:
        """Append one or more lines to the container's current instance."""
        inst = self._current(ns, pod, container)
        data = text.encode() if isinstance(text, str) else text
        for line in data.splitlines():
            if timestamp:
                stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ").encode()
                line = stamp + b" " + line
            inst.lines.append(line + b"\n")
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

    def read(self, ns: str, pod: str, container: str, *, previous: bool = False, tail: int | None = None) -> list[bytes] | None:
        """The instance's lines (each ending in a newline); None when there is no such instance."""
        inst = self._instance(ns, pod, container, previous)
        if inst is None:
            return None
        lines = list(inst.lines)
        if tail is not None:
            lines = lines[-tail:] if tail > 0 else []
        return lines

    async def follow(self, ns: str, pod: str, container: str, *, tail: int | None = None) -> AsyncIterator[bytes]:
        """Yield the last `tail` lines, then new ones, until the instance ends or the pod is forgotten."""
        # A running container that has not logged yet still has a current instance to wait on.
        inst = self._current_or_none(ns, pod, container) or self._current(ns, pod, container)
        lines = list(inst.lines)
        if tail is not None:
            lines = lines[-tail:] if tail > 0 else []
        for line in lines:
            yield line
        seen = inst.total
        while True:
            if inst.total > seen:
                fresh = min(inst.total - seen, len(inst.lines))
                for line in list(inst.lines)[-fresh:]:
                    yield line
                seen = inst.total
                continue
            if inst.ended:
                return
            await inst.changed.wait()

    def _current_or_none(self, ns: str, pod: str, container: str) -> _Instance | None:
        instances = self._logs.get((ns, pod, container), [])
        return instances[-1] if instances else None
