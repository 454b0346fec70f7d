"""``flowtide run`` and the runnable dispatcher demo."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from flowtide.cli.examples import examples_dir
from flowtide.cli.run import demo_run, run
from flowtide.demo import run_dispatcher_demo
from flowtide.engine import Lifecycle


def app() -> typer.Typer:
    cli = typer.Typer()
    cli.command("run")(run)
    cli.command("demo-run")(demo_run)
    return cli


def example(name: str) -> Path:
    folder = examples_dir()
    assert folder is not None
    return folder / name


async def test_the_dispatcher_demo_runs_every_branch_and_the_timeout() -> None:
    runs = await run_dispatcher_demo()
    summary = [(r.result.lifecycle, r.path[-1], r.elapsed.total_seconds()) for r in runs]
    assert summary == [
        (Lifecycle.COMPLETED, "end", 1.6),
        (Lifecycle.COMPLETED, "end", 0.8),
        (Lifecycle.COMPLETED, "end", 0.0),
        (Lifecycle.FAILED, "classify-message", 60.0),
    ]
    assert runs[1].path == ("setup", "classify-message", "park-for-operator", "end")
    assert runs[3].result.errors[0].type == "NodeTimeoutError"
    assert runs[3].result.interrupted_at is not None
    assert runs[3].result.interrupted_at.node == "classify-message"


def test_run_prints_json_and_exits_by_lifecycle() -> None:
    runner = CliRunner()
    doc = str(example("support-dispatcher.jsonld"))
    ok = runner.invoke(
        app(),
        [
            "run",
            doc,
            "--input",
            '{"message": "where is my parcel?"}',
            "--nodes",
            "flowtide.demo.dispatcher",
            "--json",
        ],
    )
    assert ok.exit_code == 0, ok.output
    data = json.loads(ok.output)
    assert (data["lifecycle"], data["outcome"], data["state"]["sent"]) == (
        "completed",
        "completed",
        True,
    )
    bad = runner.invoke(app(), ["run", doc, "--input", "[1]"])
    assert bad.exit_code == 2


def test_demo_run_prints_a_table_or_json() -> None:
    table = CliRunner().invoke(app(), ["demo-run"])
    assert table.exit_code == 0, table.output
    assert "completed" in table.output and "failed" in table.output
    result = CliRunner().invoke(app(), ["demo-run", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [d["result"]["lifecycle"] for d in data] == ["completed"] * 3 + ["failed"]
    assert data[3]["result"]["errors"][0]["type"] == "NodeTimeoutError"
