"""Flowtide's sources stay layered: checked on their syntax trees (`ast`), not by running them.

For each area of ``src/flowtide`` (a subpackage, or the top-level modules):

* **No import cycle.** The modules of ``flowtide`` import one another without a cycle: every
  module-level import counts, those under ``if TYPE_CHECKING:`` too. An import inside a function
  does not (it runs late, once every module is loaded). An import names the deepest module it
  can: ``from flowtide.engine.flows import plan`` is ``flowtide.engine.flows.plan``, ``from
  flowtide.engine import Engine`` is ``flowtide.engine`` (its ``__init__``, which imports its
  modules: one of them importing names from it that way is in a cycle with it).
* **No other module's private names.** No ``from x import _y``; no ``x._y`` on anything but
  ``self`` or ``cls``, unless ``_y`` is a name the module defines itself (a function, class,
  method, module or class attribute, a ``self._y`` it assigns, a slot): a module may reach into
  the objects of its own classes (``other._heap`` in a comparison), never into another module's.
  ``getattr`` and friends with a literal private name count as ``x._y``. Dunder names
  (``__init__``) and an enum's sunder names (``status._value_``) are the language's and the
  enum module's documented API, not private. ``super()._y`` is reported like any other access
  when the parent class is in another module (a hook meant for subclasses should not start with
  an underscore).
* **No asyncio or CPython internals**: the loop's queues, the task-stepping functions, a
  future's blocking flag, frame access, ``object.__new__``, private modules such as
  ``_asyncio``, by attribute, by import or by literal name.
* **Short modules and functions**: at most 800 lines per module, 80 per function (from its
  ``def`` line to its last line).

Each finding names ``file:line`` and what.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

from flowtide.model.graphs import strongly_connected

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "flowtide"
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80

INTERNALS = frozenset(
    {
        # asyncio's event loop, tasks and futures
        "_ready",
        "_scheduled",
        "_run_once",
        "_asyncio_future_blocking",
        "_enter_task",
        "_leave_task",
        "_register_task",
        "_unregister_task",
        "_swap_current_task",
        "_current_tasks",
        "_all_tasks",
        "_fut_waiter",
        "_get_running_loop",
        "_set_running_loop",
        "_PyTask",
        "_CTask",
        "_PyFuture",
        "_CFuture",
        # CPython
        "_getframe",
        "_current_frames",
    }
)
"""Private names of asyncio and CPython, reported wherever they are reached for."""

ACCESSORS = frozenset({"getattr", "setattr", "hasattr", "delattr"})


def private(name: str) -> bool:
    """``_name``, but neither a dunder (``__init__``) nor an enum's sunder (``_value_``), which
    the language and the enum module define for everyone."""
    return name.startswith("_") and not name.endswith("_")


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    lines: int
    own: frozenset[str] = frozenset()
    imported_modules: dict[str, str] = field(default_factory=dict)
    """Local name -> the module an ``import`` binds to it."""

    @property
    def where(self) -> str:
        return str(self.path.relative_to(SRC.parent))

    @property
    def area(self) -> str:
        """``flowtide.<subpackage>``, or ``flowtide`` for the top-level modules."""
        inside = self.path.parent.relative_to(PACKAGE).parts
        return "flowtide." + inside[0] if inside else "flowtide"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Module]:
    found: dict[str, Module] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
        name = module_name(path)
        found[name] = Module(name, path, tree, len(text.splitlines()), own_names(tree))
    return found


def areas() -> list[str]:
    return sorted({m.area for m in modules().values()})


def in_area(area: str) -> list[Module]:
    return [m for m in modules().values() if m.area == area]


def own_names(tree: ast.Module) -> frozenset[str]:
    """Every private name the module defines itself."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            names.add(node.attr)
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets
        ):
            names.update(
                c.value
                for c in ast.walk(node.value)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            )
    return frozenset(n for n in names if private(n))


# -- imports --------------------------------------------------------------------------------------


def module_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """The module's statements outside functions and classes, inside ``if``/``try`` too."""
    stack: list[ast.stmt] = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If | ast.Try | ast.With):
            inner = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            for handler in getattr(node, "handlers", []):
                inner.extend(handler.body)
            stack.extend(reversed(inner))


