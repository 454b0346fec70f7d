"""Edits of node settings: ``{"<placement>.<setting>": value}``, checked against the node-settings
schema and applied to a flow's document, and :func:`register_edited`, which keeps the edited
flow in the store as a new version.

A value is what the flow document would say (a duration as ISO 8601 text such as ``PT15M`` or
as whole milliseconds, timers as a list of objects...); ``None`` removes the placement's own
value, so the node type's (or the implementation's) applies again.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from flowtide.client.registration import checked, register_flows, stored_catalog
from flowtide.client.results import RegisteredFlow
from flowtide.clock import Clock, SystemClock
from flowtide.engine.flows.stored_flows import flow_from_stored
from flowtide.errors import FlowValidationError, Problem
from flowtide.model.flow import Flow
from flowtide.model.settings import NodeSettings
from flowtide.store.base import Store

__all__ = ["SETTINGS", "Edit", "apply_edits", "bumped_version", "parse_edits", "register_edited"]

SETTINGS = tuple(NodeSettings.model_fields)
"""The settings an edit may change: ``timeout``, ``timeout_anchor``, ``release_on``, ``timers``,
``retry``."""


class Edit(tuple[str, str, Any]):
    """One edit: (placement, setting, value)."""

    __slots__ = ()

    @property
    def placement(self) -> str:
        return self[0]

    @property
    def setting(self) -> str:
        return self[1]

    @property
    def value(self) -> Any:
        return self[2]

    @property
    def name(self) -> str:
        return f"{self[0]}.{self[1]}"


def parse_edits(edits: Mapping[str, Any], flow: Flow) -> list[Edit]:
    """The edits, each checked against ``flow`` and the node-settings schema. Raises
    :class:`FlowValidationError` with one problem per bad edit, each naming its placement and
    setting; nothing is changed."""
    if not edits:
        raise FlowValidationError(
            [Problem("no edit given: name at least one PLACEMENT.SETTING and its value")],
            title="invalid settings edits",
        )
    found: list[Edit] = []
    problems: list[Problem] = []
    for name, value in edits.items():
        placement, _, setting = name.rpartition(".")
        problem = _where_problem(flow, name, placement, setting)
        if problem is not None:
            problems.append(problem)
            continue
        found.append(Edit((placement, setting, value)))
    for placement in dict.fromkeys(e.placement for e in found):
        mine = [e for e in found if e.placement == placement]
        try:
            _settings(flow, placement, mine)
        except ValidationError as exc:
            problems.extend(_value_problems(placement, exc))
    if problems:
        raise FlowValidationError(problems, title="invalid settings edits")
    return found


def _where_problem(flow: Flow, name: str, placement: str, setting: str) -> Problem | None:
    if not placement or not setting:
        return Problem(f"{name!r}: an edit is named PLACEMENT.SETTING (such as 'pay.timeout')")
    if not flow.has_placement(placement):
        editable = ", ".join(p.id for p in flow.placements if p.has_settings) or "none"
        return Problem(
            f"{name}: {flow.id} has no placement {placement!r} (placements with settings: "
            f"{editable})"
        )
    if not flow.placement(placement).has_settings:
        kind = flow.placement(placement).kind
        return Problem(f"{name}: placement {placement!r} is a {kind}: it has no node settings")
    if setting not in SETTINGS:
        return Problem(
            f"{name}: no setting {setting!r} (settings: {', '.join(SETTINGS)})",
            placement=placement,
        )
    return None


def _settings(flow: Flow, placement: str, edits: Sequence[Edit]) -> NodeSettings:
    """The placement's own settings with ``edits`` applied (raises ``ValidationError``)."""
    own = flow.placement(placement).node_settings()
    data = own.model_dump(mode="json", exclude_none=True) if own is not None else {}
    for edit in edits:
        if edit.value is None:
            data.pop(edit.setting, None)
        else:
            data[edit.setting] = edit.value
    return NodeSettings.model_validate(data)


def _value_problems(placement: str, exc: ValidationError) -> list[Problem]:
    problems = []
    for err in exc.errors():
        loc = [str(part) for part in err["loc"]]
        name = f"{placement}.{'.'.join(loc)}" if loc else placement
        message = err["msg"].removeprefix("Value error, ")
        message = re.sub(r" or instance of \w+$", "", message)  # (the Python class: not for users)
        problems.append(Problem(f"{name}: {message}", placement=placement))
    return problems


def apply_edits(
    document: Mapping[str, Any],
    edits: Sequence[Edit],
    catalog: Mapping[str, Flow] | None = None,
    version: str | None = None,
) -> Flow:
    """The flow of ``document`` (a stored flow's) with ``edits`` made (checked by
    :func:`parse_edits`), its version relabelled ``version`` if given. Raises
    :class:`FlowValidationError` when the edited flow does not hold together (a timer's output
    it does not route...), nothing changed."""
    flow = Flow.model_validate(document)
    data = copy.deepcopy(dict(document))
    for placement in dict.fromkeys(e.placement for e in edits):
        settings = _settings(flow, placement, [e for e in edits if e.placement == placement])
        for entry in data["placements"]:
            if entry.get("id") == placement:
                dumped = settings.model_dump(mode="json", exclude_none=True)
                if dumped:
                    entry["settings"] = dumped
                else:
                    entry.pop("settings", None)
    if version is not None:
        data["version"] = version
    edited = Flow.model_validate(data)
    try:
        return checked([edited], catalog or {})[0]
    except FlowValidationError as exc:
        raise FlowValidationError(exc.problems, title="the edited flow is not valid") from None


_LAST_NUMBER = re.compile(r"(\d+)(?!.*\d)")


def bumped_version(version: str, taken: Sequence[str] = ()) -> str:
    """The next version label after ``version`` that is not ``taken``: its last number counted
    up (``3`` → ``4``, ``v1.2`` → ``v1.3``), else ``+edit`` added (``beta`` → ``beta+edit``,
    then ``beta+edit2``...)."""
    candidate = version
    for _ in range(len(taken) + 2):
        match = _LAST_NUMBER.search(candidate)
        if match is not None:
            number = str(int(match.group(1)) + 1)
            candidate = candidate[: match.start()] + number + candidate[match.end() :]
        else:
            candidate = f"{candidate}+edit"
        if candidate not in taken:
            return candidate
    raise AssertionError("unreachable: each bump yields a new label")  # pragma: no cover


async def register_edited(
    store: Store, flow_id: str, edits: Mapping[str, Any], *, clock: Clock | None = None
) -> RegisteredFlow:
    """Make a new version of the latest stored ``flow_id`` with ``edits`` applied (version label
    bumped, see :func:`bumped_version`) and register it: runs started by id from now on use it;
    runs already started keep the document they started on. Raises :class:`FlowValidationError`
    for bad edits (nothing stored) and :class:`~flowtide.store.base.UnknownStoredFlow`."""
    stored = await store.latest_flow(flow_id)
    flow = flow_from_stored(stored)
    parsed = parse_edits(edits, flow)
    taken = [v.version for v in await store.flow_versions(flow_id)]
    catalog = await stored_catalog(store)
    edited = apply_edits(stored.document, parsed, catalog, bumped_version(flow.version, taken))
    now: datetime = (clock or SystemClock()).now()
    (done,) = await register_flows(store, [edited], now)
    return done
