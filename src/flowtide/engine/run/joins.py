"""Join groups: the branches of a split arriving at a join, and when a join fires (``success``,
``error`` or ``empty``) and which branches a first or quorum join cancels.

Decisions on a run's groups and live tokens, without I/O: the executor commits and applies
what they decide. A run's groups are kept by (join, split) in a :data:`JoinGroups`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from flowtide.engine.event_types import JoinArrived
from flowtide.engine.flows.plan import FlowPlan
from flowtide.model.placements import Join, JoinMode
from flowtide.store.base import TokenRecord, TokenStatus

Lineage = tuple[tuple[str, int, int], ...]
"""A token's splits, outermost first: (split id, branch, branch count)."""


@dataclass(slots=True)
class JoinGroup:
    """The branches of one split expected at one join."""

    join: str
    split: str
    count: int
    arrived: list[TokenRecord] = field(default_factory=list)
    branches: set[int] = field(default_factory=set)
    fired: bool = False
    dirty: bool = True
    """A branch may have been lost (ended or moved where it cannot reach the join): the next
    judgement scans the live tokens. Otherwise an arrival only counts branches (O(1))."""
    lineage: Lineage = ()
    """The lineage of the token that split (what a token leaving by ``empty`` carries)."""


JoinGroups = dict[tuple[str, str], JoinGroup]
"""A run's open join groups by (join, split)."""


@dataclass(frozen=True, slots=True)
class JoinFiring:
    """A join group that fires now, by ``output`` (``success``, ``error`` or ``empty``)."""

    group: JoinGroup
    join: Join
    output: str


def first_branch(token: TokenRecord, split: str) -> int:
    """The branch of ``split`` that ``token`` is on; -1 if it is not on one."""
    for f in token.lineage:
        if f[0] == split:
            return f[1]
    return -1


def arrived_branches(tokens: Sequence[TokenRecord], split: str) -> list[int]:
    """:func:`first_branch` of each token (a join's arrivals), in one call."""
    out = []
    for t in tokens:
        for f in t.lineage:
            if f[0] == split:
                out.append(f[1])
                break
        else:
            out.append(-1)
    return out


def arrive(groups: JoinGroups, token: TokenRecord, join: str) -> JoinArrived:
    """Count ``token`` (with a lineage) as arrived at ``join`` in its innermost split's group;
    returns the ``join_arrived`` event's payload."""
    split, branch, count = token.lineage[-1]
    group = groups.get((join, split))
    if group is None:
        group = groups[(join, split)] = JoinGroup(join, split, count)
    token.status = TokenStatus.ARRIVED
    group.arrived.append(token)
    group.branches.add(branch)
    return JoinArrived(split=split, branch=branch)


def withdraw(groups: JoinGroups, token: TokenRecord, join: str) -> None:
    """Undo :func:`arrive` of ``token`` at ``join`` (its commit was refused): it is ready there
    again, and its group counts it no more."""
    split, branch, _ = token.lineage[-1]
    token.status = TokenStatus.READY
    group = groups.get((join, split))
    if group is None:
        return
    group.arrived = [t for t in group.arrived if t is not token]
    if all(first_branch(t, split) != branch for t in group.arrived):
        group.branches.discard(branch)


def expect_branches(
    groups: JoinGroups,
    plan: FlowPlan,
    split: str,
    count: int,
    lineage: Lineage,
    placements: Sequence[str],
) -> None:
    """Open an (empty) join group for every join the branches of ``split`` may arrive at, so
    that a join none of them reaches routes ``empty`` once none can arrive any more."""
    for join in plan.joins_of(placements):
        if (join, split) not in groups:
            groups[(join, split)] = JoinGroup(join, split, count, dirty=False, lineage=lineage)


def note_moves(
    groups: JoinGroups, plan: FlowPlan, moved: Sequence[TokenRecord], ended: bool = False
) -> bool:
    """Mark the groups that may have lost a branch through these moved (or ``ended``) tokens;
    True if any may fire now."""
    hit = False
    for group in groups.values():
        if group.fired:
            continue
        for t in moved:
            if first_branch(t, group.split) < 0:
                continue
            if group.dirty:
                hit = True  # already to be judged again: this move may settle it
                break
            if ended or not (t.placement == group.join or plan.can_reach(t.placement, group.join)):
                group.dirty = hit = True
                break
    return hit


