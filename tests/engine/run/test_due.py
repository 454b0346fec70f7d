"""Due-entry purposes: typed in the engine, text in the store, read back as they were written."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from flowtide.engine.run.due import (
    DEADLINE,
    RESUME,
    SIGNAL,
    TIMEOUT,
    DueKind,
    DuePurpose,
    parse_purpose,
)

WHEN = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("purpose", "text"),
    [
        (RESUME, ""),
        (TIMEOUT, "timeout"),
        (SIGNAL, "signal"),
        (DEADLINE, "deadline"),
        (DuePurpose.timer(3, 0), "timer:3:0"),
        (DuePurpose.timer(12, 7), "timer:12:7"),
        (DuePurpose.child_ended("c0ffee"), "child_ended:c0ffee"),
    ],
)
def test_each_purpose_is_written_and_read_back(purpose: DuePurpose, text: str) -> None:
    assert purpose.format() == text
    assert parse_purpose(text) == purpose


@pytest.mark.parametrize(
    "text", ["timer", "timer:1", "timer:a:1", "timer:1:", "timer:-1:2", "timer:²:1", "wait", "x"]
)
def test_text_flowtide_never_writes_reads_as_none(text: str) -> None:
    assert parse_purpose(text) is None


def test_an_entry_carries_the_purpose_as_the_store_keeps_it() -> None:
    entry = DuePurpose.timer(2, 1).entry(WHEN, "r", "r.1")
    assert (entry.when, entry.run_id, entry.token_id, entry.purpose) == (
        WHEN,
        "r",
        "r.1",
        "timer:2:1",
    )
    assert parse_purpose(entry.purpose) == DuePurpose(DueKind.TIMER, 2, 1)


def test_a_childs_wake_as_an_earlier_flowtide_wrote_it_names_no_child() -> None:
    assert parse_purpose("child_ended") == DuePurpose(DueKind.CHILD_ENDED)
