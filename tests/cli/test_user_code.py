"""``flowtide run`` and ``flowtide validate`` with the user's code: ``--nodes`` modules found in
the current directory, references to code, ``--with``, and every mistake in them as a located
line with exit code 2 (never an internal error)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

import flowtide
from flowtide.cli import ExitCode, app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

runner = CliRunner()


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty working directory for the user's modules; the commands leave ``sys.path`` and
    the modules they imported from it as they were found."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLOWTIDE_DEBUG", raising=False)
    path_before = list(sys.path)
    modules_before = set(sys.modules)
    yield tmp_path
    assert sys.path == path_before
    for name in set(sys.modules) - modules_before:
        if name.startswith("user_"):
            del sys.modules[name]


def module(folder: Path, source: str) -> str:
    """Write a module of the user's into ``folder``; its (fresh) name."""
    name = f"user_{uuid.uuid4().hex[:10]}"
    (folder / f"{name}.py").write_text(textwrap.dedent(source))
    return name


NODES = """\
    from flowtide import node


    @node(id="urn:test:node:work", outputs=["done", "skipped"], register=False)
    def work(ctx):
        ctx.state["worked"] = True
        return "done"
    """


def flow_file(folder: Path, node: str, *, name: str = "flow.yaml", **extra: object) -> Path:
    data = {
        "id": "urn:test:flow:user",
        "entrypoints": {"main": "work"},
        "placements": [
            {"id": "work", "kind": "task", "node": node, "routes": {"done": "end"}},
            {"id": "end", "kind": "terminal"},
        ],
        **extra,
    }
    path = folder / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def bad_input_line(result: Result) -> str:
    """The last line on stderr of a command that refused its input: exit 2, no internal error."""
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert "internal error" not in result.output
    assert "Traceback" not in result.output
    return result.stderr.strip().splitlines()[-1]


# -- --nodes: found in the current directory -------------------------------------------------


def test_nodes_are_imported_from_the_current_directory(here: Path) -> None:
    name = module(here, NODES)
    doc = flow_file(here, "urn:test:node:work")
    result = runner.invoke(app, ["run", doc.name, "--nodes", name, "--json"])
    assert result.exit_code == ExitCode.OK, result.output
    assert '"worked": true' in result.stdout


UNREGISTERED = """\
    import pathlib

    pathlib.Path("imported").touch()


    def work(ctx):
        pathlib.Path("ran").touch()
        return "done"
    """


def test_a_module_a_flow_names_is_never_imported(here: Path) -> None:
    name = module(here, UNREGISTERED)
    result = runner.invoke(app, ["run", flow_file(here, f"{name}:work").name])
    last = bad_input_line(result)
    assert "1 reference does not resolve" in last
    assert f"node '{name}:work' is not registered here: a --nodes module must register it" in (
        result.stderr
    )
    assert not (here / "imported").exists()
    assert not (here / "ran").exists()


def test_an_undecorated_function_of_a_nodes_module_is_not_a_node(here: Path) -> None:
    name = module(here, UNREGISTERED)
    result = runner.invoke(app, ["run", flow_file(here, f"{name}:work").name, "-n", name])
    bad_input_line(result)
    assert f"none of the modules given with --nodes ({name}) registers it" in result.stderr
    assert (here / "imported").exists()  # (imported because --nodes names it)
    assert not (here / "ran").exists()


