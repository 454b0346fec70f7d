"""The memory store's parts on their own (the conformance suite checks the whole store): its
wake instants kept in a heap, its parks' order and keys, and pruning letting go of leases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flowtide.store import Commit, DueEntry, Lease, ParkRecord, RunRecord, SignalRequest
from flowtide.store.memory.commits import Commits
from flowtide.store.memory.leases import Leases
from flowtide.store.memory.pruning import Pruning
from flowtide.store.memory.requests import Requests
from flowtide.store.memory.rows import ParkRow
from flowtide.store.memory.tables import Tables

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def parts() -> tuple[Tables, Leases, Commits]:
    tables = Tables()
    leases = Leases(tables)
    return tables, leases, Commits(tables, leases)


def parked(commits: Commits, run_id: str, due: float) -> None:
    """A parked run nobody holds, due at ``due`` seconds."""
    commits.create_run(RunRecord(run_id, "urn:test:flow", "1", "parked", T0), {})
    commits.commit(Commit(run_id, due=[DueEntry(at(due), run_id, "t1", "timeout")]))


def test_runs_are_claimed_earliest_wake_first() -> None:
    _, leases, commits = parts()
    for run_id, due in [("late", 30), ("early", 10), ("middle", 20)]:
        parked(commits, run_id, due)
    assert leases.next_wake() == at(10)
    assert [lease.run_id for lease in leases.claim_runs("w", at(25), at(55), limit=1)] == ["early"]
    assert [lease.run_id for lease in leases.claim_runs("v", at(25), at(55))] == ["middle"]


def test_a_wake_instant_replaced_is_skipped() -> None:
    _, leases, commits = parts()
    parked(commits, "r", 10)
    commits.commit(Commit("r", due=[DueEntry(at(40), "r", "t1", "timeout")]))  # (replaces it)
    assert leases.claim_runs("w", at(20), at(50)) == []
    assert leases.next_wake() == at(40)


def test_the_heap_of_wake_instants_stays_bounded() -> None:
    tables, leases, commits = parts()
    parked(commits, "r", 10)
    for n in range(500):
        commits.commit(Commit("r", due=[DueEntry(at(11 + n), "r", "t1", "timeout")]))
    assert len(tables.wake_heap) <= 2 * len(tables.wakes) + 65
    assert leases.next_wake() == at(510)


def test_a_park_written_again_keeps_its_place_and_takes_its_new_key() -> None:
    tables = Tables()
    first = ParkRecord("t1#1", "r", "t1", "ask", 1, 1, T0, key="k1")
    tables.put_park(ParkRow.of(first, "parks/0"))
    tables.put_park(ParkRow.of(ParkRecord("t2#1", "r", "t2", "ask", 1, 1, T0), "parks/0"))
    again = ParkRecord("t1#1", "r", "t1", "ask", 1, 1, T0, key="k2")
    tables.put_park(ParkRow.of(again, "parks/0"))
    assert tables.parks["t1#1"].order == 0 and tables.parks["t2#1"].order == 1
    assert tables.parks_by_key == {"k1": set(), "k2": {"t1#1"}}
    assert tables.parks_by_run == {"r": {"t1#1", "t2#1"}}


def test_a_pruned_run_is_no_longer_held() -> None:
    tables, leases, commits = parts()
    lease = Lease("r", "w", 1, at(30))
    run = RunRecord("r", "urn:test:flow", "1", "running", T0)
    commits.create_run(run, {}, lease=lease)
    ended = RunRecord("r", "urn:test:flow", "1", "completed", T0, finished_at=at(1))
    commits.commit(Commit("r", run=ended, lease=lease))
    assert Pruning(tables, leases).prune_runs(at(60)) == ["r"]
    assert tables.runs == {} and tables.leases == {} and tables.held == {"w": set()}
    assert leases.renew_leases("w", at(90)) == []


def test_a_pruned_run_leaves_no_requests_or_fired_deadline_behind() -> None:
    """A run created again under a pruned run's id starts with none of its requests and none of
    its fired deadline (which would move a new request's instant)."""
    tables, leases, commits = parts()
    requests = Requests(tables, leases)
    commits.create_run(RunRecord("r", "urn:test:flow", "1", "parked", T0), {})
    commits.commit(Commit("r", fires_deadline=at(5)))
    late = requests.request_signal(SignalRequest("q1", "r", at(1), {"kind": "signal"}))
    assert late.requested_at == at(5)  # (recorded after the deadline fired)
    ended = RunRecord("r", "urn:test:flow", "1", "completed", T0, finished_at=at(6))
    commits.commit(Commit("r", run=ended))
    assert Pruning(tables, leases).prune_runs(at(60)) == ["r"]

    commits.create_run(RunRecord("r", "urn:test:flow", "1", "parked", at(61)), {})
    stored = requests.request_signal(SignalRequest("q2", "r", at(2), {"kind": "signal"}))
    assert stored.requested_at == at(2)
    assert [r.id for r in requests.pending_requests("r")] == ["q2"]
