"""The support-dispatcher fixture as a Flow."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flowtide.documents import load_flow
from flowtide.model import Flow

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_JSONLD = ROOT / "examples" / "support-dispatcher.jsonld"
FIXTURE_MMD = Path(__file__).resolve().parent / "fixtures" / "support-dispatcher.mmd"
SHARED_FIXTURES = ROOT.parent / "shared" / "fixtures"

_KINDS = {"SingleNode": "task", "PhaseNode": "phase", "TerminalNode": "terminal"}


def load_support_dispatcher() -> Flow:
    """The fixture, read by the document loader as it is."""
    return load_flow(FIXTURE_JSONLD)


def support_dispatcher_by_hand() -> Flow:
    """The fixture read by hand, without the document loader (to check the loader against)."""
    doc: dict[str, Any] = json.loads(FIXTURE_JSONLD.read_text())
    placements: list[dict[str, Any]] = []
    for node in doc["nodes"]:
        kind = _KINDS[node["@type"]]
        placement: dict[str, Any] = {"id": node["@id"], "name": node["name"], "kind": kind}
        if kind == "task":
            placement.update(node=node["node"], routes=node["outputs"])
        elif kind == "phase":
            placement.update(node=node["node"], phase=node["phase"])
        else:
            placement.update(outcome=node["outcome"])
        placements.append(placement)
    return Flow.model_validate(
        {
            "id": doc["@id"],
            "name": doc["name"],
            "version": doc["version"],
            "entrypoints": doc["entrypoints"],
            "placements": placements,
        }
    )