@pytest.mark.parametrize(
    ("ref", "kind", "where"),
    [
        ("builtins:exec", "reducer", "/reducers/gateway: state key 'gateway': reducer"),
        ("os:rename", "reducer", "/reducers/gateway: state key 'gateway': reducer"),
        ("os:system", "source", "/placements/0/source_fn placement 'work': source function"),
        ("os:rename", "node", "/placements/0/node placement 'work': node"),
        ("os:system", "node", "/placements/0/node placement 'work': node"),
    ],
)
def test_documents_that_name_code_to_import_are_refused_and_nothing_runs(
    here: Path, ref: str, kind: str, where: str
) -> None:
    (here / "precious").write_text("keep me")
    name = module(here, NODES)
    node = "urn:test:node:work"
    if kind == "node":
        node = ref
    reducers = {"gateway": ref} if kind == "reducer" else {}
    doc = flow_file(here, node, reducers=reducers)
    if kind == "source":
        data = yaml.safe_load(doc.read_text())
        data["placements"][0] = {
            "id": "work",
            "kind": "scatter",
            "source_fn": ref,
            "body": {"node": "urn:test:node:work"},
            "routes": {"all-success": "end", "partial": "end", "all-error": "end", "empty": "end"},
        }
        doc.write_text(yaml.safe_dump(data, sort_keys=False))
    state = '{"gateway": "import os; os.remove(\'precious\')", "worked": false}'
    result = runner.invoke(app, ["run", doc.name, "-n", name, "--input", state])
    bad_input_line(result)
    (line,) = [x for x in result.stderr.splitlines() if ref in x]
    assert where in line and f"{ref!r} is not registered" in line
    assert (here / "precious").read_text() == "keep me"


# -- --nodes: mistakes in the module -----------------------------------------------------------


def test_a_syntax_error_in_a_nodes_module_names_the_module_and_line(here: Path) -> None:
    name = module(here, "import os\n\ndef broken(:\n    pass\n")
    line = bad_input_line(runner.invoke(app, ["run", str(flow_file(here, "x:y")), "-n", name]))
    assert line.startswith(f"flowtide: --nodes {name!r}: cannot import module {name!r}")
    assert f"{name}.py:3: SyntaxError" in line


def test_an_import_error_in_a_nodes_module_names_the_module_and_line(here: Path) -> None:
    name = module(here, "import os\nimport flowtide_no_such_dependency\n")
    line = bad_input_line(runner.invoke(app, ["run", str(flow_file(here, "x:y")), "-n", name]))
    assert f"--nodes {name!r}" in line
    assert f"{name}.py:2: ModuleNotFoundError: No module named 'flowtide_no_such_dependency'" in (
        line
    )


def test_an_exception_while_importing_a_nodes_module_is_bad_input(here: Path) -> None:
    name = module(here, "x = 1\nraise RuntimeError('no configuration')\n")
    line = bad_input_line(runner.invoke(app, ["validate", "-n", name, str(flow_file(here, "x:y"))]))
    assert f"{name}.py:2: RuntimeError: no configuration" in line


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("flowtide_no_such_module", "no module named 'flowtide_no_such_module'"),
        ("nodes.py", "not a file name (here: 'nodes')"),
        ("shop/nodes.py", "not a file name (here: 'shop.nodes', from the folder above it)"),
        ("", "a module name is expected"),
        (".nodes", "a module name is expected"),
    ],
)
def test_a_nodes_value_that_is_not_a_module_is_bad_input(here: Path, given: str, says: str) -> None:
    line = bad_input_line(runner.invoke(app, ["run", str(flow_file(here, "x:y")), "-n", given]))
    assert line.startswith(f"flowtide: --nodes {given!r}: ")
    assert says in line


def test_a_nodes_list_with_something_else_is_bad_input(here: Path) -> None:
    name = module(here, "NODES = [print, 42]\n")
    line = bad_input_line(runner.invoke(app, ["run", str(flow_file(here, "x:y")), "-n", name]))
    assert f"--nodes {name!r}: NODES[1]: node 42 is not callable" in line


# -- references that do not resolve --------------------------------------------------------------


def test_a_flow_whose_nodes_have_no_implementation_names_each_placement() -> None:
    result = runner.invoke(app, ["run", str(EXAMPLES / "escalation-ladder.yaml")])
    last = bad_input_line(result)
    assert "--nodes MODULE" in last
    assert "3 references do not resolve" in last
    lines = result.stderr.strip().splitlines()[:-1]
    assert len(lines) == 3
    assert "/placements/0/node placement 'await-approval'" in lines[0]
    assert (
        "node 'urn:flowtide:example:node:await-approval' is not registered here: a --nodes module "
        "must register it (with @node)"
    ) in lines[0]
    assert "cannot import module 'urn'" not in result.stderr


