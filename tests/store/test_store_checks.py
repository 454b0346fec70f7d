"""The store conformance suite: the memory store passes every check, and broken stores fail
the checks meant to catch them."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import pytest

from flowtide.store import (
    Commit,
    EventRecord,
    Lease,
    MemoryStore,
    RequestAnswer,
    SignalAnswer,
    SignalRequest,
    Store,
    StoreConflict,
    StoredFlow,
    StoredFlowVersion,
    UnknownStoredFlow,
    WorkerRecord,
)
from flowtide.store.base import ENDED_LIFECYCLES
from flowtide.testing import (
    StoreCheck,
    StoreCheckFailed,
    StoreFactory,
    check_store,
    run_store_check,
    store_checks,
)


def factory(kind: Callable[[], Store]) -> StoreFactory:
    @contextlib.asynccontextmanager
    async def fresh() -> AsyncIterator[Store]:
        yield kind()

    return fresh


CHECKS = store_checks()


@pytest.mark.parametrize(("name", "check"), CHECKS, ids=[name for name, _ in CHECKS])
async def test_the_memory_store_passes(name: str, check: StoreCheck) -> None:
    await run_store_check(factory(MemoryStore), check)


async def test_check_store_runs_every_check_on_a_fresh_store() -> None:
    made: list[Store] = []

    def counted() -> Store:
        made.append(MemoryStore())
        return made[-1]

    await check_store(factory(counted))
    assert len(made) == len(CHECKS) == len({id(s) for s in made})
    assert len({name for name, _ in CHECKS}) == len(CHECKS)


# -- broken stores ------------


class PartialCommits(MemoryStore):
    """Applies a commit's tokens and state first, then the rest: not all or nothing."""

    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        first = Commit(
            commit.run_id,
            tokens=commit.tokens,
            state=commit.state,
            state_deleted=commit.state_deleted,
        )
        await super().commit(first)
        rest = replace(commit, tokens=(), state=None, state_deleted=())
        return await super().commit(rest)


class IgnoringExpect(MemoryStore):
    """Applies every commit, whatever its expectations."""

    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        return await super().commit(replace(commit, expect={}))


class IgnoringTheRunsLifecycle(MemoryStore):
    """Applies a commit whatever lifecycle its run is in."""

    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        return await super().commit(replace(commit, run_lifecycles=None))


class IgnoringLeases(MemoryStore):
    """Applies a commit whoever holds the run: a worker taken over keeps writing."""

    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        return await super().commit(replace(commit, lease=None))


class ClaimingHeldRuns(MemoryStore):
    """Claims runs whatever their leases: two workers may drive one run."""

    async def claim_runs(
        self, owner: str, now: datetime, expires: datetime, limit: int = 100
    ) -> Sequence[Lease]:
        taken: list[Lease] = []
        for run in await self.list_runs():
            if len(taken) < limit and run.lifecycle in ("pending", "running", "parked"):
                lease = await self.acquire_run(run.id, owner, now, expires, force=True)
                if lease is not None:
                    taken.append(lease)
        return taken


class NamingNobody(MemoryStore):
    """Never says whom a run was taken from: a worker that died is taken over uncounted."""

    async def claim_runs(
        self, owner: str, now: datetime, expires: datetime, limit: int = 100
    ) -> Sequence[Lease]:
        taken = await super().claim_runs(owner, now, expires, limit)
        return [replace(lease, taken_from=None) for lease in taken]

    async def acquire_run(
        self, run_id: str, owner: str, now: datetime, expires: datetime, *, force: bool = False
    ) -> Lease | None:
        lease = await super().acquire_run(run_id, owner, now, expires, force=force)
        return None if lease is None else replace(lease, taken_from=None)


class FiringAnyInstant(MemoryStore):
    """Removes a fired token's entry of that purpose even when it was set again since."""

    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        dropped = [(e.token_id, e.purpose) for e in commit.due_fired]
        return await super().commit(
            replace(commit, due_fired=(), due_dropped=[*commit.due_dropped, *dropped])
        )


class SharingState(MemoryStore):
    """Keeps each run's state decoded once read, and gives every reader that very dict."""

    def __init__(self) -> None:
        super().__init__()
        self.decoded: dict[str, dict[str, Any]] = {}

    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        events = await super().commit(commit)
        self.decoded.pop(commit.run_id, None)
        return events

    async def get_state(self, run_id: str) -> dict[str, Any]:
        if run_id not in self.decoded:
            self.decoded[run_id] = await super().get_state(run_id)
        return self.decoded[run_id]


class RequestsWithoutDue(MemoryStore):
    """Stores a signal request but no due entry: its run's holder is never woken for it."""

    async def request_signal(self, request: SignalRequest) -> SignalRequest:
        stored = await super().request_signal(request)
        await self.commit(
            Commit(request.run_id, due_dropped=[(request.id, "signal")], run_lifecycles=None)
        )
        return stored


