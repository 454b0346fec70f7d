"""schemathesis against the served OpenAPI document: generated requests to every operation,
with the write token, answer anything but a server error (a bounded number of examples, a fixed
seed: under a minute)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowtide.server import Tokens, create_app
from flowtide.store import MemoryStore
from tests.server.serving import TOKEN

EXAMPLES = 50
"""Examples per operation."""


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    """The API on a memory store, served by uvicorn in a thread of its own."""
    app = create_app(MemoryStore(), tokens=Tokens({"ops": TOKEN}), drain=timedelta(seconds=1))
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=asyncio.run, args=(server.serve(),), daemon=True)
    thread.start()
    ready = threading.Event()
    for _ in range(500):
        if server.started:
            break
        ready.wait(0.01)
    assert server.started, "the server did not start"
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def test_no_generated_request_gets_a_server_error(base_url: str) -> None:
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    # (The event stream never ends by itself: it is tested on its own.)
    operations = [op for op in operations if op.path != "/api/events"]
    assert len(operations) >= 14
    failures: list[str] = []
    for operation in operations:

        @settings(
            max_examples=EXAMPLES,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy(), authorised=st.booleans())
        def check(case: Any, authorised: bool) -> None:
            headers = {"Authorization": f"Bearer {TOKEN}"} if authorised else {}
            if isinstance(case.body, dict) and "wait" in case.body:
                case.body["wait"] = 0  # (nobody works the runs here: answer at once)
            response = case.call(base_url=base_url, headers=headers, timeout=10)
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path}: {response.text[:200]}")
            else:
                (kind,) = response.headers["content-type"]
                assert kind.startswith(("application/json", "text/plain", "text/html")), kind

        check()
    assert not failures, "\n".join(failures[:10])
