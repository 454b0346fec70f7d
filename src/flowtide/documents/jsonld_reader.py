"""Reading a JSON-LD flow document into native flow data, by IRIs.

Full JSON-LD expansion would lose what a flow needs (the keys of an ``outputs`` map are labels, not
terms, and expansion drops them), so the reader walks the known structure instead: it processes the
``@context`` with pyld, expands every key and ``@type`` of the root and of each placement to its
absolute IRI, and dispatches on IRIs only. A document that spells its terms differently, uses
compact IRIs, ``@vocab`` or keyword aliases therefore means the same flow. Map-like values
(``outputs``, ``entrypoints``, state mappings, ``@json`` literals) are read as plain JSON.

Inside the DAG vocabulary's structured values (``execution``, ``reservoir``, ``body``,
``stateMapping``, ``policy``) keys are matched by their local name in either namespace, because
that vocabulary's context leaves most of them undefined.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flowtide.documents import vocabulary as v
from flowtide.documents.contexts import ActiveContext, ContextError
from flowtide.documents.pointers import PointerMap, join
from flowtide.errors import Problem
from flowtide.model.flow import is_absolute_iri

_JOIN_MODES = {"all": "all", "any": "first", "first": "first", "quorum": "quorum"}
_SCATTER_MODES = ("item", "reservoir")


@dataclass(slots=True)
class Translation:
    """Native flow data (``None`` when the document could not be translated) and where from."""

    data: dict[str, Any] | None
    pointer_map: PointerMap
    problems: list[Problem] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Value:
    value: Any
    pointer: str
    key: str


class _Node:
    """A JSON object of the document, its keys expanded to IRIs (or local names, when nested)."""

    def __init__(
        self,
        data: dict[str, Any],
        pointer: str,
        ctx: ActiveContext,
        problems: list[Problem],
        *,
        nested: bool = False,
    ) -> None:
        self.pointer = pointer
        self.problems = problems
        self.nested = nested
        if "@context" in data and not nested:
            ctx = ctx.extend(data["@context"], join(pointer, "@context"))
        self.ctx = ctx
        self._entries: dict[str, _Value] = {}
        for key, value in data.items():
            if key == "@context":
                continue
            name = self._name(key)
            if name is None:
                continue  # the context maps the key to null: JSON-LD ignores it
            at = join(pointer, key)
            if name in self._entries:
                other = self._entries[name].key
                self._error(f"{key!r} and {other!r} both mean {name!r}", at)
                continue
            self._entries[name] = _Value(_unwrap(value, ctx), at, key)

    def _name(self, key: str) -> str | None:
        iri = self.ctx.key(key)
        if iri is None or iri.startswith("@") or not self.nested:
            return iri
        for namespace in (v.SEED, v.FLOWTIDE):
            if iri.startswith(namespace):
                return iri[len(namespace) :]
        return iri if is_absolute_iri(iri) else key

    def _error(self, message: str, pointer: str, placement: str | None = None) -> None:
        self.problems.append(Problem(message, pointer=pointer, placement=placement))

    def take(self, name: str) -> _Value | None:
        """The value of property ``name`` (an IRI, or a local name when nested), consumed."""
        if self.nested:
            for namespace in (v.SEED, v.FLOWTIDE):
                if name.startswith(namespace):
                    name = name[len(namespace) :]
        return self._entries.pop(name, None)

    def leftovers(self, what: str, placement: str | None = None) -> None:
        """Report what nothing consumed: unknown terms are errors, foreign IRIs are ignored."""
        for name, entry in self._entries.items():
            if name.startswith((v.SEED, v.FLOWTIDE)) or (self.nested and ":" not in name):
                self._error(f"{entry.key!r} does not apply to {what}", entry.pointer, placement)
            elif is_absolute_iri(name) or name.startswith("@"):
                self.problems.append(
                    Problem(
                        f"{entry.key!r} ({name}) is not part of a Flowtide flow; ignored",
                        pointer=entry.pointer,
                        placement=placement,
                        severity="warning",
                    )
                )
            else:
                self._error(
                    f"{entry.key!r} is not a term of the document's @context "
                    "(JSON-LD would drop it silently)",
                    entry.pointer,
                    placement,
                )
        self._entries.clear()


def _unwrap(value: Any, ctx: ActiveContext) -> Any:
    """A value object's ``@value``; any other value as it is."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if ctx.key(key) == "@value":
                return inner
    return value


