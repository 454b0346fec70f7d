"""The real server for the browser tests: the HTTP API and the dashboard on a SQLite store, a
worker in the same process running a small flow whose node parks; and Debian's chromium driven by
Playwright.

The server runs under uvicorn in a thread of the test process, on a free port of 127.0.0.1.
Screenshots go to ``test-artifacts/`` at the repository root (git-ignored), kept by CI.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from playwright.sync_api import Browser, Page, sync_playwright

from flowtide.authoring.nodes import NodeRegistry, node
from flowtide.engine import NodeContext, Park
from flowtide.server.app import create_app
from flowtide.server.auth import Tokens

CHROMIUM = Path("/usr/bin/chromium")
REQUIRED = "FLOWTIDE_BROWSER_TESTS"
"""Set to ``required`` (``.ci/run`` does): a missing chromium fails the browser tests instead
of skipping them, so CI never passes without them."""
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
TOKEN = "browser-test-token"
NODE = "urn:flowtide:test:dashboard:node:review"
FLOW = "urn:flowtide:test:dashboard:review"
QUICK_FLOW = "urn:flowtide:test:dashboard:quick-review"


@node(id=NODE, outputs=["approved", "rejected"], parks=True, register=False)
async def review(ctx: NodeContext) -> Any:
    """Parks under a key holding markup (the page must show it as text); a signal decides."""
    if ctx.signal is None:
        return Park(key=f"<b>review</b>-{ctx.run_id}", payload={"asked": "<i>someone</i>"})
    return "rejected" if ctx.signal.get("reject") else "approved"


def flow_document(flow_id: str, timeout: str) -> dict[str, Any]:
    """A review that parks until signalled, expiring after ``timeout``."""
    return {
        "id": flow_id,
        "version": "1",
        "name": "review",
        "entrypoints": {"main": "review"},
        "node_types": [
            {"id": NODE, "parks": True, "name": "review", "outputs": ["approved", "rejected"]}
        ],
        "placements": [
            {
                "id": "review",
                "kind": "task",
                "node": NODE,
                "settings": {"timeout": timeout},
                "routes": {"approved": "done", "rejected": "declined", "timeout": "expired"},
            },
            {"id": "done", "kind": "terminal", "outcome": "done"},
            {"id": "declined", "kind": "terminal", "outcome": "declined"},
            {"id": "expired", "kind": "terminal", "outcome": "expired"},
        ],
    }


@dataclass
class Server:
    """The running server: its address, and the API called as a program would."""

    url: str

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        request.add_header("Authorization", f"Bearer {TOKEN}")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def start(self, flow: str) -> str:
        status, body = self.call("POST", "/api/runs", {"flow": flow, "input": {}})
        assert status == 201, body
        run_id: str = body["run_id"]
        return run_id


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# Package-scoped, not session-scoped: Playwright's sync API runs an event loop in this thread
# while it is open, and the tests after these call asyncio.run().
@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    store = tmp_path_factory.mktemp("dashboard") / "runs.db"
    registry = NodeRegistry()
    registry.register(review)
    app = create_app(
        f"sqlite:///{store}",
        tokens=Tokens({"default": TOKEN}),
        worker=True,
        registry=registry,
        poll=0.1,
    )
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, name="dashboard-server", daemon=True)
    thread.start()
    found = Server(f"http://127.0.0.1:{port}")
    limit = time.monotonic() + 15
    while not uv.started:
        assert thread.is_alive() and time.monotonic() < limit, "the server did not start"
        time.sleep(0.05)
    for document in (flow_document(FLOW, "PT1H"), flow_document(QUICK_FLOW, "PT6S")):
        status, body = found.call("POST", "/api/flows", document)
        assert status == 201, body
    yield found
    uv.should_exit = True
    thread.join(timeout=15)


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        why = (
            f"the browser tests drive Debian's chromium, and {CHROMIUM} is missing: "
            "install it with `apt-get install -y chromium`"
        )
        if os.environ.get(REQUIRED) == "required":
            pytest.fail(why)
        pytest.skip(why)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert not errors, f"the page raised: {errors}"


def shot(page: Page, name: str) -> Path:
    """A screenshot of the page as test-artifacts/<name>.png."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
