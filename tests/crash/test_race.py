"""Signals racing their deadlines against several worker processes on PostgreSQL: exactly one
winner, every time, over 1,000 tries (``race``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.crash.race import race
from tests.postgres_schemas import Schemas


def test_a_signal_racing_its_deadline_has_exactly_one_winner(
    schemas: Schemas, tmp_path: Path
) -> None:
    log = tmp_path / "workers.log"
    raced = asyncio.run(race(f"{schemas.url}?schema={schemas.new()}", 1, log, tries=1000))
    said = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    assert raced.problems == [], f"{raced.problems[:10]}; workers said:\n{said}"
    # Both sides won some: the race was real.
    assert raced.signal_won > 0 and raced.deadline_won > 0, raced
