"""The flowtide command: each command, its output and its exit code."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import flowtide
from flowtide.cli import ExitCode, app, main
from tests.render.mermaid_graph import parse

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

runner = CliRunner()

GOOD = {
    "id": "urn:test:flow:good",
    "entrypoints": {"main": "work"},
    "node_types": [{"id": "urn:test:node:work", "outputs": ["done"]}],
    "placements": [
        {"id": "work", "kind": "task", "node": "urn:test:node:work", "routes": {"done": "end"}},
        {"id": "end", "kind": "terminal"},
    ],
}


def write(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def bad_route(tmp_path: Path) -> Path:
    data = json.loads(json.dumps(GOOD))
    data["placements"][0]["routes"] = {"done": ["end", "nowhere"]}
    return write(tmp_path / "bad.yaml", data)


# -- help and version ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["validate"],
        ["render"],
        ["run"],
        ["demo"],
        ["simulate"],
        ["schema"],
        ["schema", "node-settings"],
        ["schema", "flow"],
    ],
)
def test_every_command_has_help_with_the_exit_codes(args: list[str]) -> None:
    result = runner.invoke(app, [*args, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output
    text = " ".join(result.output.split())
    assert "Exit codes" in text
    assert "2 bad input" in text


def test_no_arguments_shows_help() -> None:
    result = runner.invoke(app, [])
    assert "Usage" in result.output
    assert "validate" in result.output


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"flowtide {flowtide.__version__}"


def test_unknown_command_and_option_are_bad_input() -> None:
    assert runner.invoke(app, ["frobnicate"]).exit_code == ExitCode.BAD_INPUT
    assert runner.invoke(app, ["validate", "--frob"]).exit_code == ExitCode.BAD_INPUT


# -- validate ------------------------------------------------------------------------------


def test_validate_a_good_flow(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", str(write(tmp_path / "good.yaml", GOOD))])
    assert result.exit_code == ExitCode.OK, result.output
    assert "ok" in result.stdout
    assert "urn:test:flow:good" in result.stdout
    assert "1 file checked: 0 error(s), 0 warning(s)" in result.stdout


def test_validate_names_file_pointer_placement_and_a_sentence(tmp_path: Path) -> None:
    path = bad_route(tmp_path)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == ExitCode.BAD_INPUT
    line = next(x for x in result.stdout.splitlines() if "error:" in x)
    assert str(path) in line or "bad.yaml" in line
    assert "/placements/0/routes/done" in line
    assert "'nowhere'" in line
    assert "does not exist" in line
    assert "1 error(s)" in result.stdout


def test_validate_reports_warnings_and_still_succeeds(tmp_path: Path) -> None:
    data = json.loads(json.dumps(GOOD))
    data["node_types"][0]["outputs"] = ["done", "skipped"]
    result = runner.invoke(app, ["validate", str(write(tmp_path / "warn.yaml", data))])
    assert result.exit_code == ExitCode.OK, result.output
    assert "warning:" in result.stdout
    assert "'skipped'" in result.stdout
    assert "1 warning(s)" in result.stdout


def test_validate_every_problem_of_every_file(tmp_path: Path) -> None:
    good = write(tmp_path / "good.yaml", GOOD)
    bad = bad_route(tmp_path)
    result = runner.invoke(app, ["validate", str(good), str(bad), str(tmp_path / "gone.json")])
    assert result.exit_code == ExitCode.BAD_INPUT
    assert "gone.json" in result.stdout
    assert "bad.yaml" in result.stdout
    assert "3 files checked: 2 error(s)" in result.stdout


def test_validate_quiet_prints_problems_only(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", "-q", str(write(tmp_path / "good.yaml", GOOD))])
    assert result.exit_code == ExitCode.OK
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("broken.yaml", "id: [unclosed\n"),
        ("broken.json", '{"id": '),
        ("list.yaml", "- a\n- b\n"),
        ("empty.yaml", ""),
    ],
)
def test_validate_malformed_documents_are_bad_input(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert name in result.stdout
    assert "Traceback" not in result.output


def test_validate_a_directory_is_bad_input(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", str(tmp_path)])
    assert result.exit_code == ExitCode.BAD_INPUT
    assert "Traceback" not in result.output


def subflow_pair(tmp_path: Path) -> tuple[Path, Path]:
    child = write(tmp_path / "child.yaml", {**GOOD, "id": "urn:test:flow:child"})
    parent = write(
        tmp_path / "parent.yaml",
        {
            "id": "urn:test:flow:parent",
            "entrypoints": {"main": "run-child"},
            "placements": [
                {
                    "id": "run-child",
                    "kind": "subflow",
                    "flow": "urn:test:flow:child",
                    "routes": {"success": "end", "error": "end"},
                },
                {"id": "end", "kind": "terminal"},
            ],
        },
    )
    return parent, child


def test_validate_resolves_subflows_across_files(tmp_path: Path) -> None:
    parent, child = subflow_pair(tmp_path)
    together = runner.invoke(app, ["validate", str(parent), str(child)])
    assert together.exit_code == ExitCode.OK, together.output
    alone = runner.invoke(app, ["validate", str(parent)])
    assert alone.exit_code == ExitCode.BAD_INPUT
    assert "urn:test:flow:child" in alone.stdout


def test_validate_keeps_warnings_of_good_files_when_another_fails(tmp_path: Path) -> None:
    data = json.loads(json.dumps(GOOD))
    data["node_types"][0]["outputs"] = ["done", "skipped"]
    warn = write(tmp_path / "warn.yaml", data)
    result = runner.invoke(app, ["validate", str(warn), str(bad_route(tmp_path))])
    assert result.exit_code == ExitCode.BAD_INPUT
    assert "'skipped'" in result.stdout
    assert "ok " in result.stdout


def test_validate_the_examples() -> None:
    # The simulation scripts among them are checked as scripts.
    paths = sorted(str(p) for p in EXAMPLES.iterdir() if p.suffix in (".yaml", ".jsonld"))
    result = runner.invoke(app, ["validate", *paths])
    assert result.exit_code == ExitCode.OK, result.output
    assert " 0 error(s)" in result.stdout
    assert "checkout-node-anchor.simulate.yaml: a simulation script (7 signals" in result.stdout


def test_validate_names_the_mistakes_of_a_script(tmp_path: Path) -> None:
    script = tmp_path / "story.simulate.yaml"
    script.write_text("signals:\n  - {at: soon, key: k}\n")
    result = runner.invoke(app, ["validate", str(script)])
    assert result.exit_code == ExitCode.BAD_INPUT
    assert "/signals/0/at" in result.stdout
    assert "1 file checked: 1 error(s)" in result.stdout


# -- render --------------------------------------------------------------------------------


def test_render_to_stdout(tmp_path: Path) -> None:
    result = runner.invoke(app, ["render", str(write(tmp_path / "good.yaml", GOOD))])
    assert result.exit_code == ExitCode.OK, result.output
    graph = parse(result.stdout)
    assert graph.direction == "TB"
    assert ("urn_test_flow_good/node/work", "done", "urn_test_flow_good/node/end") in graph.edges


@pytest.mark.parametrize("direction", ["LR", "lr", "RL", "BT", "TD"])
def test_render_direction(tmp_path: Path, direction: str) -> None:
    path = write(tmp_path / "good.yaml", GOOD)
    result = runner.invoke(app, ["render", str(path), "--direction", direction])
    assert result.exit_code == ExitCode.OK, result.output
    assert parse(result.stdout).direction == direction.upper()


def test_render_bad_direction_is_bad_input(tmp_path: Path) -> None:
    path = write(tmp_path / "good.yaml", GOOD)
    result = runner.invoke(app, ["render", str(path), "--direction", "sideways"])
    assert result.exit_code == ExitCode.BAD_INPUT


def test_render_to_a_file(tmp_path: Path) -> None:
    out = tmp_path / "chart.mmd"
    path = write(tmp_path / "good.yaml", GOOD)
    result = runner.invoke(app, ["render", str(path), "-o", str(out), "-d", "LR"])
    assert result.exit_code == ExitCode.OK, result.output
    assert result.stdout == ""
    assert parse(out.read_text()).direction == "LR"


def test_render_to_an_unwritable_place_is_a_failure(tmp_path: Path) -> None:
    path = write(tmp_path / "good.yaml", GOOD)
    result = runner.invoke(app, ["render", str(path), "-o", str(tmp_path / "no" / "x.mmd")])
    assert result.exit_code == ExitCode.FAILURE
    assert "cannot write" in result.stderr


def test_render_invalid_or_missing_flow_is_bad_input(tmp_path: Path) -> None:
    bad = runner.invoke(app, ["render", str(bad_route(tmp_path))])
    assert bad.exit_code == ExitCode.BAD_INPUT
    assert "nowhere" in bad.stderr
    assert bad.stdout == ""
    missing = runner.invoke(app, ["render", str(tmp_path / "gone.yaml")])
    assert missing.exit_code == ExitCode.BAD_INPUT
    assert "gone.yaml" in missing.stderr


def test_render_with_the_flows_its_subflows_name(tmp_path: Path) -> None:
    parent, child = subflow_pair(tmp_path)
    assert runner.invoke(app, ["render", str(parent)]).exit_code == ExitCode.BAD_INPUT
    result = runner.invoke(app, ["render", str(parent), "--with", str(child)])
    assert result.exit_code == ExitCode.OK, result.output
    assert "urn_test_flow_parent/node/run-child" in parse(result.stdout).nodes


def test_render_the_fixture_like_the_reference() -> None:
    result = runner.invoke(app, ["render", str(EXAMPLES / "support-dispatcher.jsonld")])
    assert result.exit_code == ExitCode.OK, result.output
    reference = parse((ROOT / "tests/render/fixtures/support-dispatcher.mmd").read_text())
    ours = parse(result.stdout)
    assert ours.labels() == reference.labels()
    assert ours.edge_set() == reference.edge_set()
    assert "warning(s)" in result.stderr


# -- schema --------------------------------------------------------------------------------


def test_schema_node_settings() -> None:
    result = runner.invoke(app, ["schema", "node-settings"])
    assert result.exit_code == ExitCode.OK
    schema = json.loads(result.stdout)
    assert schema["$id"].endswith("node-settings.json")
    assert {"timeout", "timeout_anchor", "release_on", "timers", "retry"} <= set(
        schema["properties"]
    )


def test_schema_flow() -> None:
    result = runner.invoke(app, ["schema", "flow"])
    assert result.exit_code == ExitCode.OK
    schema = json.loads(result.stdout)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"].endswith("flow.json")
    assert schema["title"] == "Flowtide flow"
    assert {"id", "entrypoints", "placements", "node_types"} <= set(schema["properties"])


def test_schema_without_a_name_shows_help() -> None:
    result = runner.invoke(app, ["schema"])
    assert "node-settings" in result.output


# -- demo ----------------------------------------------------------------------------------


def test_demo_runs_the_dispatcher_then_renders_every_example(tmp_path: Path) -> None:
    result = runner.invoke(app, ["demo", "--output", str(tmp_path)])
    assert result.exit_code == ExitCode.OK, result.output
    text = " ".join(result.stdout.split())
    assert "1. A payment that outlives its worker" in text
    assert "2. A support bot" in text
    assert "NodeTimeoutErr" in text
    expected = sorted(
        p.stem
        for p in EXAMPLES.iterdir()
        if p.suffix in (".yaml", ".jsonld") and not p.stem.endswith(".simulate")
    )
    assert sorted(p.stem for p in tmp_path.glob("*.mmd")) == expected
    for chart in tmp_path.glob("*.mmd"):
        assert parse(chart.read_text()).nodes


def test_demo_show_prints_the_charts() -> None:
    result = runner.invoke(app, ["demo", "--show"])
    assert result.exit_code == ExitCode.OK, result.output
    assert "flowchart TB" in result.stdout


def test_demo_without_examples_is_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("flowtide.cli.demo.bundled_examples", list)
    result = runner.invoke(app, ["demo"])
    assert result.exit_code == ExitCode.FAILURE
    assert "no bundled examples" in result.stderr


def test_demo_with_a_broken_example_is_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = bad_route(tmp_path)
    monkeypatch.setattr("flowtide.cli.demo.bundled_examples", lambda: [broken])
    result = runner.invoke(app, ["demo"])
    assert result.exit_code == ExitCode.FAILURE
    assert "invalid" in result.stderr


# -- failures ------------------------------------------------------------------------------


def test_an_unexpected_error_is_one_line_and_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(*args: object, **kwargs: object) -> str:
        raise RuntimeError("boom")

    monkeypatch.setattr("flowtide.cli.render.render_mermaid", explode)
    monkeypatch.delenv("FLOWTIDE_DEBUG", raising=False)
    result = runner.invoke(app, ["render", str(write(tmp_path / "good.yaml", GOOD))])
    assert result.exit_code == ExitCode.FAILURE
    assert "internal error: RuntimeError: boom" in result.stderr
    assert "Traceback" not in result.output


def test_debug_lets_the_exception_through(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(*args: object, **kwargs: object) -> str:
        raise RuntimeError("boom")

    monkeypatch.setattr("flowtide.cli.render.render_mermaid", explode)
    monkeypatch.setenv("FLOWTIDE_DEBUG", "1")
    result = runner.invoke(app, ["render", str(write(tmp_path / "good.yaml", GOOD))])
    assert isinstance(result.exception, RuntimeError)


def test_main_is_the_console_script(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["flowtide", "--version"])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 0


def test_render_with_a_missing_other_document_is_bad_input(tmp_path: Path) -> None:
    path = write(tmp_path / "good.yaml", GOOD)
    result = runner.invoke(app, ["render", str(path), "--with", str(tmp_path / "gone.yaml")])
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert result.stdout == ""
    assert "gone.yaml: error: (document): cannot read the document" in result.stderr
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .endswith("gone.yaml is not a valid flow; nothing rendered")
    )