def test_unresolved_nodes_of_a_jsonld_document_point_into_it() -> None:
    result = runner.invoke(
        app, ["run", str(EXAMPLES / "support-dispatcher.jsonld"), "-n", "tests.cli.nodes_for_run"]
    )
    bad_input_line(result)
    assert "/nodes/1/node placement 'classify-message'" in result.stderr
    assert "none of the modules given with --nodes (tests.cli.nodes_for_run)" in result.stderr


@pytest.mark.parametrize(
    "ref", ["flowtide_no_such_module:work", "tests.cli.nodes_for_run:nothing", "urn:shop:pay"]
)
def test_a_reference_nothing_registers_is_bad_input(here: Path, ref: str) -> None:
    result = runner.invoke(app, ["run", flow_file(here, ref).name, "-n", "tests.cli.nodes_for_run"])
    last = bad_input_line(result)
    assert "cannot run flow.yaml: 1 reference does not resolve" in last
    (line,) = result.stderr.strip().splitlines()[:-1]
    assert line.startswith(f"flow.yaml: error: /placements/0/node placement 'work': node {ref!r}")
    assert "is not registered" in line
    assert "cannot import" not in line


def test_source_functions_and_reducers_that_do_not_resolve_are_bad_input(here: Path) -> None:
    path = here / "scatter.yaml"
    data = {
        "id": "urn:test:flow:scatter",
        "entrypoints": {"main": "each"},
        "reducers": {"total": "flowtide_no_such_module:add"},
        "placements": [
            {
                "id": "each",
                "kind": "scatter",
                "source_fn": "tests.cli.nodes_for_run:nothing",
                "body": {"node": "tests.cli.nodes_for_run:finish"},
                "gather": {"strategy": "reduce", "reducer": "tests.cli.nodes_for_run:nope"},
                "routes": {"all-success": "end", "partial": "end", "all-error": "end"},
            },
            {"id": "end", "kind": "terminal"},
        ],
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = runner.invoke(app, ["run", str(path), "-n", "tests.cli.nodes_for_run"])
    assert "3 references do not resolve" in bad_input_line(result)
    assert "/placements/0/source_fn placement 'each': source function" in result.stderr
    assert "/placements/0/gather/reducer placement 'each': reducer" in result.stderr
    assert "/reducers/total: state key 'total': reducer" in result.stderr


# -- other options ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("deadline", "says"),
    [
        ("soon", "'soon' is not an ISO 8601 duration"),
        ("-PT5M", "is not an ISO 8601 duration"),
        ("P1M", "uses years or months"),
        ("P99999999D", "too long"),
        ("2026-01-01T09:00:00", "an instant needs a time zone"),
    ],
)
def test_a_bad_deadline_is_bad_input(deadline: str, says: str) -> None:
    doc = str(EXAMPLES / "support-dispatcher.jsonld")
    result = runner.invoke(
        app, ["run", doc, "-n", "flowtide.demo.dispatcher", "--deadline", deadline]
    )
    line = bad_input_line(result)
    assert line.startswith("flowtide: --deadline")
    assert says in line
    assert result.stderr.count("\n") == 1


def test_a_deadline_may_be_an_instant() -> None:
    result = runner.invoke(
        app,
        [
            "run",
            str(EXAMPLES / "support-dispatcher.jsonld"),
            "-n",
            "flowtide.demo.dispatcher",
            "--deadline",
            "2020-01-01T00:00:00Z",
        ],
    )
    assert result.exit_code == ExitCode.FAILURE, result.output
    assert "timed_out" in result.stdout
    assert "interrupted: timeout (2020-01-01T00:00:00+00:00)" in result.stdout


def test_a_missing_flow_file_is_one_located_problem(here: Path) -> None:
    result = runner.invoke(app, ["run", "gone.yaml"])
    assert bad_input_line(result) == "flowtide: gone.yaml is not a valid flow; nothing run"
    assert "gone.yaml: error: (document): cannot read the document" in result.stderr


