"""Documents the document tests share: the seed fixture and a flow using every kind."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from flowtide.model import Flow

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SUPPORT_DISPATCHER = FIXTURES / "support-dispatcher.jsonld"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example_flows() -> list[Path]:
    """The example flow documents, sorted (the simulation scripts beside them left out)."""
    if not EXAMPLES.is_dir():
        return []
    return sorted(p for p in EXAMPLES.iterdir() if p.is_file() and ".simulate." not in p.name)


def fixture_document() -> dict[str, Any]:
    """The support-dispatcher JSON-LD document, parsed (a fresh copy each call)."""
    data: dict[str, Any] = json.loads(SUPPORT_DISPATCHER.read_text(encoding="utf-8"))
    return data


RICH: dict[str, Any] = {
    "id": "urn:test:flow:rich",
    "version": "3",
    "name": "Bestellung prüfen — 注文",
    "description": "Every placement kind, with settings.",
    "entrypoints": {"main": "charge", "replay": "fan-out"},
    "node_types": [
        {"id": "urn:test:node:charge", "outputs": ["paid", "declined"], "name": "charge"},
        {"id": "tests.documents.nodes_for_resolve:decorated", "outputs": ["ok", "retry"]},
    ],
    "reducers": {"results": "append", "total": "sum"},
    "deadline": "P1DT2H",
    "max_depth": 5,
    "placements": [
        {"id": "setup", "kind": "phase", "phase": "pre", "node": "urn:test:node:setup"},
        {
            "id": "charge",
            "kind": "task",
            "node": "urn:test:node:charge",
            "name": "Charge the card",
            "routes": {
                "paid": ["fan-out", "cool-down"],
                "declined": "retry-later",
                "timeout": "lost",
            },
            "settings": {
                "timeout": "PT10M",
                "timeout_anchor": "node",
                "release_on": ["paid"],
                "timers": [
                    {"after": "PT5M", "output": "declined", "interrupting": False},
                    {"after": "PT8M", "output": "timeout", "interrupting": True, "anchor": "node"},
                ],
                "retry": {
                    "max_attempts": 4,
                    "backoff": "decorrelated_jitter",
                    "initial": "PT0.5S",
                    "max": "PT30S",
                    "retry_on": ["OSError"],
                },
            },
        },
        {"id": "retry-later", "kind": "wait", "duration": "PT1H", "routes": {"elapsed": "charge"}},
        {
            "id": "cool-down",
            "kind": "wait",
            "until": "2030-01-01T00:00:00Z",
            "routes": {"elapsed": "both"},
        },
        {
            "id": "fan-out",
            "kind": "scatter",
            "source": "order.lines",
            "item_key": "line",
            "body": {"node": "tests.documents.nodes_for_resolve:decorated"},
            "input": {"currency": "order.currency"},
            "concurrency": 4,
            "batch": {"key": "warehouse", "size": 20, "idle": "PT2S"},
            "gather": {
                "strategy": "reduce",
                "target": "total",
                "reducer": "operator:add",
                "initial": 0,
            },
            "on_failure": "fail_fast",
            "routes": {
                "all-success": "both",
                "partial": "child",
                "all-error": "lost",
                "empty": "child",
            },
        },
        {
            "id": "both",
            "kind": "join",
            "mode": "quorum",
            "quorum": 2,
            "routes": {"success": "child", "error": "lost", "empty": "lost"},
            "settings": {"timeout": 60000},
        },
        {
            "id": "child",
            "kind": "subflow",
            "flow": "urn:test:flow:rich",
            "input": {"order": "order"},
            "output": {"receipt": "receipt"},
            "routes": {"success": "done", "error": "lost"},
        },
        {"id": "done", "kind": "terminal", "name": "Fertig ✓"},
        {"id": "lost", "kind": "terminal", "outcome": "lost-order"},
        {"id": "urn:elsewhere:audit", "kind": "phase", "phase": "post", "node": "mod.audit:run"},
    ],
}
"""A flow using every placement kind and setting, in the native shape."""


def rich_data() -> dict[str, Any]:
    return copy.deepcopy(RICH)


def rich_flow() -> Flow:
    return Flow.model_validate(rich_data())
