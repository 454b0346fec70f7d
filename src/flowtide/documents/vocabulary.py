"""The JSON-LD vocabulary of flow documents: the DAG vocabulary's terms plus Flowtide's own.

A JSON-LD flow document is read by the IRIs its keys and types expand to, never by their spelling,
so these IRIs are the contract. What the DAG vocabulary (``https://noocodec.dev/ontology/dag/``)
names keeps its IRI there (a document written for that vocabulary loads as it is); what only
Flowtide has lives in the Flowtide namespace.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Final

SEED: Final = "https://noocodec.dev/ontology/dag/"
"""The DAG vocabulary's namespace."""
FLOWTIDE: Final = "https://flowtide.dev/ns#"
"""Flowtide's namespace, for what the DAG vocabulary has no term for."""
XSD: Final = "http://www.w3.org/2001/XMLSchema#"

FLOWTIDE_CONTEXT_IRI: Final = "https://flowtide.dev/ns/flow.jsonld"
"""Where the canonical context is published; served locally, never fetched."""
SEED_CONTEXT_IRIS: Final = (
    "https://noocodec.dev/ontology/dag/context.jsonld",
    "https://noocodec.dev/ontology/dag/",
)
"""Addresses the DAG vocabulary's context may be referenced by; served locally, never fetched."""


def seed(local: str) -> str:
    return SEED + local


def flowtide(local: str) -> str:
    return FLOWTIDE + local


# -- classes ---------------------------------------------------------------------------------

DAG = seed("DAG")
SINGLE_NODE = seed("SingleNode")
TERMINAL_NODE = seed("TerminalNode")
PHASE_NODE = seed("PhaseNode")
SCATTER_NODE = seed("ScatterNode")
EMBEDDED_DAG_NODE = seed("EmbeddedDAGNode")
GATHER_NODE = seed("GatherNode")
WAIT = flowtide("Wait")
JOIN = flowtide("Join")

KIND_OF_CLASS: Final = MappingProxyType(
    {
        SINGLE_NODE: "task",
        TERMINAL_NODE: "terminal",
        PHASE_NODE: "phase",
        SCATTER_NODE: "scatter",
        EMBEDDED_DAG_NODE: "subflow",
        GATHER_NODE: "join",
        WAIT: "wait",
        JOIN: "join",
    }
)
"""Placement class IRI -> placement kind (a DAG ``GatherNode`` and a Flowtide ``Join`` agree)."""

CLASS_OF_KIND: Final = MappingProxyType(
    {
        "task": SINGLE_NODE,
        "terminal": TERMINAL_NODE,
        "phase": PHASE_NODE,
        "scatter": SCATTER_NODE,
        "subflow": EMBEDDED_DAG_NODE,
        "join": JOIN,
        "wait": WAIT,
    }
)
"""Placement kind -> the class a dumped document uses."""

# -- properties ------------------------------------------------------------------------------

NAME = seed("name")
VERSION = seed("version")
ENTRYPOINTS = seed("entrypoints")
NODES = seed("nodes")
OUTPUTS = seed("outputs")
NODE = seed("node")
DAG_REF = seed("dag")
BODY = seed("body")
SOURCE = seed("source")
SOURCES = seed("sources")
ITEM_KEY = seed("itemKey")
EXECUTION = seed("execution")
CONCURRENCY = seed("concurrency")
THROTTLE = seed("throttle")
RESERVOIR = seed("reservoir")
GATHER = seed("gather")
POLICY = seed("policy")
REDUCER = seed("reducer")
OUTCOME = seed("outcome")
PHASE = seed("phase")
STATE_MAPPING = seed("stateMapping")
CONTAINER = seed("container")

DESCRIPTION = flowtide("description")
NODE_TYPES = flowtide("nodeTypes")
REDUCERS = flowtide("reducers")
DEADLINE = flowtide("deadline")
MAX_DEPTH = flowtide("maxDepth")
DURATION = flowtide("duration")
UNTIL = flowtide("until")
MODE = flowtide("mode")
QUORUM = flowtide("quorum")
INCLUDE_ERRORS = flowtide("includeErrors")
ON_FAILURE = flowtide("onFailure")
SOURCE_FN = flowtide("sourceFn")
BATCH = flowtide("batch")
INPUT = flowtide("input")
OUTPUT = flowtide("output")
KEY_FIELD = flowtide("keyField")
CAPACITY = flowtide("capacity")
IDLE_MS = flowtide("idleMs")
IDLE = flowtide("idle")

SETTING_NAMES: Final = ("timeout", "timeout_anchor", "release_on", "timers", "retry")
"""Node settings keep their setting names as Flowtide terms."""
SETTINGS: Final = MappingProxyType({flowtide(name): name for name in SETTING_NAMES})
"""Setting IRI -> setting name."""


