"""Ages as kubectl prints them: k8s.io/apimachinery's `pkg/util/duration.HumanDuration`.

kubectl's AGE columns are `HumanDuration(time.Since(creationTimestamp))`, and
`<unknown>` for an object without a timestamp (`translateTimestampSince`). The
rules, exactly as in duration.go: seconds under 2 minutes (`45s`, `119s`);
minutes and seconds under 10 minutes (`5m30s`, `7m`); minutes under 3 hours
(`95m`); hours and minutes under 8 hours (`3h5m`); hours under 2 days (`47h`);
days and hours under 8 days (`3d4h`); days under 2 years (`400d`); years and
days under 8 years (`2y10d`); then years. A duration below -1 s is `<invalid>`
and one from -1 s to 0 is `0s` (machines' clocks disagree a little).
"""
from __future__ import annotations

UNKNOWN = "<unknown>"  # kubectl's age of an object without a timestamp
INVALID = "<invalid>"  # a timestamp more than a second in the future


def _join(big: int, big_unit: str, small: int, small_unit: str) -> str:
    return f"{big}{big_unit}{small}{small_unit}" if small else f"{big}{big_unit}"


def human_duration(seconds: float) -> str:
    """kubectl's rendering of a duration given in seconds (Go's int() truncates toward zero)."""
    whole = int(seconds)
    if whole < -1:
        return INVALID
    if whole < 0:
        return "0s"
    if whole < 60 * 2:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        return _join(minutes, "m", whole % 60, "s")
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return _join(hours, "h", minutes % 60, "m")
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return _join(hours // 24, "d", hours % 24, "h")
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        return _join(hours // 24 // 365, "y", (hours // 24) % 365, "d")
    return f"{hours // 24 // 365}y"


def age(since: float | None, now: float) -> str:
    """The age of something that happened at `since` (seconds, same clock as `now`), as kubectl's AGE."""
    if since is None:
        return UNKNOWN
    return human_duration(now - since)
