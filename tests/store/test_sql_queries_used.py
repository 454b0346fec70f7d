"""Every named statement of the SQL stores' ``.sql`` files is run by the store whose files
hold it: a statement nothing runs is removed, not kept to drift from the schema.

Checked on the sources' syntax trees: a backend runs the statements its own package names
(a string constant) and those the shared core names (``flowtide.store.sqlcore``,
``flowtide.store.sqlfiles``: a commit's statements, ``prune_<table>``). That holds only while
both backends use every read of the shared core: a read one backend does its own way belongs
to the other backend's package (as SQLite's run snapshot does), which is checked too."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import pytest

from flowtide.store.sqlfiles import PRUNED_TABLES

STORE = Path(__file__).resolve().parents[2] / "src" / "flowtide" / "store"
BACKENDS = ("postgres", "sqlite")
SHARED = [*sorted((STORE / "sqlcore").glob("*.py")), STORE / "sqlfiles.py"]
SHARED_PARTS = ("reads", "leases", "flows", "workers")
"""The shared core's modules whose classes each backend's store delegates to, method by method."""

_NAME = re.compile(r"^--\s*name:\s*([A-Za-z_][A-Za-z0-9_]*)\s*$", re.MULTILINE)


def declarations(tree: ast.Module) -> set[int]:
    """The nodes of module-level ``*_QUERIES = ...`` (lists of names, which run nothing)."""
    found: set[int] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id.endswith("_QUERIES") for t in targets):
            found.update(id(n) for n in ast.walk(node))
    return found


@cache
def tree_of(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def named(paths: Iterable[Path]) -> set[str]:
    """The string constants of ``paths`` (outside ``*_QUERIES`` declarations)."""
    found: set[str] = set()
    for path in paths:
        tree = tree_of(path)
        skipped = declarations(tree)
        found.update(
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skipped
        )
    return found


def attributes(paths: Iterable[Path]) -> set[str]:
    """Every ``x.name`` read in ``paths``."""
    return {
        node.attr
        for path in paths
        for node in ast.walk(tree_of(path))
        if isinstance(node, ast.Attribute)
    }


def statements(backend: str) -> dict[str, Path]:
    """The named statements of every ``.sql`` file of ``backend``: name -> its file."""
    found: dict[str, Path] = {}
    for path in sorted((STORE / backend).rglob("*.sql")):
        found.update(dict.fromkeys(_NAME.findall(path.read_text(encoding="utf-8")), path))
    return found


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_named_statement_is_run_by_its_store(backend: str) -> None:
    run = named((STORE / backend).rglob("*.py")) | named(SHARED)
    run |= {f"prune_{table}" for table in PRUNED_TABLES}
    declared = statements(backend)
    assert declared, f"no named statement found for {backend}"
    unused = {name: str(path.relative_to(STORE)) for name, path in declared.items()}
    assert {name: where for name, where in unused.items() if name not in run} == {}


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_read_of_the_shared_core_is_used_by_each_store(backend: str) -> None:
    used = attributes((STORE / backend).rglob("*.py")) | attributes(SHARED)
    unused: list[str] = []
    for part in SHARED_PARTS:
        path = STORE / "sqlcore" / f"{part}.py"
        for node in ast.walk(tree_of(path)):
            if isinstance(node, ast.ClassDef):
                unused.extend(
                    f"{part}.{node.name}.{method.name}"
                    for method in node.body
                    if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef)
                    and not method.name.startswith("_")
                    and method.name not in used
                )
    assert unused == []


def test_the_checks_find_what_they_look_for(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        'OWN_QUERIES = frozenset({"declared"})\n'
        'def f(db):\n    return db.read("run_me", {}), db.reads.load(1)\n'
    )
    assert named([module]) >= {"run_me"} and "declared" not in named([module])
    assert {"read", "reads", "load"} <= attributes([module])
