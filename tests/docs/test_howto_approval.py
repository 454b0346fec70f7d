"""docs/howto-approval.md runs as written, and both of its flows (the document and the one built
in Python) remind, escalate, expire and refuse a late approval on the virtual clock."""

from __future__ import annotations

import contextlib
import io
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from flowtide import Engine, Flow, SignalRefused, VirtualClock, load_flow
from flowtide.engine import RefusalReason
from flowtide.render import effective_settings

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "howto-approval.md").read_text()
(YAML,) = re.findall(r"```yaml\n(.*?)```", DOC, flags=re.S)
PYTHON = re.findall(r"```python\n(.*?)```", DOC, flags=re.S)
(PRINTED,) = re.findall(r"```text\n(.*?)```", DOC, flags=re.S)
APPROVERS = ["ann@acme.test", "bob@acme.test", "cho@acme.test"]
DAY = timedelta(days=1)


@pytest.fixture(scope="module")
def howto(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The page's code, run in order as a reader would, from a folder holding approval.yaml."""
    folder = tmp_path_factory.mktemp("howto")
    (folder / "approval.yaml").write_text(YAML)
    namespace: dict[str, Any] = {"__name__": "howto_approval"}
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as monkeypatch, contextlib.redirect_stdout(printed):
        monkeypatch.chdir(folder)
        for block in PYTHON:
            exec(compile(block, "howto-approval.md", "exec"), namespace)
    namespace["printed"] = printed.getvalue()
    return namespace


def test_the_page_prints_what_it_says_for_each_version(howto: dict[str, Any]) -> None:
    # It runs the document's flow, then the one built in Python.
    assert howto["printed"] == PRINTED * 2


def both(howto: dict[str, Any]) -> list[Flow]:
    return [load_flow(YAML, format="yaml"), howto["approval"]]


def test_both_versions_are_the_same_flow(howto: dict[str, Any]) -> None:
    document, built = both(howto)
    assert document.id == built.id
    for a, b in zip(document.placements, built.placements, strict=True):
        assert (a.id, a.kind, a.route_map()) == (b.id, b.kind, b.route_map())
        assert effective_settings(document, a) == effective_settings(built, b)


@pytest.mark.parametrize("version", [0, 1], ids=["document", "python"])
async def test_a_reminder_an_escalation_the_deadline_and_a_late_approval_refused(
    howto: dict[str, Any], version: int
) -> None:
    flow = both(howto)[version]
    clock = VirtualClock()
    start = clock.now()
    async with Engine(clock=clock) as engine:
        run = await engine.run(flow, {"approvers": APPROVERS})
        await clock.advance(5 * DAY + timedelta(hours=1))
        result = await engine.wait(run.run_id)
        history = await engine.history(run.run_id)
        with pytest.raises(SignalRefused) as late:
            await engine.signal(key=f"approval-{run.run_id}-cho@acme.test", payload={"ok": 1})
    await clock.aclose()
    fired = [
        (e.at - start, e.data["output"], e.data["interrupting"])
        for e in history
        if e.kind == "timer_fired" and e.data.get("purpose") == "timer"
    ]
    assert fired == [
        (1 * DAY, "remind", False),
        (2 * DAY, "escalate", True),
        (3 * DAY, "remind", False),
        (4 * DAY, "escalate", True),
    ]
    (timed_out,) = [e for e in history if e.kind == "node_timed_out"]
    assert timed_out.at - start == 5 * DAY
    assert result.terminals == ("reminded", "reminded", "expired")
    assert result.outcome == "expired"  # (the reminders' terminals do not set it)
    assert result.state["reminded"] == APPROVERS[:2]
    assert late.value.reason is RefusalReason.EXPIRED
    assert late.value.at == start + 5 * DAY


def test_the_readme_and_the_engine_doc_link_the_howto() -> None:
    assert "(docs/howto-approval.md)" in (ROOT / "README.md").read_text()
    assert "(howto-approval.md)" in (ROOT / "docs" / "engine.md").read_text()
