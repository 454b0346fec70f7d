"""``flowtide run`` and the dispatcher part of ``flowtide demo``."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from flowtide.cli import ExitCode, app
from flowtide.cli.examples import examples_dir
from flowtide.demo import run_dispatcher_demo
from flowtide.engine import Lifecycle

runner = CliRunner()


def example(name: str) -> Path:
    folder = examples_dir()
    assert folder is not None
    return folder / name


async def test_the_dispatcher_demo_runs_every_branch_and_the_timeout() -> None:
    runs = await run_dispatcher_demo()
    summary = [(r.result.lifecycle, r.path[-1], r.elapsed.total_seconds()) for r in runs]
    assert summary == [
        (Lifecycle.COMPLETED, "end", 1.6),
        (Lifecycle.COMPLETED, "end", 300.8),
        (Lifecycle.COMPLETED, "end", 0.0),
        (Lifecycle.FAILED, "classify-message", 60.0),
    ]
    # The escalation parks for an operator, whose reply (signalled 5 minutes later) is sent.
    handover = runs[1]
    assert handover.parked is not None
    assert handover.parked.lifecycle is Lifecycle.PARKED
    assert [p.placement for p in handover.parked.parked] == ["park-for-operator"]
    assert handover.path == (
        "setup",
        "classify-message",
        "park-for-operator",
        "park-for-operator",
        "send-response",
        "end",
    )
    assert handover.result.state["response"].startswith("Hello, this is Sam")
    assert handover.result.state["sent"] is True
    assert runs[3].result.errors[0].type == "NodeTimeoutError"
    assert runs[3].result.interrupted_at is not None
    assert runs[3].result.interrupted_at.node == "classify-message"


def test_run_prints_json_and_exits_by_lifecycle() -> None:
    doc = str(example("support-dispatcher.jsonld"))
    ok = runner.invoke(
        app,
        [
            "run",
            doc,
            "--input",
            '{"message": "where is my parcel?", "modelLatency": 0}',
            "--nodes",
            "flowtide.demo.dispatcher",
            "--json",
        ],
    )
    assert ok.exit_code == ExitCode.OK, ok.output
    data = json.loads(ok.output)
    assert (data["lifecycle"], data["outcome"], data["state"]["sent"]) == (
        "completed",
        "completed",
        True,
    )


BOOM = ("-n", "tests.cli.nodes_for_run")
"""The module that registers the node of :func:`boom_flow`."""


def boom_flow(tmp_path: Path) -> Path:
    doc = tmp_path / "boom.yaml"
    doc.write_text(
        "id: urn:test:boom\n"
        "entrypoints: {main: explode}\n"
        "placements:\n"
        "  - {id: explode, kind: task, node: 'tests.cli.nodes_for_run:boom', routes: {done: end}}\n"
        "  - {id: end, kind: terminal}\n"
    )
    return doc


def test_run_with_a_failing_flow_exits_1(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", str(boom_flow(tmp_path)), *BOOM])
    assert result.exit_code == ExitCode.FAILURE, result.output
    text = " ".join(result.output.split())
    assert "failed" in text
    assert "RuntimeError at explode: the card reader is on fire" in text


def test_run_refuses_bad_input_with_exit_2() -> None:
    doc = str(example("support-dispatcher.jsonld"))
    assert runner.invoke(app, ["run", doc, "--input", "[1]"]).exit_code == ExitCode.BAD_INPUT
    assert runner.invoke(app, ["run", doc, "--input", "{"]).exit_code == ExitCode.BAD_INPUT
    missing = runner.invoke(app, ["run", doc, "-n", "flowtide_no_such_module"])
    assert missing.exit_code == ExitCode.BAD_INPUT


def test_demo_runs_the_dispatcher_as_json() -> None:
    result = runner.invoke(app, ["demo", "--json"])
    assert result.exit_code == ExitCode.OK, result.output
    data = json.loads(result.output)
    dispatcher = data["dispatcher"]
    assert [d["result"]["lifecycle"] for d in dispatcher] == ["completed"] * 3 + ["failed"]
    assert dispatcher[3]["result"]["errors"][0]["type"] == "NodeTimeoutError"
    checkout = {c["model"]: c for c in data["checkout"]}
    assert {m: (c["outcome"], c["ended_after_seconds"]) for m, c in checkout.items()} == {
        "node anchor": ("expired", 600.0),
        "park anchor": ("paid", 630.0),
        "wait branch + first join": ("expired", 600.0),
    }
    late = checkout["node anchor"]["refused"]
    assert late[0]["minute"] == 10.5
    assert "expired at 09:10:00Z, 30 s before this signal" in late[0]["reason"]


def test_run_json_carries_each_errors_details_and_traceback(tmp_path: Path) -> None:
    doc = str(boom_flow(tmp_path))
    result = runner.invoke(app, ["run", doc, *BOOM, "--json", "--history"])
    assert result.exit_code == ExitCode.FAILURE, result.output
    data = json.loads(result.output)
    (error,) = data["errors"]
    assert (error["type"], error["placement"], error["details"]) == ("RuntimeError", "explode", {})
    assert "in boom" in error["traceback"]
    assert error["traceback"].rstrip().endswith("RuntimeError: the card reader is on fire")
    (failed,) = [e for e in data["history"] if e["kind"] == "node_failed"]
    assert failed["data"]["error"]["traceback"] == error["traceback"]


def test_run_prints_a_nodes_traceback_with_flowtide_debug(tmp_path: Path) -> None:
    doc = str(boom_flow(tmp_path))
    quiet = runner.invoke(app, ["run", doc, *BOOM])
    assert "Traceback" not in quiet.output
    assert "FLOWTIDE_DEBUG=1" in quiet.output
    loud = runner.invoke(app, ["run", doc, *BOOM], env={"FLOWTIDE_DEBUG": "1"})
    assert loud.exit_code == ExitCode.FAILURE, loud.output
    assert "Traceback (most recent call last)" in loud.output
    assert "in boom" in loud.output
