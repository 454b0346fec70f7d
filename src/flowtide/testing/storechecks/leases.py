"""Checks of leases and wake instants: who drives each run, and when a run needs a worker."""

from __future__ import annotations

import asyncio

from flowtide.store.base import (
    Commit,
    DueEntry,
    Lease,
    LeaseLost,
    LeaseTake,
    Store,
    UnknownRunError,
)
from flowtide.testing.storechecks.support import (
    T0,
    at,
    new_run,
    on_given_instants,
    raises,
    run_record,
    same,
    snapshot,
    token,
    true,
)


async def runs_wake_when_they_need_a_worker(store: Store) -> None:
    on_given_instants(store)
    same(await store.next_wake(), None, "next_wake of an empty store")
    await new_run(store, "p", lifecycle="parked")
    same(await store.next_wake(), None, "a parked run nobody holds, with nothing due")
    await store.commit(Commit("p", due=[DueEntry(at(30), "p", "p.1", "timeout")]))
    same(await store.next_wake(), at(30), "a parked run nobody holds: its earliest due entry")
    await store.create_run(run_record("h", "running"), {}, lease=Lease("h", "w1", 1, at(20)))
    same(await store.next_wake(), at(20), "a held run: its lease's expiry")
    await store.commit(Commit("h", due=[DueEntry(at(5), "h", "h.1")]))
    same(await store.next_wake(), at(5), "a held run: its due entry, if earlier")
    await store.commit(Commit("h", due_cleared=["h.1"]))
    same(await store.next_wake(), at(20), "a held run whose due entry went")
    await store.create_run(run_record("n", "pending"), {})
    same(await store.next_wake(), T0, "a pending run nobody holds: at once (its creation)")
    ended = run_record("n", "cancelled")
    await store.commit(Commit("n", run=ended))
    same(await store.next_wake(), at(20), "once that run has ended")
    await store.commit(Commit("h", release=True))
    same(await store.next_wake(), T0, "a running run given back: at once")


async def claims_take_runs_whose_wake_has_come(store: Store) -> None:
    on_given_instants(store)
    await store.create_run(run_record("a", "pending"), {})
    await new_run(store, "b", lifecycle="parked")
    await store.commit(Commit("b", due=[DueEntry(at(10), "b", "b.1", "timeout")]))
    await new_run(store, "c", lifecycle="parked")
    await store.commit(Commit("c", due=[DueEntry(at(50), "c", "c.1", "timeout")]))
    same(list(await store.claim_runs("w1", at(-1), at(100))), [], "before any wake")
    first = await store.claim_runs("w1", at(10), at(100), limit=1)
    same(list(first), [Lease("a", "w1", 1, at(100))], "the first claim (earliest, up to limit)")
    second = await store.claim_runs("w2", at(10), at(100))
    same(list(second), [Lease("b", "w2", 1, at(100))], "the second claim (another owner)")
    same(list(await store.claim_runs("w3", at(10), at(100))), [], "runs held by live owners")
    same(await store.lease_of("b"), Lease("b", "w2", 1, at(100)), "the lease of a claimed run")
    # The holder claims its own run again when an entry of it comes due: same epoch.
    await store.commit(
        Commit("b", due=[DueEntry(at(20), "b", "b.2")], lease=Lease("b", "w2", 1, at(100)))
    )
    again = await store.claim_runs("w2", at(20), at(120))
    same(list(again), [Lease("b", "w2", 1, at(120))], "the holder's own claim")
    # Once the lease has expired, anyone takes the run over, at the next epoch.
    taken = await store.claim_runs("w3", at(121), at(200))
    same(
        sorted(taken, key=lambda lease: lease.run_id),
        [
            Lease("a", "w3", 2, at(200), taken_from="w1"),
            Lease("b", "w3", 2, at(200), taken_from="w2"),
            Lease("c", "w3", 1, at(200)),
        ],
        "runs whose leases expired, and a run whose due entry came",
    )


