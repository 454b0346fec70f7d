"""The stored form of event payloads: :func:`event_record` builds every event Flowtide records,
:func:`data_of` gives a payload's ``data`` and :func:`payload_of` reads it back.

``data`` has one key per field, named as the field, except that an optional field (one that
defaults to ``None``) is left out while it is ``None``: a task's ``node_finished`` is
``{"output": ..., "to": [...]}`` and gains the scatter counts only for a scatter. So records
keep the keys they had before the payloads were typed. :func:`payload_of` fills left-out
optional fields with ``None``, ignores keys it does not know (a record written by a later
Flowtide still parses; the record's ``data`` keeps them) and reads the older shapes of
``node_started`` (no ``kind``; ``scatter: true`` for a scatter) and of ``join_fired`` (no
``branches`` for a token that came from no split) and of ``node_failed`` (an ``error`` without
``details`` and ``traceback``: empty and ``None``).

Hooks keep receiving the :class:`~flowtide.store.EventRecord` itself and call
:func:`payload_of` when they want the typed payload: the record belongs to the store layer,
which knows nothing of the engine; an existing hook keeps working unchanged; and a hook that
only looks at kinds pays nothing for parsing it does not use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from operator import attrgetter
from typing import Any, TypeVar, overload

from flowtide.engine.event_types import PAYLOADS, EventPayload
from flowtide.engine.events import EventKind
from flowtide.store.base import EventRecord

__all__ = ["data_of", "event_record", "payload_of"]

_FIELDS: dict[type[EventPayload], tuple[tuple[str, bool], ...]] = {
    cls: tuple((f.name, f.default is None) for f in dataclasses.fields(cls))
    for cls in PAYLOADS.values()
}
"""Each payload class's fields: (name, optional: left out of the stored data while ``None``)."""


def _reader(names: tuple[str, ...]) -> Callable[[EventPayload], tuple[Any, ...]]:
    """What reads the values of fields ``names`` of a payload, as a tuple, in one call (an
    ``attrgetter`` of one name gives the value itself, and needs at least one)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        get = attrgetter(names[0])
        return lambda payload: (get(payload),)
    return lambda payload: ()


_VALUES: dict[type[EventPayload], Callable[[EventPayload], tuple[Any, ...]]] = {
    cls: _reader(tuple(name for name, _ in fields)) for cls, fields in _FIELDS.items()
}
"""Each payload class's field values, read in one call (every event of every step is built
from one)."""


_KIND_NAMES: dict[type[EventPayload], str] = {cls: cls.KIND.value for cls in PAYLOADS.values()}

P = TypeVar("P", bound=EventPayload)


def data_of(payload: EventPayload) -> dict[str, Any]:
    """The ``data`` of an event record for ``payload`` (optional fields left out while None)."""
    cls = type(payload)
    out: dict[str, Any] = {}
    for (name, optional), value in zip(_FIELDS[cls], _VALUES[cls](payload), strict=True):
        if value is not None or not optional:
            out[name] = value
    return out


@overload
def payload_of(record: EventRecord) -> EventPayload: ...
@overload
def payload_of(record: EventRecord, expected: type[P]) -> P: ...
def payload_of(record: EventRecord, expected: type[EventPayload] | None = None) -> EventPayload:
    """The typed payload of a stored event ``record``.

    With ``expected`` (a payload class), the record must be of its kind. Raises ``ValueError``
    for a kind Flowtide does not know, another kind than expected, or a missing field.
    """
    try:
        kind = EventKind(record.kind)
    except ValueError:
        raise ValueError(f"unknown event kind {record.kind!r}") from None
    cls = PAYLOADS[kind]
    if expected is not None and cls is not expected:
        raise ValueError(f"a {record.kind!r} event is not a {expected.__name__}")
    data = _upgraded(kind, record.data)
    args: dict[str, Any] = {}
    missing: list[str] = []
    for name, optional in _FIELDS[cls]:
        if name in data:
            args[name] = data[name]
        elif not optional:
            missing.append(name)
    if missing:
        raise ValueError(f"a {record.kind!r} event without {', '.join(missing)}")
    return cls(**args)


def _upgraded(kind: EventKind, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` in the current shape (records written before the shapes were one per kind)."""
    if kind is EventKind.NODE_STARTED and "kind" not in data:
        if data.get("scatter"):
            return {**data, "kind": "scatter", "deadline": None}
        if "subflow" in data:
            return {**data, "kind": "subflow", "deadline": None}
        if "phase" in data:
            return {**data, "kind": "phase", "deadline": None}
        return {**data, "kind": "task"}
    if kind is EventKind.JOIN_FIRED and "branches" not in data:
        return {**data, "branches": []}
    if kind is EventKind.NODE_FAILED and isinstance(data.get("error"), dict):
        error = data["error"]
        if "details" not in error or "traceback" not in error:
            return {**data, "error": {"details": {}, "traceback": None, **error}}
    return data


def event_record(
    payload: EventPayload,
    run_id: str,
    at: datetime,
    *,
    placement: str | None = None,
    attempt: int | None = None,
    token_id: str | None = None,
) -> EventRecord:
    """The event record of ``payload``: every event Flowtide records is built here."""
    return EventRecord(
        _KIND_NAMES[type(payload)],
        run_id,
        at,
        placement,
        attempt,
        token_id,
        data_of(payload),
    )
