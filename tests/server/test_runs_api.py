"""The runs routes, on every store: a run started over HTTP parks (a worker in the same
process drives it), is listed, read, explained, signalled by key and completes; cancels;
unknown runs and bad input answered with located errors."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.server.serving import FLOW, WRITE, serving, until

pytestmark = pytest.mark.usefixtures("every_store")  # (memory, SQLite, PostgreSQL)


async def start(http: httpx.AsyncClient, order: str, **extra: Any) -> str:
    answer = await http.post(
        "/api/runs", json={"flow": FLOW, "input": {"order": order}, **extra}, headers=WRITE
    )
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert body["flow"] == FLOW and body["version"] == "1"
    return str(body["run_id"])


async def parked(http: httpx.AsyncClient, run: str) -> dict[str, Any]:
    async def look() -> dict[str, Any] | None:
        shown = (await http.get(f"/api/runs/{run}")).json()
        return shown if shown["lifecycle"] == "parked" else None

    found: dict[str, Any] = await until(look, "the run parks")
    return found


async def test_a_run_started_over_http_parks_is_signalled_by_key_and_completes() -> None:
    async with serving(worker=True) as (http, _):
        run = await start(http, "o-1", deadline="PT1H")
        shown = await parked(http, run)
        (park,) = shown["parks"]
        assert park["key"] == "review:o-1" and park["placement"] == "review"
        assert park["deadline"].endswith("+00:00")
        assert "flowchart" in shown["mermaid"] or "graph" in shown["mermaid"]
        listed = (await http.get("/api/runs", params={"lifecycle": "parked"})).json()
        assert [r["run_id"] for r in listed["runs"]] == [run]
        assert listed["runs"][0]["where"][0]["placement"] == "review"
        answer = await http.post(
            "/api/signals", json={"key": "review:o-1", "output": "approved"}, headers=WRITE
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["accepted"] is True and answer.json()["placement"] == "review"

        async def ended() -> bool:
            return bool((await http.get(f"/api/runs/{run}")).json()["lifecycle"] == "completed")

        await until(ended, "the run completes")
        events = (await http.get(f"/api/runs/{run}/history")).json()["events"]
        signalled = [e for e in events if e["kind"] == "signalled"]
        assert signalled[0]["data"]["sender"] == "ops"  # who sent it, by the token's name
        assert events[-1]["kind"] == "run_finished"
        again = await http.post(
            "/api/signals", json={"key": "review:o-1", "output": "approved"}, headers=WRITE
        )
        assert again.status_code == 409 and again.json()["accepted"] is False
        assert again.json()["reason"]


async def test_signal_by_run_and_placement_and_a_placement_nothing_parked_at() -> None:
    async with serving(worker=True) as (http, _):
        run = await start(http, "o-2")
        await parked(http, run)
        wrong = await http.post(
            f"/api/runs/{run[:12]}/signals", json={"placement": "done"}, headers=WRITE
        )
        assert wrong.status_code == 400 and wrong.json()["error"]["code"] == "not_parked"
        assert "review" in wrong.json()["error"]["message"]
        neither = await http.post(f"/api/runs/{run}/signals", json={}, headers=WRITE)
        assert neither.status_code == 400
        ok = await http.post(
            f"/api/runs/{run[:12]}/signals",
            json={"placement": "review", "output": "rejected", "idempotency_key": "k-2"},
            headers=WRITE,
        )
        assert ok.status_code == 200 and ok.json()["output"] == "rejected", ok.text


async def test_a_signal_or_cancel_no_worker_answers_is_recorded_202() -> None:
    async with serving(worker=False) as (http, _):
        run = await start(http, "o-3")
        # No worker: the run is pending; a cancel is recorded for the next worker.
        answer = await http.post(f"/api/runs/{run}/cancel", json={"wait": 0}, headers=WRITE)
        assert answer.status_code == 202, answer.text
        assert answer.json()["pending"] is True and answer.json()["request_id"]
        shown = (await http.get(f"/api/runs/{run}")).json()
        (request,) = shown["pending_requests"]
        assert request["kind"] == "cancel" and request["request"]["sender"] == "ops"


async def test_cancel_a_parked_run_then_again() -> None:
    async with serving(worker=True) as (http, _):
        run = await start(http, "o-4")
        await parked(http, run)
        first = await http.post(f"/api/runs/{run}/cancel", json={"reason": "no"}, headers=WRITE)
        assert first.status_code == 200, first.text
        assert first.json() == {"run_id": run, "cancelled": True, "lifecycle": "cancelled"}
        again = await http.post(f"/api/runs/{run}/cancel", headers=WRITE)
        assert again.json()["cancelled"] is False
        # Who cancelled it, by the token's name, is in the history.
        events = (await http.get(f"/api/runs/{run}/history")).json()["events"]
        assert events[-1]["kind"] == "run_finished"
        assert events[-1]["data"]["lifecycle"] == "cancelled"
        assert events[-1]["data"]["sender"] == "ops"


async def test_explain_history_paging_and_unknown_runs() -> None:
    async with serving(worker=True) as (http, _):
        runs = [await start(http, f"p-{n}") for n in range(3)]
        for run in runs:
            await parked(http, run)
        explained = (await http.get(f"/api/runs/{runs[0]}/explain")).json()["explanations"]
        assert explained and explained[0]["placement"] == "review"
        one = await http.get(f"/api/runs/{runs[0]}/explain", params={"placement": "review"})
        assert one.status_code == 200 and len(one.json()["explanations"]) == 1
        first = (await http.get("/api/runs", params={"limit": 2, "flow": FLOW})).json()
        assert len(first["runs"]) == 2 and first["next"] == first["runs"][-1]["run_id"]
        rest = (await http.get("/api/runs", params={"limit": 2, "after": first["next"]})).json()
        assert len(rest["runs"]) == 1 and rest["next"] is None
        seen = [r["run_id"] for r in first["runs"] + rest["runs"]]
        assert sorted(seen) == sorted(runs)
        assert (await http.get("/api/runs", params={"flow": "urn:none"})).json()["runs"] == []
        for path in ("/api/runs/nope", "/api/runs/nope/history", "/api/runs/nope/explain"):
            missing = await http.get(path)
            assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_run"
        bad = await http.get("/api/runs", params={"lifecycle": "asleep"})
        assert bad.status_code == 400 and "lifecycle" in bad.json()["error"]["message"]
        unknown = await http.post("/api/runs", json={"flow": "urn:none"}, headers=WRITE)
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "unknown_flow"
        late = await http.post("/api/runs", json={"flow": FLOW, "deadline": "soon"}, headers=WRITE)
        assert late.status_code == 400 and late.json()["error"]["code"] == "bad_input"
        twice = await http.post("/api/runs", json={"flow": FLOW, "run_id": runs[0]}, headers=WRITE)
        assert twice.status_code == 409, twice.text
        assert quote(FLOW, safe="")  # (flow ids are path-encoded in /api/flows/{id})
