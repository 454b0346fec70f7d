"""A run's errors keep what they know: the node's traceback and the error's own fields, in the
history's ``node_failed`` events and in the result, stored and read back."""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime, timedelta

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import ErrorInfo, Lifecycle, NodeContext, NodeFailed, RunResult, payload_of
from flowtide.model import Flow
from tests.engine.engine_helpers import of_kind, running, two_engines


class CardDeclined(Exception):
    """A node's own error that exposes its fields, as the engine's errors do."""

    def __init__(self, card: str, attempts: int) -> None:
        self.card = card
        self.attempts = attempts
        super().__init__(f"card {card} declined after {attempts} attempts")

    def details(self) -> dict[str, object]:
        return {"card": self.card, "attempts": self.attempts}


def charge_the_card(card: str) -> None:
    raise ValueError(f"the reader cannot read card {card}")


@node(outputs=["done"])
async def reads_card(ctx: NodeContext) -> str:
    charge_the_card("4242")
    return "done"


@node(outputs=["done"], execution="inline")
def declines(ctx: NodeContext) -> str:
    raise CardDeclined("4242", 3)


@node(outputs=["done"], timeout="PT5S")
async def sleeps(ctx: NodeContext) -> str:
    await ctx.clock.sleep(timedelta(minutes=1))
    return "done"


@node(outputs=["done"], execution="inline")
def answers_maybe(ctx: NodeContext) -> str:
    return "maybe"


@node(outputs=["done"], execution="process")
def fails_in_its_process(ctx: object) -> str:
    charge_the_card("1111")
    return "done"


def one_task(impl: object, **settings: object) -> Flow:
    return (
        FlowBuilder("urn:test:flow:errors")
        .task("pay", impl, {"done": "end"}, **settings)  # type: ignore[arg-type]
        .terminal("end")
        .build()
    )


async def test_a_nodes_traceback_is_kept_in_the_history_and_the_result() -> None:
    async with running() as (engine, _clock):
        result = await engine.run(one_task(reads_card))
        history = await engine.history(result.run_id)
    assert result.lifecycle is Lifecycle.FAILED
    (error,) = result.errors
    assert (error.type, error.message, error.placement) == (
        "ValueError",
        "the reader cannot read card 4242",
        "pay",
    )
    assert error.details == {}
    assert error.traceback is not None
    assert "in reads_card" in error.traceback
    assert "in charge_the_card" in error.traceback
    assert error.traceback.rstrip().endswith("ValueError: the reader cannot read card 4242")
    (failed,) = of_kind(history, "node_failed")
    assert payload_of(failed, NodeFailed).error == {
        "type": "ValueError",
        "message": "the reader cannot read card 4242",
        "details": {},
        "traceback": error.traceback,
    }


async def test_a_retried_failure_keeps_each_attempts_traceback() -> None:
    flow = one_task(reads_card, retry={"max_attempts": 2, "backoff": "fixed", "initial": "PT1S"})
    async with running() as (engine, _clock):
        result = await engine.run(flow)
        history = await engine.history(result.run_id)
    failures = of_kind(history, "node_failed")
    assert [e.attempt for e in failures] == [1, 2]
    assert all("in charge_the_card" in e.data["error"]["traceback"] for e in failures)
    assert result.errors[0].traceback is not None


async def test_explain_after_the_run_failed_says_the_visit_failed_and_with_what() -> None:
    flow = one_task(reads_card, retry={"max_attempts": 2, "backoff": "fixed", "initial": "PT1S"})
    async with running() as (engine, _clock):
        result = await engine.run(flow)
        explained = await engine.explain(result.run_id, placement="pay")
        history = await engine.history(result.run_id)
    first_failure, last_failure = of_kind(history, "node_failed")
    assert last_failure.at > first_failure.at
    # The first failure was retried: the visit ended with the second.
    assert (explained.visit, explained.timeout) == (1, None)
    assert (explained.ending, explained.ended_at, explained.ended_by) == (
        "failed",
        last_failure.at,
        "ValueError",
    )
    assert f"failed at {last_failure.at.isoformat()} (ValueError)" in str(explained)


async def test_a_nodes_own_error_exposes_its_fields_through_details() -> None:
    async with running() as (engine, _clock):
        result = await engine.run(one_task(declines))
        history = await engine.history(result.run_id)
    (error,) = result.errors
    assert error.type == "CardDeclined"
    assert error.details == {"card": "4242", "attempts": 3}
    assert of_kind(history, "node_failed")[0].data["error"]["details"] == error.details


