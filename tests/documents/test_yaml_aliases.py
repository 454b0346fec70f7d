"""A YAML document may not expand, through its aliases, to more than it can be read as: the
billion laughs are refused before they are built, where the alias is, whichever loader reads."""

from __future__ import annotations

import itertools
import time
import tracemalloc
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowtide.cli import ExitCode, app
from flowtide.documents import formats, load_document
from flowtide.documents.formats import MAX_ALIAS_NODES, Format, parse_text
from flowtide.errors import FlowValidationError
from flowtide.model.placements import Task

runner = CliRunner()

FLOW = """\
id: urn:test:flow:aliases
entrypoints: {main: end}
placements: [{id: end, kind: terminal}]
"""


def laughs(levels: int = 9, width: int = 9) -> str:
    """Nine levels of nine aliases: 1 KB of text for 9**9 (387 million) values."""
    names = "abcdefghijklmnop"[:levels]
    lines = ["lol:", f"  {names[0]}: &{names[0]} [{', '.join(['lol'] * width)}]"]
    for before, name in itertools.pairwise(names):
        lines.append(f"  {name}: &{name} [{', '.join([f'*{before}'] * width)}]")
    return "\n".join(lines) + "\n"


def billion_laughs_flow() -> str:
    """The laughs where a flow keeps data it does not check (a node type's output schemas)."""
    body = laughs().replace("\n  ", "\n      ").replace("lol:\n", "")
    return (
        FLOW
        + "node_types:\n  - id: urn:test:node:x\n    outputs: [done]\n    output_schemas:\n"
        + "      done:\n"
        + "".join(f"  {line}\n" for line in body.splitlines())
    )


@pytest.fixture(params=["libyaml", "pyyaml"])
def loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "pyyaml":
        monkeypatch.setattr(formats, "FAST_YAML_LOADER", None)
    elif formats.FAST_YAML_LOADER is None:
        pytest.skip("PyYAML was built without libyaml")
    return str(request.param)


def test_the_billion_laughs_are_refused_at_once_in_little_memory(loader: str) -> None:
    text = billion_laughs_flow()
    assert len(text) < 1500
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(FlowValidationError) as raised:
            load_document(text, format="yaml")
        took = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert took < 0.5
    assert peak < 5_000_000
    (problem,) = raised.value.problems
    assert "line " in problem.message and ", column " in problem.message
    assert "the alias *" in problem.message
    assert f"more than {MAX_ALIAS_NODES:,} nodes" in problem.message


def test_an_alias_inside_the_node_it_names_is_refused(loader: str) -> None:
    with pytest.raises(FlowValidationError) as raised:
        load_document(FLOW + "extra: &loop [1, *loop]\n", format="yaml")
    (problem,) = raised.value.problems
    assert problem.message == (
        "YAML at line 4, column 18: the alias *loop names a node it is inside of"
    )


def test_aliases_within_the_bound_still_load(loader: str) -> None:
    shared = (
        "id: urn:test:flow:aliases\n"
        "entrypoints: {main: work}\n"
        "node_types: [{id: urn:test:node:work, outputs: [done]}]\n"
        "placements:\n"
        "  - {id: work, kind: task, node: urn:test:node:work, routes: {done: again},\n"
        "     settings: &quick {timeout: PT5M}}\n"
        "  - {id: again, kind: task, node: urn:test:node:work, routes: {done: end},\n"
        "     settings: *quick}\n"
        "  - {id: end, kind: terminal}\n"
    )
    flow = load_document(shared, format="yaml").flow
    work, again = flow.placement("work"), flow.placement("again")
    assert isinstance(work, Task) and isinstance(again, Task)
    assert again.settings == work.settings
    # Four levels of ten repeat 12,330 nodes: read; five repeat 123,440: refused.
    assert len(parse_text(laughs(levels=4, width=10), Format.YAML)["lol"]["d"]) == 10
    with pytest.raises(FlowValidationError):
        parse_text(laughs(levels=5, width=10), Format.YAML)


def test_validate_and_start_refuse_what_the_other_would(tmp_path: Path) -> None:
    flow = tmp_path / "laughs.yaml"
    flow.write_text(billion_laughs_flow())
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    for command in (["validate", str(flow)], ["start", str(flow), "--store", store]):
        result = runner.invoke(app, command)
        assert result.exit_code == ExitCode.BAD_INPUT, result.output
        assert "the alias *" in result.output
    assert not (tmp_path / "runs.db").exists() or "laughs" not in (tmp_path / "runs.db").read_text(
        errors="replace"
    )


def test_a_simulation_script_with_the_laughs_is_refused(tmp_path: Path) -> None:
    flow = tmp_path / "flow.yaml"
    flow.write_text(FLOW)
    script = tmp_path / "story.simulate.yaml"
    script.write_text("input:\n" + "".join(f"  {line}\n" for line in laughs().splitlines()))
    started = time.perf_counter()
    result = runner.invoke(app, ["simulate", str(flow), "--script", str(script)])
    assert time.perf_counter() - started < 5
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert "the alias *" in result.output