def resolve(module: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.name if module.path.name == "__init__.py" else module.name.rpartition(".")[0]
    parts = package.split(".")
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def deepest(name: str) -> str | None:
    known = modules()
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: Module) -> Iterator[tuple[str, int]]:
    """(flowtide module, line) for each module-level import of another flowtide module."""
    for node in module_level(module.tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = resolve(module, node)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.append(sub if sub in modules() else base)
        for target in targets:
            found = deepest(target)
            if found is None or found == module.name:
                continue
            yield found, node.lineno


def cycle_findings(area: str) -> list[str]:
    edges: dict[str, dict[str, int]] = {}
    for module in modules().values():
        edges[module.name] = {}
        for target, line in imports(module):
            edges[module.name].setdefault(target, line)
    graph = {m: set(targets) for m, targets in edges.items()}
    out = []
    for component in strongly_connected(graph):
        members = set(component)
        if len(members) < 2 or not any(modules()[m].area == area for m in members):
            continue
        links = [
            f"{modules()[m].where}:{edges[m][t]} imports {t}"
            for m in sorted(members)
            for t in sorted(edges[m])
            if t in members
        ]
        out.append("import cycle among " + ", ".join(sorted(members)) + ": " + "; ".join(links))
    return out


# -- private names and internals ------------------------------------------------------------------


def import_bindings(module: Module) -> dict[str, str]:
    """Local name -> module, for every ``import`` (and ``from`` import of a flowtide module)."""
    bound: dict[str, str] = {}
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.partition(".")[0]
                bound[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom):
            base = resolve(module, node)
            for alias in node.names:
                if f"{base}.{alias.name}" in modules():
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
    return bound


def accessed(node: ast.AST) -> tuple[ast.expr, str] | None:
    """(object, private name) for ``x._y``, or ``getattr(x, "_y")`` and its kin."""
    if isinstance(node, ast.Attribute) and private(node.attr):
        return node.value, node.attr
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ACCESSORS
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
        and private(node.args[1].value)
    ):
        return node.args[0], node.args[1].value
    return None


def by_place(findings: list[str]) -> list[str]:
    """Findings in file and line order, each once."""

    def place(finding: str) -> tuple[str, int]:
        where, _, rest = finding.partition(":")
        line = rest.split(" ", 1)[0]
        return where, int(line) if line.isdigit() else 0

    return sorted(set(findings), key=place)


def privates_in(module: Module) -> Iterator[str]:
    bound = import_bindings(module)
    for node in ast.walk(module.tree):
        at = f"{module.where}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.ImportFrom):
            source = resolve(module, node)
            for alias in node.names:
                if private(alias.name) and alias.name not in INTERNALS:
                    yield f"{at} imports private {alias.name} from {source}"
            continue
        found = accessed(node)
        if found is None:
            continue
        value, name = found
        if isinstance(value, ast.Name) and value.id in ("self", "cls"):
            continue
        if name in INTERNALS:
            continue  # reported as an internal
        if isinstance(value, ast.Name) and value.id in bound:
            yield f"{at} uses private {name} of module {bound[value.id]}"
        elif name not in module.own:
            yield f"{at} uses {ast.unparse(value)}.{name}, private to another module"


def imported_internals(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The private modules (``_asyncio``) and internal names an import statement names."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif node.module and not node.level:
        names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
    else:
        return []  # a relative import: a flowtide module
    return [
        name
        for name in names
        if not name.startswith("flowtide.")
        and any(part in INTERNALS or private(part) for part in name.split("."))
    ]


def internals_in(module: Module) -> Iterator[str]:
    spelled: set[int] = set()  # literal names already reported with their getattr
    for node in ast.walk(module.tree):
        at = f"{module.where}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import | ast.ImportFrom):
            for name in imported_internals(node):
                yield f"{at} imports {name}"
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "__new__"
            and isinstance(node.value, ast.Name)
            and node.value.id == "object"
        ):
            yield f"{at} calls object.__new__"
        elif (found := accessed(node)) is not None and found[1] in INTERNALS:
            value, name = found
            if not (isinstance(value, ast.Name) and value.id in ("self", "cls")):
                yield f"{at} reaches for {ast.unparse(value)}.{name}"
            if isinstance(node, ast.Call):
                spelled.add(id(node.args[1]))
        elif isinstance(node, ast.Constant) and node.value in INTERNALS and id(node) not in spelled:
            yield f"{at} names {node.value!r}"


