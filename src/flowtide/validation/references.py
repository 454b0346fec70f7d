"""Reference checks: flows run by subflows and scatters, node type ids, state reducers."""

from __future__ import annotations

from collections.abc import Iterator

from flowtide.errors import Problem
from flowtide.model.flow import BUILTIN_REDUCERS
from flowtide.model.placements import Scatter, Subflow
from flowtide.validation.pointers import pointer
from flowtide.validation.subject import Subject


def flows(subject: Subject) -> Iterator[Problem]:
    """A subflow or a scatter body runs a known flow: this one, or one of the catalog."""
    known = {subject.flow.id, *subject.catalog}
    listed = ", ".join(sorted(known))
    for pos, p in subject.positions():
        if isinstance(p, Subflow):
            ref, where = p.flow, subject.at(pos, "flow")
        elif isinstance(p, Scatter) and p.body.flow is not None:
            ref, where = p.body.flow, subject.at(pos, "body", "flow")
        else:
            continue
        if ref not in known:
            yield Problem(
                f"{p.kind} runs flow {ref!r}, which is not known (known flows: {listed})",
                pointer=where,
                placement=p.id,
            )


def node_type_ids(subject: Subject) -> Iterator[Problem]:
    """A node type is declared once."""
    seen: set[str] = set()
    for position, declared in enumerate(subject.flow.node_types):
        if declared.id in seen:
            yield Problem(
                f"node type {declared.id!r} is declared twice",
                pointer=subject.node_type_at(position, "id"),
            )
        seen.add(declared.id)


def reducers(subject: Subject) -> Iterator[Problem]:
    """Each state reducer is a built-in one or a ``module:function`` reference."""
    for key, how in subject.flow.reducers.items():
        module, sep, function = how.partition(":")
        if how in BUILTIN_REDUCERS or (sep and module and function):
            continue
        yield Problem(
            f"unknown reducer {how!r} for state key {key!r} "
            f"(reducers: {', '.join(BUILTIN_REDUCERS)}, or 'module:function')",
            pointer=pointer("reducers", key),
        )
