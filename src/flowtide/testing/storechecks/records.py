"""Checks of records: tokens, scatter items, checkpoints, JSON values, and copies."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from flowtide.errors import FlowtideError
from flowtide.store.base import (
    Checkpoint,
    Commit,
    EventRecord,
    ParkRecord,
    ParkStatus,
    RunRecord,
    ScatterItemRecord,
    SignalAnswer,
    Store,
    StoredFlow,
    StoreError,
    TokenRecord,
    TokenStatus,
    UnknownStoredFlow,
)
from flowtide.store.jsonvalues import NotJSONError
from flowtide.testing.storechecks.support import (
    T0,
    at,
    new_run,
    park,
    raises,
    run_record,
    same,
    token,
    true,
)

S = TokenStatus


async def tokens_are_filtered_by_status(store: Store) -> None:
    await new_run(store)
    await new_run(store, "s")
    same(list(await store.tokens("r")), [], "the tokens of a run without any")
    same(await store.token("r", "r.1"), None, "a token never written")
    full = token(
        "r",
        1,
        S.PARKED,
        attempt=2,
        visit=3,
        lineage=(("split", 0, 2), ("inner", 1, 3)),
        deadline=at(10),
        due=at(5),
        created_at=T0,
        data={"why": "signal"},
        epoch=4,
    )
    await store.commit(Commit("r", tokens=[full, token("r", 2, S.DONE), token("r", 3, S.WAITING)]))
    await store.commit(Commit("s", tokens=[token("s", 1, S.PARKED)]))
    # Rewritten, a token keeps its place among the run's tokens.
    await store.commit(Commit("r", tokens=[token("r", 4, S.READY), token("r", 2, S.CANCELLED)]))
    same(await store.token("r", "r.1"), full, "a token as it was written")

    async def ids(statuses: list[TokenStatus] | None) -> list[str]:
        return [t.id for t in await store.tokens("r", statuses)]

    same(await ids(None), ["r.1", "r.2", "r.3", "r.4"], "a run's tokens, first written first")
    same(await ids([S.PARKED, S.WAITING]), ["r.1", "r.3"], "the parked and waiting tokens")
    same(await ids([S.CANCELLED]), ["r.2"], "the cancelled tokens (a rewritten status)")
    same(await ids([S.DONE, S.FAILED]), [], "tokens of statuses none has")
    same(await ids([]), [], "tokens of no status")
    same([t.id for t in await store.tokens("s")], ["s.1"], "another run's tokens")
    same(await store.token("s", "r.1"), None, "a token of another run")


async def scatter_items_are_kept_by_index(store: Store) -> None:
    await new_run(store)
    same(list(await store.scatter_items("r", "each#1")), [], "the items of a scatter never run")
    items = [
        ScatterItemRecord("r", "each#1", 2, "done", "even", {"n": 4}, "b", order=1),
        ScatterItemRecord("r", "each#1", 0, "failed", None, None, None, order=2),
        ScatterItemRecord("r", "each#2", 0, "done", "odd", 1, 1, order=1),
    ]
    await store.commit(Commit("r", scatter=items))
    same(list(await store.scatter_items("r", "each#1")), [items[1], items[0]], "items by index")
    retried = replace(items[1], status="done", output="even", result=[0], order=3)
    await store.commit(Commit("r", scatter=[retried]))
    same(
        list(await store.scatter_items("r", "each#1")),
        [retried, items[0]],
        "items after one was written again",
    )
    same(list(await store.scatter_items("r", "each#2")), [items[2]], "another scatter's items")


async def checkpoints_round_trip(store: Store) -> None:
    run = replace(
        run_record("r", "parked"),
        checkpoint=Checkpoint(7, {"pay": 2, "ask": 1}, ["done", "audit"], "completed"),
    )
    await store.create_run(run, {})
    same((await store.get_run("r")).checkpoint, run.checkpoint, "a checkpoint created with a run")
    later = replace(run, checkpoint=Checkpoint(9, {}, [], None))
    await store.commit(Commit("r", run=later))
    got = await store.get_run("r")
    same(got.checkpoint, later.checkpoint, "a checkpoint written by a commit")
    cleared = replace(run, checkpoint=None)
    await store.commit(Commit("r", run=cleared))
    same((await store.get_run("r")).checkpoint, None, "a checkpoint cleared")
    same(await store.get_run("r"), cleared, "the run record")


_VALUE: dict[str, Any] = {
    "text": 'é ✓ "quoted" \\ /',
    "int": 7,
    "big": 2**53,
    "float": 0.1,
    "negative": -1.25e-7,
    "true": True,
    "none": None,
    "tuple": (1, ("a", None)),
    "nested": {"a/b~c": {"b": [{}, []]}},
    "status": S.DONE,
}
_JSON: dict[str, Any] = {**_VALUE, "tuple": [1, ["a", None]], "status": "done"}
"""What :data:`_VALUE` comes back as: tuples as lists, a string enum member as its value."""


async def json_values_round_trip(store: Store) -> None:
    await store.create_run(replace(run_record("r"), options=dict(_VALUE)), {"initial": _VALUE})
    await store.commit(
        Commit(
            "r",
            run=replace(run_record("r"), options=dict(_VALUE), result={"state": _VALUE}),
            tokens=[token("r", 1, data={"bookkeeping": _VALUE})],
            state={"set": _VALUE},
            events=[EventRecord("e", "r", T0, data={"data": _VALUE})],
            scatter=[ScatterItemRecord("r", "each#1", 0, "done", "ok", _VALUE, _VALUE)],
            parks=[park("r", 1, payload=_VALUE)],
            signal_answers=[SignalAnswer("k", "r", {"answer": _VALUE})],
        )
    )
    run = await store.get_run("r")
    (item,) = await store.scatter_items("r", "each#1")
    (kept,) = await store.parks(run_id="r")
    answer = await store.signal_answer("k")
    got: dict[str, Any] = {
        "run options": run.options,
        "run result": (run.result or {}).get("state"),
        "initial state": (await store.get_state("r"))["initial"],
        "state set by a commit": (await store.get_state("r"))["set"],
        "token data": (await store.tokens("r"))[0].data["bookkeeping"],
        "event data": (await store.history("r"))[0].data["data"],
        "scatter result": item.result,
        "scatter key": item.key,
        "park payload": kept.payload,
        "signal answer": answer.answer["answer"] if answer else None,
    }
    for where, value in got.items():
        same(value, _JSON, f"the {where}")
        true(type(value["tuple"]) is list, f"the {where}: a tuple comes back as a list")
        true(type(value["status"]) is str, f"the {where}: a string enum comes back as a str")
        true(type(value["float"]) is float, f"the {where}: a float comes back as a float")


class _Opaque:
    """An object JSON knows nothing of."""


def _contains_itself() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


async def values_that_are_not_json_are_refused(store: Store) -> None:
    await new_run(store)
    refused: dict[str, Any] = {
        "a set": {1, 2},
        "a datetime": T0,
        "bytes": b"raw",
        "NaN": math.nan,
        "an infinity": -math.inf,
        "an int key": {1: "one"},
        "an object": _Opaque(),
        "a value that contains itself": _contains_itself(),
    }
    for what, value in refused.items():
        with raises(NotJSONError, f"state holding {what}") as caught:
            await store.commit(Commit("r", state={"order": {"items": [1, 2, value]}}))
        error = caught.error
        true(isinstance(error, TypeError), f"{what}: NotJSONError is a TypeError")
        true(isinstance(error, FlowtideError), f"{what}: NotJSONError is a FlowtideError")
        true(not isinstance(error, StoreError), f"{what}: NotJSONError is not a StoreError")
        true(
            str(error).startswith("state/order/items/2"),
            f"{what}: the error names where the value is ({error})",
        )
    with raises(NotJSONError, "state holding a set") as caught:
        await store.commit(Commit("r", state={"order": {"items": [1, 2, {3}]}}))
    same(str(caught.error), "state/order/items/2: a set is not JSON", "the message for a set")
    when: datetime = T0
    elsewhere: dict[str, Commit] = {
        "run options": Commit("r", run=replace(run_record("r"), options={"at": when})),
        "run result": Commit("r", run=replace(run_record("r"), result={"at": when})),
        "token data": Commit("r", tokens=[token("r", 1, data={"at": when})]),
        "event data": Commit("r", events=[EventRecord("e", "r", T0, data={"at": when})]),
        "scatter result": Commit(
            "r", scatter=[ScatterItemRecord("r", "each#1", 0, "done", result={"at": when})]
        ),
        "scatter key": Commit("r", scatter=[ScatterItemRecord("r", "each#1", 0, "done", key=when)]),
        "park payload": Commit("r", parks=[park("r", 1, payload={"at": when})]),
        "signal answer": Commit("r", signal_answers=[SignalAnswer("k", "r", {"at": when})]),
    }
    for where, commit in elsewhere.items():
        with raises(NotJSONError, f"a datetime in the {where}"):
            await store.commit(commit)
    with raises(NotJSONError, "a datetime in a new run's state"):
        await store.create_run(run_record("s"), {"at": when})
    same(await store.get_state("r"), {"n": 1}, "the state after refused commits")
    same(list(await store.tokens("r")), [], "the tokens after refused commits")
    same(list(await store.history("r")), [], "the history after refused commits")
    same(await store.signal_answer("k"), None, "the answers after refused commits")
    same([r.id for r in await store.list_runs()], ["r"], "the runs after a refused creation")
    same((await store.get_run("r")).options, {"entrypoint": None}, "the run after refusals")


async def records_are_copies(store: Store) -> None:
    """Changing a record after writing it, or a value a read returned, changes nothing."""
    written = await _write_records(store)
    read = await _read_records(store)
    _change_written(written)
    _change_read(read)
    await _records_are_as_written(store)


@dataclass(slots=True)
class _Written:
    """The records :func:`records_are_copies` wrote, and what the commit returned: the check
    changes them afterwards."""

    run: RunRecord
    state: dict[str, Any]
    token: TokenRecord
    event: EventRecord
    park: ParkRecord
    item: ScatterItemRecord
    answer: SignalAnswer
    returned: Sequence[EventRecord]


@dataclass(slots=True)
class _Read:
    """What reads returned after the write: the check changes them afterwards."""

    run: RunRecord
    state: dict[str, Any]
    tokens: list[TokenRecord]
    history: list[EventRecord]
    parks: list[ParkRecord]
    items: list[ScatterItemRecord]
    answer: SignalAnswer | None


async def _write_records(store: Store) -> _Written:
    """A run created, then one commit of every kind of record, each holding nested values."""
    run = replace(
        run_record("r"),
        options={"input": {"a": [1]}},
        checkpoint=Checkpoint(1, {"p": 1}, ["end"], None),
    )
    state = {"order": {"lines": [1]}}
    await store.create_run(run, state)
    tok = token("r", 1, data={"window": {"timers": [1]}})
    event = EventRecord("e", "r", T0, data={"to": ["a"]})
    kept = park("r", 1, payload={"form": {"fields": ["x"]}})
    item = ScatterItemRecord("r", "each#1", 0, "done", "ok", {"r": [1]}, ["k"])
    answer = SignalAnswer("k", "r", {"receipt": {"at": "now"}})
    returned = await store.commit(
        Commit(
            "r",
            run=replace(run, result={"state": {"x": [1]}}),
            tokens=[tok],
            state={"more": {"b": [2]}},
            events=[event],
            scatter=[item],
            parks=[kept],
            signal_answers=[answer],
        )
    )
    return _Written(run, state, tok, event, kept, item, answer, returned)


async def _read_records(store: Store) -> _Read:
    """Every record of the run, read back once."""
    return _Read(
        await store.get_run("r"),
        await store.get_state("r"),
        list(await store.tokens("r")),
        list(await store.history("r")),
        list(await store.parks(run_id="r")),
        list(await store.scatter_items("r", "each#1")),
        await store.signal_answer("k"),
    )


def _change_written(written: _Written) -> None:
    """What was written, changed afterwards: the store must have kept its own copies."""
    written.run.options["input"]["a"].append(2)
    assert written.run.checkpoint is not None
    written.run.checkpoint.visits["p"] = 5
    written.state["order"]["lines"].append(2)
    written.token.data["window"]["timers"].append(2)
    written.token.status = S.DONE
    written.event.data["to"].append("b")
    written.park.payload["form"]["fields"].append("y")
    written.park.status = ParkStatus.CANCELLED
    written.item.result["r"].append(2)
    written.answer.answer["receipt"]["at"] = "later"
    written.returned[0].data["to"].append("c")


def _change_read(read: _Read) -> None:
    """What reads returned, changed afterwards: the store must have handed out copies."""
    read.run.options["input"]["a"].append(3)
    assert read.run.result is not None and read.run.checkpoint is not None
    read.run.result["state"]["x"].append(3)
    read.run.checkpoint.terminals.append("other")
    read.state["order"]["lines"].append(3)
    read.tokens[0].data["window"]["timers"].append(3)
    read.history[0].data["to"].append("d")
    read.parks[0].payload["form"]["fields"].append("z")
    read.items[0].result["r"].append(3)
    assert read.answer is not None
    read.answer.answer["receipt"]["at"] = "never"


async def _records_are_as_written(store: Store) -> None:
    """Every record reads back as it was when written, whatever was changed since."""
    same(
        await store.get_run("r"),
        replace(
            run_record("r"),
            options={"input": {"a": [1]}},
            checkpoint=Checkpoint(1, {"p": 1}, ["end"], None),
            result={"state": {"x": [1]}},
        ),
        "the run",
    )
    same(
        await store.get_state("r"),
        {"order": {"lines": [1]}, "more": {"b": [2]}},
        "the state",
    )
    same((await store.tokens("r"))[0].data, {"window": {"timers": [1]}}, "a token's data")
    same((await store.tokens("r"))[0].status, S.RUNNING, "a token's status")
    same((await store.history("r"))[0].data, {"to": ["a"]}, "an event's data")
    same((await store.parks(run_id="r"))[0].payload, {"form": {"fields": ["x"]}}, "a payload")
    same((await store.parks(run_id="r"))[0].status, ParkStatus.PARKED, "a park's status")
    same((await store.scatter_items("r", "each#1"))[0].result, {"r": [1]}, "an item's result")
    same(
        await store.signal_answer("k"),
        SignalAnswer("k", "r", {"receipt": {"at": "now"}}),
        "a signal answer",
    )


async def flows_are_stored_by_digest(store: Store) -> None:
    with raises(UnknownStoredFlow, "a flow never stored"):
        await store.get_flow("urn:f", "0" * 64)
    one = StoredFlow("urn:f", "1", "a" * 64, {"id": "urn:f", "version": "1", "nodes": [1.5]})
    changed = StoredFlow("urn:f", "1", "b" * 64, {"id": "urn:f", "version": "1", "nodes": []})
    await store.put_flow(one)
    await store.put_flow(one)
    await store.put_flow(changed)
    same(await store.get_flow("urn:f", "a" * 64), one, "the first document")
    same(await store.get_flow("urn:f", "b" * 64), changed, "the changed one, beside it")
    kept = await store.get_flow("urn:f", "a" * 64)
    kept.document["nodes"].append(2)
    same(await store.get_flow("urn:f", "a" * 64), one, "a document read, then changed")