class _Reader:
    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.pmap = PointerMap()
        self.node_prefix = ""

    # -- helpers -----------------------------------------------------------------------------

    def error(self, message: str, pointer: str, placement: str | None = None) -> None:
        self.problems.append(Problem(message, pointer=pointer, placement=placement))

    def warn(self, message: str, pointer: str, placement: str | None = None) -> None:
        self.problems.append(
            Problem(message, pointer=pointer, placement=placement, severity="warning")
        )

    def put(
        self,
        out: dict[str, Any],
        native: str,
        name: str,
        entry: _Value | None,
        convert: Callable[[Any], Any] | None = None,
    ) -> None:
        if entry is None:
            return
        out[name] = convert(entry.value) if convert is not None else entry.value
        self.pmap.add(join(native, name), entry.pointer)

    def text(self, entry: _Value, what: str) -> str | None:
        if isinstance(entry.value, str) and entry.value:
            return entry.value
        self.error(f"{what} must be a non-empty string", entry.pointer)
        return None

    def object(self, entry: _Value, what: str) -> dict[str, Any] | None:
        if isinstance(entry.value, dict):
            return entry.value
        self.error(f"{what} must be an object", entry.pointer)
        return None

    def nested(self, entry: _Value, ctx: ActiveContext, what: str) -> _Node | None:
        data = self.object(entry, what)
        if data is None:
            return None
        return _Node(data, entry.pointer, ctx, self.problems, nested=True)

    def local(self, iri: str) -> str:
        """A placement IRI as the model's id: local under ``<flow id>/node/``, else the IRI."""
        if self.node_prefix and iri.startswith(self.node_prefix) and iri != self.node_prefix:
            return iri[len(self.node_prefix) :]
        return iri

    def target(self, value: Any, ctx: ActiveContext) -> Any:
        if isinstance(value, str) and value:
            return self.local(ctx.iri(value))
        return value

    def targets(self, value: Any, ctx: ActiveContext) -> Any:
        if isinstance(value, list):
            return [self.target(t, ctx) for t in value]
        return self.target(value, ctx)

    def ref(self, value: Any, ctx: ActiveContext) -> Any:
        """A node or flow reference: compact IRIs expand; ``module:attribute`` stays."""
        return ctx.iri(value) if isinstance(value, str) and value else value

    def types(self, node: _Node, what: str) -> list[tuple[str, str]] | None:
        """Each ``@type`` value as written, with the IRI it expands to."""
        entry = node.take("@type")
        if entry is None:
            self.error(f"{what} has no @type", node.pointer)
            return None
        values = entry.value if isinstance(entry.value, list) else [entry.value]
        if not values or not all(isinstance(t, str) for t in values):
            self.error("@type must be a string or a list of strings", entry.pointer)
            return None
        return [(t, node.ctx.type_iri(t) or t) for t in values]

    # -- the flow ----------------------------------------------------------------------------

    def read(self, doc: dict[str, Any]) -> Translation:
        try:
            root = _Node(doc, "", ActiveContext.initial(), self.problems)
        except ContextError as exc:
            return Translation(None, self.pmap, [exc.problem])
        out: dict[str, Any] = {}
        self.flow(root, out)
        if any(p.severity == "error" for p in self.problems):
            return Translation(None, self.pmap, self.problems)
        return Translation(out, self.pmap, self.problems)

    def flow(self, root: _Node, out: dict[str, Any]) -> None:
        types = self.types(root, "the flow document")
        if types is not None and v.DAG not in (iri for _, iri in types):
            self.error(f"the flow's @type must be {v.DAG} (DAG)", join("", "@type"))
        ident = root.take("@id")
        if ident is None:
            self.error("the flow has no @id (its IRI)", "")
        else:
            flow_id = self.text(ident, "the flow's @id")
            if flow_id is not None:
                out["id"] = root.ctx.iri(flow_id)
                self.pmap.add("/id", ident.pointer)
                self.node_prefix = f"{out['id']}/node/"
        self.put(out, "", "name", root.take(v.NAME))
        self.put(out, "", "version", root.take(v.VERSION))
        self.put(out, "", "description", root.take(v.DESCRIPTION))
        self.put(out, "", "deadline", root.take(v.DEADLINE))
        self.put(out, "", "max_depth", root.take(v.MAX_DEPTH))
        self.put(out, "", "reducers", root.take(v.REDUCERS))
        node_types = root.take(v.NODE_TYPES)
        self.put(out, "", "node_types", node_types, lambda x: self.node_types(x, root.ctx))
        entrypoints = root.take(v.ENTRYPOINTS)
        if entrypoints is not None and isinstance(entrypoints.value, dict):
            self.put(
                out,
                "",
                "entrypoints",
                entrypoints,
                lambda x: {label: self.target(t, root.ctx) for label, t in x.items()},
            )
        else:
            self.put(out, "", "entrypoints", entrypoints)
        nodes = root.take(v.NODES)
        if nodes is not None:
            self.placements(nodes, root.ctx, out)
        root.leftovers("a flow")

    def node_types(self, value: Any, ctx: ActiveContext) -> Any:
        if not isinstance(value, list):
            return value
        return [
            {**t, "id": self.ref(t["id"], ctx)} if isinstance(t, dict) and "id" in t else t
            for t in value
        ]

    def placements(self, entry: _Value, ctx: ActiveContext, out: dict[str, Any]) -> None:
        items = entry.value if isinstance(entry.value, list) else [entry.value]
        base = entry.pointer if isinstance(entry.value, list) else None
        placements: list[Any] = []
        self.pmap.add("/placements", entry.pointer)
        for index, item in enumerate(items):
            native = join("/placements", len(placements))
            at = join(base, index) if base is not None else entry.pointer
            self.pmap.add(native, at)
            if not isinstance(item, dict):
                self.error("a placement must be an object", at)
                continue
            try:
                node = _Node(item, at, ctx, self.problems)
            except ContextError as exc:
                self.problems.append(exc.problem)
                continue
            placement = self.placement(node, native)
            if placement is not None:
                self.pmap.placement_kind(len(placements), placement["kind"])
                placements.append(placement)
        out["placements"] = placements

    # -- placements --------------------------------------------------------------------------

    def placement(self, node: _Node, native: str) -> dict[str, Any] | None:
        out: dict[str, Any] = {}
        ident = node.take("@id")
        placement_id: str | None = None
        if ident is None:
            self.error("a placement has no @id", node.pointer)
        else:
            text = self.text(ident, "a placement's @id")
            if text is not None:
                placement_id = self.local(node.ctx.iri(text))
                self.put(out, native, "id", ident, lambda _: placement_id)
        written = self.types(node, f"placement {placement_id or node.pointer!r}")
        if written is None:
            return None
        types = [iri for _, iri in written]
        kinds = {v.KIND_OF_CLASS[t] for t in types if t in v.KIND_OF_CLASS}
        if len(kinds) != 1:
            message = (
                _unknown_type(written)
                if not kinds
                else f"@type names several placement kinds: {', '.join(sorted(kinds))}"
            )
            self.error(message, join(node.pointer, "@type"), placement_id)
            return None
        kind = kinds.pop()
        out["kind"] = kind
        self.pmap.add(join(native, "kind"), join(node.pointer, "@type"))
        self.put(out, native, "name", node.take(v.NAME))
        self.put(out, native, "description", node.take(v.DESCRIPTION))
        getattr(self, f"_{kind}")(node, native, out, v.GATHER_NODE in types)
        if kind not in ("terminal", "phase"):
            self.routes(node, native, out)
        if kind not in ("terminal", "wait"):
            self.settings(node, native, out)
        node.leftovers(f"a {kind} placement", placement_id)
        return out

    def routes(self, node: _Node, native: str, out: dict[str, Any]) -> None:
        entry = node.take(v.OUTPUTS)
        if entry is None:
            return
        if isinstance(entry.value, dict):
            routes = {o: self.targets(t, node.ctx) for o, t in entry.value.items()}
            self.put(out, native, "routes", entry, lambda _: routes)
        else:
            self.put(out, native, "routes", entry)

    def settings(self, node: _Node, native: str, out: dict[str, Any]) -> None:
        settings: dict[str, Any] = {}
        where = join(native, "settings")
        for iri, name in v.SETTINGS.items():
            self.put(settings, where, name, node.take(iri))
        if settings:
            out["settings"] = settings
            self.pmap.add(where, node.pointer)

    def _task(self, node: _Node, native: str, out: dict[str, Any], _: bool) -> None:
        self.put(out, native, "node", node.take(v.NODE), lambda x: self.ref(x, node.ctx))

    def _phase(self, node: _Node, native: str, out: dict[str, Any], _: bool) -> None:
        self.put(out, native, "node", node.take(v.NODE), lambda x: self.ref(x, node.ctx))
        self.put(out, native, "phase", node.take(v.PHASE))

    def _terminal(self, node: _Node, native: str, out: dict[str, Any], _: bool) -> None:
        self.put(out, native, "outcome", node.take(v.OUTCOME))

    def _wait(self, node: _Node, native: str, out: dict[str, Any], _: bool) -> None:
        self.put(out, native, "duration", node.take(v.DURATION))
        self.put(out, native, "until", node.take(v.UNTIL))

    def _join(self, node: _Node, native: str, out: dict[str, Any], seed_gather: bool) -> None:
        self.put(out, native, "mode", node.take(v.MODE), self.join_mode)
        self.put(out, native, "quorum", node.take(v.QUORUM))
        if not seed_gather:
            return
        policy = node.take(v.POLICY)
        if policy is not None:
            found = self.nested(policy, node.ctx, "a gather policy")
            if found is not None:
                self.put(out, native, "mode", found.take("mode"), self.join_mode)
                self.put(out, native, "quorum", found.take("quorum"))
                include = found.take("includeErrors")
                if include is not None and include.value is not True:
                    self.warn(
                        "a Flowtide join always passes errors on (it routes 'error'); "
                        "includeErrors is ignored",
                        include.pointer,
                    )
                found.leftovers("a gather policy")
        for name, why in (
            (v.SOURCES, "a Flowtide join merges the branches routed into it"),
            (v.GATHER, "a Flowtide join merges branch states with the flow's reducers"),
        ):
            entry = node.take(name)
            if entry is not None:
                self.warn(f"{entry.key!r} is ignored: {why}", entry.pointer)

    def join_mode(self, value: Any) -> Any:
        return _JOIN_MODES.get(value, value) if isinstance(value, str) else value

    def _subflow(self, node: _Node, native: str, out: dict[str, Any], _: bool) -> None:
        dag = node.take(v.DAG_REF)
        if dag is not None and not isinstance(dag.value, str):
            self.error(
                "a subflow's dag must be a flow IRI (dynamic references are not supported)",
                dag.pointer,
            )
        self.put(out, native, "flow", dag, lambda x: self.ref(x, node.ctx))
        self.state_mapping(node, native, out, ("input", "output"))
        self.ignore(node, v.CONTAINER, "containers are not part of Flowtide")

    def _scatter(self, node: _Node, native: str, out: dict[str, Any], _: bool) -> None:
        self.put(out, native, "source", node.take(v.SOURCE))
        self.put(out, native, "source_fn", node.take(v.SOURCE_FN))
        self.put(out, native, "item_key", node.take(v.ITEM_KEY))
        self.body(node, native, out)
        self.state_mapping(node, native, out, ("input",))
        self.execution(node, native, out)
        self.put(out, native, "gather", node.take(v.GATHER))
        self.put(out, native, "on_failure", node.take(v.ON_FAILURE))
        reducer = node.take(v.REDUCER)
        if reducer is not None and reducer.value != "aggregate":
            self.warn(
                "a Flowtide scatter always routes by aggregate "
                "(all-success, partial, all-error, empty); reducer is ignored",
                reducer.pointer,
            )
        self.ignore(node, v.CONTAINER, "containers are not part of Flowtide")

    def ignore(self, node: _Node, name: str, why: str) -> None:
        entry = node.take(name)
        if entry is not None:
            self.warn(f"{entry.key!r} is ignored: {why}", entry.pointer)

    def body(self, node: _Node, native: str, out: dict[str, Any]) -> None:
        entry = node.take(v.BODY)
        if entry is None:
            return
        found = self.nested(entry, node.ctx, "a scatter body")
        if found is None:
            return
        body: dict[str, Any] = {}
        where = join(native, "body")
        self.put(body, where, "node", found.take("node"), lambda x: self.ref(x, node.ctx))
        dag = found.take("dag")
        if dag is not None and not isinstance(dag.value, str):
            self.error(
                "a scatter body's dag must be a flow IRI (dynamic references are not supported)",
                dag.pointer,
            )
        self.put(body, where, "flow", dag, lambda x: self.ref(x, node.ctx))
        found.leftovers("a scatter body")
        out["body"] = body
        self.pmap.add(where, entry.pointer)

    def state_mapping(
        self, node: _Node, native: str, out: dict[str, Any], names: tuple[str, ...]
    ) -> None:
        entry = node.take(v.STATE_MAPPING)
        if entry is None:
            return
        found = self.nested(entry, node.ctx, "a state mapping")
        if found is None:
            return
        for name in names:
            self.put(out, native, name, found.take(name))
        found.leftovers("this state mapping")

    def execution(self, node: _Node, native: str, out: dict[str, Any]) -> None:
        entry = node.take(v.EXECUTION)
        batch = node.take(v.BATCH)
        self.put(out, native, "batch", batch)
        if entry is None:
            return
        found = self.nested(entry, node.ctx, "a scatter's execution")
        if found is None:
            return
        mode = found.take("mode")
        if mode is not None and mode.value not in _SCATTER_MODES:
            self.error(f"execution mode must be one of {', '.join(_SCATTER_MODES)}", mode.pointer)
        self.put(out, native, "concurrency", found.take("concurrency"))
        throttle = found.take("throttle")
        if throttle is not None and isinstance(throttle.value, dict):
            self.error("throttle must be a number: items started per second", throttle.pointer)
        self.put(out, native, "throttle", throttle)
        reservoir = found.take("reservoir")
        if reservoir is not None:
            if batch is not None:
                self.error("give keyed batches once: batch or execution.reservoir", batch.pointer)
            self.reservoir(reservoir, node.ctx, native, out)
        elif mode is not None and mode.value == "reservoir":
            self.error("execution mode 'reservoir' needs a reservoir", mode.pointer)
        found.leftovers("a scatter's execution")

    def reservoir(
        self, entry: _Value, ctx: ActiveContext, native: str, out: dict[str, Any]
    ) -> None:
        found = self.nested(entry, ctx, "a reservoir")
        if found is None:
            return
        where = join(native, "batch")
        batch: dict[str, Any] = {}
        self.put(batch, where, "key", found.take("keyField"))
        self.put(batch, where, "size", found.take("capacity"))
        idle_ms, idle = found.take("idleMs"), found.take("idle")
        if idle_ms is not None and idle is not None:
            self.error("give the idle time once: idleMs or idle", idle.pointer)
        self.put(batch, where, "idle", idle_ms or idle)
        found.leftovers("a reservoir")
        out["batch"] = batch
        self.pmap.add(where, entry.pointer)


