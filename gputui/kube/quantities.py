"""Quantities and timestamps as the API server writes them: parsed (`parse_count`,
`parse_quantity`, `parse_time`) and written back as kubectl prints them (`format_quantity`)."""
from __future__ import annotations

import re
from datetime import datetime, timezone
from fractions import Fraction
from typing import Any, Iterable


def parse_time(value: str | None) -> float | None:
    """RFC 3339 timestamp -> POSIX seconds (None stays None)."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


_SUFFIXES = {
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}


def parse_count(quantity: Any) -> int:
    """A Kubernetes quantity for a countable resource -> int (0 when unreadable).

    Extended resources such as nvidia.com/gpu are whole numbers, normally
    written plainly ("8"); suffixes are accepted for completeness.
    """
    if isinstance(quantity, int):
        return quantity
    if not isinstance(quantity, str) or not quantity:
        return 0
    try:
        return int(quantity)
    except ValueError:
        pass
    for suffix in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E"):
        if quantity.endswith(suffix):
            try:
                return int(float(quantity[: -len(suffix)]) * _SUFFIXES[suffix])
            except ValueError:
                return 0
    if quantity.endswith("m"):  # milli-units: 1000m is one device
        try:
            return int(quantity[:-1]) // 1000
        except ValueError:
            return 0
    try:
        return int(float(quantity))
    except ValueError:
        return 0


class InvalidQuantity(ValueError):
    """A quantity kube-apiserver refuses (a restored dump may hold one); str() in its words:
    `FIELD: Invalid value: "VALUE": why`."""


_QUANTITY_WORDS = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def whole_count(quantity: Any, field: str) -> int:
    """An extended resource's quantity (a device count) -> int. kube-apiserver's rules: a quantity, not
    negative, whole; InvalidQuantity naming `field` otherwise (never a number made up of it)."""
    if quantity.__class__ is str and quantity.isdigit() and quantity.isascii():
        return int(quantity)  # "1", "8": nearly every device count, without the exact arithmetic below
    shown = str(quantity)[:40]
    if isinstance(quantity, bool) or not isinstance(quantity, (int, float, str)):
        raise InvalidQuantity(f'{field}: Invalid value: "{shown}": {_QUANTITY_WORDS}')
    if isinstance(quantity, int):
        value = Fraction(quantity)
    elif isinstance(quantity, float):
        if quantity != quantity or quantity in (float("inf"), float("-inf")):
            raise InvalidQuantity(f'{field}: Invalid value: "{shown}": {_QUANTITY_WORDS}')
        value = Fraction(quantity)
    else:
        parsed = parse_quantity(quantity)
        if parsed is None:
            raise InvalidQuantity(f'{field}: Invalid value: "{shown}": {_QUANTITY_WORDS}')
        value = parsed[0]
    if value < 0:
        raise InvalidQuantity(f'{field}: Invalid value: "{shown}": must be greater than or equal to 0')
    if value.denominator != 1:
        raise InvalidQuantity(f'{field}: Invalid value: "{shown}": must be an integer')
    return int(value)


# Quantities as Kubernetes writes them back (k8s.io/apimachinery resource.Quantity's canonical
# form, which kubectl prints): `2147483648Ki` is `2Ti`, `1.5` is `1500m`, `2000` is `2k`.
_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([a-zA-Z]*|[eE][+-]?[0-9]+)$")
_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_DECIMAL_EXPONENT = {v: k for k, v in _DECIMAL.items() if v}


def parse_quantity(quantity: str) -> tuple[Fraction, str] | None:
    """A quantity string -> (its exact value, its format: "binary", "decimal" or "exponent");
    None when it is not a quantity. Precision finer than 1n rounds up, as Kubernetes does."""
    match = _QUANTITY.match(quantity.strip()) if isinstance(quantity, str) else None
    if match is None:
        return None
    number, suffix = match.groups()
    value = Fraction(number)
    if suffix in _BINARY[1:]:
        value, kind = value * 1024 ** _BINARY.index(suffix), "binary"
    elif suffix in _DECIMAL_EXPONENT:
        value, kind = value * Fraction(10) ** _DECIMAL_EXPONENT[suffix], "decimal"
    elif suffix == "":
        kind = "decimal"
    elif suffix[0] in "eE":
        value, kind = value * Fraction(10) ** int(suffix[1:]), "exponent"
    else:
        return None
    nanos = value * 10**9
    if nanos.denominator != 1:  # round up (away from zero), to whole nano units
        whole = -((-abs(nanos)) // 1)
        value = Fraction(whole if nanos > 0 else -whole, 10**9)
    return value, kind


def format_quantity(quantity: str | None) -> str:
    """A quantity in Kubernetes' canonical form (what kubectl prints); one that does not parse is shown as given."""
    if not quantity:
        return ""
    parsed = parse_quantity(quantity)
    if parsed is None:
        return quantity
    value, kind = parsed
    if value == 0:
        return "0"
    if kind == "binary" and (-1024 < value < 1024 or value.denominator != 1):
        kind = "decimal"  # small or fractional binary quantities are written in decimal, to lose nothing
    if kind == "binary":
        mantissa, power = value.numerator, 0
        while mantissa % 1024 == 0 and power < len(_BINARY) - 1:
            mantissa //= 1024
            power += 1
        return f"{mantissa}{_BINARY[power]}"
    # Decimal: the smallest whole mantissa with an exponent that is a multiple of 3 (nano at the least).
    mantissa, exponent = (value * 10**9).numerator, -9  # whole after parse_quantity's rounding
    while mantissa % 1000 == 0 and mantissa != 0:
        mantissa //= 1000
        exponent += 3
    if kind == "exponent":
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    if exponent in _DECIMAL:
        return f"{mantissa}{_DECIMAL[exponent]}"
    return f"{mantissa}e{exponent}"


_TIME_KEYS = ("time", "startedAt", "finishedAt", "renewTime", "acquireTime")


def newest_time(objects: Iterable[Any]) -> float | None:
    """The newest time written anywhere in raw objects (creation, managedFields, conditions' heartbeats and
    transitions, events, containers' starts, leases): a dump was taken at or after it. None when none is."""
    newest: float | None = None
    stack: list[Any] = list(objects)
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if isinstance(value, str) and (key.endswith(("Time", "Timestamp")) or key in _TIME_KEYS):
                    when = parse_time(value)
                    if when is not None and (newest is None or when > newest):
                        newest = when
                elif isinstance(value, (dict, list)):
                    stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
    return newest


TAKEN_GLOSS = " (its newest object time)"  # how dump_taken knows; a narrow header leaves it out


def dump_taken(objects: Iterable[Any]) -> str:
    """When a dump was taken, from its own objects: `taken ≈ 2026-12-02 14:03 UTC (its newest object time)`; a file's
    time is not used (a copy changes it)."""
    newest = newest_time(objects)
    if newest is None:
        return "taken: unknown (no time in its objects)"
    return f"taken ≈ {datetime.fromtimestamp(newest, timezone.utc):%Y-%m-%d %H:%M} UTC{TAKEN_GLOSS}"
