"""Mermaid flowcharts of flows.

:func:`render_mermaid` draws one node per placement, one shape per placement kind, and one
labelled edge per (output, target) pair, so a parallel split shows as several edges with the same
label. Entrypoints are stadium-shaped roots named ``entry_<label>``. A node's label is its name
(or id); what matters about its timing (effective timeout and anchor, timers, retry, a wait's
duration, a join's mode) follows on extra lines after ``<br/>``.

| kind | shape |
| --- | --- |
| task | rectangle ``["…"]`` |
| wait | hexagon ``{{"…"}}`` |
| join | rhombus ``{"…"}`` |
| scatter | trapezoid ``[/"…"/]`` |
| subflow | subroutine ``[["…"]]`` |
| phase | stadium ``(["… (pre)"])``, no edges |
| terminal | double circle ``((("…")))`` |

Mermaid node ids are the placements' absolute IRIs with ``:`` replaced by ``_`` and every other
character Mermaid's lexer could misread replaced too, so any id renders.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta

from flowtide.model.durations import format_duration
from flowtide.model.flow import Flow
from flowtide.model.placements import (
    AnyPlacement,
    Join,
    JoinMode,
    Phase,
    Scatter,
    Subflow,
    Terminal,
    Wait,
)
from flowtide.model.settings import NodeSettings, TimeoutAnchor

__all__ = ["DIRECTIONS", "SHAPES", "effective_settings", "mermaid_id", "render_mermaid"]

DIRECTIONS = ("TB", "TD", "BT", "LR", "RL")
"""Directions a Mermaid flowchart accepts."""

SHAPES: dict[str, tuple[str, str]] = {
    "task": ('["', '"]'),
    "wait": ('{{"', '"}}'),
    "join": ('{"', '"}'),
    "scatter": ('[/"', '"/]'),
    "subflow": ('[["', '"]]'),
    "phase": ('(["', '"])'),
    "terminal": ('((("', '")))'),
}
"""Opening and closing delimiters of each placement kind's shape."""

ENTRY_SHAPE = ('(["', '"])')

_INIT = '%%{init: {"flowchart":{"nodeSpacing":92,"rankSpacing":104,"padding":28}}}%%'

# Characters kept in a Mermaid id; everything else becomes "_". Runs of "-" are shortened to one
# and a final "-" is replaced ("--" starts a link in Mermaid; "-" must be followed by something).
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_/-]")
_ID_DASHES = re.compile(r"-{2,}")
# Words Mermaid's lexer takes as keywords at the start of a token: the first group even when a
# letter follows ("classify"), "end" only as a whole word.
_ID_KEYWORDS = re.compile(
    r"^(?:style|linkstyle|interpolate|classdef|class|subgraph|graph|flowchart|end(?!\w))",
    re.IGNORECASE,
)
_DIRECTION_WORDS = re.compile(r"(direction)\s+(?=TB|BT|RL|LR|TD)", re.IGNORECASE)
_PLAIN_EDGE_LABEL = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_ .-]*$")
_ESCAPES = {
    "#": "#35;",
    '"': "#quot;",
    "<": "#lt;",
    ">": "#gt;",
    "&": "#amp;",
    "|": "#124;",
    "%": "#37;",
    "\r": " ",
    "\n": " ",
    "\t": " ",
}

BREAK = "<br/>"
"""What separates a node's label from its annotations."""


def render_mermaid(flow: Flow, *, direction: str = "TB") -> str:
    """The flow as a Mermaid ``flowchart``, ending with a newline.

    ``direction`` is one of ``TB`` (top to bottom, the default), ``TD``, ``BT``, ``LR``, ``RL``.
    """
    direction = direction.upper()
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}; use one of {', '.join(DIRECTIONS)}")
    ids = _IdMap(flow)
    lines = [
        _INIT,
        f"flowchart {direction}",
        f"  %% {_comment(flow.label)} (v{_comment(flow.version)})",
    ]
    for label, target in flow.entrypoints.items():
        entry = ids.entry(label)
        lines.append(f"  {entry}{ENTRY_SHAPE[0]}{escape_label(label)}{ENTRY_SHAPE[1]}")
        lines.append(f"  {entry} --> {ids.placement(target)}")
    for placement in flow.placements:
        source = ids.placement(placement.id)
        opening, closing = SHAPES[placement.kind]
        lines.append(f"  {source}{opening}{_node_label(flow, placement)}{closing}")
        if isinstance(placement, Phase):
            continue
        lines.extend(
            f"  {source} -->|{_edge_label(output)}| {ids.placement(target)}"
            for output, targets in placement.route_map().items()
            for target in targets
        )
    return "\n".join(lines) + "\n"


def effective_settings(flow: Flow, placement: AnyPlacement) -> NodeSettings | None:
    """The settings in force at ``placement``: its node type's defaults overlaid by its own.

    ``None`` for kinds that take no settings (wait, terminal).
    """
    if not placement.has_settings:
        return None
    return flow.settings_at(placement)