def _local_name(text: str) -> str:
    """The last segment of an IRI or compact IRI (``dag:SingleNod`` -> ``SingleNod``)."""
    return re.split(r"[/#:]", text)[-1]


_CLASSES: dict[str, str] = {_local_name(iri): iri for iri in v.KIND_OF_CLASS}
"""Each placement class IRI by its term in the canonical context (``SingleNode``)."""

_CLASS_NAMES: dict[str, str] = {
    **{kind: _local_name(v.CLASS_OF_KIND[kind]) for kind in v.CLASS_OF_KIND},
    **{term.lower(): term for term in _CLASSES},
}
"""Lower-case names a class is looked for by: its term, and the kind it gives ("task")."""


def _as_written(term: str, iri: str) -> str:
    if iri != term:
        return f"{term!r} ({iri})"
    if is_absolute_iri(term):
        return repr(term)
    return f"{term!r} (not a term of the document's @context)"


def _nearest_class(written: list[tuple[str, str]]) -> str | None:
    """The class term nearest to one of the ``@type`` values, if one is near enough."""
    best: tuple[float, str] | None = None
    for _, iri in written:
        name = _local_name(iri).lower()
        for match in difflib.get_close_matches(name, _CLASS_NAMES, n=1, cutoff=0.5):
            ratio = difflib.SequenceMatcher(None, name, match).ratio()
            if best is None or ratio > best[0]:
                best = (ratio, _CLASS_NAMES[match])
    return best[1] if best else None


def _unknown_type(written: list[tuple[str, str]]) -> str:
    """Which ``@type`` values were given, what they expand to, and the nearest known class."""
    given = ", ".join(_as_written(term, iri) for term, iri in written)
    nearest = _nearest_class(written)
    hint = ""
    if nearest is not None:
        iri = _CLASSES[nearest]
        hint = f"; the nearest is {nearest!r} ({iri}), a {v.KIND_OF_CLASS[iri]}"
    known = ", ".join(f"{term} ({v.KIND_OF_CLASS[iri]})" for term, iri in _CLASSES.items())
    return f"@type {given} names no placement class{hint} (classes: {known})"


def read_jsonld(doc: dict[str, Any]) -> Translation:
    """Native flow data from a JSON-LD document, a map of its pointers, and its problems."""
    return _Reader().read(doc)
