"""What a new user meets first on the stores' commands: a read-only command creates no store,
every hint can be pasted as it is, ``run --json`` prints JSON only, Ctrl-C says where the run is,
a run is named by the start of its id, tables never cut an id, and ``prune``."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from flowtide.cli import ExitCode, app
from tests.cli.test_operate import until
from tests.postgres_schemas import Schemas

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
CHECKOUT = ROOT / "examples" / "checkout-node-anchor.yaml"
DISPATCHER = ROOT / "examples" / "support-dispatcher.jsonld"
TO_A_HUMAN = '{"message": "I want to talk to a human", "modelLatency": 0}'
READ_ONLY = (
    ["runs"],
    ["show", "x"],
    ["status", "x"],
    ["history", "x"],
    ["explain", "x"],
    ["workers"],
    ["flows"],
)


def invoke(*args: str, code: int = ExitCode.OK) -> Result:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result


def as_json(*args: str, code: int = ExitCode.OK) -> Any:
    return json.loads(invoke(*args, "--json", code=code).stdout)


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test's folder as the working directory, with no FLOWTIDE_STORE: the default store."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLOWTIDE_STORE")
    return tmp_path


def flow_file(folder: Path, node: str, name: str = "flow.yaml") -> Path:
    path = folder / name
    path.write_text(
        yaml.safe_dump(
            {
                "id": "urn:test:flow:one-node",
                "entrypoints": {"main": "work"},
                "placements": [
                    {"id": "work", "kind": "task", "node": node, "routes": {"done": "end"}},
                    {"id": "end", "kind": "terminal"},
                ],
            }
        )
    )
    return path


# -- a read-only command on a missing file ------------


def test_a_read_only_command_on_a_missing_sqlite_file_creates_nothing(here: Path) -> None:
    for command in (*READ_ONLY, ["prune", "--ended-before", "P1D"]):
        result = invoke(*command, code=ExitCode.BAD_INPUT)
        assert result.stderr == (
            "flowtide: no store at flowtide.db; start a run first, or name one with --store\n"
        )
        other = invoke(*command, "--store", "sqlite:///other.db", code=ExitCode.BAD_INPUT)
        assert other.stderr.startswith("flowtide: no store at other.db;")
        assert list(here.iterdir()) == [], command
    invoke("start", str(CHECKOUT))
    assert (here / "flowtide.db").exists()
    assert as_json("runs")[0]["lifecycle"] == "pending"


# -- hints that can be pasted ------------


def hinted(output: str, before: str) -> list[str]:
    """The command a hint prints after ``before`` (up to ';' or the line's end), as the shell
    would split it with ``$FLOWTIDE_STORE`` expanded."""
    text = output.split(before, 1)[1].split("\n", 1)[0].split(";", 1)[0]
    words = shlex.split(os.path.expandvars(text))
    assert words[0] == "flowtide", text
    return words[1:]


def test_hints_name_the_store_when_it_is_not_the_default(here: Path) -> None:
    default = invoke("start", str(CHECKOUT)).stdout
    assert "--store" not in default
    assert invoke(*hinted(default, "see it: ")).stdout.startswith("run ")
    (here / "my runs").mkdir()
    other = invoke("start", str(CHECKOUT), "--store", "my runs/r.db").stdout
    assert "flowtide worker --store 'my runs/r.db'; see it: flowtide show " in other
    assert "pending" in invoke(*hinted(other, "see it: ")).stdout


def test_hints_name_the_variable_for_a_store_from_the_environment(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWTIDE_STORE", f"sqlite:///{here / 'env.db'}")
    started = invoke("start", str(CHECKOUT)).stdout
    assert 'flowtide worker --store "$FLOWTIDE_STORE"; see it: flowtide show ' in started
    assert "env.db" not in started
    assert "pending" in invoke(*hinted(started, "see it: ")).stdout


def test_hints_never_show_a_password(
    here: Path, schemas: Schemas, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (the test server trusts its clients: any password is accepted, and must never be shown)
    url = postgres_url.replace("postgres@", "postgres:s3cret@") + f"?schema={schemas.new()}"
    assert "s3cret" in url
    started = invoke("start", str(CHECKOUT), "--store", url).stdout
    assert "s3cret" not in started and "***" not in started
    assert "see it: flowtide show " in started and '--store "$FLOWTIDE_STORE"' in started
    assert "set FLOWTIDE_STORE to the store's URL: its password is not shown" in started
    monkeypatch.setenv("FLOWTIDE_STORE", url)
    assert "pending" in invoke(*hinted(started, "see it: ")).stdout


# -- flowtide run: --json, Ctrl-C ------------


Start = Callable[..., subprocess.Popen[str]]


@pytest.fixture
def run_process() -> Iterator[Start]:
    """Starts ``flowtide run ARGS`` in a process of its own (killed at the end if need be)."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        command = [sys.executable, "-m", "flowtide", "run", *args]
        started.append(
            subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
            )
        )
        return started[-1]

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.communicate()


