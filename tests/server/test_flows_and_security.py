"""Flows over HTTP (JSON and YAML documents in, located problems out, one flow's versions,
diagram and settings), and the server's guard: every mutating route refuses a missing or wrong
token, a server with no token is read-only, bodies over the limit are refused."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import quote

import httpx
import pytest
import yaml

from flowtide.documents import to_document
from tests.client.approval import approval
from tests.server.serving import FLOW, TOKEN, WRITE, serving

pytestmark = pytest.mark.usefixtures("every_store")

MUTATING = [
    ("/api/flows", {}),
    ("/api/runs", {"flow": FLOW}),
    ("/api/runs/some-run/signals", {"placement": "review"}),
    ("/api/signals", {"key": "k"}),
    ("/api/runs/some-run/cancel", {}),
    ("/api/runs/some-run/callbacks", {}),
]


async def test_flows_are_registered_as_json_or_yaml_and_read_back() -> None:
    async with serving() as (http, _):
        listed = (await http.get("/api/flows")).json()["flows"]
        assert [(f["flow"], f["version"], f["latest"], f["runs"]) for f in listed] == [
            (FLOW, "1", True, 0)
        ]
        text = yaml.safe_dump(to_document(approval("2")))
        answer = await http.post(
            "/api/flows",
            content=text,
            headers={**WRITE, "Content-Type": "application/yaml"},
        )
        assert answer.status_code == 201, answer.text
        assert answer.json()["version"] == "2" and answer.json()["new"] is True
        again = await http.post("/api/flows", json=to_document(approval("2")), headers=WRITE)
        assert again.status_code == 201 and again.json()["new"] is False
        one = (await http.get(f"/api/flows/{quote(FLOW, safe='')}")).json()
        assert [v["version"] for v in one["versions"]] == ["1", "2"]
        assert one["document"]["version"] == "2"
        assert "review" in one["mermaid"]
        assert one["settings"]["review"]["timeout"] == "PT1H"
        assert "properties" in one["settings_schema"]
        missing = await http.get("/api/flows/urn:none")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_flow"


async def test_an_invalid_document_is_422_with_located_problems_and_nothing_stored() -> None:
    async with serving() as (http, _):
        bad = {"id": "urn:test:flow:bad", "placements": [{"id": "x", "kind": "task"}]}
        answer = await http.post("/api/flows", json=bad, headers=WRITE)
        assert answer.status_code == 422, answer.text
        body = answer.json()
        assert body["error"]["code"] == "invalid_flow" and body["problems"]
        assert set(body["problems"][0]) == {"message", "pointer", "placement", "severity"}
        for content, kind in (("{", "application/json"), ("[1]", "application/json")):
            broken = await http.post(
                "/api/flows", content=content, headers={**WRITE, "Content-Type": kind}
            )
            assert broken.status_code == 400 and broken.json()["error"]["code"] == "bad_input"
        assert len((await http.get("/api/flows")).json()["flows"]) == 1


@pytest.mark.parametrize(("path", "body"), MUTATING)
async def test_every_mutating_route_refuses_a_missing_or_wrong_token(
    path: str, body: dict[str, object]
) -> None:
    async with serving() as (http, _):
        for headers in (
            {},
            {"Authorization": "Bearer wrong"},
            {"Authorization": f"Basic {TOKEN}"},
            {"Authorization": "Bearer "},
        ):
            answer = await http.post(path, json=body, headers=headers)
            assert answer.status_code == 401, (path, headers, answer.text)
            assert answer.json()["error"]["code"] == "unauthorized"
            assert TOKEN not in answer.text
        assert (await http.get("/api/runs")).json()["runs"] == []  # (nothing was done)


@pytest.mark.parametrize(("path", "body"), MUTATING)
async def test_a_server_with_no_token_is_read_only(path: str, body: dict[str, object]) -> None:
    async with serving(tokens={}, register=False) as (http, _):
        answer = await http.post(path, json=body, headers=WRITE)
        assert answer.status_code == 403 and answer.json()["error"]["code"] == "read_only"
        assert (await http.get("/api/flows")).status_code == 200


async def test_tokens_are_named_and_a_body_over_the_limit_is_413() -> None:
    async with serving(tokens={"ops": TOKEN, "ci": "another"}, max_body=8192) as (http, _):
        other = await http.post(
            "/api/runs",
            json={"flow": FLOW, "input": {"order": "x"}},
            headers={"Authorization": "Bearer another"},
        )
        assert other.status_code == 201, other.text
        big = {"flow": FLOW, "input": {"pad": "x" * 10_000}}
        answer = await http.post("/api/runs", json=big, headers=WRITE)
        assert answer.status_code == 413 and answer.json()["error"]["code"] == "too_large"

        async def chunks() -> AsyncIterator[bytes]:  # (no Content-Length: counted as it comes)
            for _ in range(10):
                yield b"x" * 1024

        for path in ("/api/flows", "/api/runs", "/api/runs/some-run/signals"):
            streamed = await http.post(
                path, content=chunks(), headers={**WRITE, "Content-Type": "application/json"}
            )
            assert streamed.status_code == 413, streamed.text


async def test_unknown_routes_and_methods_answer_json_errors() -> None:
    async with serving(register=False) as (http, _):
        nowhere = await http.get("/api/nowhere")
        assert nowhere.status_code == 404 and nowhere.json()["error"]["code"] == "not_found"
        wrong = await http.put("/api/runs")
        assert wrong.status_code == 405 and wrong.json()["error"]["code"]
        form = await http.post("/api/runs", data={"flow": FLOW}, headers=WRITE)
        assert form.status_code == 400 and "JSON object" in form.json()["error"]["message"]
        assert (await http.get("/healthz")).json() == {"ok": True}
        assert isinstance(http, httpx.AsyncClient)
