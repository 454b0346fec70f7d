"""The memory store's rows: a record's plain fields, and its JSON fields as text.

A row keeps a copy of its record with the JSON fields emptied (every other field holds an
immutable value: a string, a number, an instant, an enum member, a tuple), and those fields as
JSON text beside it. A history row (written once and never changed) and a token row (replaced
whole on every write: a run's most written row) keep the record's fields themselves instead,
without a copy of the record. Reading a row builds a new record with them decoded: what comes
back is what a database gives back (a tuple comes back as a list), as new objects every time.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, TypeVar

from flowtide.store.base import (
    Checkpoint,
    EventRecord,
    ParkRecord,
    RunRecord,
    ScatterItemRecord,
    SignalAnswer,
    SignalRequest,
    TokenRecord,
    TokenStatus,
)
from flowtide.store.jsonvalues import decode_json, encode_json
from flowtide.store.records import Lineage, lineage_of

__all__ = [
    "AnswerRow",
    "EventRow",
    "ParkRow",
    "RequestRow",
    "RunRow",
    "ScatterRow",
    "TokenRow",
    "replace",
]

_Record = TypeVar("_Record")
_FIELDS: dict[type[Any], tuple[str, ...]] = {}


def replace(record: _Record, **changes: Any) -> _Record:
    """A copy of ``record`` with ``changes`` (``dataclasses.replace``, with each record class's
    field names read once: rows are copied on every write and read)."""
    cls = type(record)
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in fields(cls) if f.init)  # type: ignore[arg-type]
    values = {name: getattr(record, name) for name in names}
    values.update(changes)
    return cls(**values)


@dataclass(slots=True)
class RunRow:
    record: RunRecord
    options: str
    result: str
    checkpoint: str

    @classmethod
    def of(cls, run: RunRecord, where: str) -> RunRow:
        checkpoint = run.checkpoint.to_json() if run.checkpoint is not None else None
        return cls(
            replace(run, options={}, result=None, checkpoint=None),
            encode_json(run.options, f"{where}/options"),
            encode_json(run.result, f"{where}/result"),
            encode_json(checkpoint, f"{where}/checkpoint"),
        )

    def read(self) -> RunRecord:
        checkpoint = decode_json(self.checkpoint)
        return replace(
            self.record,
            options=decode_json(self.options),
            result=decode_json(self.result),
            checkpoint=Checkpoint.from_json(checkpoint) if checkpoint is not None else None,
        )


@dataclass(slots=True)
class TokenRow:
    """A token's fields themselves (each immutable: a token row is replaced whole on every
    write, never changed in place), its data as JSON text."""

    id: str
    run_id: str
    placement: str
    status: TokenStatus
    attempt: int
    visit: int
    lineage: Lineage
    deadline: datetime | None
    due: datetime | None
    created_at: datetime | None
    data: str
    epoch: int

    @classmethod
    def of(cls, token: TokenRecord, where: str) -> TokenRow:
        t = token
        return cls(
            t.id,
            t.run_id,
            t.placement,
            t.status,
            t.attempt,
            t.visit,
            lineage_of(t.lineage),
            t.deadline,
            t.due,
            t.created_at,
            encode_json(t.data, f"{where}/data"),
            t.epoch,
        )

    def read(self) -> TokenRecord:
        return TokenRecord(
            self.id,
            self.run_id,
            self.placement,
            self.status,
            self.attempt,
            self.visit,
            self.lineage,
            self.deadline,
            self.due,
            self.created_at,
            decode_json(self.data),
            self.epoch,
        )


@dataclass(slots=True)
class EventRow:
    """An event's fields themselves (each immutable: a history row is never changed once
    written, so it needs no record of its own), its data as JSON text."""

    kind: str
    run_id: str
    at: datetime
    placement: str | None
    attempt: int | None
    token_id: str | None
    data: str
    seq: int = 0

    @classmethod
    def of(cls, event: EventRecord, where: str) -> EventRow:
        data = encode_json(event.data, f"{where}/data")
        e = event
        return cls(e.kind, e.run_id, e.at, e.placement, e.attempt, e.token_id, data)

    def read(self) -> EventRecord:
        data = decode_json(self.data)
        return EventRecord(
            self.kind,
            self.run_id,
            self.at,
            self.placement,
            self.attempt,
            self.token_id,
            data,
            self.seq,
        )


@dataclass(slots=True)
class ParkRow:
    record: ParkRecord
    payload: str
    order: int = 0
    """Its place among every park, by first write (the order ``parks`` gives them in)."""

    @classmethod
    def of(cls, park: ParkRecord, where: str) -> ParkRow:
        return cls(replace(park, payload=None), encode_json(park.payload, f"{where}/payload"))

    def read(self) -> ParkRecord:
        return replace(self.record, payload=decode_json(self.payload))


@dataclass(slots=True)
class ScatterRow:
    record: ScatterItemRecord
    result: str
    key: str

    @classmethod
    def of(cls, item: ScatterItemRecord, where: str) -> ScatterRow:
        return cls(
            replace(item, result=None, key=None),
            encode_json(item.result, f"{where}/result"),
            encode_json(item.key, f"{where}/key"),
        )

    def read(self) -> ScatterItemRecord:
        return replace(self.record, result=decode_json(self.result), key=decode_json(self.key))


@dataclass(slots=True)
class AnswerRow:
    record: SignalAnswer
    answer: str

    @classmethod
    def of(cls, answer: SignalAnswer, where: str) -> AnswerRow:
        return cls(replace(answer, answer={}), encode_json(answer.answer, f"{where}/answer"))

    def read(self) -> SignalAnswer:
        return replace(self.record, answer=decode_json(self.answer))


@dataclass(slots=True)
class RequestRow:
    record: SignalRequest
    request: str
    answer: str | None
    """None until answered."""

    @classmethod
    def of(cls, request: SignalRequest) -> RequestRow:
        text = encode_json(request.request, "request")
        return cls(replace(request, request={}, answer=None, answered_at=None), text, None)

    def read(self) -> SignalRequest:
        answer = decode_json(self.answer) if self.answer is not None else None
        return replace(self.record, request=decode_json(self.request), answer=answer)