async def test_a_node_timeout_keeps_its_node_placement_and_budget() -> None:
    async with running() as (engine, _clock):
        result = await engine.run(one_task(sleeps))
    (error,) = result.errors
    assert error.type == "NodeTimeoutError"
    assert error.details == {"node": sleeps.id, "placement": "pay", "budget": "PT5S"}
    # The engine's own verdict: what it knows is in the details, there is no code to trace.
    assert error.traceback is None


async def test_an_undeclared_output_keeps_the_output_and_the_declared_ones() -> None:
    async with running() as (engine, _clock):
        result = await engine.run(one_task(answers_maybe))
    (error,) = result.errors
    assert error.type == "UndeclaredOutputError"
    assert error.details == {
        "node": answers_maybe.id,
        "placement": "pay",
        "output": "maybe",
        "declared": ["done"],
    }


async def test_errors_are_stored_with_the_result_and_read_back_whole() -> None:
    flow = one_task(declines)
    async with two_engines(flow, autojump=True) as (a, b, _clock, _store):
        ended = await a.run(flow)
        stored = await b.wait(ended.run_id)  # b did not run it: it reads the stored result
    assert stored.errors == ended.errors
    assert stored.errors[0].details == {"card": "4242", "attempts": 3}
    assert stored.errors[0].traceback is not None
    assert "in declines" in stored.errors[0].traceback
    assert RunResult.from_dict(ended.to_dict()) == ended


async def test_a_process_isolated_nodes_traceback_comes_from_its_process() -> None:
    async with running(autojump=False) as (engine, _clock):
        result = await asyncio.wait_for(engine.run(one_task(fails_in_its_process)), 60)
    (error,) = result.errors
    assert error.traceback is not None
    assert "in fails_in_its_process" in error.traceback
    assert "ValueError: the reader cannot read card 1111" in error.traceback


@node(outputs=["done"], execution="inline")
def opens_the_database(ctx: NodeContext) -> str:
    raise ConnectionError("no database")


class LedgerClosed(Exception):
    def details(self) -> dict[str, object]:
        return {"ledger": "eu-1"}


@node(outputs=["done"], execution="inline")
def opens_the_ledger(ctx: NodeContext) -> str:
    raise LedgerClosed("the ledger is closed")


def with_pre_phase(impl: object) -> Flow:
    return (
        FlowBuilder("urn:test:flow:pre-errors")
        .phase("connect", "pre", impl)  # type: ignore[arg-type]
        .task("pay", declines, {"done": "end"})
        .terminal("end")
        .entrypoint("main", "pay")
        .build()
    )


async def test_a_failing_pre_phase_keeps_its_traceback() -> None:
    async with running() as (engine, _clock):
        result = await engine.run(with_pre_phase(opens_the_database))
        history = await engine.history(result.run_id)
    (error,) = result.errors
    assert (error.type, error.placement) == ("ConnectionError", "connect")
    assert error.message == "pre phase 'connect' failed: ConnectionError: no database"
    assert error.traceback is not None
    assert "in opens_the_database" in error.traceback
    (failed,) = of_kind(history, "node_failed")
    assert payload_of(failed, NodeFailed).error["traceback"] == error.traceback


async def test_a_failing_pre_phase_keeps_its_details() -> None:
    async with running() as (engine, _clock):
        result = await engine.run(with_pre_phase(opens_the_ledger))
    (error,) = result.errors
    assert (error.type, error.details) == ("LedgerClosed", {"ledger": "eu-1"})
    assert error.message == "pre phase 'connect' failed: LedgerClosed: the ledger is closed"


class Odd:
    def __repr__(self) -> str:
        return "<odd>"


class Awkward(Exception):
    def details(self) -> dict[object, object]:
        return {
            "at": datetime(2026, 1, 1, 9, 30, tzinfo=UTC),
            "wait": timedelta(minutes=5),
            "tags": ("a", "b"),
            "ratio": math.nan,
            "odd": Odd(),
            3: {"nested": [1.5, None]},
        }


class Broken(Exception):
    def details(self) -> dict[str, object]:
        raise RuntimeError("details are broken")


class NotAMapping(Exception):
    def details(self) -> list[str]:
        return ["not", "fields"]


def test_details_are_made_json_values_and_a_broken_details_gives_none() -> None:
    assert ErrorInfo.of(Awkward()).details == {
        "at": "2026-01-01T09:30:00+00:00",
        "wait": "PT5M",
        "tags": ["a", "b"],
        "ratio": "nan",
        "odd": "<odd>",
        "3": {"nested": [1.5, None]},
    }
    assert ErrorInfo.of(Broken()).details == {}
    assert ErrorInfo.of(NotAMapping()).details == {}
    assert ErrorInfo.of(ValueError("plain")).details == {}


def test_an_error_never_raised_has_no_traceback() -> None:
    assert ErrorInfo.of(ValueError("never raised")).traceback is None
