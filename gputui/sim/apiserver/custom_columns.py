"""Server-side printing of a custom resource: its CRD's additionalPrinterColumns, as kube-apiserver prints them.

Each column's jsonPath is read with the simple JSONPath the apiextensions server allows (fields,
`['key']`, `[N]`, `[*]` and `[?(@.field=="value")]` filters); a column takes the first result.
A "string" column prints any value (numbers and maps as kubectl's jsonpath prints them), a "date"
column an age, "integer", "number" and "boolean" only values of their type; anything else is empty
(kubectl shows `<none>`).  Without columns a custom resource prints NAME and AGE.
"""
from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

import orjson

from .resources import ResourceType
from .tables import since

Obj = dict[str, Any]
_FILTER = re.compile(r"""\?\(@((?:\.[\w./-]+)+)\s*==\s*(?:"([^"]*)"|'([^']*)'|(-?\d+(?:\.\d+)?|true|false))\)""")


class PathError(ValueError):
    pass


def _steps(path: str) -> list[tuple[str, Any]]:
    """('field', name) | ('index', n) | ('all', None) | ('filter', (fields, value)) for a jsonPath."""
    steps: list[tuple[str, Any]] = []
    i = 0
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    while i < len(path):
        if path[i] == ".":
            i += 1
            name = []
            while i < len(path) and path[i] not in ".[":
                if path[i] == "\\" and i + 1 < len(path):
                    i += 1
                name.append(path[i])
                i += 1
            if name:
                steps.append(("field", "".join(name)))
        elif path[i] == "[":
            end = path.find("]", i)
            if end < 0:
                raise PathError(f"unclosed [ in {path}")
            inside = path[i + 1:end].strip()
            if inside == "*":
                steps.append(("all", None))
            elif inside.lstrip("-").isdigit():
                steps.append(("index", int(inside)))
            elif inside[:1] in "'\"" and inside[-1:] == inside[:1]:
                steps.append(("field", inside[1:-1]))
            elif (match := _FILTER.fullmatch(inside)) is not None:
                fields = match.group(1).strip(".").split(".")
                literal = match.group(4)
                value: Any = match.group(2) if match.group(2) is not None else match.group(3)
                if literal is not None:
                    value = orjson.loads(literal)
                steps.append(("filter", (fields, value)))
            else:
                raise PathError(f"unsupported [{inside}] in {path}")
            i = end + 1
        else:
            raise PathError(f"unexpected {path[i]!r} in {path}")
    return steps


def find(obj: Any, path: str) -> list[Any]:
    """Every value the jsonPath names in obj (none when a step finds nothing)."""
    nodes = [obj]
    for kind, arg in _steps(path):
        found: list[Any] = []
        for node in nodes:
            if kind == "field" and isinstance(node, dict) and arg in node:
                found.append(node[arg])
            elif kind == "index" and isinstance(node, list) and -len(node) <= arg < len(node):
                found.append(node[arg])
            elif kind == "all":
                found.extend(node if isinstance(node, list) else node.values() if isinstance(node, dict) else ())
            elif kind == "filter" and isinstance(node, list):
                fields, wanted = arg
                for item in node:
                    value: Any = item
                    for name in fields:
                        value = value.get(name) if isinstance(value, dict) else None
                    if value == wanted and value is not None:
                        found.append(item)
        nodes = found
    return nodes


def _cell(typ: str, value: Any, now: datetime) -> Any:
    if value is None:
        return None
    if typ == "string":
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        return orjson.dumps(value).decode() if isinstance(value, (dict, list)) else str(value)
    if typ == "date":
        return since(value, now) if isinstance(value, str) else None
    if typ == "integer" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    if typ == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if typ == "boolean" and isinstance(value, bool):
        return value
    return None


def column_definitions(r: ResourceType) -> list[Obj]:
    head = [{"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0}]
    return head + [{"name": name, "type": typ, "format": "", "description": "", "priority": priority}
                   for name, typ, _, priority in r.printer_columns]


def cells(r: ResourceType, obj: Obj, now: datetime | None = None) -> list[Any]:
    now = now or datetime.now(timezone.utc)
    row: list[Any] = [(obj.get("metadata") or {}).get("name", "")]
    for _, typ, path, _ in r.printer_columns:
        try:
            found = find(obj, path)
        except PathError:
            found = []
        row.append(_cell(typ, found[0], now) if found else None)
    return row
