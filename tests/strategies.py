"""Hypothesis strategies for valid, varied flows.

``flows()`` draws flows that load without errors: every placement kind, node settings with timers
and retries, parallel splits, loops, joins with at least two incoming branches, scatters with every
gather strategy and keyed batches, self-embedding subflows, phases, terminals with custom outcomes,
declared node types and unicode names. The graph is a spine ``inner[0] -> inner[1] -> ... ->
terminal`` (so everything is reachable and can end) with random extra routes on top.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

from flowtide.model import Flow

BUILTIN_REDUCERS = ("last", "append", "extend", "merge", "sum")
FIXED_OUTPUTS: dict[str, tuple[str, ...]] = {
    "wait": ("elapsed",),
    "join": ("success", "error", "empty"),
    "scatter": ("all-success", "partial", "all-error", "empty"),
    "subflow": ("success", "error"),
}
INNER_KINDS = ("task", "task", "wait", "join", "scatter", "subflow")

_LETTERS = st.characters(categories=("Lu", "Ll", "Lo", "Nd"), max_codepoint=0x2FFFF)
_NAME_CHARS = st.characters(exclude_categories=("Cs", "Cc", "Co", "Cn"))

names = st.text(_NAME_CHARS, min_size=1, max_size=24)
"""Display names and descriptions: any printable unicode."""

words = st.text(_LETTERS, min_size=1, max_size=8)
"""Short unicode words (letters and digits)."""

state_paths = st.lists(words, min_size=1, max_size=3).map(".".join)
"""Dotted state paths."""

output_names = st.one_of(
    st.sampled_from(["ok", "done", "retry", "give-up", "declined", "yes", "no", "on", "null"]),
    words,
)
"""Output names, including YAML's tricky words."""

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | names,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(words, inner, max_size=3),
    max_leaves=6,
)


@st.composite
def durations(draw: st.DrawFn, *, whole_ms: bool = False) -> timedelta:
    """Positive durations, from a millisecond to weeks, some with microseconds."""
    ms = draw(st.integers(1, 30 * 86_400_000))
    micros = 0 if whole_ms else draw(st.sampled_from([0, 0, 0, 1, 250, 999]))
    return timedelta(milliseconds=ms, microseconds=micros)


instants = st.datetimes(
    min_value=datetime(2000, 1, 1),
    max_value=datetime(2100, 1, 1),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))]),
)


@st.composite
def retry_policies(draw: st.DrawFn) -> dict[str, Any]:
    policy: dict[str, Any] = {}
    if draw(st.booleans()):
        policy["max_attempts"] = draw(st.integers(1, 10))
    if draw(st.booleans()):
        policy["backoff"] = draw(
            st.sampled_from(["fixed", "linear", "exponential", "decorrelated_jitter"])
        )
    initial = draw(durations())
    if draw(st.booleans()):
        policy["max"] = initial + draw(durations())
    else:
        initial = min(initial, timedelta(minutes=5))  # the default max
    policy["initial"] = initial
    if draw(st.booleans()):
        policy["factor"] = draw(st.floats(0.1, 10, allow_nan=False))
    if draw(st.booleans()):
        policy["retry_on"] = draw(
            st.lists(st.sampled_from(["TimeoutError", "OSError", "shop.PaymentError"]), max_size=2)
        )
    return policy


@st.composite
def settings(draw: st.DrawFn, routed: list[str]) -> dict[str, Any] | None:
    """Placement settings whose timers and ``release_on`` only name ``routed`` outputs."""
    if not draw(st.booleans()):
        return None
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        out["timeout"] = draw(durations())
    anchor = draw(st.sampled_from([None, "park", "instance", "node"]))
    if anchor is not None:
        out["timeout_anchor"] = anchor
    if draw(st.booleans()) and routed and anchor == "node":
        out["release_on"] = draw(st.lists(st.sampled_from(routed), max_size=2, unique=True))
    if draw(st.booleans()) and routed:
        out["timers"] = draw(
            st.lists(
                st.fixed_dictionaries(
                    {"after": durations(), "output": st.sampled_from(routed)},
                    optional={
                        "interrupting": st.booleans(),
                        "anchor": st.sampled_from(
                            ["park", "instance"] + ([anchor] if anchor else [])
                        ),
                    },
                ),
                max_size=3,
            )
        )
    if draw(st.booleans()):
        out["retry"] = draw(retry_policies())
    return out or None