def first_line(stream: IO[str] | None, patience: float = 30.0) -> str:
    """The stream's first line, or a failure once ``patience`` seconds have passed."""
    assert stream is not None
    reader = ThreadPoolExecutor(max_workers=1)
    try:
        return reader.submit(stream.readline).result(timeout=patience)
    finally:
        reader.shutdown(wait=False)  # (a line that never came: the process is killed at the end)


def interrupted(process: subprocess.Popen[str]) -> tuple[str, str]:
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == ExitCode.INTERRUPTED, out + err
    return out, err


def test_run_json_prints_json_only_on_stdout_even_when_stopped(
    tmp_path: Path, run_process: Start
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    process = run_process(
        str(DISPATCHER), "-n", "flowtide.demo.dispatcher", "--input", TO_A_HUMAN,
        "--store", store, "--json",
    )  # fmt: skip
    assert "waiting: parked at park-for-operator" in first_line(process.stderr)
    out, err = interrupted(process)
    left = json.loads(out)
    assert (left["kept"], left["lifecycle"]) == (True, "parked")
    assert left["parked"][0]["placement"] == "park-for-operator"
    assert "stopped waiting: run" in err


def test_ctrl_c_says_a_memory_run_is_lost(run_process: Start) -> None:
    process = run_process(
        str(DISPATCHER), "-n", "flowtide.demo.dispatcher", "--input", TO_A_HUMAN,
        "--store", "memory:",
    )  # fmt: skip
    line = first_line(process.stdout)
    assert "no other process can signal it" in line and "flowtide signal" not in line
    _, err = interrupted(process)
    assert "is lost (parked): a memory: store keeps nothing once the command ends" in err
    assert "flowtide worker" not in err


def test_ctrl_c_while_a_node_runs_says_it_runs_again_on_a_worker(
    tmp_path: Path, run_process: Start
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    flow = flow_file(tmp_path, "tests.cli.nodes_for_run:slow")
    process = run_process(str(flow), "--store", store, "--nodes", "tests.cli.nodes_for_run")

    def running() -> Any:
        if not (tmp_path / "runs.db").exists():
            return None
        found = as_json("runs", "--store", store)
        return found and found[0]["tokens"] and found[0]["tokens"][0]["status"] == "running"

    until(running, "the node running")
    _, err = interrupted(process)
    assert "is kept in" in err and "running; no process drives it now" in err
    assert "at work: running; a node that was running here was stopped, and runs again" in err
    assert (
        "a worker goes on with it at once: flowtide worker --nodes tests.cli.nodes_for_run --store"
        in err
    )
    (left,) = as_json("runs", "--store", store)
    assert (left["lifecycle"], left["held_by"]) == ("running", None)


# -- runs named by the start of their id ------------


@pytest.fixture(params=["sqlite", "postgresql"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
        return
    schemas: Schemas = request.getfixturevalue("schemas")
    url: str = request.getfixturevalue("postgres_url")
    yield f"{url}?schema={schemas.new()}"


def test_a_run_is_named_by_the_start_of_its_id(any_store: str) -> None:
    for run_id in ("abc1", "abc2", "xyz9", "ab"):
        invoke("start", str(CHECKOUT), "--run-id", run_id, "--store", any_store)
    store = ("--store", any_store)
    assert as_json("show", "xy", *store)["run_id"] == "xyz9"
    assert invoke("show", "xy", *store).stdout.startswith("run xyz9: pending")
    assert as_json("show", "ab", *store)["run_id"] == "ab"  # (a whole id wins)
    assert as_json("history", "xyz", *store) == []
    nodes = ("--nodes", "flowtide.demo.checkout")
    assert invoke("explain", "xy", *store, *nodes).stdout.startswith("run xyz9: no placement")
    ambiguous = invoke("show", "abc", *store, code=ExitCode.BAD_INPUT).stderr
    assert ambiguous == (
        "flowtide: run 'abc' is ambiguous: the ids of 2 runs start with it (abc1, abc2); "
        "give more of it\n"
    )
    for command in (["history", "abc"], ["explain", "abc"], ["cancel", "abc"]):
        assert "is ambiguous" in invoke(*command, *store, code=ExitCode.BAD_INPUT).stderr
    unknown = invoke("show", "q", *store, code=ExitCode.BAD_INPUT).stderr
    assert unknown.startswith("flowtide: no run 'q' in ")
    signalled = invoke(  # (a placement nothing is parked at: bad input)
        "signal", "abc2", "--placement", "collect-payment", *store, code=ExitCode.BAD_INPUT
    )
    assert "nothing is parked in run 'abc2'" in signalled.stderr
    assert (
        "is ambiguous"
        in invoke("signal", "abc", "--placement", "p", *store, code=ExitCode.BAD_INPUT).stderr
    )
    # (No worker runs here: the cancel is recorded for the one that takes the run.)
    cancelled = invoke("cancel", "xy", "--wait", "0", "--json", *store, code=ExitCode.PENDING)
    assert json.loads(cancelled.stdout)["run_id"] == "xyz9"


def test_many_runs_that_share_a_prefix_are_listed_ten_at_most(tmp_path: Path) -> None:
    store = ("--store", f"sqlite:///{tmp_path / 'runs.db'}")
    for n in range(12):
        invoke("start", str(CHECKOUT), "--run-id", f"run-{n:02d}", *store)
    said = invoke("show", "run-", *store, code=ExitCode.BAD_INPUT).stderr
    assert "the ids of more than 10 runs start with it (run-00, " in said
    assert "run-09, ...); give more of it" in said


# -- tables ------------


def test_tables_outside_a_terminal_never_cut_an_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ("--store", f"sqlite:///{tmp_path / 'runs.db'}")
    ids = [f"{n}-" + "0123456789abcdef" * 4 for n in range(2)]
    for run_id in ids:
        invoke("start", str(CHECKOUT), "--run-id", run_id, *store)
    monkeypatch.setenv("COLUMNS", "30")
    listed = invoke("runs", *store).stdout
    for run_id in ids:
        assert run_id in listed, listed
    assert "urn:flowtide:example:checkout-node-anchor" in listed


# -- prune ------------


def test_prune_deletes_ended_runs_in_batches_and_says_how_many(
    any_store: str, tmp_path: Path
) -> None:
    store = ("--store", any_store)
    flow = flow_file(tmp_path, "tests.cli.nodes_for_run:finish")
    nodes = ("--nodes", "tests.cli.nodes_for_run")
    ended = [as_json("run", str(flow), *store, *nodes)["run_id"] for _ in range(3)]
    kept = as_json("start", str(CHECKOUT), *store)["run_id"]
    said = invoke("prune", "--ended-before", "P1D", *store).stdout
    assert said.startswith(f"pruned 0 runs of {any_store} that ended before ")
    dry = invoke("prune", "--ended-before", "PT0S", "--dry-run", "--batch", "2", *store).stdout
    assert dry.startswith("would prune 3 runs of ")
    assert len(as_json("runs", *store)) == 4
    pruned = as_json("prune", "--ended-before", "PT0S", "--batch", "2", *store)
    assert (pruned["runs"], pruned["deleted"]) == (3, True)
    assert [r["run_id"] for r in as_json("runs", *store)] == [kept]
    for run_id in ended:
        gone = invoke("history", run_id, *store, code=ExitCode.BAD_INPUT)
        assert gone.stderr.startswith(f"flowtide: no run {run_id!r} in ")
    assert as_json("prune", "--ended-before", "2000-01-01T00:00:00Z", *store)["runs"] == 0
    assert as_json("show", kept, *store)["lifecycle"] == "pending"


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("yesterday", "--ended-before 'yesterday': 'yesterday' is not an ISO 8601 duration"),
        ("2026-01-01T00:00:00", "an instant needs a time zone"),
    ],
)
def test_prune_refuses_a_bad_cutoff(value: str, says: str) -> None:
    result = invoke("prune", "--ended-before", value, code=ExitCode.BAD_INPUT)
    assert says in result.stderr and result.stderr.count("\n") == 1
