"""The JSON Schemas (draft 2020-12) the loader, the CLI and the UI share."""

from __future__ import annotations

import re
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
    _plain_descriptions(schema)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://flowtide.dev/schema/{name}.json"
    schema["title"] = title
    return schema


_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")


def _plain_descriptions(value: object) -> None:
    """Descriptions as an editor shows them: ``:mod:`x``` and ````x```` become `x`, and a
    docstring's lines are joined into paragraphs."""
    if isinstance(value, list):
        for item in value:
            _plain_descriptions(item)
    if not isinstance(value, dict):
        return
    for key, item in value.items():
        if key == "description" and isinstance(item, str):
            text = _ROLE.sub(r"`\1`", item).replace("``", "`")
            paragraphs = (" ".join(p.split()) for p in text.split("\n\n"))
            value[key] = "\n\n".join(paragraphs)
        else:
            _plain_descriptions(item)