@st.composite
def gathers(draw: st.DrawFn) -> dict[str, Any] | None:
    strategy = draw(st.sampled_from([None, "append", "collect", "partition", "map", "reduce"]))
    if strategy is None:
        return None
    out: dict[str, Any] = {"strategy": strategy}
    if draw(st.booleans()):
        out["target"] = draw(state_paths)
    if draw(st.booleans()):
        out["field"] = draw(state_paths)
    if strategy == "map" or draw(st.booleans()):
        out["key"] = draw(state_paths)
    if strategy == "reduce":
        out["reducer"] = draw(st.sampled_from(["shop.totals:add", "operator:add"]))
        out["initial"] = draw(json_values)
    return out


@st.composite
def placement_ids(draw: st.DrawFn, count: int) -> list[str]:
    """Unique placement ids: local words (unicode too), a few absolute IRIs of elsewhere."""
    local = st.tuples(words, st.sampled_from(["", "-a", "_b", ".c"])).map("".join)
    iri = words.map(lambda w: f"urn:elsewhere:{w}")
    return draw(st.lists(st.one_of(local, local, iri), min_size=count, max_size=count, unique=True))


@st.composite
def flows(draw: st.DrawFn) -> Flow:
    """A valid flow (it loads without errors), built as native data and validated."""
    flow_id = draw(
        st.sampled_from(["urn:test:flow:", "https://example.org/flows/", "urn:ünï:"]).flatmap(
            lambda prefix: words.map(lambda w: prefix + w)
        )
    )
    inner_kinds = draw(st.lists(st.sampled_from(INNER_KINDS), min_size=1, max_size=6))
    if inner_kinds[0] == "join":
        inner_kinds[0] = "task"
    if "join" in inner_kinds and len(inner_kinds) < 3:
        inner_kinds += ["task", "wait"][: 3 - len(inner_kinds)]
    outcomes = draw(
        st.lists(st.one_of(st.sampled_from(["completed", "failed"]), words), min_size=1, max_size=3)
    )
    phases = draw(st.lists(st.sampled_from(["pre", "post"]), max_size=2))
    ids = draw(placement_ids(len(inner_kinds) + len(outcomes) + len(phases)))
    inner_ids = ids[: len(inner_kinds)]
    terminal_ids = ids[len(inner_kinds) : len(inner_kinds) + len(outcomes)]
    phase_ids = ids[len(inner_kinds) + len(outcomes) :]
    routable = inner_ids + terminal_ids

    # Outputs of each inner placement, and routes: the spine first, then random extras.
    outputs: list[list[str]] = []
    for kind in inner_kinds:
        if kind == "task":
            outputs.append(draw(st.lists(output_names, min_size=1, max_size=3, unique=True)))
        else:
            outputs.append(list(FIXED_OUTPUTS[kind]))
    routes: list[dict[str, list[str]]] = []
    for index, outs in enumerate(outputs):
        spine = routable[index + 1]
        placement_routes = {outs[0]: [spine]}
        for out in outs[1:]:
            placement_routes[out] = draw(
                st.lists(st.sampled_from(routable), min_size=1, max_size=2, unique=True)
            )
        routes.append(placement_routes)
    # Every terminal is reached; every join has two incoming branches or more.
    for terminal in terminal_ids[1:]:
        index = draw(st.integers(0, len(inner_ids) - 1))
        out = draw(st.sampled_from(outputs[index]))
        if terminal not in routes[index][out]:
            routes[index][out].append(terminal)
    for index, kind in enumerate(inner_kinds):
        if kind != "join":
            continue
        join_id = inner_ids[index]
        incoming = {(s, o) for s, r in enumerate(routes) for o, ts in r.items() if join_id in ts}
        for source, source_routes in enumerate(routes):
            if len(incoming) >= 2:
                break
            if source == index:
                continue
            for out, targets in source_routes.items():
                if join_id not in targets and len(incoming) < 2:
                    targets.append(join_id)
                    incoming.add((source, out))

    placements: list[dict[str, Any]] = []
    node_types: list[dict[str, Any]] = []
    for index, kind in enumerate(inner_kinds):
        p: dict[str, Any] = {"id": inner_ids[index], "kind": kind}
        p["routes"] = {o: ts[0] if len(ts) == 1 else ts for o, ts in routes[index].items()}
        routed = list(routes[index])
        if draw(st.booleans()):
            p["name"] = draw(names)
        if draw(st.integers(0, 4)) == 0:
            p["description"] = draw(names)
        if kind == "task":
            ref = draw(
                st.sampled_from(
                    [f"urn:test:node:{index}", f"shop.nodes:step_{index}", f"dag:node-{index}"]
                )
            )
            p["node"] = ref
            node_type: dict[str, Any] = {"id": ref, "outputs": outputs[index]}
            if draw(st.booleans()):
                node_type["name"] = draw(names)
            if draw(st.booleans()):
                node_type["settings"] = {"timeout": draw(durations())}
            node_types.append(node_type)
        elif kind == "wait":
            if draw(st.booleans()):
                p["duration"] = draw(durations())
            else:
                p["until"] = draw(instants)
        elif kind == "join":
            mode = draw(st.sampled_from(["all", "first", "quorum"]))
            p["mode"] = mode
            if mode == "quorum":
                p["quorum"] = draw(st.integers(1, 2))
        elif kind == "scatter":
            if draw(st.booleans()):
                p["source"] = draw(state_paths)
            else:
                p["source_fn"] = draw(st.sampled_from(["shop.orders:pending", "feeds.rows:all"]))
            if draw(st.booleans()):
                p["item_key"] = draw(words)
            p["body"] = draw(st.sampled_from([{"node": "urn:test:node:item"}, {"flow": flow_id}]))
            if draw(st.booleans()):
                p["input"] = draw(st.dictionaries(state_paths, state_paths, max_size=2))
            if draw(st.booleans()):
                p["concurrency"] = draw(st.integers(1, 16))
            flavour = draw(st.sampled_from(["plain", "throttle", "batch"]))
            if flavour == "throttle":
                p["throttle"] = draw(st.floats(0.001, 1000, allow_nan=False))
            elif flavour == "batch":
                batch: dict[str, Any] = {"key": draw(state_paths)}
                if draw(st.booleans()):
                    batch["size"] = draw(st.integers(1, 500))
                if draw(st.booleans()):
                    batch["idle"] = draw(durations())
                p["batch"] = batch
            gather = draw(gathers())
            if gather is not None:
                p["gather"] = gather
            if draw(st.booleans()):
                p["on_failure"] = draw(st.sampled_from(["continue", "fail_fast"]))
        elif kind == "subflow":
            p["flow"] = flow_id
            if draw(st.booleans()):
                p["input"] = draw(st.dictionaries(state_paths, state_paths, max_size=2))
            if draw(st.booleans()):
                p["output"] = draw(st.dictionaries(state_paths, state_paths, max_size=2))
        if kind != "wait":
            chosen = draw(settings(routed))
            if chosen is not None:
                p["settings"] = chosen
        placements.append(p)
    for terminal, outcome in zip(terminal_ids, outcomes, strict=True):
        t: dict[str, Any] = {"id": terminal, "kind": "terminal"}
        if outcome != "completed" or draw(st.booleans()):
            t["outcome"] = outcome
        if draw(st.booleans()):
            t["name"] = draw(names)
        placements.append(t)
    for phase_id, phase in zip(phase_ids, phases, strict=True):
        ph: dict[str, Any] = {"id": phase_id, "kind": "phase", "phase": phase}
        ph["node"] = draw(st.sampled_from(["urn:test:node:setup", "shop.phases:audit"]))
        chosen = draw(settings([]))
        if chosen is not None:
            ph["settings"] = chosen
        placements.append(ph)
    placements = draw(st.permutations(placements))

    data: dict[str, Any] = {
        "id": flow_id,
        "entrypoints": {"main": inner_ids[0]},
        "placements": placements,
    }
    if draw(st.booleans()):
        label = draw(words.filter(lambda w: w != "main"))
        data["entrypoints"][label] = draw(st.sampled_from(inner_ids))
    if draw(st.booleans()):
        data["version"] = draw(st.sampled_from(["1", "2.0.1", "2026-11"]))
    if draw(st.booleans()):
        data["name"] = draw(names)
    if draw(st.booleans()):
        data["description"] = draw(names)
    if draw(st.booleans()) and node_types:
        data["node_types"] = node_types
    if draw(st.booleans()):
        data["reducers"] = draw(
            st.dictionaries(
                state_paths, st.sampled_from([*BUILTIN_REDUCERS, "shop.state:merge"]), max_size=2
            )
        )
    if draw(st.booleans()):
        data["deadline"] = draw(durations())
    if draw(st.booleans()):
        data["max_depth"] = draw(st.integers(1, 64))
    return Flow.model_validate(data)
