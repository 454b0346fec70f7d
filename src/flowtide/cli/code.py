"""The user's code: the modules named with ``--nodes``, and the code they register for flows to
name (nodes with ``@node``, reducers with ``@flowtide.reducer``, source functions with
``@flowtide.source``).

``run`` and ``validate --nodes`` import the user's code with the current directory first on
``sys.path``, as ``python -m`` has it. A ``--nodes`` module that cannot be imported is a
:class:`~flowtide.cli.common.BadInput` naming the module, and the file and line at fault. A
reference a flow makes to code no module registers (a node, a scatter's source function, a
reducer) is a :class:`~flowtide.errors.Problem` located at the placement that makes it: nothing is
imported because a flow names it.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import ModuleType

from flowtide.authoring.functions import reducers, sources
from flowtide.authoring.nodes import NodeImplementation, NodeRegistry, as_node
from flowtide.authoring.nodes import registry as default_registry
from flowtide.cli.common import BadInput
from flowtide.errors import FlowValidationError, Problem
from flowtide.jsonpointer import join
from flowtide.model.flow import BUILTIN_REDUCERS, Flow
from flowtide.model.placements import GatherStrategy, Phase, Scatter, Task


@contextlib.contextmanager
def current_directory_first() -> Iterator[None]:
    """The current directory first on ``sys.path`` while the block runs (as ``python -m`` has
    it), so that the user's modules are found where the command is run."""
    here = os.getcwd()
    added = here not in sys.path
    if added:
        sys.path.insert(0, here)
    importlib.invalidate_caches()
    try:
        yield
    finally:
        if added and here in sys.path:
            sys.path.remove(here)


# -- importing ---------------------------------------------------------------------------------


class ImportFailed(Exception):
    """A module could not be imported; the message says why in one line."""


def dotted(text: str) -> bool:
    """Whether ``text`` is a dotted Python name (``shop.nodes``)."""
    return bool(text) and all(part.isidentifier() for part in text.split("."))


def one_line(exc: BaseException) -> str:
    """What ``exc`` says, on one line."""
    if isinstance(exc, FlowValidationError):
        return "; ".join(p.message for p in exc.errors) or exc.title
    return " ".join(str(exc).split())


def _place(filename: str | None, line: int | None) -> str:
    if not filename:
        return ""
    try:
        shown = os.path.relpath(filename)
    except ValueError:  # another drive
        shown = filename
    if shown.startswith(os.pardir):
        shown = filename
    return f"{shown}:{line}: " if line else f"{shown}: "


def where(exc: BaseException) -> str:
    """``file:line: `` of the statement of the user's code that failed, or ``""``.

    For a syntax error, the line it is on; otherwise the innermost module-level statement being
    run (the ``import`` of a missing dependency, the line that raised), else the innermost frame.
    """
    if isinstance(exc, SyntaxError):
        return _place(exc.filename, exc.lineno)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<")]
    module_level = [f for f in frames if f.name == "<module>"]
    chosen = module_level or frames
    return _place(chosen[-1].filename, chosen[-1].lineno) if chosen else ""


