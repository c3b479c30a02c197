"""The layers as contracts (ARCHITECTURE.md): who may import whom, and no import cycles.

Imports are read from the source with `ast`, at any depth (inside functions too, since a
lazy import still runs), except those under `if TYPE_CHECKING:`, which never run.
A second check imports the headless commands in a fresh interpreter and looks at sys.modules.
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gputui"


@dataclass(frozen=True)
class Import:
    importer: str  # module name, e.g. gputui.kube.model
    imported: str  # module name as written or resolved, e.g. textual.app or gputui.kube.gpu
    line: int

    def __str__(self) -> str:
        return f"{self.importer} imports {self.imported} (line {self.line})"


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(tree: ast.AST):
    """Every node of the tree except what sits under `if TYPE_CHECKING:` (its else branch runs)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def imports_of(path: Path, known: set[str], root: Path = ROOT) -> list[Import]:
    """The modules a file imports at run time. `from pkg import name` names the submodule
    pkg.name when there is one (known: every module of the project), else pkg."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [Import(name, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "__future__":
                continue
            subs = [f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in known]
            found += [Import(name, sub, node.lineno) for sub in subs]
            if len(subs) < len(node.names):
                found.append(Import(name, target, node.lineno))
    return found


def project_imports(package: Path = PACKAGE, root: Path = ROOT) -> list[Import]:
    files = sorted(package.rglob("*.py"))
    known = {module_name(f, root) for f in files}
    return [imp for f in files for imp in imports_of(f, known, root)]


def within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def violations(imports: list[Import], importers: str, forbidden: tuple[str, ...], allowed_importers: tuple[str, ...] = ()) -> list[str]:
    return [
        str(imp)
        for imp in imports
        if within(imp.importer, importers)
        and not any(within(imp.importer, a) for a in allowed_importers)
        and any(within(imp.imported, f) for f in forbidden)
    ]


def cycles(imports: list[Import]) -> list[list[str]]:
    """Strongly connected components of more than one module (or a module importing itself)."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        if within(imp.imported, "gputui"):
            graph.setdefault(imp.importer, set()).add(imp.imported)
            graph.setdefault(imp.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


UI_TOOLKITS = ("textual", "rich")
HEADLESS = ("gputui.report", "gputui.cli.report", "gputui.cli.verify", "gputui.cli.serve", "gputui.web")


@pytest.fixture(scope="module")
def imports() -> list[Import]:
    return project_imports()


def test_the_model_knows_no_ui_and_no_simulator(imports):
    assert violations(imports, "gputui.kube", (*UI_TOOLKITS, "gputui.ui", "gputui.sim", "gputui.cli", "gputui.report")) == []


def test_the_simulator_is_an_independent_oracle(imports):
    others = ("gputui.kube", "gputui.ui", "gputui.cli", "gputui.report", "gputui.config", "gputui.sanitize")
    assert violations(imports, "gputui.sim", others) == []


def test_the_ui_reaches_the_simulator_only_through_the_demo_launcher(imports):
    assert violations(imports, "gputui.ui", ("gputui.sim",), allowed_importers=("gputui.ui.demo",)) == []


def test_the_headless_commands_import_no_textual(imports):
    for command in HEADLESS:
        assert violations(imports, command, (*UI_TOOLKITS, "gputui.ui")) == [], command


def test_the_simulator_loads_only_where_a_command_serves_one(imports):
    """The report's contract never imports the simulator; a command (cli/) only inside the function that
    serves a dump (--from) or the demo, so that a plain `gputui report` loads none (run below)."""
    assert violations(imports, "gputui.report", ("gputui.sim",)) == []
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        top = [node for node in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(node, (ast.Import, ast.ImportFrom))]
        names = [alias.name for node in top if isinstance(node, ast.Import) for alias in node.names]
        names += [node.module or "" for node in top if isinstance(node, ast.ImportFrom) and not node.level]
        assert not [name for name in names if within(name, "gputui.sim")], path


def test_screens_never_ask_prometheus(imports):
    """Widgets render the model and never fetch: no module under gputui/ui imports Prometheus' client (the module
    kube/prometheus.py, or its class by name wherever re-exported) but the launcher, which builds the fleet's source."""
    assert violations(imports, "gputui.ui", ("gputui.kube.prometheus",), allowed_importers=("gputui.ui.launch",)) == []
    named = [f"{path.name}:{node.lineno}" for path in sorted((PACKAGE / "ui").rglob("*.py")) if path.name != "launch.py"
             for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.ImportFrom) and any(alias.name == "Prometheus" for alias in node.names)]
    assert named == []


