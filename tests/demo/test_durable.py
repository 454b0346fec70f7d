"""The durable scene of ``flowtide demo``, played for real: separate ``flowtide`` processes on a
SQLite file, one worker killed on the way."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from flowtide.demo.durable import play_durable
from flowtide.store.sqlite import SQLiteStore

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def window() -> float:
    """Seconds of the payment window here: it must outlast three ``flowtide`` processes started
    one after another and worker 1's lease. The demo's 8 s do on an idle machine; a busy one can
    take longer than that to start one process. Real processes are the point of this scene, so
    the budget is real time: generous, and measured on the machine as it is now (the test
    lasts as long as the window: it ends the run)."""
    began = time.monotonic()
    subprocess.run([sys.executable, "-m", "flowtide", "--version"], check=True, capture_output=True)
    return float(round(8 + 6 * (time.monotonic() - began)))


def test_the_payment_outlives_its_worker_and_the_late_callback_is_refused(
    tmp_path: Path,
) -> None:
    scene = play_durable(EXAMPLES / "checkout-node-anchor.yaml", tmp_path, window=window())
    who = [s.who for s in scene.steps]
    assert who.index("kill -9") < who.index("customer") < who.index("worker 2")
    assert (scene.lifecycle, scene.outcome, scene.refused) == ("completed", "expired", "expired")
    history, state = asyncio.run(_stored(tmp_path / "payments.db", scene.run_id))
    assert state["tries"] == 2  # the second try was asked by the second worker
    kinds = [e.kind for e in history]
    assert kinds.count("node_timed_out") == 1 and kinds.count("run_finished") == 1
    assert [e.seq for e in history] == list(range(1, len(history) + 1))


async def _stored(path: Path, run_id: str) -> tuple[list[Any], dict[str, Any]]:
    async with SQLiteStore(path) as store:
        return list(await store.history(run_id)), await store.get_state(run_id)