def test_a_parked_run_says_where_it_waits_and_is_left_in_the_store_on_ctrl_c(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [
        sys.executable, "-m", "flowtide", "run", str(EXAMPLES / "support-dispatcher.jsonld"),
        "-n", "flowtide.demo.dispatcher", "--store", store,
        "--input", '{"message": "I want to talk to a human", "modelLatency": 0}',
    ]  # fmt: skip
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
    )
    assert process.stdout is not None
    line = process.stdout.readline()  # (a pipe: the waiting line is printed, not redrawn)
    assert "waiting: parked at park-for-operator" in line
    assert "flowtide signal" in line
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == ExitCode.INTERRUPTED, out + err
    assert f"is kept in {store}, parked; no process drives it now" in err
    assert "flowtide worker --nodes flowtide.demo.dispatcher" in err
    shown = runner.invoke(app, ["runs", "--store", store, "--json"])
    (run,) = json.loads(shown.stdout)
    assert run["lifecycle"] == "parked"
    assert run["tokens"][0]["placement"] == "park-for-operator"


def test_iris_are_printed_as_they_are(here: Path) -> None:
    data = {
        "id": "urn:x:flow",
        "entrypoints": {"main": "work"},
        "placements": [
            {"id": "work", "kind": "task", "node": "urn:x:work", "routes": {"done": "end"}},
            {"id": "end", "kind": "terminal"},
        ],
    }
    (here / "x.yaml").write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["validate", "x.yaml"])
    assert result.exit_code == ExitCode.OK, result.output
    assert "node 'urn:x:work' is not declared" in result.stdout
    assert "ok x.yaml: urn:x:flow" in result.stdout


# -- run --with --------------------------------------------------------------------------------


def test_run_takes_the_flows_its_subflows_name_with_with(here: Path) -> None:
    child = flow_file(here, "tests.cli.nodes_for_run:finish", name="child.yaml")
    parent = here / "parent.yaml"
    parent.write_text(
        yaml.safe_dump(
            {
                "id": "urn:test:flow:parent",
                "entrypoints": {"main": "child"},
                "placements": [
                    {
                        "id": "child",
                        "kind": "subflow",
                        "flow": "urn:test:flow:user",
                        "output": {"finished": "finished"},
                        "routes": {"success": "end", "error": "end"},
                    },
                    {"id": "end", "kind": "terminal"},
                ],
            }
        )
    )
    alone = runner.invoke(app, ["run", "parent.yaml"])
    assert "urn:test:flow:user" in alone.stderr
    assert bad_input_line(alone) == "flowtide: parent.yaml is not a valid flow; nothing run"
    result = runner.invoke(
        app, ["run", "parent.yaml", "--with", child.name, "-n", "tests.cli.nodes_for_run", "--json"]
    )
    assert result.exit_code == ExitCode.OK, result.output
    assert '"outcome": "completed"' in result.stdout


# -- validate --nodes ---------------------------------------------------------------------------


def test_validate_checks_routes_against_the_nodes_implementations(here: Path) -> None:
    name = module(here, NODES)
    doc = flow_file(here, "urn:test:node:work")
    alone = runner.invoke(app, ["validate", doc.name])
    assert alone.exit_code == ExitCode.OK, alone.output
    assert "is not declared in the document nor registered" in alone.stdout
    checked = runner.invoke(app, ["validate", doc.name, "--nodes", name])
    assert checked.exit_code == ExitCode.OK, checked.output
    assert "warning: /placements/0/routes placement 'work': output 'skipped'" in checked.stdout
    assert "not declared" not in checked.stdout
    wrong = flow_file(here, "urn:test:node:work", name="wrong.yaml")
    text = wrong.read_text().replace("done: end", "done: end\n    finished: end")
    wrong.write_text(text)
    refused = runner.invoke(app, ["validate", wrong.name, "--nodes", name])
    assert refused.exit_code == ExitCode.BAD_INPUT, refused.output
    assert "node 'urn:test:node:work' has no output 'finished'" in refused.stdout
    assert "ok wrong.yaml" not in refused.stdout


