"""Flow documents: JSON-LD (canonical), plain JSON and YAML, loaded and dumped losslessly.

``load_flow`` / ``load_document`` / ``load_flows`` read documents (raising only
:class:`~flowtide.errors.FlowValidationError`); ``dump_flow`` / ``to_jsonld`` write them;
``resolve_nodes`` binds a flow's node references to code.
"""

from flowtide.documents.dump import dump_flow, to_document
from flowtide.documents.formats import Format, parse_format
from flowtide.documents.jsonld_writer import to_jsonld
from flowtide.documents.load import LoadedDocument, Source, load_document, load_flow, load_flows
from flowtide.documents.resolve import node_references, resolve_nodes
from flowtide.documents.vocabulary import (
    FLOWTIDE,
    FLOWTIDE_CONTEXT,
    FLOWTIDE_CONTEXT_IRI,
    SEED,
    SEED_CONTEXT,
)

__all__ = [
    "FLOWTIDE",
    "FLOWTIDE_CONTEXT",
    "FLOWTIDE_CONTEXT_IRI",
    "SEED",
    "SEED_CONTEXT",
    "Format",
    "LoadedDocument",
    "Source",
    "dump_flow",
    "load_document",
    "load_flow",
    "load_flows",
    "node_references",
    "parse_format",
    "resolve_nodes",
    "to_document",
    "to_jsonld",
]
