"""``POST /api/whatif``: the flow's recorded runs played again with edited node settings over
HTTP, bad edits refused located, and ``save`` registering the edited version."""

from __future__ import annotations

import pytest

from tests.server.serving import FLOW, WRITE, serving, until
from tests.server.test_runs_api import parked, start

pytestmark = pytest.mark.usefixtures("every_store")


async def test_recorded_runs_are_played_again_with_edits_and_the_edit_is_saved() -> None:
    async with serving(worker=True) as (http, _):
        run = await start(http, "o-1")
        await parked(http, run)
        signalled = await http.post(
            "/api/signals", json={"key": "review:o-1", "output": "approved"}, headers=WRITE
        )
        assert signalled.status_code == 200, signalled.text

        async def ended() -> bool:
            return bool((await http.get(f"/api/runs/{run}")).json()["lifecycle"] == "completed")

        await until(ended, "the run completes")
        edits = {"review.timeout": "PT2H"}
        answer = await http.post(
            "/api/whatif", json={"flow": FLOW, "set": edits, "last": 10}, headers=WRITE
        )
        assert answer.status_code == 200, answer.text
        report = answer.json()["report"]
        assert (report["flow"], report["compared"], report["unreproduced"]) == (FLOW, [run], [])
        assert answer.json()["summary"] == report["summary"] and "saved" not in answer.json()
        saved = await http.post(
            "/api/whatif", json={"flow": FLOW, "set": edits, "save": True}, headers=WRITE
        )
        assert saved.status_code == 200, saved.text
        assert (saved.json()["saved"]["flow"], saved.json()["saved"]["version"]) == (FLOW, "2")
        versions = (await http.get("/api/flows")).json()["flows"]
        assert [(v["version"], v["latest"]) for v in versions] == [("1", False), ("2", True)]


async def test_bad_edits_and_unknown_flows_are_refused_and_nothing_is_saved() -> None:
    async with serving() as (http, _):
        bad = await http.post(
            "/api/whatif", json={"flow": FLOW, "set": {"review.timeout": "soon"}}, headers=WRITE
        )
        assert bad.status_code == 422, bad.text
        assert "review.timeout" in bad.text
        unknown = await http.post(
            "/api/whatif", json={"flow": "urn:x", "set": {"a.timeout": "PT1M"}}, headers=WRITE
        )
        assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "unknown_flow")
        refused = await http.post("/api/whatif", json={"flow": FLOW, "set": {"a.timeout": 1}})
        assert refused.status_code == 401
        versions = (await http.get("/api/flows")).json()["flows"]
        assert [v["version"] for v in versions] == ["1"]
