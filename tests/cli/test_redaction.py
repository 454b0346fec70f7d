"""A ``--nodes`` module that registers a redaction hook on import: what ``flowtide run`` (as
``flowtide worker``) records and prints of an error has its secrets taken out."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowtide.cli import ExitCode, app
from flowtide.engine import redact_errors

runner = CliRunner()

NODES = """
from flowtide.authoring import node
from flowtide.engine import redact_errors

redact_errors(lambda text: text.replace("sk-live-9", "[secret]"))


@node(id="urn:test:node:leaky", outputs=["done"])
def leaky(ctx):
    raise RuntimeError("the payment API refused key sk-live-9")
"""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    (tmp_path / "leaky_nodes.py").write_text(NODES)
    (tmp_path / "leaky.yaml").write_text(
        "id: urn:test:leaky\n"
        "entrypoints: {main: pay}\n"
        "placements:\n"
        "  - {id: pay, kind: task, node: 'urn:test:node:leaky', routes: {done: end}}\n"
        "  - {id: end, kind: terminal}\n"
    )
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    redact_errors(None)
    sys.modules.pop("leaky_nodes", None)


def test_a_nodes_module_registers_the_redaction_of_errors(folder: Path) -> None:
    args = ["run", "leaky.yaml", "--nodes", "leaky_nodes", "--store", "sqlite:///runs.db"]
    result = runner.invoke(app, [*args, "--json", "--history"])
    assert result.exit_code == ExitCode.FAILURE, result.output
    assert "sk-live-9" not in result.output
    (error,) = json.loads(result.output)["errors"]
    assert error["message"] == "the payment API refused key [secret]"
    stored = [f.read_bytes() for f in folder.glob("runs.db*")]
    assert stored and not any(b"sk-live-9" in data for data in stored)
    assert any(b"[secret]" in data for data in stored)
