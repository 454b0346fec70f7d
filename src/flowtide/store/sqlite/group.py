"""Group commit: the writes waiting for a SQLite store's thread share one transaction.

Every write of a :class:`~flowtide.store.sqlite.SQLiteStore` (a commit, a new run, a lease
change, a flow document) is put in its store's :class:`WriteQueue`, in call order. When the
store's thread comes to it, it takes every write waiting (up to :data:`GROUP_LIMIT`) and applies
them in call order in one ``BEGIN IMMEDIATE`` transaction, each inside a ``SAVEPOINT`` of its
own: a write refused by its checks (``StoreConflict``, ``LeaseLost``, a value that is not JSON,
...) is rolled back to its savepoint and gets its own error, the others are unaffected. A write
alone needs no savepoint: refused, its transaction is rolled back. Then one
``COMMIT``, one fsync for the whole group, and only then is each write answered: no caller hears
"committed" before its data is on disk. If the transaction itself fails (``BEGIN``, ``COMMIT``,
an error after which SQLite has rolled the whole transaction back), every write of the group
fails with that error and none of them is applied.

Nothing waits for company: a write alone in the queue is applied at once, alone, as it was
before groups. Groups only form from writes that were already waiting while the thread was busy
with earlier work, which is when one fsync for many pays.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from flowtide.store.sqlite.sql import store_error

__all__ = ["GROUP_LIMIT", "Answer", "Write", "WriteQueue", "apply_group"]

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)

GROUP_LIMIT = 64
"""The most writes one transaction takes (the rest wait for the next), so that the first write
of a group is not answered much later than it would be alone."""


class Answer(Protocol[T_contra]):
    """Where a write's answer goes, in the store's thread (a ``concurrent.futures.Future``
    will do)."""

    def set_running_or_notify_cancel(self) -> bool:
        """False if the caller gave up before the write started (it is then dropped)."""

    def set_result(self, result: T_contra, /) -> None: ...

    def set_exception(self, exception: BaseException | None, /) -> None: ...


@dataclass(slots=True, eq=False)
class Write(Generic[T]):
    """One write: ``work(connection)``, run in a transaction already open (it raises to refuse
    the write); its answer (what ``work`` returned, or the error) goes to ``future``."""

    work: Callable[[sqlite3.Connection], T]
    future: Answer[T] = field(default_factory=Future)


class WriteQueue:
    """Writes waiting for a store's thread, in call order. ``put`` is called from the event
    loop's thread and ``take`` from the store's; a ``deque``'s append and popleft are atomic."""

    def __init__(self, limit: int = GROUP_LIMIT) -> None:
        self.limit = limit
        self._waiting: deque[Write[Any]] = deque()

    def put(self, write: Write[Any]) -> None:
        self._waiting.append(write)

    def take(self) -> list[Write[Any]]:
        """The next group: the writes waiting, oldest first, up to ``limit`` (a write whose
        caller gave up before it started is dropped, as the executor drops a cancelled call)."""
        group: list[Write[Any]] = []
        while self._waiting and len(group) < self.limit:
            write = self._waiting.popleft()
            if write.future.set_running_or_notify_cancel():
                group.append(write)
        return group


def apply_group(conn: sqlite3.Connection, group: list[Write[Any]], path: str) -> None:
    """Apply ``group`` in one transaction on ``conn`` (the store at ``path``) and answer each
    write, only once the transaction has committed (or failed)."""
    alone = len(group) == 1
    try:
        conn.execute("BEGIN IMMEDIATE")
        outcomes = [_apply(conn, write, alone) for write in group]
        # (A write alone has no savepoint: refused, its whole transaction is rolled back.)
        conn.execute("ROLLBACK" if alone and outcomes[0][1] is not None else "COMMIT")
    except BaseException as error:  # (the transaction failed: none of the group is applied)
        if conn.in_transaction:
            with suppress(sqlite3.Error):  # (the error that got us here is the one to report)
                conn.execute("ROLLBACK")
        for write in group:
            write.future.set_exception(_reported(error, path))
        return
    for write, (result, refused) in zip(group, outcomes, strict=True):
        if refused is None:
            write.future.set_result(result)
        else:
            write.future.set_exception(_reported(refused, path))


def _apply(
    conn: sqlite3.Connection, write: Write[Any], alone: bool
) -> tuple[Any, Exception | None]:
    """``write`` applied: (its result, None), or (None, why it was refused). A write in a group
    runs inside a savepoint, rolled back if it is refused; a write ``alone`` needs none (the
    caller rolls its transaction back). Raises if the transaction itself is lost."""
    if not alone:
        conn.execute("SAVEPOINT write")
    try:
        result = write.work(conn)
    except Exception as error:
        if not conn.in_transaction:
            raise  # SQLite rolled the whole transaction back (a full disk, an I/O error)
        if not alone:
            conn.execute("ROLLBACK TO write")
            conn.execute("RELEASE write")
        return None, error
    if not alone:
        conn.execute("RELEASE write")
    return result, None


def _reported(error: BaseException, path: str) -> BaseException:
    """``error`` as the caller hears it: SQLite's own errors as store errors (a new one for each
    caller, so that their tracebacks do not pile up on one object)."""
    if isinstance(error, sqlite3.Error):
        reported = store_error(error, path)
        reported.__cause__ = error
        return reported
    return error
