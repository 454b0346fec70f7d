"""Hostile input to the commands: one located line and exit 2, never an internal error, and
nothing stored."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowtide.cli import ExitCode, app
from flowtide.cli.common import BadInput
from flowtide.cli.inputs import parse_state
from flowtide.printable import printable

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
CHECKOUT = ROOT / "examples" / "checkout-node-anchor.yaml"
NODES = "flowtide.demo.checkout"


def deep(levels: int) -> str:
    return '{"a": ' + "[" * levels + "]" * levels + "}"


def test_a_value_of_the_input_may_nest_as_deep_as_a_whole_payload_less_one() -> None:
    # A value of the state may nest 100 levels; an input's object is one more level, a
    # payload is one value whose object counts.
    assert parse_state(deep(100), "--input") == json.loads(deep(100))
    with pytest.raises(BadInput, match="101 levels deep; a payload may nest at most 100"):
        parse_state(deep(100), "--payload")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"a": NaN}', "--OPTION: NaN is not a JSON number (at line 1, column 7)"),
        ('{"a": Infinity}', "--OPTION: Infinity is not a JSON number (at line 1, column 7)"),
        ('{"a":\n -Infinity}', "--OPTION: -Infinity is not a JSON number (at line 2, column 2)"),
        ('{"a": [1e999]}', "--OPTION: 1e999 is not a JSON number (at line 1, column 8)"),
        (
            '{"a": "\\ud800"}',
            "--OPTION/a: a string holds '\\ud800', a lone surrogate, which is not Unicode text",
        ),
        ('{"a": "\udcff"}', "--OPTION is not UTF-8 text (at line 1, column 8)"),
        (deep(990), "--OPTION nests lists and objects 991 levels deep; EACH may nest at most 100"),
        (deep(101), "--OPTION nests lists and objects 102 levels deep; EACH may nest at most 100"),
    ],
)
def test_hostile_input_and_payload_are_bad_input(tmp_path: Path, text: str, said: str) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    commands = {
        "--input": ["start", str(CHECKOUT), "--input", text],
        "--payload": ["signal", "some-run", "--placement", "p", "--payload", text],
    }
    for option, command in commands.items():
        result = runner.invoke(app, [*command, "--store", store])
        assert result.exit_code == ExitCode.BAD_INPUT, result.output
        expected = said.replace("--OPTION", option)
        each = "each value of the state" if option == "--input" else "a payload"
        expected = expected.replace("EACH", each)
        assert result.stderr.strip().startswith(f"flowtide: {expected}"), result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs.db").exists()


def test_bytes_that_are_not_utf8_on_the_command_line(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    argv = [sys.executable, "-m", "flowtide", "start", str(CHECKOUT), "--store", store]
    process = subprocess.run(
        [*map(os.fsencode, argv), b"--input", b'{"a": "\xff\xfe"}'],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        check=False,
    )
    assert process.returncode == ExitCode.BAD_INPUT, process.stderr
    assert process.stderr.decode().strip() == (
        "flowtide: --input is not UTF-8 text (at line 1, column 8)"
    )


def test_a_payload_within_the_limits_is_read() -> None:
    result = runner.invoke(app, ["start", str(CHECKOUT), "--input", deep(99), "--store", "memory:"])
    assert result.exit_code == ExitCode.OK, result.output


def test_a_subflow_depth_past_the_cap_is_refused_where_it_is(tmp_path: Path) -> None:
    flow = tmp_path / "deep.yaml"
    flow.write_text(
        "id: urn:test:flow:deep\nmax_depth: 100000\n"
        "entrypoints: {main: end}\nplacements: [{id: end, kind: terminal}]\n"
    )
    result = runner.invoke(app, ["validate", str(flow)])
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert "error: /max_depth: 'max_depth' must be at most 100, not 100000" in result.output
    flow.write_text(flow.read_text().replace("100000", "100"))
    assert runner.invoke(app, ["validate", str(flow)]).exit_code == ExitCode.OK


EVIL = "evil\nrun\x1b[31m\u2028"
SHOWN = "evil\\nrun\\x1b[31m\\u2028"


def test_ids_with_control_characters_are_escaped_in_human_output(tmp_path: Path) -> None:
    store = str(tmp_path / "runs.db")
    started = runner.invoke(app, ["start", str(CHECKOUT), "--run-id", EVIL, "--store", store])
    assert started.exit_code == ExitCode.OK, started.output
    shown = runner.invoke(app, ["show", EVIL, "--store", store])
    assert shown.exit_code == ExitCode.OK, shown.output
    listed = runner.invoke(app, ["runs", "--store", store])
    for result in (started, shown, listed):
        assert "\x1b" not in result.stdout and "\u2028" not in result.stdout
        assert "evil\nrun" not in result.stdout
        # (the table wraps its narrow columns: the start of the id is on one line)
        assert (SHOWN if result is not listed else "evil\\nrun\\x1b") in result.stdout
    assert started.stdout.count("\n") == 2  # its two lines, whatever the id holds
    as_json = runner.invoke(app, ["show", EVIL, "--store", store, "--json"])
    assert json.loads(as_json.stdout)["run_id"] == EVIL  # (JSON keeps the id as it is)


def test_printable_escapes_what_does_not_print() -> None:
    assert printable("plain text, é, 漢字") == "plain text, é, 漢字"
    assert printable(EVIL) == SHOWN
    assert printable("tab\there \ud800") == "tab\\there \\ud800"


def test_a_workers_event_lines_escape_ids(tmp_path: Path) -> None:
    store, log = str(tmp_path / "runs.db"), tmp_path / "worker.log"
    started = runner.invoke(app, ["start", str(CHECKOUT), "--run-id", EVIL, "--store", store])
    assert started.exit_code == ExitCode.OK, started.output
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "flowtide", "worker", "--nodes", "flowtide.demo.checkout",
             "--store", store, "--poll", "0.05", "--events"],
            stdout=output, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT / "src")},
        )  # fmt: skip
    try:
        end = time.monotonic() + 30
        while "parked" not in log.read_text() and time.monotonic() < end:
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, log.read_text()
    lines = log.read_text().splitlines()
    events = [line for line in lines if " evil" in line]
    assert events and all(SHOWN[:15] in line for line in events), lines
    assert "\x1b" not in log.read_text()  # (no raw escape character)


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("[" * 150 + "]" * 150, "the value nests lists and objects 150 levels deep, over the "
         "limit of 100 (at /a)"),
        (".nan", "nan is not JSON (at /a)"),
        ('"\\ud800"', "a string holds '\\ud800', a lone surrogate, which is not Unicode text "
         "(at /a)"),
    ],
)  # fmt: skip
def test_a_simulation_script_with_values_a_run_cannot_keep_is_bad_input(
    tmp_path: Path, value: str, said: str
) -> None:
    script = tmp_path / "story.simulate.yaml"
    script.write_text(f"input:\n  a: {value}\n")
    result = runner.invoke(
        app, ["simulate", str(CHECKOUT), "--script", str(script), "--nodes", NODES]
    )
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert f"{script}: error: /input: {said}" in result.output
