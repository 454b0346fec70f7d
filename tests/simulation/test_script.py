"""Reading a simulation script: its defaults, and every mistake told at a JSON pointer into it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from flowtide.errors import FlowValidationError
from flowtide.simulation import (
    DEFAULT_RUN_ID,
    DEFAULT_START,
    DEFAULT_UNTIL,
    load_script,
    parse_script,
)


def problems(data: Any) -> list[tuple[str, str]]:
    with pytest.raises(FlowValidationError) as raised:
        parse_script(data)
    return [(p.pointer, p.message) for p in raised.value.problems]


def test_an_empty_mapping_is_a_script_with_the_defaults() -> None:
    script = parse_script({})
    assert (script.input, script.nodes, script.signals) == ({}, {}, [])
    assert (script.start, script.until, script.run_id) == (
        DEFAULT_START,
        DEFAULT_UNTIL,
        DEFAULT_RUN_ID,
    )
    assert script.deadline is None


def test_the_format_of_the_brief() -> None:
    script = parse_script(
        yaml.safe_load(
            """
            input: {order: 42}
            deadline: PT1H
            start: 2026-03-01T08:00:00+01:00
            nodes:
              collect-payment:
                - {after: PT2M, output: declined}
                - {park: {key: pay-1}}
                - {raise: gateway down}
            signals:
              - {at: PT10M30S, key: pay-1, output: paid}
              - {at: PT9M30S, placement: offer-retry, payload: {retry: true}}
            until: P1D
            """
        )
    )
    declined, park, boom = script.nodes["collect-payment"]
    assert (declined.after, declined.output) == (timedelta(minutes=2), "declined")
    assert park.park is not None and park.park.key == "pay-1"
    assert boom.raise_ == "gateway down"
    assert script.start == datetime(2026, 3, 1, 7, 0, tzinfo=UTC)
    assert script.deadline == timedelta(hours=1)
    # Played by instant, whatever the order in the script.
    assert [index for index, _ in script.played()] == [1, 0]


def test_every_mistake_is_located() -> None:
    found = problems(
        {
            "input": [1],
            "colour": "red",
            "until": "P1D",
            "nodes": {
                "pay": [
                    {"output": "paid", "park": {}},
                    {"after": "soon", "output": "paid"},
                    {},
                    {"raise": "down", "update": {"a": 1}},
                    {"park": {"key": "k", "extra": 1}},
                ]
            },
            "signals": [
                {"at": "PT1M"},
                {"at": "P2D", "key": "k"},
                {"at": "PT1M", "key": "k", "payload": 3},
            ],
        }
    )
    assert found == [
        (
            "/colour",
            "unknown field 'colour' (fields: input, start, run_id, deadline, nodes, "
            "signals, until)",
        ),
        ("/input", "'input' must be a mapping, not a list"),
        ("/nodes/pay/0", "a step does one thing: output, park or raise (here: output and park)"),
        (
            "/nodes/pay/1/after",
            "'soon' is not an ISO 8601 duration (examples: 'PT10M', 'PT1H30M', 'P1D', 'PT0.5S')",
        ),
        ("/nodes/pay/2", "a step does one thing: output, park or raise (here: none)"),
        ("/nodes/pay/3", "a step that raises changes nothing: 'update' goes with output or park"),
        ("/nodes/pay/4/park/extra", "unknown field 'extra' (fields: key, payload)"),
        ("/signals/0", "a signal needs a 'placement' or a 'key' to address its park"),
        ("/signals/1/at", "P2D is after 'until' (P1D): the clock stops before it"),
        ("/signals/2/payload", "'payload' must be a mapping, not a number"),
    ]


def test_only_json_goes_into_the_state() -> None:
    (found,) = problems(yaml.safe_load("input: {when: 2026-01-01}"))
    assert found == (
        "/input",
        "only JSON values can go into a run's state, not a date (quote it to keep it as text)",
    )


@pytest.mark.parametrize(
    ("data", "pointer"),
    [
        ({"until": "PT0S"}, "/until"),
        ({"deadline": 0}, "/deadline"),
        ({"start": "2026-01-01T09:00:00"}, "/start"),
        ({"run_id": ""}, "/run_id"),
        ({"signals": [{"at": "-PT1M", "key": "k"}]}, "/signals/0/at"),
        ({"nodes": {"pay": {"output": "paid"}}}, "/nodes/pay"),
    ],
)
def test_more_mistakes(data: dict[str, Any], pointer: str) -> None:
    assert [p for p, _ in problems(data)] == [pointer]


def test_a_script_is_a_mapping() -> None:
    assert problems([]) == [("", "a script is a mapping (input, nodes, signals...), not a list")]
    assert problems(None) == [("", "a script is a mapping (input, nodes, signals...), not empty")]


def test_loading_yaml_or_json_from_a_file(tmp_path: Path) -> None:
    data = {"signals": [{"at": "PT1M", "key": "k"}]}
    as_json = tmp_path / "story.simulate.json"
    as_json.write_text(json.dumps(data))
    as_yaml = tmp_path / "story.simulate.yaml"
    as_yaml.write_text(yaml.safe_dump(data))
    assert load_script(as_json) == load_script(as_yaml)


def test_a_file_that_cannot_be_read_is_located(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("signals: [\n")
    for path, words in ((broken, "malformed YAML at line 2"), (tmp_path / "none.yaml", "cannot")):
        with pytest.raises(FlowValidationError) as raised:
            load_script(path)
        (problem,) = raised.value.problems
        assert problem.source == str(path)
        assert words in problem.message
        assert raised.value.title == f"{path} is not a valid simulation script"