def test_validate_with_nodes_refuses_a_function_named_by_module_instead_of_its_id(
    here: Path,
) -> None:
    name = module(here, NODES)  # (its node is registered as 'urn:test:node:work')
    doc = flow_file(here, f"{name}:work")
    assert runner.invoke(app, ["validate", doc.name]).exit_code == ExitCode.OK
    checked = runner.invoke(app, ["validate", doc.name, "--nodes", name])
    assert checked.exit_code == ExitCode.BAD_INPUT, checked.output
    assert f"node '{name}:work' is not registered" in checked.stdout


def test_validate_with_nodes_reports_nodes_without_implementation(here: Path) -> None:
    name = module(here, NODES)
    result = runner.invoke(
        app, ["validate", str(flow_file(here, "urn:test:node:other")), "-n", name]
    )
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    (line,) = [x for x in result.stdout.splitlines() if "urn:test:node:other" in x]
    assert "error: /placements/0/node placement 'work'" in line
    assert f"none of the modules given with --nodes ({name}) registers it" in line


def test_validate_the_dispatcher_against_its_nodes() -> None:
    doc = str(EXAMPLES / "support-dispatcher.jsonld")
    assert "5 warning(s)" in runner.invoke(app, ["validate", doc]).stdout
    result = runner.invoke(app, ["validate", doc, "--nodes", "flowtide.demo.dispatcher"])
    assert result.exit_code == ExitCode.OK, result.output
    assert "1 file checked: 0 error(s), 0 warning(s)" in result.stdout


@pytest.mark.parametrize(
    ("command", "options"), [("run", ["--nodes", "--with"]), ("validate", ["--nodes"])]
)
def test_help_shows_the_options_for_your_code(command: str, options: list[str]) -> None:
    result = runner.invoke(app, [command, "--help"])
    for option in options:
        assert option in result.output


# -- python -m flowtide -------------------------------------------------------------------------


def python_m_flowtide(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("FLOWTIDE_DEBUG", None)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "flowtide", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def test_python_m_flowtide_is_the_command() -> None:
    version = python_m_flowtide("--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"flowtide {flowtide.__version__}"
    refused = python_m_flowtide("run", "examples/escalation-ladder.yaml")
    assert refused.returncode == ExitCode.BAD_INPUT, refused.stderr
    assert (
        refused.stderr.strip()
        .splitlines()[-1]
        .startswith("flowtide: cannot run examples/escalation-ladder.yaml")
    )
    assert "Traceback" not in refused.stderr


REGISTERED = """\
    import flowtide
    from flowtide import node


    @node(id="urn:test:node:square", outputs=["done"])
    def square(ctx):
        ctx.state["square"] = ctx.item * ctx.item
        return "done"


    @flowtide.source
    def numbers(ctx):
        return range(ctx.state["n"])


    @flowtide.reducer(id=__name__ + ":sum")
    def total(current, value):
        return (current or 0) + value
    """


def test_reducers_and_sources_a_nodes_module_registers_run(here: Path) -> None:
    name = module(here, REGISTERED)
    data = {
        "id": "urn:test:flow:registered",
        "entrypoints": {"main": "each"},
        "placements": [
            {
                "id": "each",
                "kind": "scatter",
                "source_fn": f"{name}:numbers",
                "body": {"node": "urn:test:node:square"},
                "gather": {"strategy": "reduce", "field": "square", "reducer": f"{name}:sum"},
                "routes": {"all-success": "end"},
            },
            {"id": "end", "kind": "terminal"},
        ],
    }
    (here / "sums.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    checked = runner.invoke(app, ["validate", "sums.yaml", "-n", name])
    assert checked.exit_code == ExitCode.OK, checked.output
    result = runner.invoke(app, ["run", "sums.yaml", "-n", name, "-i", '{"n": 4}', "--json"])
    assert result.exit_code == ExitCode.OK, result.output
    assert json.loads(result.stdout)["state"]["results"] == 0 + 1 + 4 + 9
