"""``flowtide flows``, ``flowtide flows register`` and ``flowtide start FLOW_ID``, on a SQLite
file (and a worker process that learns the flow from the store)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from flowtide.cli import ExitCode, app
from tests.cli.test_operate import CHECKOUT, ROOT, cli, runner, store, until, worker

__all__ = ["store", "worker"]  # (the fixtures, used below)

FLOW = "urn:flowtide:example:checkout-node-anchor"
ESCALATION = ROOT / "examples" / "escalation-ladder.yaml"


def version_two(tmp_path: Path) -> Path:
    """The checkout document, as its version 2."""
    path = tmp_path / "checkout-2.yaml"
    path.write_text(CHECKOUT.read_text().replace('version: "1"', 'version: "2"', 1))
    return path


def test_documents_are_registered_and_listed(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    missing = runner.invoke(app, ["flows", "--store", store])  # (a read: nothing is created)
    assert missing.exit_code == ExitCode.BAD_INPUT and not (tmp_path / "runs.db").exists()
    done = cli("flows", "register", str(CHECKOUT), str(ESCALATION), "--store", store)
    assert [(d["flow"], d["version"], d["new"]) for d in done] == [
        (FLOW, "1", True),
        ("urn:flowtide:example:escalation-ladder", "1", True),
    ]
    (again,) = cli("flows", "register", str(CHECKOUT), "--store", store)
    assert (again["digest"], again["new"]) == (done[0]["digest"], False)
    cli("flows", "register", str(version_two(tmp_path)), "--store", store)
    listed = cli("flows", "--store", store)
    assert [(f["flow"], f["version"], f["latest"], f["runs"]) for f in listed] == [
        (FLOW, "1", False, 0),
        (FLOW, "2", True, 0),
        ("urn:flowtide:example:escalation-ladder", "1", True, 0),
    ]
    assert all(f["stored_at"] for f in listed)
    table = runner.invoke(app, ["flows", "--store", store])
    assert (
        table.exit_code == 0 and "latest" in table.stdout and done[0]["digest"][:12] in table.stdout
    )


def test_nothing_is_registered_when_a_document_is_bad(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"id": "urn:x", "entrypoints": {"main": "a"}, "placements": [
        {"id": "a", "kind": "task", "node": "n", "routes": {"done": "nowhere"}},
        {"id": "end", "kind": "terminal"},
    ]}))  # fmt: skip
    result = runner.invoke(app, ["flows", "register", str(CHECKOUT), str(bad), "--store", store])
    assert result.exit_code == ExitCode.BAD_INPUT
    assert "/placements/0/routes/done" in result.stderr and "nowhere" in result.stderr
    assert "bad.json is not a valid flow; nothing registered" in result.stderr
    assert cli("flows", "--store", store) == []


def test_a_subflow_may_name_a_flow_of_the_store(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    parent = tmp_path / "parent.yaml"
    parent.write_text(
        "id: urn:test:parent\nentrypoints: {main: sub}\nplacements:\n"
        f"  - {{id: sub, kind: subflow, flow: '{FLOW}', routes: {{success: end, error: end}}}}\n"
        "  - {id: end, kind: terminal}\n"
    )
    result = runner.invoke(app, ["flows", "register", str(parent), "--store", store])
    assert result.exit_code == ExitCode.BAD_INPUT and FLOW in result.stderr
    cli("flows", "register", str(CHECKOUT), "--store", store)
    (done,) = cli("flows", "register", str(parent), "--store", store)
    assert done["new"] is True


def test_start_takes_the_latest_stored_version_of_a_flow_id(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    unknown = runner.invoke(app, ["start", FLOW, "--store", store])
    assert unknown.exit_code == ExitCode.BAD_INPUT
    assert f"'{FLOW}' is neither a file nor the id of a flow stored in" in unknown.stderr
    assert "no flow is stored there" in unknown.stderr
    cli("flows", "register", str(CHECKOUT), "--store", store)
    assert cli("start", FLOW, "--store", store)["version"] == "1"
    cli("flows", "register", str(version_two(tmp_path)), "--store", store)
    assert cli("start", FLOW, "--store", store, "--input", '{"order": 2}')["version"] == "2"
    assert [f["runs"] for f in cli("flows", "--store", store)] == [1, 1]
    misspelled = runner.invoke(app, ["start", "urn:flowtide:example:checkout", "--store", store])
    assert misspelled.exit_code == ExitCode.BAD_INPUT
    assert f"(stored flows: {FLOW})" in misspelled.stderr
    with_other = runner.invoke(app, ["start", FLOW, "--with", str(ESCALATION), "--store", store])
    assert with_other.exit_code == ExitCode.BAD_INPUT and "--with" in with_other.stderr


def test_a_worker_runs_a_run_started_by_flow_id(
    store: str, worker: subprocess.Popen[bytes]
) -> None:
    cli("flows", "register", str(CHECKOUT), "--store", store)
    run = cli("start", FLOW, "--store", store, "--input", '{"order": 3}')["run_id"]
    shown = until(
        lambda: (s := cli("show", run, "--store", store))["lifecycle"] == "parked" and s,
        "the run parks on a worker",
    )
    assert shown["flow"] == FLOW
