"""gputui's UI uses Textual's public API only: no private attribute read or written, no private method
overridden, except the one hook Textual offers no public form of (an unhandled exception's end)."""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import textual
from textual.app import App
from textual.command import Provider
from textual.screen import ModalScreen, Screen
from textual.widget import Widget
from textual.widgets import DataTable, Input, Log, Static

import gputui.ui

UI = Path(gputui.ui.__file__).parent
ALLOWED = {"_fatal_error", "_exception", "_close_messages_no_wait"}  # GpuTuiApp._fatal_error: one line, not a traceback with locals


def textual_private_names() -> set[str]:
    names = set()
    for cls in (App, Screen, ModalScreen, Widget, DataTable, Log, Static, Input, Provider):
        names |= {n for n in dir(cls) if n.startswith("_") and not n.startswith("__")}
    names |= {n for n in vars(App()) if n.startswith("_") and not n.startswith("__")}
    return names


def ui_classes() -> list[type]:
    found = []
    for info in pkgutil.walk_packages([str(UI)], "gputui.ui."):
        module = importlib.import_module(info.name)
        found += [c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == module.__name__]
    return found


def set_by_textual() -> set[str]:
    """What Textual itself puts in every subclass (its handlers, CSS names, bindings)."""
    names = set()
    for base in (App, Screen, ModalScreen, Widget, DataTable, Log, Static, Input, Provider):
        names |= set(vars(type("Probe", (base,), {"__module__": "probe"})))
    return names


def test_no_private_textual_method_is_overridden():
    overridden = []
    automatic = set_by_textual()
    for cls in ui_classes():
        textual_bases = [base for base in cls.__mro__[1:] if base.__module__.startswith("textual.")]
        for name in vars(cls):
            if name.startswith("_") and not name.startswith("__") and name not in ALLOWED | automatic:
                if any(name in vars(base) for base in textual_bases):
                    overridden.append(f"{cls.__qualname__}.{name}")
    assert overridden == []


def test_no_private_textual_attribute_is_used():
    private = textual_private_names()
    sources = {path: path.read_text() for path in UI.rglob("*.py")}
    ours = set()  # names gputui defines itself (its own methods and fields), whatever Textual calls its own
    for text in sources.values():
        ours |= set(re.findall(r"def (_[a-z]\w*)", text)) | set(re.findall(r"self\.(_[a-z]\w*)\s*(?::[^=\n]*)?=", text))
    used = []
    for path, text in sources.items():
        for number, line in enumerate(text.splitlines(), 1):
            for name in re.findall(r"(?<!\bos)\.(_[a-z]\w*)", line):  # os._exit is not Textual's
                if name in private and name not in ours and name not in ALLOWED:
                    used.append(f"{path.relative_to(UI)}:{number}: {name}")
    assert used == [], f"Textual {textual.__version__}'s private attributes used"
