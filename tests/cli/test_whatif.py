"""``flowtide whatif``: the report of recorded runs played again with edited settings, bad edits
refused with exit 2, and ``--save`` making a version new runs use."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path

from typer.testing import CliRunner

from flowtide.cli.app import app
from flowtide.cli.common import ExitCode
from flowtide.clock import VirtualClock
from flowtide.engine import Engine
from flowtide.store import SQLiteStore
from tests.simulation.test_whatif import DELAYS, START, nodes, record

runner = CliRunner()
FLOW = "urn:test:flow:payments"


def recorded(tmp_path: Path, delays: list[int | None]) -> str:
    path = tmp_path / "runs.db"

    async def go() -> None:
        async with SQLiteStore(path) as store:
            await record(store, delays)

    asyncio.run(go())
    return f"sqlite:///{path}"


def test_a_shorter_timeout_is_reported_per_placement(tmp_path: Path) -> None:
    store = recorded(tmp_path, [*DELAYS])
    result = runner.invoke(
        app, ["whatif", FLOW, "--set", "collect-payment.timeout=PT5M", "--store", store]
    )
    assert result.exit_code == ExitCode.OK, result.output
    assert "5 of its last 5 run(s) played again" in result.output
    assert (
        "collect-payment: 3 of the last 5 runs would have expired (runs run02, run03, run04)"
        in result.output
    )
    assert "run02: completed 'paid' after 6:00 → completed 'expired' after 5:00" in result.output


def test_json_and_last_and_a_timer_given_as_json(tmp_path: Path) -> None:
    store = recorded(tmp_path, [*DELAYS])
    timers = '[{"after":"PT5M","output":"remind"}]'
    edit = f"collect-payment.timers={timers}"
    args = ["whatif", FLOW, "--set", edit, "--last", "3", "--store", store, "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == ExitCode.OK, result.output
    report = json.loads(result.output)
    assert report["compared"] == ["run02", "run03", "run04"]
    (change,) = report["placements"]
    assert change["reminders"] == {"before": 0, "after": 3}
    assert change["summary"] == "collect-payment: 3 reminders more"


def test_bad_edits_exit_2_with_a_located_line_and_save_nothing(tmp_path: Path) -> None:
    store = recorded(tmp_path, [2])
    for given, said in [
        ("collect-payment.timeout=soon", "collect-payment.timeout: 'soon' is not an ISO 8601"),
        ("collect-payment", "an edit is PLACEMENT.SETTING=VALUE"),
        ("nowhere.timeout=PT1M", "has no placement 'nowhere'"),
    ]:
        result = runner.invoke(app, ["whatif", FLOW, "--set", given, "--save", "--store", store])
        assert result.exit_code == ExitCode.BAD_INPUT, result.output
        assert said in result.output
        assert "Traceback" not in result.output
    unknown = runner.invoke(app, ["whatif", "urn:x", "--set", "a.timeout=PT1M", "--store", store])
    assert unknown.exit_code == ExitCode.BAD_INPUT
    assert f"no flow 'urn:x' in the store (flows: {FLOW})" in unknown.output
    listed = runner.invoke(app, ["flows", "--store", store, "--json"])
    assert [v["version"] for v in json.loads(listed.output)] == ["3"]


def test_save_registers_a_version_new_runs_use_while_old_runs_keep_theirs(tmp_path: Path) -> None:
    store = recorded(tmp_path, [2, 7])
    result = runner.invoke(
        app, ["whatif", FLOW, "--set", "collect-payment.timeout=PT5M", "--save", "--store", store]
    )
    assert result.exit_code == ExitCode.OK, result.output
    assert f"saved: {FLOW} version 4" in result.output

    async def a_new_run() -> tuple[str, str, str | None]:
        clock = VirtualClock(START + timedelta(days=1))
        try:
            async with (
                SQLiteStore(tmp_path / "runs.db") as kept,
                Engine(store=kept, clock=clock, registry=nodes()) as engine,
            ):
                handle = await engine.start(FLOW, {}, run_id="fresh")
                await clock.settle()
                await clock.advance(timedelta(minutes=6))  # past the new window, not the old
                ended = await handle.result()
                old = await kept.get_run("run01")
                return (await kept.get_run("fresh")).flow_version, old.flow_version, ended.outcome
        finally:
            await clock.aclose()

    assert asyncio.run(a_new_run()) == ("4", "3", "expired")
