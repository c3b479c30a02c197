"""Pod names cut to their column so that two pods never read the same.

A name too long for its column gives way in the middle (`llm-pr…rker-0`): its ends tell most
pods apart. Where two names still read alike once cut (`llm-pretrain-big-worker-0` and
`llm-pretrain-worker-0` in `ml-training`: `ml-tr…/llm-pr…rker-0` both), each keeps the part
where it differs from the other (`ml-tr…/…big-worker-0`, `ml-tr…/ll…pretrai…-0`); so does a
namespace (`ml-training` and `ml-training-eu`). DistinctNames finds those names as pods come
and go: each name is cut once (for one column width: a new width, a new DistinctNames), and
only the names that read alike are looked at again.
"""
from __future__ import annotations

from typing import Iterable

from gputui.sanitize import clean

Key = tuple[str, str]  # (namespace, name): a pod's key, and its name


def safe_parts(namespace: str, name: str) -> tuple[str, str]:
    """The namespace and name made safe to show, at most as long as Kubernetes allows."""
    return clean(namespace, 63), clean(name, 253)


Differ = tuple[int | None, int | None]  # where a namespace, and a name, differ from those of pods that read alike


def cut_name(namespace: str, name: str, width: int, differ: Differ | None = None, keep: int = 0) -> tuple[str, str]:
    """`namespace/name` in `width` cells, as (the namespace shown, `/` and the name shown). differ:
    the indexes of the namespace and of the name that the cut must keep (where they differ from
    another pod's that the usual cut makes read the same, or where a filter matched); keep: how
    many characters from there must show (a filter's match)."""
    if len(namespace) + 1 + len(name) <= width:
        return namespace, "/" + name
    namespace_at, name_at = differ or (None, None)
    if namespace_at is not None and width >= 16:
        namespace = _keeping(namespace, min(len(namespace), max(3, width // 2)), namespace_at, keep)
    elif width - len(namespace) - 1 < 9:  # a long namespace gives way too
        namespace = namespace[: max(1, width // 3 - 1)] + "…"
    space = width - len(namespace) - 1
    return namespace, "/" + (_middle(name, space) if name_at is None else _keeping(name, space, name_at, keep))


def showing(namespace: str, name: str, width: int, needle: str, differ: Differ | None = None) -> tuple[Differ | None, int]:
    """(differ, keep) for cut_name such that a filter's `needle` (casefolded) stays in sight where
    `namespace/name` (safe parts) holds it: `/serving` at 80 columns reads `infe…/ll…serving…kc`,
    not `infe…/lla…kc`. differ as it was when the usual cut shows the match already."""
    at = f"{namespace}/{name}".casefold().find(needle)
    if not needle or at < 0 or needle in "".join(cut_name(namespace, name, width, differ)).casefold():
        return differ, 0
    namespace_at, name_at = differ or (None, None)
    if at + len(needle) <= len(namespace):
        return (at, name_at), len(needle)
    start = max(0, at - len(namespace) - 1)  # a match across the `/` keeps its part in the name
    return (namespace_at, start), at + len(needle) - len(namespace) - 1 - start


def _middle(text: str, space: int) -> str:
    """`text` in `space` cells, its middle giving way."""
    if len(text) <= space:
        return text
    if space < 1:
        return ""
    head = (space - 1) // 2
    return text[:head] + "…" + text[len(text) - (space - 1 - head):]


def _keeping(text: str, space: int, at: int, length: int = 0) -> str:
    """`text` in `space` cells, keeping from index `at` on (`…big-worker-0`), or around it between both
    ends; `length` characters from `at` when they fit."""
    if len(text) <= space:
        return text
    if space < 6:
        return _middle(text, space)
    at = max(0, min(at, len(text) - 1))
    if len(text) - at <= space - 1:
        return text[: space - 1 - (len(text) - at)] + "…" + text[at:]
    edge = max(1, (space - 2) // 4)
    if length:
        edge = max(0, min(edge, (space - 2 - length) // 2))  # the ends give way to the match first
        if at + length <= space - 1 - edge:  # within the head
            return text[: space - 1 - edge] + "…" + text[len(text) - edge:]
    return text[:edge] + "…" + text[at: at + space - 2 - 2 * edge] + "…" + text[len(text) - edge:]


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class DistinctNames:
    """Per pod, where its namespace and name must be kept when cut (`differ_at`, for cut_name) for no
    two rows to read alike."""

    def __init__(self, width: int = 0) -> None:
        self.width = width
        self.differ_at: dict[Key, Differ] = {}
        self._shown: dict[Key, str] = {}  # each pod's name as cut_name shows it with no hint
        self._alike: dict[str, set[Key]] = {}  # that text -> the pods showing it

    def update(self, added: Iterable[Key], removed: Iterable[Key]) -> set[Key]:
        """Pods come and go; the keys whose cut changed (among those still here)."""
        touched: set[str] = set()
        for key in removed:
            shown = self._shown.pop(key, None)
            if shown is not None:
                self._alike[shown].discard(key)
                touched.add(shown)
                self.differ_at.pop(key, None)
        for key in added:
            if key not in self._shown:
                shown = "".join(cut_name(*safe_parts(*key), self.width))
                self._shown[key] = shown
                self._alike.setdefault(shown, set()).add(key)
                touched.add(shown)
        changed: set[Key] = set()
        for shown in touched:
            alike = self._alike.get(shown)
            if not alike:
                self._alike.pop(shown, None)
                continue
            parts = {key: safe_parts(*key) for key in alike}
            for key, (namespace, name) in parts.items():
                others = [parts[other] for other in alike if other != key]
                differ = (max((_common_prefix(namespace, n) for n, _ in others if n != namespace), default=None),
                          max((_common_prefix(name, m) for _, m in others if m != name), default=None))
                differ_or_none = None if differ == (None, None) else differ
                if self.differ_at.get(key) != differ_or_none:
                    changed.add(key)
                    if differ_or_none is None:
                        del self.differ_at[key]
                    else:
                        self.differ_at[key] = differ_or_none
        return changed
