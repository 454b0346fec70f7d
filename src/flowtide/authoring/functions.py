"""Reducers and source functions: code a flow names by a registered id.

A flow document names a state reducer (``reducers: {key: ID}``, a scatter's ``gather.reducer``)
or a scatter's source function (``source_fn: ID``) by the id it is registered under, never by a
module to import: a document may come from anyone who can write to the store, and an engine
calls only what its own code registered. Register with the decorators::

    @flowtide.reducer                       # id: "shop.state:newest" (module:qualified_name)
    def newest(current, value): ...

    @flowtide.source(id="urn:shop:source:open-orders")
    async def open_orders(ctx): ...

or by calling them (``flowtide.reducer(fn, id=...)``). The function is returned unchanged.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from typing import Any, Literal, TypeVar, overload

from flowtide.errors import NodeResolutionError
from flowtide.model.placements import FUNCTION_REF_PATTERN

__all__ = [
    "FunctionRegistry",
    "reducer",
    "reducers",
    "source",
    "sources",
]

F = TypeVar("F", bound=Callable[..., Any])
Kind = Literal["reducer", "source function"]


def function_id(fn: Callable[..., Any]) -> str:
    """A function's default id: ``module:qualified_name``."""
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


class FunctionRegistry:
    """Functions of one kind (reducers, or source functions) by id.

    Registering a different function under an id already taken raises, unless it has the same
    ``module:qualname`` (a module imported again, a definition run again)."""

    def __init__(self, kind: Kind, decorator: str) -> None:
        self.kind: Kind = kind
        self._decorator = decorator
        self._functions: dict[str, Callable[..., Any]] = {}
        self._lock = threading.Lock()

    def register(self, fn: Callable[..., Any], id: str | None = None) -> str:
        """Register ``fn`` under ``id`` (default: its ``module:qualname``); returns the id."""
        if not callable(fn):
            raise TypeError(f"a {self.kind} must be callable, not {fn!r}")
        key = id or function_id(fn)
        if not re.fullmatch(FUNCTION_REF_PATTERN, key):
            # (A document names it in this form: any other id could never be named.)
            raise ValueError(
                f"{self.kind} id {key!r} must read as 'module:function' (dotted names, a colon)"
            )
        with self._lock:
            old = self._functions.get(key)
            if old is not None and old is not fn and function_id(old) != function_id(fn):
                raise ValueError(
                    f"{self.kind} id {key!r} is already registered to {function_id(old)}; "
                    f"cannot register {function_id(fn)} under it"
                )
            self._functions[key] = fn
        return key

    def get(self, ref: str) -> Callable[..., Any] | None:
        return self._functions.get(ref)

    def id_of(self, fn: Callable[..., Any]) -> str | None:
        """The id ``fn`` is registered under (the first, when it has several), or None."""
        with self._lock:
            return next((k for k, v in self._functions.items() if v is fn), None)

    def resolve(self, ref: str) -> Callable[..., Any]:
        """The function registered under ``ref``; :class:`NodeResolutionError` naming it when
        there is none (nothing is imported because a flow names it)."""
        found = self._functions.get(ref)
        if found is None:
            raise NodeResolutionError(self.missing(ref), [ref])
        return found

    def missing(self, ref: str) -> str:
        """What to say of ``ref`` when it is not registered."""
        return (
            f"{self.kind} {ref!r} is not registered here: a --nodes module must register it "
            f"(with @flowtide.{self._decorator})"
        )

    def __contains__(self, ref: object) -> bool:
        return ref in self._functions

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._functions))

    def __len__(self) -> int:
        return len(self._functions)


reducers = FunctionRegistry("reducer", "reducer")
"""The process-wide registry of state reducers (:func:`reducer` registers into it)."""

sources = FunctionRegistry("source function", "source")
"""The process-wide registry of scatter source functions (:func:`source` registers into it)."""


@overload
def reducer(fn: F, /, *, id: str | None = ...) -> F: ...
@overload
def reducer(fn: None = None, /, *, id: str | None = ...) -> Callable[[F], F]: ...


def reducer(fn: F | None = None, /, *, id: str | None = None) -> F | Callable[[F], F]:
    """Register a state reducer, ``fn(current, value) -> new value`` (``current`` is None when
    the key has no value yet), under ``id`` (default: ``module:qualified_name``), the name a
    flow's ``reducers`` or a scatter's ``gather.reducer`` gives it. Returns ``fn`` itself."""

    def wrap(f: F) -> F:
        reducers.register(f, id)
        return f

    return wrap(fn) if fn is not None else wrap


@overload
def source(fn: F, /, *, id: str | None = ...) -> F: ...
@overload
def source(fn: None = None, /, *, id: str | None = ...) -> Callable[[F], F]: ...


def source(fn: F | None = None, /, *, id: str | None = None) -> F | Callable[[F], F]:
    """Register a scatter's source function, ``fn(ctx)`` -> an iterable, an async iterable or
    an awaitable of either, under ``id`` (default: ``module:qualified_name``), the name a
    scatter's ``source_fn`` gives it. Returns ``fn`` itself."""

    def wrap(f: F) -> F:
        sources.register(f, id)
        return f

    return wrap(fn) if fn is not None else wrap
