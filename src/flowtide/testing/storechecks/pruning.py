"""Checks of finding runs by the start of their id, and of pruning ended runs."""

from __future__ import annotations

from dataclasses import replace

from flowtide.store.base import (
    Commit,
    Lease,
    NodeAnchor,
    RunRecord,
    ScatterItemRecord,
    SignalAnswer,
    SignalRequest,
    Store,
    UnknownRunError,
)
from flowtide.testing.storechecks.support import (
    at,
    every_part,
    new_run,
    on_given_instants,
    raises,
    run_record,
    same,
    seeded_run,
    snapshot,
    true,
)

IDS = ["ab1", "ab2", "abc", "Ab9", "xab", "a%b", "a_b", "é1", "é2", "z\U0010ffff", "z\U0010ffffa"]


async def runs_are_found_by_the_start_of_their_id(store: Store) -> None:
    for run_id in IDS:
        await new_run(store, run_id)
    same(list(await store.run_ids("ab")), ["ab1", "ab2", "abc"], "the runs starting with 'ab'")
    same(list(await store.run_ids("ab", limit=2)), ["ab1", "ab2"], "at most two of them")
    same(list(await store.run_ids("abc")), ["abc"], "a whole id")
    same(list(await store.run_ids("ab1x")), [], "a prefix longer than the id")
    same(list(await store.run_ids("a%")), ["a%b"], "'%' is a character, not a wildcard")
    same(list(await store.run_ids("a_")), ["a_b"], "'_' is a character, not a wildcard")
    same(list(await store.run_ids("A")), ["Ab9"], "upper and lower case differ")
    same(list(await store.run_ids("é")), ["é1", "é2"], "a prefix beyond ASCII")
    same(
        list(await store.run_ids("z\U0010ffff")),
        ["z\U0010ffff", "z\U0010ffffa"],
        "a prefix that ends with the last code point",
    )
    same(list(await store.run_ids("", limit=3)), sorted(IDS)[:3], "every run, in order")
    same(list(await store.run_ids("q")), [], "no run")


def ended(run_id: str, seconds: float, parent: str | None = None) -> RunRecord:
    """A run that completed ``seconds`` after T0 (a child of ``parent``)."""
    return replace(
        run_record(run_id, "completed"),
        finished_at=at(seconds),
        parent_run_id=parent,
        depth=1 if parent else 0,
    )


async def with_everything(store: Store, run_id: str, record: RunRecord) -> None:
    """``run_id`` with something in every part of a run, then ended as ``record`` says."""
    await seeded_run(store, run_id)
    await store.commit(every_part(run_id, run_id))
    await store.commit(
        Commit(
            run_id,
            anchors=[NodeAnchor(run_id, "kept", None, at(1))],
            scatter=[ScatterItemRecord(run_id, "each#1", 0, "done", "ok", [1])],
        )
    )
    await store.request_signal(SignalRequest(f"request-{run_id}", run_id, at(4), {"n": 1}))
    await store.commit(Commit(run_id, run=record))


async def pruning_deletes_ended_runs_and_everything_of_theirs(store: Store) -> None:
    await with_everything(store, "old", ended("old", 10))
    await with_everything(store, "new", ended("new", 100))
    await new_run(store, "live")
    before = await snapshot(store, "new"), await snapshot(store, "live")
    same(list(await store.prune_runs(at(50), dry_run=True)), ["old"], "a dry run")
    same((await store.get_run("old")).lifecycle, "completed", "a run a dry run found")
    same(list(await store.prune_runs(at(50))), ["old"], "the pruned runs")
    with raises(UnknownRunError, "a pruned run"):
        await store.get_run("old")
    for read in (store.get_state, store.tokens, store.history, store.due_of, store.lease_of):
        with raises(UnknownRunError, f"{read.__name__} of a pruned run"):
            await read("old")
    same(list(await store.parks(key=None, run_id="old")), [], "a pruned run's parks")
    same(list(await store.node_anchors("old")), [], "a pruned run's node anchors")
    same(await store.node_anchor("old", "kept", None), None, "a pruned run's node anchor")
    same(list(await store.scatter_items("old", "each#1")), [], "a pruned run's scatter items")
    same(list(await store.scatter_items("old", "each#9")), [], "a pruned run's scatter items")
    same(await store.signal_answer("answer-old"), None, "a pruned run's signal answer")
    same(await store.signal_request("request-old"), None, "a pruned run's signal request")
    same(list(await store.run_ids("old")), [], "a pruned run's id")
    after = await snapshot(store, "new"), await snapshot(store, "live")
    same(after, before, "the runs kept")
    true(await store.signal_answer("answer-new") is not None, "a kept run's signal answer")
    true(await store.signal_request("request-new") is not None, "a kept run's signal request")
    same(list(await store.prune_runs(at(50))), [], "pruning again")
    await new_run(store, "old")  # (its id is free again)


async def pruning_keeps_live_runs_and_the_children_of_live_parents(store: Store) -> None:
    on_given_instants(store)
    await new_run(store, "live-parent")
    await store.create_run(ended("child-of-live", 1, "live-parent"), {})
    await store.create_run(ended("parent", 5), {})
    await store.create_run(ended("child-of-ended", 1, "parent"), {})
    await store.create_run(ended("orphan", 1, "gone"), {})
    lease = Lease("held", "w1", 1, at(900))
    await store.create_run(replace(run_record("held", "parked")), {}, lease=lease)
    for lifecycle in ("pending", "running", "parked"):
        await store.create_run(replace(run_record(lifecycle, lifecycle), created_at=at(-99)), {})
    await store.create_run(replace(run_record("unfinished", "failed"), finished_at=None), {})
    same(
        list(await store.prune_runs(at(10))),
        ["child-of-ended", "orphan", "parent", "unfinished"],
        "the runs pruned: ended ones, but no child of a run that has not ended",
    )
    same((await store.get_run("child-of-live")).lifecycle, "completed", "a live parent's child")
    for kept in ("live-parent", "held", "pending", "running", "parked"):
        same((await store.get_run(kept)).id, kept, f"the run {kept!r}")
    same(await store.lease_of("held"), lease, "a held run's lease")
    await store.commit(Commit("live-parent", run=ended("live-parent", 2)))
    same(
        list(await store.prune_runs(at(10))),
        ["child-of-live", "live-parent"],
        "once the parent has ended",
    )


async def pruning_goes_in_batches(store: Store) -> None:
    ids = [f"r{n}" for n in range(7)]
    for run_id in ids:
        await store.create_run(ended(run_id, 1), {"n": run_id})
    await store.commit(Commit("r0", signal_answers=[SignalAnswer("k", "r0", {"ok": True})]))
    same(list(await store.prune_runs(at(5), limit=3, dry_run=True)), ids[:3], "a dry run's first")
    same(
        list(await store.prune_runs(at(5), limit=3, after="r2", dry_run=True)),
        ids[3:6],
        "a dry run's next batch",
    )
    same(list(await store.prune_runs(at(5), limit=3, after="r5", dry_run=True)), ids[6:], "last")
    same(list(await store.prune_runs(at(5), limit=3)), ids[:3], "the first batch pruned")
    same(list(await store.run_ids("r")), ids[3:], "the runs left after one batch")
    same(list(await store.prune_runs(at(5), limit=3)), ids[3:6], "the second batch")
    same(list(await store.prune_runs(at(5), limit=3)), ids[6:], "the third batch")
    same(list(await store.prune_runs(at(5), limit=3)), [], "nothing left to prune")
    same(await store.signal_answer("k"), None, "a signal answer of a pruned run")