def judge(group: JoinGroup, plan: FlowPlan, live: Mapping[str, TokenRecord]) -> str | None:
    """The output ``group`` fires by now, given the run's ``live`` tokens; None if it waits.
    A dirty group is judged on the live tokens that can still arrive (and left clean)."""
    branches = group.branches
    need = plan.join_needs.get(group.join) or group.count
    if len(branches) >= need:
        return "success"
    if not group.dirty:
        return None
    group.dirty = False
    arrived_ids = {t.id for t in group.arrived}
    pending = {
        first_branch(t, group.split)
        for t in live.values()
        if t.id not in arrived_ids
        and first_branch(t, group.split) >= 0
        and (t.placement == group.join or plan.can_reach(t.placement, group.join))
    } - branches
    if not branches:
        if pending:
            group.dirty = True  # judged again when one arrives
            return None
        return "empty"
    if len(branches) + len(pending) >= need:
        return None
    return "error"


def next_firing(
    groups: JoinGroups, plan: FlowPlan, live: Mapping[str, TokenRecord]
) -> JoinFiring | None:
    """The first group that fires now, taken out of ``groups``; None if none does. A group
    that fires ``empty`` where nothing routes it is dropped (its branches ended elsewhere)."""
    for key, group in list(groups.items()):
        if group.fired:
            continue
        output = judge(group, plan, live)
        if output is None:
            continue
        group.fired = True
        del groups[key]
        p = plan.placements[group.join]
        assert isinstance(p, Join)
        if output == "empty" and output not in p.route_map():
            continue
        return JoinFiring(group, p, output)
    return None


def close_split(groups: JoinGroups, split: str) -> None:
    """``split`` is joined: its other groups that nothing arrived at expect nothing more."""
    for key, other in list(groups.items()):
        if other.split == split and not other.arrived:
            del groups[key]


def losers(firing: JoinFiring, live: Mapping[str, TokenRecord]) -> list[TokenRecord]:
    """The live branches of the split a first or quorum join cancels when it fires (none for an
    ``all`` join): those of the split that did not arrive."""
    if firing.join.mode is JoinMode.ALL:
        return []
    split = firing.group.split
    ids = {t.id for t in firing.group.arrived}
    return [t for t in live.values() if t.id not in ids and first_branch(t, split) >= 0]


def judges_move(
    groups: JoinGroups, plan: FlowPlan, targets: Sequence[str], split: str | None
) -> bool:
    """Whether a move to ``targets`` (opening ``split``, if any) may settle an open group. A
    split whose every branch can reach every join it opened marks none of those groups: the
    others (of enclosing splits) are looked at as for any move."""
    return bool(groups) and (
        split is None
        or not plan.reaches_joins(targets)
        or any(g.split != split for g in groups.values())
    )


def open_splits(groups: JoinGroups, new_split: str | None) -> set[str]:
    """The splits of the open groups but ``new_split`` (the split a move made, whose fresh
    groups cannot fire by it)."""
    if not groups:
        return set()
    found = {g.split for g in groups.values()}
    if new_split is not None:
        found.discard(new_split)
    return found


def out_of_reach(token: TokenRecord, splits: set[str]) -> bool:
    """Whether no open group of ``splits`` (see :func:`open_splits`) can act on ``token``."""
    if not splits or not token.lineage:
        return True
    return not any(f[0] in splits for f in token.lineage)


def restore_groups(groups: JoinGroups, plan: FlowPlan, live: Iterable[TokenRecord]) -> None:
    """The groups of a run rebuilt from its stored live tokens: those arrived at a join, and
    the groups the others may still arrive at."""
    tokens = list(live)
    for t in tokens:
        if t.status is TokenStatus.ARRIVED and t.lineage:
            split, _, count = t.lineage[-1]
            group = groups.setdefault((t.placement, split), JoinGroup(t.placement, split, count))
            group.arrived.append(t)
            group.branches.add(first_branch(t, split))
    for t in tokens:
        if t.status is not TokenStatus.ARRIVED and t.lineage:
            split, _, count = t.lineage[-1]
            for join in plan.joins_from(t.placement):
                groups.setdefault(
                    (join, split), JoinGroup(join, split, count, lineage=t.lineage[:-1])
                )