class IgnoringFiredDeadlines(MemoryStore):
    """Applies a commit firing a deadline whatever requests came before it, and records later
    requests at the instant given."""

    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        return await super().commit(replace(commit, fires_deadline=None))


class ListingAnsweredRequests(MemoryStore):
    """Lists a run's requests as pending, answered or not, ended run or not."""

    def __init__(self) -> None:
        super().__init__()
        self.recorded: dict[str, list[str]] = {}

    async def request_signal(self, request: SignalRequest) -> SignalRequest:
        stored = await super().request_signal(request)
        self.recorded.setdefault(request.run_id, []).append(request.id)
        return stored

    async def pending_requests(self, run_id: str) -> Sequence[SignalRequest]:
        found = [await self.signal_request(i) for i in self.recorded.get(run_id, ())]
        return [r for r in found if r is not None]


class AnsweringAgain(MemoryStore):
    """Lets a later commit answer a request again (the last answer wins)."""

    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        answers = commit.requests_answered
        events = await super().commit(replace(commit, requests_answered=()))
        for answer in answers:
            request = await self.signal_request(answer.request_id)
            if request is None or request.run_id != commit.run_id:
                raise StoreConflict(f"signal request {answer.request_id!r} is unknown")
            self.answered[answer.request_id] = answer
        return events

    def __init__(self) -> None:
        super().__init__()
        self.answered: dict[str, RequestAnswer] = {}

    async def signal_request(self, request_id: str) -> SignalRequest | None:
        request = await super().signal_request(request_id)
        answer = self.answered.get(request_id)
        if request is not None and answer is not None:
            request.answer, request.answered_at = answer.answer, answer.at
        return request


class AppendingHeartbeats(MemoryStore):
    """Keeps every heartbeat a worker writes instead of its last one."""

    def __init__(self) -> None:
        super().__init__()
        self.beats: list[WorkerRecord] = []

    async def record_worker(self, worker: WorkerRecord) -> None:
        await super().record_worker(worker)
        self.beats.append(worker)

    async def workers(self) -> Sequence[WorkerRecord]:
        return sorted(self.beats, key=lambda w: w.worker_id)


class RememberingWorkers(MemoryStore):
    """Says a worker was forgotten, and keeps it."""

    async def forget_worker(self, worker_id: str) -> bool:
        return any(w.worker_id == worker_id for w in await self.workers())


class LatestFirstStored(MemoryStore):
    """Gives the document of an id stored first as its latest."""

    async def latest_flow(self, flow_id: str) -> StoredFlow:
        versions = await self.flow_versions(flow_id)
        if not versions:
            raise UnknownStoredFlow(flow_id)
        return await self.get_flow(flow_id, versions[0].digest)


class StoredAgainIsLatest(MemoryStore):
    """A document stored again moves to the end of its id's documents, as if it were new."""

    def __init__(self) -> None:
        super().__init__()
        self.again: StoredFlow | None = None

    async def put_flow(self, flow: StoredFlow, *, stored_at: datetime | None = None) -> bool:
        new = await super().put_flow(flow, stored_at=stored_at)
        if not new:
            self.again = flow
        return new

    async def latest_flow(self, flow_id: str) -> StoredFlow:
        if self.again is not None and self.again.flow_id == flow_id:
            return self.again
        return await super().latest_flow(flow_id)


class CountingRunsByFlowId(MemoryStore):
    """Counts every run of a flow id for each of its documents."""

    async def flow_versions(self, flow_id: str | None = None) -> Sequence[StoredFlowVersion]:
        runs = await self.list_runs()
        return [
            replace(v, runs=sum(r.flow_id == v.flow_id for r in runs))
            for v in await super().flow_versions(flow_id)
        ]


class FindingIdsAnywhere(MemoryStore):
    """Finds runs whose id holds the prefix anywhere, in any case (a LIKE '%x%' gone wrong)."""

    async def run_ids(self, prefix: str, limit: int = 10) -> Sequence[str]:
        found = sorted(r.id for r in await self.list_runs() if prefix.lower() in r.id.lower())
        return found[:limit]


class PruningLiveRuns(MemoryStore):
    """Prunes runs created before the instant, whether they have ended or not."""

    async def prune_runs(
        self, ended_before: datetime, *, limit: int = 500, after: str = "", dry_run: bool = False
    ) -> Sequence[str]:
        for run in await self.list_runs():
            if run.lifecycle not in ENDED_LIFECYCLES and run.created_at < ended_before:
                await self.commit(Commit(run.id, run=replace(run, lifecycle="completed")))
        return await super().prune_runs(ended_before, limit=limit, after=after, dry_run=dry_run)


