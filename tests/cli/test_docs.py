"""README, docs and CI agree with each other and with the code."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from flowtide.documents import FLOWTIDE_CONTEXT

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
CI = ROOT / ".ci" / "run"


def fenced_after(marker: str) -> list[str]:
    """The lines of the first fenced block after ``marker`` in the README."""
    rest = README.split(marker, 1)[1]
    block = re.search(r"```[a-z]*\n(.*?)```", rest, re.DOTALL)
    assert block is not None
    return block.group(1).splitlines()


def test_readme_has_exactly_two_setup_commands() -> None:
    setup = README.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    assert len(re.findall(r"^```sh$", setup, re.MULTILINE)) == 2
    (main,) = fenced_after("<!-- main command -->")
    (tests,) = fenced_after("<!-- test command -->")
    for command in (main, tests):
        assert command.startswith("python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev]'")
    assert main.endswith(".venv/bin/flowtide demo")
    assert tests.endswith(".venv/bin/python -m pytest -q")


def test_ci_runs_the_readme_test_command() -> None:
    text = CI.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text
    assert os.access(CI, os.X_OK)
    # Run the extraction part of .ci/run and compare with the README.
    extraction = text.split("test_command=", 1)[1].split("\nif ", 1)[0]
    script = f"cd {ROOT} && test_command={extraction}\nprintf '%s' \"$test_command\""
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout == fenced_after("<!-- test command -->")[0]
    for step in ("ruff check src tests", "ruff format --check src tests", "mypy src tests"):
        assert f".venv/bin/{step}" in text


@pytest.mark.parametrize("term", [t for t in FLOWTIDE_CONTEXT if not t.startswith("@")], ids=str)
def test_documents_doc_lists_every_context_term(term: str) -> None:
    doc = (ROOT / "docs" / "documents.md").read_text()
    definition = FLOWTIDE_CONTEXT[term]
    assert f"| `{term}` | `{definition['@id']}` |" in doc


def test_cli_doc_covers_every_command_and_exit_code() -> None:
    doc = (ROOT / "docs" / "cli.md").read_text()
    commands = ("validate", "render", "run", "simulate", "schema node-settings", "schema flow")
    for command in (*commands, "demo"):
        assert f"flowtide {command}" in doc
    for code in ("`0`", "`1`", "`2`"):
        assert f"| {code} |" in doc
    assert "**0** ok" in README and "**2** bad input" in README


def test_the_readme_python_examples_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    assert len(blocks) >= 2
    monkeypatch.chdir(ROOT)
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out
    assert "parked collect-payment 2026-01-01 00:10:00+00:00" in printed
    assert "expired 2026-01-01 00:10:00+00:00" in printed
    assert "flowchart LR" in printed


def test_docs_show_the_options_for_your_code() -> None:
    doc = (ROOT / "docs" / "cli.md").read_text()
    assert "## `flowtide validate FILE... [--nodes MODULE]`" in doc
    run_heading = next(line for line in doc.splitlines() if line.startswith("## `flowtide run"))
    for option in ("--nodes MODULE", "--with OTHER", "--deadline", "--input JSON"):
        assert option in run_heading
    assert "`python -m flowtide`" in doc
    table = README.split("## Command line", 1)[1].split("\n## ", 1)[0]
    assert "| `flowtide validate FILE... [--nodes MODULE]` |" in table
    assert "| `flowtide run FILE [--input JSON] [--nodes MODULE] [--with OTHER]" in table
    assert "| `python -m flowtide …` |" in table


def test_the_cli_doc_shows_what_run_says_of_nodes_without_implementation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from typer.testing import CliRunner

    from flowtide.cli import app

    doc = (ROOT / "docs" / "cli.md").read_text()
    command = "$ flowtide run examples/escalation-ladder.yaml\n"
    shown = doc.split(command, 1)[1].split("```", 1)[0].splitlines()
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(app, ["run", "examples/escalation-ladder.yaml"])
    printed = result.stderr.splitlines()
    assert (printed[0], printed[-1]) == (shown[0], shown[-1])


def test_ci_then_runs_the_suite_on_every_other_python() -> None:
    text = CI.read_text()
    subprocess.run(["bash", "-n", str(CI)], check=True)
    # The README's test command comes first; the other Pythons after it, each in its own venv.
    assert text.index('bash -c "$test_command"') < text.index("/root/.pyenv/versions/3.1[1-9]*")
    assert 'venv=".venv-$version"' in text
    assert '"$venv/bin/python" -m pytest -q -x' in text
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert ".venv-*/" in ignored
