"""Checks of a run's snapshot: everything a rebuild reads, in one read."""

from __future__ import annotations

from dataclasses import replace

from flowtide.store.base import (
    Checkpoint,
    Commit,
    EventRecord,
    ParkStatus,
    Store,
    UnknownRunError,
)
from flowtide.testing.storechecks.support import T0, at, new_run, park, raises, same, seeded_run


async def a_run_is_loaded_whole_in_one_read(store: Store) -> None:
    with raises(UnknownRunError, "the snapshot of an unknown run"):
        await store.load_run("nobody")
    empty = await new_run(store, "e", state={})
    got = await store.load_run("e")
    same(got.run, empty, "the record of a run without anything")
    same(
        (got.state, list(got.tokens), list(got.history), list(got.parks), list(got.due)),
        ({}, [], [], [], []),
        "the parts of a run without anything",
    )
    same(list(got.anchors), [], "the anchors of a run without any")
    await seeded_run(store)
    await seeded_run(store, "s")  # (another run's rows are not this one's)
    closed = replace(park("r", 3), status=ParkStatus.SIGNALLED, closed_at=at(1), closed_by="x")
    await store.commit(Commit("r", events=[EventRecord("second", "r", at(1))], parks=[closed]))
    got = await store.load_run("r")
    same(got.run, await store.get_run("r"), "the run's record")
    same(got.state, await store.get_state("r"), "the run's state")
    same(list(got.tokens), list(await store.tokens("r")), "every token of the run")
    same(list(got.history), list(await store.history("r")), "the history without a checkpoint")
    same(list(got.parks), list(await store.parks(run_id="r", open_only=True)), "open parks")
    same(list(got.anchors), list(await store.node_anchors("r")), "the run's anchors")
    same(list(got.due), list(await store.due_of("r")), "the run's due entries, earliest first")
    # With a resume checkpoint: only the history after it.
    run = replace(await store.get_run("r"), checkpoint=Checkpoint(1, {}, [], None))
    await store.commit(Commit("r", run=run, events=[EventRecord("third", "r", T0)]))
    got = await store.load_run("r")
    same([e.kind for e in got.history], ["second", "third"], "the history after the checkpoint")
    same([e.seq for e in got.history], [2, 3], "their numbers")
    same(got.run.checkpoint, run.checkpoint, "the checkpoint read with it")