def mermaid_id(text: str) -> str:
    """A Mermaid node id for ``text`` (an IRI): ``:`` and unsafe characters become ``_``."""
    out = _ID_UNSAFE.sub("_", text.replace(":", "_"))
    out = _ID_DASHES.sub("-", out)
    if out.endswith("-"):
        out = out[:-1] + "_"
    if not out or not out[0].isascii() or not out[0].isalpha() or _ID_KEYWORDS.match(out):
        out = "n_" + out
    return out


def escape_label(text: str) -> str:
    """``text`` made safe inside a quoted Mermaid label (entity codes for ``"``, ``<``, …)."""
    escaped = "".join(_ESCAPES.get(c, c) for c in text)
    # Mermaid reads any line holding "direction LR" (and so on) as a direction statement.
    return _DIRECTION_WORDS.sub(r"\1#32;", escaped)


def _comment(text: str) -> str:
    return " ".join(text.split())


def _edge_label(output: str) -> str:
    if _PLAIN_EDGE_LABEL.match(output) and not output.endswith(" "):
        return output
    return f'"{escape_label(output)}"'


def _node_label(flow: Flow, placement: AnyPlacement) -> str:
    title = escape_label(placement.label)
    if isinstance(placement, Phase):
        title = f"{title} ({placement.phase.value})"
    notes = [escape_label(note) for note in node_annotations(flow, placement)]
    return BREAK.join([title, *notes])


def node_annotations(flow: Flow, placement: AnyPlacement) -> list[str]:
    """The lines shown under a placement's label (unescaped)."""
    notes = list(_kind_notes(placement))
    settings = effective_settings(flow, placement)
    if settings is not None:
        notes.extend(_settings_notes(settings))
    return notes


def _kind_notes(placement: AnyPlacement) -> Iterator[str]:
    if isinstance(placement, Wait):
        if placement.duration is not None:
            yield f"⏳ wait {_duration(placement.duration)}"
        elif placement.until is not None:
            yield f"⏳ until {placement.until.isoformat()}"
    elif isinstance(placement, Join):
        if placement.mode is JoinMode.QUORUM:
            yield f"join: quorum {placement.quorum}"
        elif placement.mode is JoinMode.FIRST:
            yield "join: first (cancels the others)"
        else:
            yield "join: all"
    elif isinstance(placement, Scatter):
        body = placement.body.node or placement.body.flow or ""
        source = placement.source or f"{placement.source_fn}()"
        yield f"for each {source} → {body}"
        limits = [f"concurrency {placement.concurrency}"]
        if placement.throttle is not None:
            limits.append(f"{placement.throttle:g}/s")
        if placement.batch is not None:
            limits.append(f"batches by {placement.batch.key}")
        limits.append(f"gather {placement.gather.strategy.value}")
        yield " · ".join(limits)
    elif isinstance(placement, Subflow):
        yield f"↳ {placement.flow}"
    elif isinstance(placement, Terminal) and _shows_outcome(placement):
        yield f"outcome: {placement.outcome}"


def _shows_outcome(terminal: Terminal) -> bool:
    return terminal.outcome not in ("completed", terminal.label)


def _settings_notes(settings: NodeSettings) -> Iterator[str]:
    if settings.timeout is not None:
        line = f"⏱ {_duration(settings.timeout)} · {settings.anchor.value}"
        if settings.release_on and settings.anchor is TimeoutAnchor.NODE:
            line += f" · released on {', '.join(settings.release_on)}"
        yield line
    for timer in settings.timers or ():
        kind = "interrupting" if timer.interrupting else "non-interrupting"
        yield f"⏰ {_duration(timer.after)} · {timer.anchor.value} → {timer.output} ({kind})"
    if settings.retry is not None:
        retry = settings.retry
        backoff = f"{retry.backoff.value} from {_duration(retry.initial)}"
        yield f"↻ {retry.max_attempts} attempts · {backoff}"


def _duration(value: timedelta) -> str:
    return format_duration(value)


class _IdMap:
    """Mermaid ids of a flow's placements and entrypoints, unique within the chart."""

    def __init__(self, flow: Flow) -> None:
        self._flow = flow
        self._ids: dict[tuple[str, str], str] = {}
        self._used: set[str] = set()
        for label in flow.entrypoints:
            self.entry(label)
        for placement in flow.placements:
            self.placement(placement.id)

    def entry(self, label: str) -> str:
        return self._get(("entry", label), mermaid_id("entry_" + label))

    def placement(self, placement_id: str) -> str:
        return self._get(
            ("placement", placement_id), mermaid_id(self._flow.placement_iri(placement_id))
        )

    def _get(self, key: tuple[str, str], wanted: str) -> str:
        found = self._ids.get(key)
        if found is not None:
            return found
        candidate, n = wanted, 2
        while candidate.lower() in self._used:
            candidate, n = f"{wanted}_{n}", n + 1
        self._used.add(candidate.lower())
        self._ids[key] = candidate
        return candidate