async def claims_never_hand_a_run_to_two_owners(store: Store) -> None:
    on_given_instants(store)
    for i in range(40):
        await store.create_run(run_record(f"r{i}", "pending"), {})
    claims = await asyncio.gather(
        *(store.claim_runs(f"w{n}", at(10), at(100), limit=15) for n in range(4))
    )
    taken = [lease.run_id for claim in claims for lease in claim]
    same(len(taken), 40, "runs claimed by four overlapping claims")
    same(len(set(taken)), 40, "distinct runs among them")
    same(await store.next_wake(), at(100), "the next wake: the leases' expiry")


async def commits_are_fenced_by_their_lease(store: Store) -> None:
    on_given_instants(store)
    await store.create_run(run_record("r", "running"), {"n": 1}, lease=Lease("r", "w1", 1, at(10)))
    old = Lease("r", "w1", 1, at(10))
    await store.commit(Commit("r", tokens=[token("r", 1)], lease=old))
    taken = await store.acquire_run("r", "w2", at(11), at(50))
    same(taken, Lease("r", "w2", 2, at(50), "w1"), "a run taken over once its lease expired")
    before = await snapshot(store)
    with raises(LeaseLost, "a commit under the lease that was taken over"):
        await store.commit(Commit("r", state={"n": 2}, tokens=[token("r", 2)], lease=old))
    same(await snapshot(store), before, "the run after the refused commit")
    assert taken is not None
    await store.commit(Commit("r", state={"n": 3}, lease=taken, release=True))
    same(await store.lease_of("r"), None, "the lease once given back")
    with raises(LeaseLost, "a commit under a lease given back"):
        await store.commit(Commit("r", state={"n": 4}, lease=taken))
    same(await store.get_state("r"), {"n": 3}, "the state")
    again = await store.acquire_run("r", "w1", at(12), at(60))
    same(again, Lease("r", "w1", 3, at(60)), "taken again: the next epoch")


async def acquiring_a_run(store: Store) -> None:
    on_given_instants(store)
    with raises(UnknownRunError, "acquiring an unknown run"):
        await store.acquire_run("nope", "w1", T0, at(10))
    await store.create_run(run_record("r", "parked"), {})
    same(await store.acquire_run("r", "w1", T0, at(10)), Lease("r", "w1", 1, at(10)), "free")
    same(await store.acquire_run("r", "w2", at(5), at(20)), None, "held by a live owner")
    same(
        await store.acquire_run("r", "w1", at(5), at(20)),
        Lease("r", "w1", 1, at(20)),
        "by its own holder (the same epoch, later expiry)",
    )
    forced = await store.acquire_run("r", "w2", at(5), at(30), force=True)
    same(forced, Lease("r", "w2", 2, at(30), "w1"), "forced from a live owner")
    with raises(LeaseLost, "a commit of the owner it was forced from"):
        await store.commit(Commit("r", lease=Lease("r", "w1", 1, at(20))))
    await store.commit(Commit("r", run=run_record("r", "completed")))
    same(await store.acquire_run("r", "w3", at(99), at(200)), None, "a run that has ended")


async def leases_say_whom_a_run_was_taken_from(store: Store) -> None:
    on_given_instants(store)
    await store.create_run(run_record("new", "pending"), {})
    for run_id, owner in (("held", "w1"), ("back", "w1"), ("mine", "w2")):
        await store.create_run(run_record(run_id), {}, lease=Lease(run_id, owner, 1, at(10)))
    await store.commit(Commit("back", lease=Lease("back", "w1", 1, at(10)), release=True))
    claimed = await store.claim_runs("w2", at(11), at(50))
    same(
        sorted(claimed, key=lambda lease: lease.run_id),
        [
            Lease("back", "w2", 2, at(50)),
            Lease("held", "w2", 2, at(50), taken_from="w1"),
            Lease("mine", "w2", 1, at(50)),
            Lease("new", "w2", 1, at(50)),
        ],
        "claimed: from an expired lease of another owner (not a run given back, its own, new)",
    )
    same(await store.lease_of("held"), Lease("held", "w2", 2, at(50)), "its lease read later")
    forced = await store.acquire_run("held", "w3", at(20), at(70), force=True)
    same(forced, Lease("held", "w3", 3, at(70), taken_from="w2"), "forced from a live owner")
    same(
        await store.acquire_run("held", "w3", at(30), at(80)),
        Lease("held", "w3", 3, at(80)),
        "acquired by its own holder",
    )
    renewed = await store.renew_leases("w2", at(60))
    same(
        sorted(renewed, key=lambda lease: lease.run_id),
        [
            Lease("back", "w2", 2, at(60)),
            Lease("mine", "w2", 1, at(60)),
            Lease("new", "w2", 1, at(60)),
        ],
        "leases renewed",
    )
    same(
        await store.acquire_run("mine", "w1", at(61), at(90)),
        Lease("mine", "w1", 2, at(90), taken_from="w2"),
        "acquired once another owner's lease expired",
    )