def import_module(name: str) -> ModuleType:
    """Import ``name``, or raise :class:`ImportFailed` saying why (with the file and line)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise ImportFailed(
                f"no module named {exc.name!r} in the current directory nor on the Python path"
            ) from None
        raise ImportFailed(_failure(name, exc)) from None
    except SyntaxError as exc:
        raise ImportFailed(
            f"cannot import module {name!r}: {where(exc)}{type(exc).__name__}: {exc.msg}"
        ) from None
    except (Exception, SystemExit) as exc:  # importing the user's code may raise anything
        raise ImportFailed(_failure(name, exc)) from None


def _failure(name: str, exc: BaseException) -> str:
    return f"cannot import module {name!r}: {where(exc)}{type(exc).__name__}: {one_line(exc)}"


def _module_name_hint(name: str) -> str:
    """Why ``name`` is not a module name, for ``--nodes``."""
    if name.endswith(".py") or "/" in name or os.sep in name:
        guess = name.removesuffix(".py").replace(os.sep, "/").strip("./").replace("/", ".")
        if not dotted(guess):
            here = ""
        elif "." in guess:
            here = f" (here: {guess!r}, from the folder above it)"
        else:
            here = f" (here: {guess!r})"
        return f"a module name is expected, not a file name{here}"
    return "a module name is expected: dotted Python names, such as 'nodes' or 'shop.nodes'"


# -- the modules of --nodes --------------------------------------------------------------------


@dataclass
class Code:
    """The code a command was given: the ``--nodes`` modules, and the node implementations they
    register, by id."""

    modules: tuple[str, ...] = ()
    nodes: dict[str, NodeImplementation] = field(default_factory=dict)
    unregistered: set[str] = field(default_factory=set)
    """The node references (IRIs) no module registers."""

    def registry(self) -> NodeRegistry:
        """A registry with every node found so far, for the loader and the engine."""
        return NodeRegistry(self.nodes)

    def node(self, ref: str) -> str | None:
        """Why node ``ref`` does not resolve, or ``None`` when it does (a ``--nodes`` module
        registers it: it is in :attr:`nodes`). Nothing is imported because a flow names it."""
        if ref in self.nodes:
            return None
        self.unregistered.add(ref)
        if self.modules:
            given = ", ".join(self.modules)
            why = f"none of the modules given with --nodes ({given}) registers it"
        else:
            why = "a --nodes module must register it"
        return f"node {ref!r} is not registered here: {why} (with @node)"

    def function(self, ref: str, what: str) -> str | None:
        """Why ``ref`` (the id of a ``what``: a reducer or a source function) does not resolve
        to a registered function, or ``None`` when it does."""
        known = reducers if what == "reducer" else sources
        return None if ref in known else known.missing(ref)


def load_modules(names: Sequence[str]) -> Code:
    """Import the ``--nodes`` modules and gather their nodes: the ``@node`` implementations they
    define or register, and those listed in their ``NODES``. Raises
    :class:`~flowtide.cli.common.BadInput` naming the module (and the file and line) at fault."""
    registry = NodeRegistry()
    names = tuple(dict.fromkeys(names))
    for name in names:
        if not dotted(name) or name.endswith(".py"):
            raise BadInput(f"--nodes {name!r}: {_module_name_hint(name)}")
        before = set(default_registry)
        try:
            module = import_module(name)
        except ImportFailed as exc:
            raise BadInput(f"--nodes {name!r}: {exc}") from None
        registered = (default_registry.get(i) for i in default_registry if i not in before)
        found = [
            *_listed(name, module),
            *(v for v in vars(module).values() if isinstance(v, NodeImplementation)),
            *(each for each in registered if each is not None),
        ]
        for impl in found:
            try:
                registry.register(impl)
            except ValueError as exc:
                raise BadInput(f"--nodes {name!r}: {exc}") from None
    nodes = {i: found_impl for i in registry if (found_impl := registry.get(i)) is not None}
    return Code(modules=names, nodes=nodes)


def _listed(name: str, module: ModuleType) -> list[NodeImplementation]:
    listed = getattr(module, "NODES", None)
    if listed is None:
        return []
    if not isinstance(listed, list | tuple | set | frozenset):
        kind = type(listed).__name__
        raise BadInput(f"--nodes {name!r}: NODES must be a list of nodes, not a {kind}")
    found: list[NodeImplementation] = []
    for index, item in enumerate(listed):
        try:
            found.append(as_node(item))
        except Exception as exc:
            raise BadInput(f"--nodes {name!r}: NODES[{index}]: {one_line(exc)}") from None
    return found


# -- the references of a flow ------------------------------------------------------------------


def reference_problems(
    flow: Flow, code: Code, pointers: Callable[[str], str] | None
) -> list[Problem]:
    """A problem for each reference of ``flow`` to code that does not resolve: nodes, scatter
    source functions, gather and state reducers. ``pointers`` maps a pointer into the native
    shape to one into the document (without it, a problem names its placement only)."""
    problems: list[Problem] = []

    def add(reason: str | None, placement: str | None, *tokens: object) -> None:
        if reason is not None:
            pointer = pointers(join("", *tokens)) if pointers is not None else ""
            problems.append(Problem(reason, pointer=pointer, placement=placement))

    for index, p in enumerate(flow.placements):
        at = ("placements", index)
        if isinstance(p, Task | Phase):
            add(code.node(p.node), p.id, *at, "node")
        elif isinstance(p, Scatter):
            if p.body.node is not None:
                add(code.node(p.body.node), p.id, *at, "body", "node")
            if p.source_fn is not None:
                add(code.function(p.source_fn, "source function"), p.id, *at, "source_fn")
            if p.gather.strategy is GatherStrategy.REDUCE and p.gather.reducer is not None:
                add(code.function(p.gather.reducer, "reducer"), p.id, *at, "gather", "reducer")
    for key, how in flow.reducers.items():
        if how not in BUILTIN_REDUCERS:
            reason = code.function(how, "reducer")
            add(f"state key {key!r}: {reason}" if reason else None, None, "reducers", key)
    return problems