class PruningChildrenOfLiveParents(MemoryStore):
    """Prunes a subflow child that has ended whatever its parent."""

    async def prune_runs(
        self, ended_before: datetime, *, limit: int = 500, after: str = "", dry_run: bool = False
    ) -> Sequence[str]:
        for run in await self.list_runs():
            if run.parent_run_id is not None:
                await self.commit(Commit(run.id, run=replace(run, parent_run_id=None)))
        return await super().prune_runs(ended_before, limit=limit, after=after, dry_run=dry_run)


class KeepingSignalAnswers(MemoryStore):
    """Prunes runs but keeps their signal answers."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: dict[str, SignalAnswer] = {}

    async def commit(self, commit: Commit) -> Sequence[EventRecord]:
        events = await super().commit(commit)
        self.answers.update((a.key, a) for a in commit.signal_answers)
        return events

    async def signal_answer(self, key: str) -> SignalAnswer | None:
        return self.answers.get(key)


class PruningAllAtOnce(MemoryStore):
    """Prunes every run it may in one go, whatever the batch's limit."""

    async def prune_runs(
        self, ended_before: datetime, *, limit: int = 500, after: str = "", dry_run: bool = False
    ) -> Sequence[str]:
        return await super().prune_runs(ended_before, limit=10**6, after=after, dry_run=dry_run)


@pytest.mark.parametrize(
    ("broken", "caught_by"),
    [
        (PartialCommits, "a_refused_commit_applies_nothing"),
        (IgnoringExpect, "compare_and_set_conflicts"),
        (IgnoringExpect, "a_refused_commit_applies_nothing"),
        (IgnoringTheRunsLifecycle, "run_lifecycle_conflicts"),
        (IgnoringLeases, "commits_are_fenced_by_their_lease"),
        (IgnoringLeases, "a_refused_commit_applies_nothing"),
        (ClaimingHeldRuns, "claims_never_hand_a_run_to_two_owners"),
        (ClaimingHeldRuns, "claims_take_runs_whose_wake_has_come"),
        (NamingNobody, "leases_say_whom_a_run_was_taken_from"),
        (FiringAnyInstant, "fired_entries_are_removed_only_as_they_were"),
        (SharingState, "records_are_copies"),
        (RequestsWithoutDue, "signal_requests_wake_the_runs_holder"),
        (AnsweringAgain, "signal_requests_are_answered_once"),
        (AppendingHeartbeats, "worker_heartbeats_are_kept_and_forgotten"),
        (AppendingHeartbeats, "worker_heartbeats_are_copies"),
        (RememberingWorkers, "worker_heartbeats_are_kept_and_forgotten"),
        (LatestFirstStored, "flows_are_listed_by_id_in_the_order_stored"),
        (StoredAgainIsLatest, "flows_are_listed_by_id_in_the_order_stored"),
        (CountingRunsByFlowId, "stored_flows_count_their_runs"),
        (FindingIdsAnywhere, "runs_are_found_by_the_start_of_their_id"),
        (PruningLiveRuns, "pruning_keeps_live_runs_and_the_children_of_live_parents"),
        (PruningChildrenOfLiveParents, "pruning_keeps_live_runs_and_the_children_of_live_parents"),
        (KeepingSignalAnswers, "pruning_deletes_ended_runs_and_everything_of_theirs"),
        (KeepingSignalAnswers, "pruning_goes_in_batches"),
        (PruningAllAtOnce, "pruning_goes_in_batches"),
        (IgnoringFiredDeadlines, "a_deadline_waits_for_the_requests_recorded_before_it"),
        (ListingAnsweredRequests, "pending_requests_are_listed_oldest_first"),
    ],
)
async def test_a_broken_store_fails_the_check_meant_to_catch_it(
    broken: Callable[[], Store], caught_by: str
) -> None:
    with pytest.raises(StoreCheckFailed) as failed:
        await check_store(factory(broken))
    failures = dict(failed.value.failures)
    assert caught_by in failures
    assert f"  {caught_by}: {failures[caught_by]}" in str(failed.value)
    check = dict(CHECKS)[caught_by]
    with pytest.raises(AssertionError):
        await run_store_check(factory(broken), check)


async def test_a_check_that_crashes_is_reported_with_the_error() -> None:
    class Crashing(MemoryStore):
        async def next_wake(self) -> datetime | None:
            raise RuntimeError("the index is gone")

    with pytest.raises(StoreCheckFailed) as failed:
        await check_store(factory(Crashing))
    failures = dict(failed.value.failures)
    assert failures["runs_wake_when_they_need_a_worker"] == "RuntimeError: the index is gone"
    assert isinstance(failed.value, AssertionError)