# -- size -----------------------------------------------------------------------------------------


def sizes_in(module: Module) -> Iterator[str]:
    if module.lines > MAX_MODULE_LINES:
        yield f"{module.where}:1 has {module.lines} lines (at most {MAX_MODULE_LINES})"
    for node in ast.walk(module.tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                yield (
                    f"{module.where}:{node.lineno} function {node.name} has {length} lines "
                    f"(at most {MAX_FUNCTION_LINES})"
                )


# -- the tests ------------------------------------------------------------------------------------


def in_each(area: str, check: Callable[[Module], Iterable[str]]) -> list[str]:
    return by_place([finding for module in in_area(area) for finding in check(module)])


def report(findings: list[str]) -> str:
    return f"{len(findings)} finding(s):\n" + "\n".join(findings)


@pytest.mark.parametrize("area", areas())
def test_no_import_cycle(area: str) -> None:
    findings = cycle_findings(area)
    assert not findings, report(findings)


@pytest.mark.parametrize("area", areas())
def test_no_private_name_of_another_module(area: str) -> None:
    findings = in_each(area, privates_in)
    assert not findings, report(findings)


@pytest.mark.parametrize("area", areas())
def test_no_asyncio_or_cpython_internals(area: str) -> None:
    findings = in_each(area, internals_in)
    assert not findings, report(findings)


@pytest.mark.parametrize("area", areas())
def test_modules_and_functions_are_short(area: str) -> None:
    findings = in_each(area, sizes_in)
    assert not findings, report(findings)


def sample(text: str) -> Module:
    """A module of ``flowtide`` (never written to disk) with ``text`` as its source."""
    text = textwrap.dedent(text)
    tree = ast.parse(text)
    return Module(
        "flowtide.sample", PACKAGE / "sample.py", tree, len(text.splitlines()), own_names(tree)
    )


SAMPLE = """\
import asyncio
import flowtide.clock as clocks
from asyncio.tasks import _enter_task
from flowtide.model.graphs import _numbered


class Own:
    __slots__ = ("_slot",)

    def __init__(self) -> None:
        self._mine = 1

    def same(self, other: "Own") -> bool:
        return other._mine == other._slot and self._mine == 1


def reach(loop: asyncio.AbstractEventLoop, x: object) -> None:
    loop._ready
    getattr(loop, "_ready")
    object.__new__(Own)
    x._theirs
    clocks._MINUTES
    x.status._value_, x.__class__
"""


def test_the_checks_find_what_they_look_for() -> None:
    module = sample(SAMPLE)
    assert by_place(list(privates_in(module))) == [
        "src/flowtide/sample.py:4 imports private _numbered from flowtide.model.graphs",
        "src/flowtide/sample.py:21 uses x._theirs, private to another module",
        "src/flowtide/sample.py:22 uses private _MINUTES of module flowtide.clock",
    ]
    assert by_place(list(internals_in(module))) == [
        "src/flowtide/sample.py:3 imports asyncio.tasks._enter_task",
        "src/flowtide/sample.py:18 reaches for loop._ready",
        "src/flowtide/sample.py:19 reaches for loop._ready",
        "src/flowtide/sample.py:20 calls object.__new__",
    ]
    body = "".join(f"    x = {i}\n" for i in range(MAX_FUNCTION_LINES - 1))
    fits, too_long = sample(f"def fits():\n{body}"), sample(f"def long():\n{body}    x = 0\n")
    assert list(sizes_in(fits)) == []
    assert list(sizes_in(too_long)) == [
        f"src/flowtide/sample.py:1 function long has {MAX_FUNCTION_LINES + 1} lines "
        f"(at most {MAX_FUNCTION_LINES})"
    ]


def test_the_checks_see_every_area() -> None:
    assert {"flowtide", "flowtide.engine", "flowtide.model", "flowtide.store"} <= set(areas())
