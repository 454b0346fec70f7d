"""Checks of stored flows by id: the order they were first stored in, their latest, and the
runs started on each."""

from __future__ import annotations

from flowtide.store.base import RunRecord, Store, StoredFlow, StoredFlowVersion, UnknownStoredFlow
from flowtide.testing.storechecks.support import T0, at, raises, same

A, B = "urn:check:a", "urn:check:b"


def document(flow_id: str, version: str, mark: str) -> StoredFlow:
    """A stored flow whose digest is ``mark`` repeated (a stand-in for a real digest)."""
    return StoredFlow(flow_id, version, mark * 64, {"id": flow_id, "version": version, "m": mark})


def row(flow: StoredFlow, seconds: float, runs: int, latest: bool) -> StoredFlowVersion:
    return StoredFlowVersion(flow.flow_id, flow.version, flow.digest, at(seconds), runs, latest)


async def flows_are_listed_by_id_in_the_order_stored(store: Store) -> None:
    with raises(UnknownStoredFlow, "the latest of a flow never stored"):
        await store.latest_flow(A)
    same(list(await store.flow_versions()), [], "no flow stored yet")
    a1, a2, b1 = document(A, "1", "c"), document(A, "2", "a"), document(B, "1", "b")
    same(await store.put_flow(b1, stored_at=at(1)), True, "a new document is new")
    same(await store.put_flow(a1, stored_at=at(2)), True, "another new one")
    same(await store.put_flow(a2, stored_at=at(3)), True, "a later one of the same id")
    # Stored again later: not new, and neither its instant nor its place changes.
    same(await store.put_flow(a1, stored_at=at(4)), False, "a document stored again")
    same(await store.latest_flow(A), a2, "the latest of an id: the one first stored last")
    same(await store.latest_flow(B), b1, "the latest of an id with one document")
    want = [row(a1, 2, 0, False), row(a2, 3, 0, True), row(b1, 1, 0, True)]
    same(list(await store.flow_versions()), want, "every document, by id, then as first stored")
    same(list(await store.flow_versions(A)), want[:2], "the documents of one id")
    same(list(await store.flow_versions("urn:check:none")), [], "the documents of an unknown id")
    kept = await store.latest_flow(A)
    kept.document["m"] = "changed"
    same(await store.latest_flow(A), a2, "a latest document read, then changed")


async def stored_flows_count_their_runs(store: Store) -> None:
    a1, a2, b1 = document(A, "1", "d"), document(A, "2", "e"), document(B, "1", "d")
    for n, flow in enumerate((a1, a2, b1)):
        await store.put_flow(flow, stored_at=at(n))
    started = [(A, a1.digest), (A, a1.digest), (A, a2.digest), (B, a1.digest), (A, None)]
    for n, (flow_id, digest) in enumerate(started):
        options = {"entrypoint": None} if digest is None else {"flow_digest": digest}
        await store.create_run(RunRecord(f"r{n}", flow_id, "1", "pending", T0, options=options), {})
    want = [row(a1, 0, 2, False), row(a2, 1, 1, True), row(b1, 2, 1, True)]
    same(list(await store.flow_versions()), want, "the runs started on each document")
