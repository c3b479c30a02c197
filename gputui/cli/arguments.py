"""Argument types shared by the commands' parsers."""
from __future__ import annotations

import argparse
from typing import Callable


def whole_number(minimum: int, maximum: int | None = None, what: str = "") -> Callable[[str], int]:
    """An argparse type: a whole number from minimum (to maximum); `what` names it in the error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}: {text}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"not {what or f'at most {maximum}'}: {text}")
        return value

    return parse
