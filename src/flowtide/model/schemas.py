"""The JSON Schemas (draft 2020-12) the loader, the CLI and the UI share."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from flowtide.model.flow import Flow
from flowtide.model.settings import NodeSettings


def node_settings_schema() -> dict[str, Any]:
    """The schema of node settings (timeout, timeout_anchor, release_on, timers, retry)."""
    return _schema(NodeSettings, "node-settings", "Flowtide node settings")


def flow_schema() -> dict[str, Any]:
    """The schema of a whole flow in its native document shape (plain JSON or YAML)."""
    return _schema(Flow, "flow", "Flowtide flow")


def _schema(model: type[BaseModel], name: str, title: str) -> dict[str, Any]:
    schema = model.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://flowtide.dev/schema/{name}.json"
    schema["title"] = title
    return schema