def test_no_import_cycles(imports):
    assert cycles(imports) == []


def test_the_checks_see_a_violation(tmp_path):
    """The checks can fail: a model module importing Textual, and two modules importing each other."""
    package = tmp_path / "gputui"
    (package / "kube").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "kube" / "__init__.py").write_text("")
    (package / "kube" / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import rich\n\ndef f():\n    from . import b\n")
    (package / "kube" / "b.py").write_text("from gputui.kube import a\nimport textual.app\n")
    found = project_imports(package, tmp_path)
    assert violations(found, "gputui.kube", UI_TOOLKITS) == ["gputui.kube.b imports textual.app (line 2)"]
    assert cycles(found) == [["gputui.kube.a", "gputui.kube.b"]]


def _loaded_after(code: str) -> list[str]:
    probe = (
        f"import sys\n{code}\n"
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich') or m.startswith(('gputui.ui', 'gputui.sim')))))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=90, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


@pytest.fixture(scope="module")
def demo_kubeconfig():
    """The demo cluster, served from a thread of its own (the subprocesses below talk to it)."""
    from gputui.ui.demo import BackgroundCluster

    cluster = BackgroundCluster(scenario="demo")
    cluster.begin()
    try:
        yield str(cluster.wait_ready())
    finally:
        cluster.stop()


def test_a_headless_run_loads_no_textual(demo_kubeconfig):
    """`gputui report` and `gputui verify` run to the end through the real entry point, on the demo cluster."""
    for argv, status in ((["report", "-o", "json"], 1), (["verify", "--yes", "h100-1"], 0)):
        code = (
            "import contextlib, io\nfrom gputui.cli.main import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()):\n    status = main({[*argv, '--kubeconfig', demo_kubeconfig]!r})\n"
            f"assert status == {status}, status"
        )
        assert _loaded_after(code) == [], argv


def test_the_web_server_knows_nothing_of_the_app(imports):
    """`gputui serve`'s server runs the app as a child process; it imports neither the UI, the model nor the simulator."""
    assert violations(imports, "gputui.web", ("gputui.ui", "gputui.kube", "gputui.sim", "gputui.report", "gputui.cli")) == []


def test_the_web_server_runs_no_textual():
    """`gputui serve`'s process loads no Textual (textual-serve's server brings Rich): the app runs in its children."""
    code = "from gputui.cli.main import build_parser\nbuild_parser()\nimport gputui.web.server"
    assert [m for m in _loaded_after(code) if not m.split(".")[0] == "rich"] == []


def test_version_loads_nothing_of_the_model():
    probe = "import sys\nfrom gputui.cli.main import main\nmain(['--version'])\nprint(sorted(m for m in sys.modules if m.startswith('gputui.kube')))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.stdout.splitlines() == ["gputui 0.1.0", "[]"], result


def test_the_product_speaks_http_through_its_client(imports):
    """aiohttp serves the simulator and `gputui serve`, and is the model's transport behind kube/client.py (with
    aiohttp-socks and yarl); everything else in the model talks HTTP through that client."""
    transport = ("aiohttp", "aiohttp_socks", "yarl", "python_socks")
    assert violations(imports, "gputui", transport, allowed_importers=("gputui.sim", "gputui.web", "gputui.kube.client")) == []


def test_a_report_loads_neither_the_app_nor_verification_nor_socks(demo_kubeconfig):
    """aiohttp it loads (the transport); aiohttp-socks only for a socks5 proxy."""
    code = (
        "import contextlib, io, sys\nfrom gputui.cli.main import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    main(['report', '-o', 'json', '--kubeconfig', {demo_kubeconfig!r}])\n"
        "print(sorted(m for m in sys.modules if m in ('aiohttp_socks', 'gputui.cli.app') or m.startswith('gputui.kube.verify')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=90, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[]"


# -- the seam between the model and the screens (gputui/ui/seam.py) ---------------------------------------------

def _reads_of_the_apps_model(tree: ast.AST) -> list[int]:
    """Lines that reach the app's model or its state around the seam: `self.app.model`, `app.model` off a
    screen, and `getattr(x, "name")` with a literal name on self, the app or the screen (a protocol by string)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "model":
            owner = node.value
            if (isinstance(owner, ast.Attribute) and owner.attr == "app") or (isinstance(owner, ast.Name) and owner.id == "app"):
                lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) >= 2:
            target, name = node.args[0], node.args[1]
            on_the_app = (isinstance(target, ast.Name) and target.id in ("self", "app", "screen")) or (
                isinstance(target, ast.Attribute) and target.attr in ("app", "screen"))
            if on_the_app and isinstance(name, ast.Constant) and isinstance(name.value, str):
                lines.append(node.lineno)
    return lines


def test_no_ui_module_reaches_the_model_but_through_the_seam():
    """Screens are given the model in `show(model, context)`; none reads `app.model`, and no part of the app
    finds another's methods or fields by a name in a string (`getattr(screen, "refresh_from_model")`)."""
    found = [f"{path.relative_to(ROOT)}:{line}" for path in sorted((PACKAGE / "ui").rglob("*.py"))
             for line in _reads_of_the_apps_model(ast.parse(path.read_text(encoding="utf-8")))]
    assert found == []


def test_the_seam_check_sees_a_read_of_the_apps_model():
    code = 'class S:\n    def f(self):\n        return self.app.model\n    def g(self):\n        return getattr(self.screen, "refresh_from_model", None)\n'
    assert _reads_of_the_apps_model(ast.parse(code)) == [3, 5]


def _mentions_the_model(cls: type) -> bool:
    import inspect

    tree = ast.parse(inspect.getsource(cls).lstrip())
    return any((isinstance(node, ast.Name) and node.id in ("model", "ClusterModel"))
               or (isinstance(node, ast.Attribute) and node.attr == "model")
               or (isinstance(node, ast.arg) and node.arg == "model") for node in ast.walk(tree))


def _screens_of_the_ui() -> list[type]:
    import importlib

    from textual.screen import Screen

    for module in ("gputui.ui.app", "gputui.ui.fleet", "gputui.ui.views"):  # every screen module
        importlib.import_module(module)
    found, stack = [], [Screen]
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            if sub.__module__.startswith("gputui.ui.") and sub not in found:
                found.append(sub)
    return sorted(found, key=lambda cls: (cls.__module__, cls.__qualname__))


def test_every_screen_that_shows_the_model_implements_the_seam():
    """A screen that reads the model is a ModelView, listed in ui/views.py's MODEL_VIEWS, where the type checker
    checks its show() against the protocol; the refresh calls it through that protocol."""
    from gputui.ui.seam import ModelView
    from gputui.ui.views import MODEL_VIEWS

    screens = _screens_of_the_ui()
    assert len(screens) >= 15  # every screen found: the main one, the pages, the popups, verification's
    reading = [cls for cls in screens if _mentions_the_model(cls)]
    listed = [cls for cls in reading if any(issubclass(cls, view) or issubclass(view, cls) for view in MODEL_VIEWS)]  # ModelPage: a base
    assert [cls.__qualname__ for cls in reading if cls not in listed] == []
    assert [cls.__qualname__ for cls in MODEL_VIEWS if not issubclass(cls, ModelView)] == []  # the runtime check the refresh makes


def test_the_screen_check_sees_a_screen_that_reads_the_model():
    class Sneaky:
        def body(self):
            model = self.app.model  # type: ignore[attr-defined]
            return model

    assert _mentions_the_model(Sneaky)


def _calls_of_wait_for(tree: ast.AST) -> list[int]:
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "wait_for" and isinstance(node.func.value, ast.Name) and node.func.value.id == "asyncio"]


def test_no_wait_for_that_loses_a_stop():
    """Python 3.11's asyncio.wait_for loses a cancellation that meets what it waits for in the same turn,
    and a loop that waits with it never ends on stop (kube/tasks.py says more): asyncio.timeout instead."""
    found = [f"{path.relative_to(ROOT)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
             for line in _calls_of_wait_for(ast.parse(path.read_text(encoding="utf-8")))]
    assert found == []
    assert _calls_of_wait_for(ast.parse("import asyncio\nasync def f(e):\n    await asyncio.wait_for(e.wait(), 1)\n")) == [3]


def _mixed_into(cls: type) -> list[str]:
    """The classes an app is made of besides itself and Textual's App (and what App is made of)."""
    from textual.app import App

    return [base.__qualname__ for base in cls.__mro__[1:] if base not in App.__mro__]


def test_the_app_is_made_of_parts_it_holds_not_of_mix_ins():
    """Issue 21: the App owns the connection, the model, key routing and the view context; the rest (the
    coalesced refresh, verification, the idle figures, the bad GPUs' notes, the stack's screens, the terminal
    watch, the way around a fleet, the filter, a row's details, the selected node, the main screen's layout) are
    parts it holds, each given the app through a typed host protocol, none mixed into its class."""
    from gputui.ui.app import GpuTuiApp

    assert _mixed_into(GpuTuiApp) == []


def _parts_built_with_the_app(source: str) -> dict[str, str]:
    """`self.NAME = Class(self, ...)` in GpuTuiApp.__init__: the parts given the app itself as their host."""
    tree = ast.parse(source)
    app = next(node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.name == "GpuTuiApp")
    init = next(node for node in app.body if isinstance(node, ast.FunctionDef) and node.name == "__init__")
    found = {}
    for node in ast.walk(init):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            if (len(targets) == 1 and isinstance(target := targets[0], ast.Attribute) and isinstance(target.value, ast.Name)
                    and target.value.id == "self" and isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                    and value.args and isinstance(value.args[0], ast.Name) and value.args[0].id == "self"):
                found[target.attr] = value.func.id
    return found


def _parts_in_the_architecture(text: str) -> dict[str, tuple[str, str, str]]:
    """ARCHITECTURE.md's table of the app's parts: attribute -> (class, module path, host protocol)."""
    row = re.compile(r"^\| `(\w+)` \| `(\w+)`, `(ui/[\w/]+\.py)` \| .+ \| `(\w+)` \|$")
    return {m[1]: (m[2], m[3], m[4]) for line in text.splitlines() if (m := row.match(line))}


def test_every_part_of_the_app_is_listed_with_its_host():
    """Each part the app builds with itself as host is a row of ARCHITECTURE.md's table (its class, module and
    host protocol, as they are), and takes `host` typed as that Protocol, defined next to it."""
    import importlib
    import inspect

    built = _parts_built_with_the_app((PACKAGE / "ui" / "app.py").read_text(encoding="utf-8"))
    listed = _parts_in_the_architecture((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    assert len(built) >= 11
    assert built == {attr: cls for attr, (cls, _, _) in listed.items()}
    for cls_name, path, host_name in listed.values():
        module = importlib.import_module("gputui." + path.removesuffix(".py").replace("/", "."))
        cls, host = getattr(module, cls_name), getattr(module, host_name)
        assert getattr(host, "_is_protocol", False), f"{host_name} is no Protocol"
        assert inspect.signature(cls.__init__).parameters["host"].annotation == host_name, cls_name


def test_the_parts_check_sees_a_part_built_with_the_app():
    source = ("class GpuTuiApp:\n    def __init__(self):\n        self.bar = Bar(self, 1)\n        self.baz: Baz = Baz(self)\n"
              "        self.other = Other(self.bar)\n")
    assert _parts_built_with_the_app(source) == {"bar": "Bar", "baz": "Baz"}
    table = "| `bar` | `Bar`, `ui/bar.py` | what it owns | `BarHost` |\n| `x` | not a part | | |\n"
    assert _parts_in_the_architecture(table) == {"bar": ("Bar", "ui/bar.py", "BarHost")}


def test_the_mix_in_check_sees_a_mix_in():
    from textual.app import App

    class Actions:
        def action_x(self) -> None: ...

    class Mixed(Actions, App[None]):
        pass

    assert _mixed_into(Mixed) == ["test_the_mix_in_check_sees_a_mix_in.<locals>.Actions"]