async def leases_are_renewed_and_given_back(store: Store) -> None:
    on_given_instants(store)
    for run_id in ("a", "b", "c"):
        await store.create_run(run_record(run_id), {}, lease=Lease(run_id, "w1", 1, at(10)))
    await store.acquire_run("c", "w2", at(11), at(40))
    renewed = await store.renew_leases("w1", at(30))
    same(
        sorted(renewed, key=lambda lease: lease.run_id),
        [Lease("a", "w1", 1, at(30)), Lease("b", "w1", 1, at(30))],
        "the leases renewed (not the run taken over)",
    )
    named = await store.renew_leases("w1", at(35), run_ids=["a", "c", "unknown"])
    same(list(named), [Lease("a", "w1", 1, at(35))], "only the runs named are renewed")
    same(await store.lease_of("b"), Lease("b", "w1", 1, at(30)), "a run not named: as it was")
    same(await store.lease_of("c"), Lease("c", "w2", 2, at(40)), "another owner's: as it was")
    same(sorted(await store.release_runs("w1")), ["a", "b"], "the runs given back")
    same(await store.lease_of("a"), None, "a run given back")
    same(list(await store.renew_leases("w1", at(50))), [], "renewing once nothing is held")
    true(await store.lease_of("c") is not None, "another owner's run is still held")
    same(await store.next_wake(), T0, "runs given back need a worker at once")


async def a_commit_takes_the_lease_of_a_run_nobody_holds(store: Store) -> None:
    on_given_instants(store)
    await store.create_run(run_record("r", "parked"), {"n": 1})
    seen = await store.load_run("r")
    same(seen.lease, None, "the snapshot of a run nobody holds: its lease")
    true(seen.epoch in (None, 0), "the snapshot's epoch (a run never held)")
    mine = Lease("r", "w1", 1, at(30))
    await store.commit(Commit("r", state={"n": 2}, take=LeaseTake(mine, at(1))))
    same(await store.lease_of("r"), mine, "the lease a commit took")
    same(await store.next_wake(), at(30), "its wake instant: the lease's expiry")
    before = await snapshot(store)
    theirs = LeaseTake(Lease("r", "w2", 1, at(40)), at(2))
    with raises(LeaseLost, "a second commit taking it from the same read"):
        await store.commit(Commit("r", state={"n": 3}, tokens=[token("r", 1)], take=theirs))
    same(await snapshot(store), before, "the run after the refused commit")
    again = Lease("r", "w1", 1, at(50))
    await store.commit(Commit("r", take=LeaseTake(again, at(3))))
    same(await store.lease_of("r"), again, "taken by the owner that holds it already")
    await store.commit(Commit("r", lease=again, release=True))
    with raises(LeaseLost, "a take from a read before the run was held and given back"):
        await store.commit(Commit("r", take=LeaseTake(Lease("r", "w2", 1, at(60)), at(4))))
    later = Lease("r", "w2", 2, at(60))
    await store.commit(Commit("r", state={"n": 4}, take=LeaseTake(later, at(4))))
    same(await store.lease_of("r"), later, "taken at the next epoch from a fresh read")
    with raises(LeaseLost, "a commit of the owner before"):
        await store.commit(Commit("r", state={"n": 5}, lease=again))
    same(await store.get_state("r"), {"n": 4}, "the state")
    await store.create_run(run_record("e"), {}, lease=Lease("e", "w1", 1, at(5)))
    with raises(LeaseLost, "a take of a run another owner holds (its lease expired or not)"):
        await store.commit(Commit("e", take=LeaseTake(Lease("e", "w2", 2, at(60)), at(10))))
