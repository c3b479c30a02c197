"""Make cluster text safe to show: no escape sequences, no control characters, bounded length.

Everything that comes from the cluster (log lines, names, labels, event
messages) goes through here before it reaches a widget. The result is plain
text: widgets put it in `rich.text.Text` objects or `Log` lines, never in
markup, so square brackets stay square brackets.
"""
from __future__ import annotations

import re

MAX_LOG_LINE = 4096  # characters kept of one log line; the rest is summarised
MAX_FIELD = 512  # characters kept of a name, label or message

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ESC \), other two-byte escapes.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]")
# C0 and C1 controls (tab kept for logs, turned into spaces) and every Unicode bidirectional
# control (marks, embeddings, overrides, isolates) that can make a line read differently from what it says.
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{BIDI_CONTROLS}]")


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if code < 0x20:
        return "^" + chr(code + 0x40)  # caret notation, as `cat -v` shows it
    return "\ufffd"


def clean(text: str, limit: int = MAX_FIELD) -> str:
    """One line of plain, printable text of at most `limit` characters."""
    if len(text) > limit * 2:
        text = text[: limit * 2]  # bound the regex work before it runs
    text = _ANSI.sub("", text)
    text = text.replace("\t", " ").replace("\r", "").replace("\n", " ")
    text = _CONTROL.sub(_visible, text)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def log_line(raw: bytes | str, limit: int = MAX_LOG_LINE) -> str:
    """A container log line as printable text: invalid UTF-8 replaced, escapes removed, long lines cut."""
    unit = "bytes" if isinstance(raw, bytes) else "characters"
    size = len(raw)
    head = raw[: limit * 4]  # enough for `limit` characters even after escapes are removed
    text = head.decode("utf-8", errors="replace") if isinstance(head, bytes) else head
    text = text.rstrip("\r\n")
    text = _ANSI.sub("", text)
    text = text.expandtabs(4).replace("\r", "").replace("\n", " ")
    text = _CONTROL.sub(_visible, text)
    if len(text) > limit or size > len(head):
        text = f"{text[:limit]} … [line cut: {size:,} {unit}]"
    return text


def printable(text: str | None) -> str:
    """Cluster text for a report, unbounded: every control character (ANSI escapes included) becomes '?'."""
    if not text:
        return ""
    return "".join(ch if ch.isprintable() else "?" for ch in text)
