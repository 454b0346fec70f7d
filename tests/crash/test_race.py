"""Signals racing their deadlines against several worker processes, on SQLite and on
PostgreSQL: exactly one winner, every time, in agreement with the instant the store recorded
each signal, over 1,000 tries each (``race``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.crash.race import Race, race
from tests.postgres_schemas import Schemas


def _raced(raced: Race, log: Path) -> None:
    said = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    assert raced.problems == [], f"{raced.problems[:10]}; workers said:\n{said}"
    # Both sides won some: the race was real.
    assert raced.signal_won > 0 and raced.deadline_won > 0, raced


def test_a_signal_racing_its_deadline_has_exactly_one_winner_on_postgresql(
    schemas: Schemas, tmp_path: Path
) -> None:
    log = tmp_path / "workers.log"
    url = f"{schemas.url}?schema={schemas.new()}"
    _raced(asyncio.run(race(url, 1, log, tries=1000, batch=100)), log)


def test_a_signal_racing_its_deadline_has_exactly_one_winner_on_sqlite(tmp_path: Path) -> None:
    log = tmp_path / "workers.log"
    url = f"sqlite:///{tmp_path / 'race.db'}"
    _raced(asyncio.run(race(url, 2, log, tries=1000, batch=100)), log)
