"""``flowtide simulate``: the bundled payment stories on both models, scripted nodes, signals and
their answers, located script mistakes, and the JSON; all on the virtual clock."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from flowtide.cli import ExitCode, app
from flowtide.simulation import parse_script

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DOC = (ROOT / "docs" / "cli.md").read_text()
NODE_ANCHOR = EXAMPLES / "checkout-node-anchor.yaml"
WAIT_BRANCH = EXAMPLES / "checkout-wait-branch.yaml"
STAND_INS = ["--nodes", "flowtide.demo.checkout"]
MODELS = ["node-anchor", "wait-branch"]

runner = CliRunner()


def simulate(flow: Path | str, script: Path | str, *more: str) -> Result:
    return runner.invoke(app, ["simulate", str(flow), "--script", str(script), *more])


def story(model: str, *more: str) -> Result:
    """The bundled story played on one checkout model, with the stand-in nodes."""
    return simulate(
        f"examples/checkout-{model}.yaml",
        f"examples/checkout-{model}.simulate.yaml",
        *STAND_INS,
        *more,
    )


def write(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def lines(result: Result) -> list[str]:
    """The timeline's lines, each as ``<time> <words>``."""
    return [" ".join(line.split()) for line in result.stdout.splitlines() if line.startswith("  ")]


@pytest.fixture(autouse=True)
def from_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


