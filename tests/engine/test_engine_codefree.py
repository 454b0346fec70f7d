"""Clients need no node code: what a flow is (placements, settings, routes) is planned from the
document stored with the run; the code that runs it is bound by executing engines only."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flowtide.authoring import NodeRegistry, node
from flowtide.clock import VirtualClock
from flowtide.documents import load_flow
from flowtide.engine import Engine, Lifecycle, NodeContext, Park
from flowtide.engine.flows.stored_flows import stored_flow
from flowtide.model import Flow
from flowtide.model.nodes import NodeType
from flowtide.store import MemoryStore
from tests.engine.engine_helpers import T0


@node(id="urn:test:node:ask", outputs=["approved", "rejected"], parks=True, timeout="PT1H",
      register=False)  # fmt: skip
async def ask(ctx: NodeContext) -> Any:
    return Park(key=f"ask-{ctx.run_id}")


@node(id="urn:test:node:note", outputs=["done"], register=False)
def note(ctx: NodeContext) -> str:
    ctx.state["noted"] = True
    return "done"


NODES = NodeRegistry({ask.id: ask, note.id: note})
"""What a worker registers (its --nodes module); a client has none of it."""

DOCUMENT = """
id: urn:test:flow:codefree
entrypoints: {main: note}
placements:
  - {id: note, kind: task, node: "urn:test:node:note", routes: {done: ask}}
  - {id: ask, kind: task, node: "urn:test:node:ask",
     routes: {approved: ok, rejected: refused, timeout: late}}
  - {id: ok, kind: terminal, outcome: approved}
  - {id: refused, kind: terminal, outcome: rejected}
  - {id: late, kind: terminal, outcome: late}
"""


def document_flow(*declared: NodeType) -> Flow:
    """The flow as read from its document: it declares no node type (but ``declared``), and
    carries no code."""
    data = load_flow(DOCUMENT, format="yaml").to_data()
    data["node_types"] = [t.model_dump(mode="json", exclude_defaults=True) for t in declared]
    return Flow.model_validate(data)


def test_a_stored_flow_declares_the_types_of_its_registered_nodes() -> None:
    flow = document_flow()
    bare = stored_flow(flow, lambda ref: None)
    assert "node_types" not in bare.document
    stored = stored_flow(flow, lambda ref: NODES.get(ref).type if ref in NODES else None)  # type: ignore[union-attr]
    declared = {t["id"]: t for t in stored.document["node_types"]}
    assert declared["urn:test:node:ask"]["outputs"] == ["approved", "rejected"]
    assert declared["urn:test:node:ask"]["parks"] is True
    assert declared["urn:test:node:ask"]["settings"] == {"timeout": "PT1H"}
    assert stored.digest != bare.digest
    # A type the document declares is kept as it is, whatever the implementation says.
    own = ask.type.model_copy(update={"outputs": ("approved", "rejected", "held")})
    kept = stored_flow(document_flow(own), lambda ref: NODES.get(ref).type)  # type: ignore[union-attr]
    types = {t["id"]: t for t in kept.document["node_types"]}
    assert types["urn:test:node:ask"]["outputs"] == ["approved", "rejected", "held"]
    assert types["urn:test:node:note"]["outputs"] == ["done"]


async def test_a_client_with_no_code_starts_reads_and_explains_runs() -> None:
    clock = VirtualClock(T0, autojump=True)
    store = MemoryStore()
    client = Engine(clock=clock, store=store, executes=False)  # no registry, no node anywhere
    worker = Engine(clock=clock, store=store, registry=NODES)
    worker.sweeper  # noqa: B018 - it takes the runs clients start
    try:
        handle = await client.start(document_flow())
        parked = await client.wait_parked(handle.run_id)
        assert parked.lifecycle is Lifecycle.PARKED and parked.state == {"noted": True}
        # The client's plan knows the placements and routes, not the node's defaults...
        plan = client.plan("urn:test:flow:codefree")
        assert plan.unknown == {"note": "urn:test:node:note", "ask": "urn:test:node:ask"}
        # ... and the window the worker resolved says where its timeout came from.
        e = await client.explain(handle.run_id, placement="ask")
        assert e.timeout == timedelta(hours=1) and e.unknown_defaults is None
        assert e.timeout_source == "implementation default"
        assert e.deadline == parked.parked[0].deadline
        receipt = await client.signal(key=f"ask-{handle.run_id}", output="approved")
        assert receipt.placement == "ask"
        ended = await client.wait(handle.run_id)
        assert ended.outcome == "approved"
        # After the end, from the history: the deadline recorded, the timeout unknown here.
        (seen,) = await client.explain_run(handle.run_id)
        assert (seen.placement, seen.ending, seen.timeout) == ("ask", "moved_on", None)
        assert seen.unknown_defaults == "urn:test:node:ask"
        assert seen.deadline == parked.parked[0].deadline
        text = str(seen)
        assert "node 'urn:test:node:ask' declares no type in the flow" in text
        assert "its implementation's defaults (timeout, timers) are unknown" in text
    finally:
        await client.close()
        await worker.close()


async def test_a_flow_stored_where_its_nodes_are_registered_tells_clients_their_types() -> None:
    clock = VirtualClock(T0, autojump=True)
    store = MemoryStore()
    app = Engine(clock=clock, store=store, registry=NODES, executes=False)  # (has the nodes)
    worker = Engine(clock=clock, store=store, registry=NODES)
    worker.sweeper  # noqa: B018
    try:
        handle = await app.start(document_flow())
        parked = await worker.wait_parked(handle.run_id)
        await worker.close()
        bare = Engine(clock=clock, store=store, executes=False)
        run = await store.get_run(handle.run_id)
        plan = await bare.catalog.plan_of_run(run)
        assert plan.unknown == {}
        assert plan.outputs("ask") == ("approved", "rejected")
        assert plan.settings["ask"].timeout == timedelta(hours=1)
        e = await bare.explain(handle.run_id, placement="ask")
        assert (e.timeout, e.timeout_source) == (timedelta(hours=1), "node type")
        assert e.deadline == parked.parked[0].deadline
        await bare.close()
    finally:
        await app.close()
        await worker.close()


@node(id="urn:test:node:hold", outputs=["approved"], parks=True, register=False)
async def hold(ctx: NodeContext) -> Any:
    return Park(key=f"hold-{ctx.run_id}")


async def test_a_client_says_when_a_nodes_defaults_are_unknown_to_it() -> None:
    clock = VirtualClock(T0, autojump=True)
    store = MemoryStore()
    flow = Flow.model_validate(
        {
            "id": "urn:test:flow:hold",
            "entrypoints": {"main": "hold"},
            "placements": [
                {
                    "id": "hold",
                    "kind": "task",
                    "node": "urn:test:node:hold",
                    "routes": {"approved": "end"},
                },
                {"id": "end", "kind": "terminal"},
            ],
        }
    )
    client = Engine(clock=clock, store=store, executes=False)
    worker = Engine(clock=clock, store=store, registry=NodeRegistry({hold.id: hold}))
    worker.sweeper  # noqa: B018
    try:
        run_id = (await client.start(flow)).run_id
        await client.wait_parked(run_id)
        e = await client.explain(run_id, placement="hold")
        assert (e.timeout, e.unknown_defaults) == (None, "urn:test:node:hold")
        assert "no timeout as far as is known here" in str(e)
        # With the node's code, the same run is explained without doubt.
        e = await worker.explain(run_id, placement="hold")
        assert (e.timeout, e.unknown_defaults) == (None, None)
        assert str(e).endswith("no timeout")
    finally:
        await client.close()
        await worker.close()
