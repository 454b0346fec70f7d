"""What ``import flowtide`` offers is a fixed, documented set: a change to it is deliberate."""

from __future__ import annotations

import ast
import importlib
import inspect
from typing import Any

import pytest

import flowtide

PUBLIC = [
    "AsyncClient",
    "Cancelled",
    "Client",
    "Clock",
    "Engine",
    "EngineError",
    "ErrorInfo",
    "EventKind",
    "EventRecord",
    "Explanation",
    "Flow",
    "FlowBuilder",
    "FlowValidationError",
    "FlowtideError",
    "Hook",
    "InterruptedAt",
    "Lifecycle",
    "MemoryStore",
    "NodeContext",
    "NodeResolutionError",
    "NodeTimeoutError",
    "Output",
    "Park",
    "ParkedToken",
    "Problem",
    "RefusalReason",
    "RequestPending",
    "RunError",
    "RunHandle",
    "RunResult",
    "SignalReceipt",
    "SignalRefused",
    "Store",
    "StoreError",
    "SystemClock",
    "UnknownFlowError",
    "UnknownRunError",
    "VirtualClock",
    "__version__",
    "dump_flow",
    "load_flow",
    "node",
    "reducer",
    "source",
]


def test_the_public_names_are_exactly_these() -> None:
    assert sorted(flowtide.__all__) == flowtide.__all__ == PUBLIC


@pytest.mark.parametrize("name", PUBLIC)
def test_each_public_name_imports(name: str) -> None:
    namespace: dict[str, Any] = {}
    exec(f"from flowtide import {name}", namespace)
    assert namespace[name] is getattr(flowtide, name)


def own_docstring(obj: Any) -> str | None:
    """The docstring written on ``obj``'s own definition (not inherited, nor a dataclass's
    generated signature), read from its source; any of its overloads may carry it."""
    tree = ast.parse(inspect.getsource(inspect.getmodule(obj)))  # type: ignore[arg-type]
    kinds = (ast.ClassDef,) if inspect.isclass(obj) else (ast.FunctionDef, ast.AsyncFunctionDef)
    docs = [
        ast.get_docstring(node)
        for node in ast.walk(tree)
        if isinstance(node, kinds) and node.name == obj.__name__
    ]
    return next((d for d in docs if d), None)


CLASSES_AND_FUNCTIONS = [
    n
    for n in PUBLIC
    if inspect.isclass(getattr(flowtide, n)) or inspect.isfunction(getattr(flowtide, n))
]


def test_every_public_name_but_the_version_and_hook_is_a_class_or_a_function() -> None:
    assert set(PUBLIC) - set(CLASSES_AND_FUNCTIONS) == {"__version__", "Hook"}


@pytest.mark.parametrize("name", CLASSES_AND_FUNCTIONS)
def test_each_public_class_and_function_is_documented(name: str) -> None:
    assert own_docstring(getattr(flowtide, name)), f"flowtide.{name} has no docstring of its own"


@pytest.mark.parametrize("name", ["Commit", "TokenRecord", "RunRecord", "CancelScope", "FlowPlan"])
def test_internals_stay_in_their_subpackages(name: str) -> None:
    assert not hasattr(flowtide, name)


def test_the_records_of_the_store_are_still_in_flowtide_store() -> None:
    store = importlib.import_module("flowtide.store")
    assert {"Commit", "TokenRecord", "RunRecord", "EventRecord"} <= set(store.__all__)