def _term(iri: str, **extra: str) -> dict[str, str]:
    return {"@id": iri, **extra}


_JSON = {"@type": "@json"}

SEED_CONTEXT: Final[dict[str, Any]] = {
    "@version": 1.1,
    "name": _term(NAME),
    "version": _term(VERSION),
    "entrypoints": _term(ENTRYPOINTS, **{"@container": "@index"}),
    "nodes": _term(NODES, **{"@container": "@set"}),
    "outputs": _term(OUTPUTS),
    "node": _term(NODE),
    "dag": _term(DAG_REF),
    "body": _term(BODY),
    "source": _term(SOURCE),
    "sources": _term(SOURCES, **{"@container": "@index"}),
    "itemKey": _term(ITEM_KEY),
    "execution": _term(EXECUTION),
    "concurrency": _term(CONCURRENCY),
    "throttle": _term(THROTTLE),
    "reservoir": _term(RESERVOIR),
    "gather": _term(GATHER),
    "dagReference": _term(seed("dagReference"), **{"@type": "@id"}),
    "DagReference": _term(seed("DagReference")),
    "from": _term(seed("from")),
    "path": _term(seed("path")),
    "candidates": _term(seed("candidates"), **{"@container": "@set"}),
    "candidateDag": _term(seed("candidateDag"), **{"@type": "@id"}),
    "selectedDag": _term(seed("selectedDag"), **{"@type": "@id"}),
    "resultField": _term(seed("resultField")),
    "policy": _term(POLICY),
    "reducer": _term(REDUCER),
    "outcome": _term(OUTCOME),
    "phase": _term(PHASE),
    "stateMapping": _term(STATE_MAPPING),
    "container": _term(CONTAINER),
    "DAG": _term(DAG),
    "Placement": _term(seed("Placement")),
    "SingleNode": _term(SINGLE_NODE),
    "ScatterNode": _term(SCATTER_NODE),
    "EmbeddedDAGNode": _term(EMBEDDED_DAG_NODE),
    "GatherNode": _term(GATHER_NODE),
    "TerminalNode": _term(TERMINAL_NODE),
    "PhaseNode": _term(PHASE_NODE),
}
"""The DAG vocabulary's context, exactly as documents written for it carry it."""

FLOWTIDE_CONTEXT: Final[dict[str, Any]] = {
    **SEED_CONTEXT,
    "gather": _term(GATHER, **_JSON),
    "Wait": _term(WAIT),
    "Join": _term(JOIN),
    "description": _term(DESCRIPTION),
    "nodeTypes": _term(NODE_TYPES, **_JSON),
    "reducers": _term(REDUCERS, **_JSON),
    "deadline": _term(DEADLINE, **{"@type": XSD + "duration"}),
    "maxDepth": _term(MAX_DEPTH),
    "duration": _term(DURATION, **{"@type": XSD + "duration"}),
    "until": _term(UNTIL, **{"@type": XSD + "dateTime"}),
    "mode": _term(MODE),
    "quorum": _term(QUORUM),
    "includeErrors": _term(INCLUDE_ERRORS),
    "onFailure": _term(ON_FAILURE),
    "sourceFn": _term(SOURCE_FN),
    "batch": _term(BATCH, **_JSON),
    "input": _term(INPUT, **_JSON),
    "output": _term(OUTPUT, **_JSON),
    "keyField": _term(KEY_FIELD),
    "capacity": _term(CAPACITY),
    "idleMs": _term(IDLE_MS),
    "idle": _term(IDLE, **{"@type": XSD + "duration"}),
    "timeout": _term(flowtide("timeout"), **{"@type": XSD + "duration"}),
    "timeout_anchor": _term(flowtide("timeout_anchor")),
    "release_on": _term(flowtide("release_on"), **{"@container": "@set"}),
    "timers": _term(flowtide("timers"), **_JSON),
    "retry": _term(flowtide("retry"), **_JSON),
}
"""The canonical context of Flowtide flow documents: the DAG vocabulary's terms, then Flowtide's.

It declares no prefixes, so a ``module:attribute`` node reference can never be mistaken for a
compact IRI when a dumped document is read back.
"""

LOCAL_CONTEXTS: Final = MappingProxyType(
    {
        FLOWTIDE_CONTEXT_IRI: FLOWTIDE_CONTEXT,
        **dict.fromkeys(SEED_CONTEXT_IRIS, SEED_CONTEXT),
    }
)
"""Remote context IRIs Flowtide serves from memory: the only ones a document may reference."""
