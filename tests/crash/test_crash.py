"""Workers killed with SIGKILL at seeded random instants, on SQLite and on PostgreSQL: no run
lost, no token duplicated, no history gap, no transition applied twice (see ``harness``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.crash.harness import Round, play
from tests.postgres_schemas import Schemas

ROUNDS = 4
"""Rounds per store in each test run (``python -m tests.crash.soak`` plays many more)."""


@pytest.mark.parametrize("seed", range(ROUNDS))
def test_a_killed_sqlite_worker_loses_nothing(seed: int, tmp_path: Path) -> None:
    log = tmp_path / "workers.log"
    played = asyncio.run(play(f"sqlite:///{tmp_path / 'runs.db'}", seed, log))
    assert played.problems == [], explain(played, log)


@pytest.mark.parametrize("seed", range(ROUNDS))
def test_a_killed_postgres_worker_loses_nothing(
    seed: int, schemas: Schemas, tmp_path: Path
) -> None:
    url = f"{schemas.url}?schema={schemas.new()}"
    log = tmp_path / "workers.log"
    played = asyncio.run(play(url, seed, log))
    assert played.problems == [], explain(played, log)


def explain(played: Round, log: Path) -> str:
    said = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    return f"seed {played.seed}, killed after {played.killed_after:.3f} s; workers said:\n{said}"
