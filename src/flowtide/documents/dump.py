"""Writing a flow as a document, in any format."""

from __future__ import annotations

import json
from typing import Any

import yaml

from flowtide.documents.formats import Format, parse_format
from flowtide.documents.jsonld_writer import to_jsonld
from flowtide.model.flow import Flow


def to_document(flow: Flow, format: str | Format = Format.JSONLD) -> dict[str, Any]:
    """The flow as document data: canonical JSON-LD, or the native shape for JSON and YAML."""
    if parse_format(format) is Format.JSONLD:
        return to_jsonld(flow)
    return flow.to_data()


def dump_flow(flow: Flow, format: str | Format = Format.JSONLD) -> str:
    """The flow as document text (JSON-LD by default); loading it gives an equal flow."""
    fmt = parse_format(format)
    data = to_document(flow, fmt)
    if fmt is Format.YAML:
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