@pytest.fixture(scope="module")
def played() -> dict[str, dict[str, Any]]:
    """Both stories as JSON."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.chdir(ROOT)
        results = {model: story(model, "--json") for model in MODELS}
    for result in results.values():
        assert result.exit_code == ExitCode.OK, result.output
    return {model: json.loads(result.stdout) for model, result in results.items()}


def events(data: dict[str, Any], kind: str, placement: str | None = None) -> list[dict[str, Any]]:
    return [
        m
        for m in data["timeline"]
        if m["kind"] == kind and (placement is None or m["placement"] == placement)
    ]


# -- the bundled stories ---------------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
def test_the_docs_show_what_the_stories_print(model: str) -> None:
    command = (
        f"flowtide simulate examples/checkout-{model}.yaml \\\n"
        f"    --script examples/checkout-{model}.simulate.yaml --nodes flowtide.demo.checkout\n"
    )
    shown = re.search(re.escape(command) + r"```\n\n```text\n(.*?)```", DOC, re.S)
    assert shown is not None
    result = story(model)
    assert result.exit_code == ExitCode.OK, result.output
    assert result.stdout == shown.group(1)


def test_the_node_anchor_expires_at_ten_minutes_whatever_the_retries(
    played: dict[str, dict[str, Any]],
) -> None:
    data = played["node-anchor"]
    parks = events(data, "parked", "collect-payment")
    assert [p["after_seconds"] for p in parks] == [0, 150, 330, 570]
    # Every visit's window ends at +10:00, measured from the first arrival.
    assert {p["data"]["deadline"] for p in parks} == {"2026-01-01T09:10:00+00:00"}
    assert all("anchored at the node's first arrival, +0:00" in p["text"] for p in parks)
    (timed_out,) = events(data, "node_timed_out")
    assert (timed_out["after_seconds"], timed_out["data"]["to"]) == (600, ["expired"])
    *taken, late = [m["signal"] for m in events(data, "signal")]
    assert all(s["accepted"] for s in taken)
    assert (late["key"], late["reason"], late["closed_at"]) == (
        "charge-sim-4",
        "expired",
        "2026-01-01T09:10:00+00:00",
    )
    (window,) = data["windows"]
    assert window["placement"] == "collect-payment"
    assert (window["anchor"], window["anchor_after_seconds"], window["anchor_visit"]) == (
        "node",
        0,
        1,
    )
    assert (window["deadline_after_seconds"], window["visit"], window["ending"]) == (
        600,
        4,
        "timed_out",
    )
    assert (window["source"], window["anchor_source"]) == ("placement", "placement")
    result = data["result"]
    assert (result["lifecycle"], result["outcome"], result["ended_after_seconds"]) == (
        "completed",
        "expired",
        600,
    )
    assert result["stopped_after_seconds"] == 630


def test_the_wait_branch_races_a_wait_and_cancels_the_payment(
    played: dict[str, dict[str, Any]],
) -> None:
    data = played["wait-branch"]
    parks = events(data, "parked", "collect-payment")
    assert [p["after_seconds"] for p in parks] == [0, 150, 330, 570]
    # No window on the payment: the wait is the budget.
    assert {p["data"]["deadline"] for p in parks} == {None}
    assert events(data, "node_timed_out") == []
    (cancelled,) = events(data, "token_cancelled")
    assert (cancelled["placement"], cancelled["after_seconds"]) == ("collect-payment", 600)
    assert cancelled["text"] == "collect-payment cancelled: join first-to-finish fired without it"
    late = events(data, "signal")[-1]
    assert late["signal"]["reason"] == "cancelled"
    assert late["text"].endswith(
        "refused, cancelled: join first-to-finish fired without it at +10:00"
    )
    (window,) = data["windows"]
    assert (window["placement"], window["kind"], window["deadline_after_seconds"]) == (
        "payment-window",
        "wait",
        600,
    )
    assert (data["result"]["outcome"], data["result"]["ended_after_seconds"]) == ("expired", 600)


def test_the_timelines_read_as_the_docs_say() -> None:
    anchor, branch = lines(story("node-anchor")), lines(story("wait-branch"))
    assert (
        "+9:30 collect-payment parked (key charge-sim-4), window ends +10:00 "
        "(anchored at the node's first arrival, +0:00)"
    ) in anchor
    assert "+10:00 collect-payment timed out: its window of PT10M ended at +10:00 → expired" in (
        anchor
    )
    assert (
        '+10:30 signal key charge-sim-4 {"gateway": "paid"}: refused, expired: the park\'s '
        "window ended at +10:00"
    ) in anchor
    assert "+9:30 collect-payment parked (key charge-sim-4), with no window" in branch
    assert "+0:00 payment-window waits until +10:00" in branch
    assert "+10:00 payment-window: the wait is over → first-to-finish" in branch


def test_with_the_park_anchor_every_try_gets_ten_fresh_minutes(tmp_path: Path) -> None:
    # As the docs say: change the anchor to 'park' and play the story again.
    text = NODE_ANCHOR.read_text().replace("timeout_anchor: node", "timeout_anchor: park")
    flow = tmp_path / "checkout-park-anchor.yaml"
    flow.write_text(text)
    result = simulate(flow, "examples/checkout-node-anchor.simulate.yaml", *STAND_INS)
    assert result.exit_code == ExitCode.OK, result.output
    said = lines(result)
    assert (
        "+9:30 collect-payment parked (key charge-sim-4), window ends +19:30 "
        "(anchored at this park, +9:30)"
    ) in said
    assert '+10:30 signal key charge-sim-4 {"gateway": "paid"}: accepted' in said
    assert "Result: completed, outcome 'paid', ended at +10:30" in result.stdout


# -- scripted nodes --------------------------------------------------------------------------


def test_scripted_outputs_parks_raises_and_delays_need_no_code(tmp_path: Path) -> None:
    script = write(
        tmp_path / "story.yaml",
        {
            "nodes": {
                "collect-payment": [
                    {"after": "PT2M", "output": "declined"},
                    {"park": {"key": "pay-1", "payload": {"amount": 10}}},
                    {"raise": "gateway down"},
                ],
                "offer-retry": [{"output": "retry"}, {"after": "PT1M", "output": "retry"}],
            },
            "signals": [{"at": "PT4M", "key": "pay-1", "output": "declined"}],
        },
    )
    result = simulate(NODE_ANCHOR, script)
    assert result.exit_code == ExitCode.OK, result.output
    said = lines(result)
    for line in [
        "+2:00 collect-payment returned 'declined' → offer-retry",
        "+2:00 collect-payment parked (key pay-1), window ends +10:00 (anchored at the node's "
        "first arrival, +0:00)",
        "+4:00 signal key pay-1, output 'declined': accepted",
        "+4:00 collect-payment took the signal: output 'declined' → offer-retry",
        "+5:00 offer-retry returned 'retry' → collect-payment",
        "+5:00 collect-payment failed: ScriptedFailure: gateway down",
        "+5:00 the run ended: failed; ScriptedFailure: gateway down",
    ]:
        assert line in said
    assert "Result: failed, ended at +5:00" in result.stdout
    assert "ScriptedFailure at collect-payment: gateway down" in result.stdout


def test_an_undeclared_scripted_output_is_refused(tmp_path: Path) -> None:
    script = write(tmp_path / "story.yaml", {"nodes": {"collect-payment": [{"output": "maybe"}]}})
    result = simulate(NODE_ANCHOR, script, *STAND_INS)
    assert result.exit_code == ExitCode.BAD_INPUT
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"{script}: error: /nodes/collect-payment/0/output: the node at 'collect-payment' does "
        "not declare output 'maybe' (it declares: paid, declined)",
        f"flowtide: {script} is not a valid simulation script",
    ]


def test_an_unscripted_node_without_code_is_bad_input(tmp_path: Path) -> None:
    script = write(tmp_path / "story.yaml", {"nodes": {"collect-payment": [{"park": {}}]}})
    result = simulate(NODE_ANCHOR, script)
    assert result.exit_code == ExitCode.BAD_INPUT
    assert result.stdout == ""
    (problem, last) = result.stderr.splitlines()
    assert "placement 'offer-retry'" in problem
    assert last.endswith("or script its placement (the script's 'nodes')")


def test_a_scripted_placement_needs_no_code_even_by_reference(tmp_path: Path) -> None:
    flow = write(
        tmp_path / "flow.yaml",
        {
            "id": "urn:test:flow:ref",
            "entrypoints": {"main": "work"},
            "node_types": [{"id": "nowhere_to_be_found:collect", "outputs": ["done"]}],
            "placements": [
                {
                    "id": "work",
                    "kind": "task",
                    "node": "nowhere_to_be_found:collect",
                    "routes": {"done": "end"},
                },
                {"id": "end", "kind": "terminal"},
            ],
        },
    )
    script = write(
        tmp_path / "story.yaml", {"nodes": {"work": [{"after": "PT1H", "output": "done"}]}}
    )
    result = simulate(flow, script)
    assert result.exit_code == ExitCode.OK, result.output
    assert "+1:00:00 work returned 'done' → end" in lines(result)
    unscripted = simulate(flow, write(tmp_path / "none.yaml", {}))
    assert unscripted.exit_code == ExitCode.BAD_INPUT
    assert "node 'nowhere_to_be_found:collect' is not registered" in unscripted.stderr


# -- signals -----------------------------------------------------------------------------------


def test_refused_signals_are_lines_with_their_reason(tmp_path: Path) -> None:
    script = write(
        tmp_path / "story.yaml",
        {
            "signals": [
                {"at": "PT1M", "placement": "offer-retry", "payload": {"choice": "retry"}},
                {"at": "PT2M", "key": "nobody"},
                {"at": "PT12M", "key": "charge-sim-1", "payload": {"gateway": "paid"}},
            ]
        },
    )
    result = simulate(NODE_ANCHOR, script, *STAND_INS, "--json")
    assert result.exit_code == ExitCode.OK, result.output
    sent = [m for m in json.loads(result.stdout)["timeline"] if m["kind"] == "signal"]
    assert [(m["after_seconds"], m["signal"]["reason"]) for m in sent] == [
        (60, "unknown"),
        (120, "unknown"),
        (720, "expired"),
    ]
    assert sent[2]["text"] == (
        'signal key charge-sim-1 {"gateway": "paid"}: refused, expired: the park\'s window '
        "ended at +10:00"
    )


def test_a_run_still_parked_when_the_clock_stops(tmp_path: Path) -> None:
    script = write(tmp_path / "story.yaml", {"until": "PT5M"})
    result = simulate(NODE_ANCHOR, script, *STAND_INS)
    assert result.exit_code == ExitCode.OK, result.output
    assert "Result: parked: not ended when the clock stopped at +5:00 (the script's 'until')" in (
        result.stdout
    )
    assert "parked at collect-payment (key charge-sim-1), window ends +10:00" in result.stdout


def test_a_subflow_of_another_document(tmp_path: Path) -> None:
    child = write(
        tmp_path / "review.yaml",
        {
            "id": "urn:test:flow:review",
            "entrypoints": {"main": "approve"},
            "node_types": [{"id": "urn:test:node:approve", "outputs": ["approved"]}],
            "placements": [
                {
                    "id": "approve",
                    "kind": "task",
                    "node": "urn:test:node:approve",
                    "routes": {"approved": "ok"},
                },
                {"id": "ok", "kind": "terminal"},
            ],
        },
    )
    parent = write(
        tmp_path / "parent.yaml",
        {
            "id": "urn:test:flow:parent",
            "entrypoints": {"main": "review"},
            "placements": [
                {
                    "id": "review",
                    "kind": "subflow",
                    "flow": "urn:test:flow:review",
                    "routes": {"success": "end"},
                },
                {"id": "end", "kind": "terminal"},
            ],
        },
    )
    script = write(
        tmp_path / "story.yaml",
        {
            "nodes": {"approve": [{"park": {"key": "review-1"}}]},
            "signals": [{"at": "PT3H", "key": "review-1", "output": "approved"}],
        },
    )
    result = simulate(parent, script, "--with", str(child))
    assert result.exit_code == ExitCode.OK, result.output
    said = lines(result)
    assert "+0:00 review ▸ approve parked (key review-1), with no window" in said
    assert "+3:00:00 review ▸ the run ended: completed, outcome 'completed'" in said
    assert "Result: completed, outcome 'completed', ended at +3:00:00" in result.stdout


# -- mistakes ----------------------------------------------------------------------------------

READS_BADLY = {
    "nodes": {"collect-payment": [{"park": {"key": "pay-1"}}, {"output": "paid", "park": {}}]},
    "signals": [
        {"at": "PT1M"},
        {"at": "PT2M", "key": "pay-1"},
        {"at": "P2D", "key": "pay-1"},
    ],
    "until": "P1D",
}

DOES_NOT_FIT = {
    "nodes": {
        "collect-payment": [{"output": "approved"}],
        "offer-retry": [{"output": "retry"}],
    },
    "signals": [
        {"at": "PT1M", "key": "pay-1", "output": "paid"},
        {"at": "PT2M", "placement": "retry"},
    ],
}


@pytest.mark.parametrize("data", [READS_BADLY, DOES_NOT_FIT], ids=["reads badly", "does not fit"])
def test_script_mistakes_are_located_as_the_docs_show(
    data: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "story.yaml", data)
    result = simulate(NODE_ANCHOR, "story.yaml")
    assert result.exit_code == ExitCode.BAD_INPUT
    assert result.stdout == ""  # nothing played
    command = "$ flowtide simulate examples/checkout-node-anchor.yaml --script story.yaml\n"
    shown = [block.split("```", 1)[0] for block in DOC.split(command)[1:]]
    assert result.stderr in shown


def test_a_script_that_is_not_there(tmp_path: Path) -> None:
    result = simulate(NODE_ANCHOR, tmp_path / "none.yaml", *STAND_INS)
    assert result.exit_code == ExitCode.BAD_INPUT
    assert "cannot read the script" in result.stderr


def test_the_script_option_is_required() -> None:
    result = runner.invoke(app, ["simulate", str(NODE_ANCHOR)])
    assert result.exit_code == ExitCode.BAD_INPUT
    assert "--script" in result.output


# -- JSON --------------------------------------------------------------------------------------


def test_the_json_shape(played: dict[str, dict[str, Any]]) -> None:
    data = played["node-anchor"]
    assert set(data) == {"timeline", "windows", "result"}
    first = data["timeline"][0]
    assert set(first) == {
        "at",
        "after_seconds",
        "kind",
        "run",
        "placement",
        "attempt",
        "text",
        "data",
        "signal",
    }
    assert (first["kind"], first["at"], first["after_seconds"]) == (
        "run_started",
        "2026-01-01T09:00:00+00:00",
        0,
    )
    offsets = [m["after_seconds"] for m in data["timeline"]]
    assert offsets == sorted(offsets)
    signal = events(data, "signal")[0]["signal"]
    assert set(signal) == {
        "index",
        "placement",
        "key",
        "payload",
        "output",
        "accepted",
        "reason",
        "message",
        "closed_at",
        "token_id",
        "reached",
    }
    assert data["result"]["run_id"] == "sim"
    assert data["result"]["started_at"] == "2026-01-01T09:00:00+00:00"


def test_the_script_the_docs_show_reads() -> None:
    shown = DOC.split("### The script", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", shown, re.S)
    assert block is not None
    script = parse_script(yaml.safe_load(block.group(1)))
    assert [step.output for step in script.nodes["collect-payment"]] == [
        "declined",
        None,
        None,
        "paid",
    ]
    assert [s.at.total_seconds() for s in script.signals] == [570, 630]
