"""Exact quantities, as apimachinery's resource.Quantity parses, adds, compares and prints them.

The admission plugins quote quantities back to the user (`exceeded quota: q, requested: requests.cpu=1500m`,
`maximum memory usage per Container is 1Gi, but limit is 2Gi`), so they must add up exactly and print in
the canonical form kube-apiserver prints: the largest SI (or, for a binary quantity, 1024-based) suffix that
keeps the number whole, a binary quantity under 1024 or not whole in bytes printed as a decimal one, and
precision beyond a nano rounded up. builders/quantities.py keeps its float reading for the scheduler's sums.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT = "DecimalSI", "BinarySI", "DecimalExponent"
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SUFFIX_OF_EXPONENT = {e: s for s, e in _DECIMAL.items()}
_BINARY_OF_POWER = {p // 10: s for s, p in _BINARY.items()}
_SYNTAX = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([eEinumkKMGTP]*[-+]?[0-9]*)")
QUANTITY_REGEX = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"  # as validation messages quote it
NANO = Fraction(1, 10**9)


class QuantityError(ValueError):
    """Not a quantity: apimachinery's ParseQuantity would refuse it."""


@dataclass(frozen=True)
class Quantity:
    value: Fraction
    format: str = DECIMAL_SI

    def __add__(self, other: "Quantity") -> "Quantity":
        return Quantity(self.value + other.value, self.format)  # the receiver's format, as Quantity.Add keeps it

    def __str__(self) -> str:
        return canonical(self)

    @property
    def sign(self) -> int:
        return (self.value > 0) - (self.value < 0)


ZERO = Quantity(Fraction(0))


def parse(text: object) -> Quantity:
    """A quantity from its text (a JSON number too, as the API server reads one); QuantityError if it is none."""
    if isinstance(text, bool):
        raise QuantityError(f"quantities must match the regular expression '{QUANTITY_REGEX}'")
    if isinstance(text, (int, float)):
        text = repr(text) if isinstance(text, float) else str(text)
    if not isinstance(text, str):
        raise QuantityError(f"quantities must match the regular expression '{QUANTITY_REGEX}'")
    m = _SYNTAX.fullmatch(text.strip())
    if not m:
        raise QuantityError(f"quantities must match the regular expression '{QUANTITY_REGEX}'")
    number, suffix = Fraction(m.group(1)), m.group(2)
    if suffix in _BINARY:
        value, fmt = number * (2 ** _BINARY[suffix]), BINARY_SI
    elif suffix in _DECIMAL:
        value, fmt = number * Fraction(10) ** _DECIMAL[suffix], DECIMAL_SI
    elif suffix[:1] in ("e", "E") and re.fullmatch(r"[-+]?[0-9]+", suffix[1:]):
        value, fmt = number * Fraction(10) ** int(suffix[1:]), DECIMAL_EXPONENT
    else:
        raise QuantityError("unable to parse quantity's suffix")
    return Quantity(_round_up_to_nano(value), fmt)


def _round_up_to_nano(value: Fraction) -> Fraction:
    scaled = value / NANO
    if scaled.denominator == 1:
        return value
    return Fraction(math.ceil(scaled)) * NANO  # away from zero for positives, as inf.Dec rounds up


def canonical(q: Quantity) -> str:
    """Quantity.String(): the canonical text."""
    value, fmt = q.value, q.format
    if fmt == BINARY_SI and (-1024 < value < 1024 or value.denominator != 1):
        fmt = DECIMAL_SI
    if value == 0:
        return "0"
    if fmt == BINARY_SI:
        number, power = int(value), 0
        while number % 1024 == 0 and power < 6:
            number //= 1024
            power += 1
        return f"{number}{_BINARY_OF_POWER[power] if power else ''}"
    # mantissa and exponent (a multiple of 3, at least -9): the largest exponent that keeps the mantissa whole
    exponent = -9
    while exponent < 18 and (value / Fraction(10) ** (exponent + 3)).denominator == 1:
        exponent += 3
    mantissa = value / Fraction(10) ** exponent
    if fmt == DECIMAL_EXPONENT:
        return f"{int(mantissa)}" + (f"e{exponent}" if exponent else "")
    return f"{int(mantissa)}{_SUFFIX_OF_EXPONENT[exponent]}"


def add_lists(a: dict[str, Quantity], b: dict[str, Quantity]) -> dict[str, Quantity]:
    """quota.Add: every key of either; a key in both is summed in a's format."""
    out = dict(a)
    for key, value in b.items():
        out[key] = out[key] + value if key in out else value
    return out


def pretty(items: dict[str, Quantity]) -> str:
    """`a=1,b=2Gi`: the resource quota plugin's prettyPrint (keys sorted)."""
    return ",".join(f"{key}={items[key]}" for key in sorted(items))
