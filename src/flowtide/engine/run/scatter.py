"""Scatter/gather: run a body (a node or a flow) per item, then gather the results.

* The items come from ``source``, the state path of a collection (a list in the run's JSON
  state), or from ``source_fn``, a source function for items that are not in the state: a
  generator, an async generator, a query's cursor. It is named by the id ``@flowtide.source``
  registers it under and bound before the run's code runs (as nodes are: one that is not
  registered raises :class:`~flowtide.errors.NodeResolutionError`; nothing is imported because a
  flow names it). When the scatter starts it is called as
  ``fn(ctx)`` with a :class:`~flowtide.engine.context.SourceContext`: ``ctx.state`` is a read-only
  view of a copy of the run state, ``ctx.clock`` the engine's clock, ``ctx.run_id``,
  ``ctx.placement``, ``ctx.visit``. It returns an iterable or an async iterable of JSON items (or
  an awaitable of one); each item is checked as JSON when it is pulled. It is called on the event
  loop and a sync iterable is pulled there too: do I/O in an async one. Should it raise (called or
  pulled), the run fails with that error at the scatter. A generator the scatter stops pulling
  early (``fail_fast``, a cancelled scatter) is closed, so its ``finally`` runs.
* Each item runs on its own copy of the run state as the scatter started (without the
  ``source`` collection's top-level key; only the ``input`` paths when ``input`` maps any), with
  the item at ``item_key``; ``ctx.item`` is the item too. The copy is made as the item's node
  reads it (:class:`~flowtide.engine.state.nodestate.NodeState`): a value no item reads is copied
  only into the results that gather it (:func:`item_result`).
* At most ``concurrency`` items run at once, and the source is pulled only when a slot is free,
  so a source function's generator or async iterator is never drained ahead. ``throttle`` spaces
  item starts (items per second, on the engine's clock). ``batch`` groups items by key and runs
  the body once per batch (``ctx.item`` is the list), released when ``size`` items are in it,
  when no item joined it for ``idle`` (it starts then, even while the source is still waiting
  for its next item), or when the source ends.
* An item succeeds when its body returns a declared output (a flow body: completes); it fails
  when the body raises, times out (its window is the body's ``timeout``) or the child run does
  not complete. ``on_failure: fail_fast`` stops starting items after the first failure.
* Every finished item is recorded in the store (index, output, result, completion order) under
  the scatter's placement and visit (:func:`progress_key`), so a scatter resumed after a crash
  re-runs only its own items that had not finished. A resumed scatter pulls its source again
  from the start and skips the finished items by index, their position in the source: a source
  function must give the same items in the same order when it is called again for the same run
  (read a snapshot, or order a query), else other items are skipped than the ones that
  finished. A batch is recorded under the position of its first item, and when it is released
  (before its body starts) the positions of its items are recorded too (:class:`BatchMarks`):
  a resumed scatter skips the items of the batches that finished, gathers the items of a batch
  that had started again into that same batch (whenever they come: its body runs on the same
  items, a flow body finds the same child run), and batches only the others anew. So every item
  is in one finished batch, whatever the pace of the items was before and after the crash.
* Gather (``gather.strategy``), over succeeded items: ``append`` a list in source order;
  ``collect`` a list in completion order; ``partition`` a mapping output -> list (failed items
  under ``error``/``timeout``, as ``{"item", "error"}``); ``map`` a mapping ``key`` -> result;
  ``reduce`` folds results in source order with ``function(accumulator, result)`` from
  ``gather.initial``. A result is the item's final state, or its ``gather.field`` path.
* Routes: ``empty`` (no items), ``all-success``, ``partial``, ``all-error``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
from collections.abc import AsyncIterator, Iterator, Mapping
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from flowtide.engine.context import SourceContext
from flowtide.engine.errors import StoreUnavailableError, unavailable
from flowtide.engine.event_types import NodeFinished, ScatterItemFinished
from flowtide.engine.run.attempts import COMPUTE, AttemptCall
from flowtide.engine.run.children import child_run_id
from flowtide.engine.run.executor.ports import StepPort
from flowtide.engine.state.nodestate import NodeState, copy_value
from flowtide.engine.state.paths import get_path, set_path
from flowtide.engine.state.reducers import copy_state
from flowtide.engine.timing.deadlines import needs_node_anchor, resolve_window
from flowtide.engine.timing.scope import CancelScope
from flowtide.model.placements import FailurePolicy, GatherStrategy, KeyedBatches, Scatter
from flowtide.store.base import (
    Commit,
    EventRecord,
    ScatterItemRecord,
    StoreConflict,
    StoreDown,
    TokenRecord,
)
from flowtide.store.jsonvalues import check_json

if TYPE_CHECKING:
    from flowtide.clock import Clock, TimerHandle
    from flowtide.engine.flows.code import FlowCode
    from flowtide.engine.run.attempts import Running
    from flowtide.engine.run.executor.arming import Arming
    from flowtide.engine.run.executor.attempts import TokenAttempts
    from flowtide.engine.run.executor.child_runs import ChildRuns
    from flowtide.engine.worker._host import RunHost


class ScatterHost(StepPort, Protocol):
    """What a scatter needs of the executor besides a step: the engine (its store), the
    node code, arming (items' anchors), the running scopes and attempts, the run's tasks,
    and dropping its view."""

    @property
    def host(self) -> RunHost: ...

    @property
    def code(self) -> FlowCode: ...

    @property
    def arming(self) -> Arming: ...

    @property
    def running(self) -> Running: ...

    @property
    def token_attempts(self) -> TokenAttempts: ...

    def track(self, task: asyncio.Task[Any]) -> None: ...

    def lose_view(self, exc: StoreConflict | StoreUnavailableError) -> None: ...


_END = object()
_MISSING = object()

_Ended = tuple[str, Mapping[str, Any] | None, str | None]
"""How an item's body ended: its output, its final state (None when it failed), its error."""


class _Source:
    """One pull at a time over a sync or async iterable; ``origin`` names a source function
    whose items are checked as JSON as they are pulled (a state collection's already are)."""

    def __init__(self, source: Any, origin: str | None = None) -> None:
        self._sync: Iterator[Any] | None = None
        self._async: AsyncIterator[Any] | None = None
        self._origin = origin
        self._count = 0
        if hasattr(source, "__aiter__"):
            self._async = source.__aiter__()
        elif origin is not None and not hasattr(source, "__iter__"):
            raise TypeError(
                f"source function {origin!r} gave {type(source).__name__}, "
                "not an iterable or an async iterable of items"
            )
        else:
            self._sync = iter(source)

    async def pull(self) -> Any:
        if self._async is not None:
            try:
                item = await self._async.__anext__()
            except StopAsyncIteration:
                return _END
        else:
            assert self._sync is not None
            item = next(self._sync, _END)
            if item is _END:
                return _END
        if self._origin is not None:
            check_json(item, f"item {self._count} of source function {self._origin!r}")
        self._count += 1
        return item

    async def close(self) -> None:
        """Close a generator the scatter stopped pulling early (its ``finally`` runs now)."""
        if self._async is not None:
            aclose = getattr(self._async, "aclose", None)
            if aclose is not None:
                await aclose()
        elif self._sync is not None:
            close = getattr(self._sync, "close", None)
            if close is not None:
                close()


def progress_key(placement: str, visit: int) -> str:
    """The key a scatter's finished items are recorded under: one set per visit of the
    placement (a token moving from one scatter to the next keeps its id, so the token would not
    tell them apart; a scatter re-entered in a loop runs its items again)."""
    return f"{placement}#{visit}"


RELEASED = "released"
"""The status of a batch's record from its release until it finishes (its result: its items'
positions)."""
BATCHED = "batched"
"""The status of the record of an item that is not the first of its batch (its result: the
position of the batch's first item)."""


class BatchMarks:
    """What a resumed scatter knows of its batches: the positions of the items of the batches
    that finished (skipped), and of those released and not finished (each gathered into its
    batch again, by the position of its first item)."""

    def __init__(self) -> None:
        self.members: dict[int, int] = {}  # position -> the position of its batch's first item
        self.released: dict[int, list[int]] = {}  # first position -> its batch's positions

    def read(self, record: ScatterItemRecord) -> bool:
        """Take in ``record`` if it marks a batch or an item of one (True), else False (a
        finished item or batch)."""
        if record.status == BATCHED:
            self.members[record.index] = int(record.result["batch"])
            return True
        if record.status == RELEASED:
            self.released[record.index] = [int(i) for i in record.result["items"]]
            return True
        return False

    def batch_of(self, position: int, finished: Mapping[int, Any]) -> int | None:
        """The first position of the batch the item at ``position`` was released in (None: in
        none); ``finished``: the records of the finished batches, by first position."""
        if position in finished or position in self.released:
            return position
        return self.members.get(position)

    @staticmethod
    def records(
        run_id: str, progress: str, positions: list[int], key: Any
    ) -> list[ScatterItemRecord]:
        """The records that mark a batch released with the items at ``positions``."""
        first = positions[0]
        marks = [
            ScatterItemRecord(run_id, progress, first, RELEASED, None, {"items": positions}, key)
        ]
        marks += [
            ScatterItemRecord(run_id, progress, i, BATCHED, None, {"batch": first}, None)
            for i in positions[1:]
        ]
        return marks


class ScatterRun:
    def __init__(
        self, ex: ScatterHost, children: ChildRuns, token: TokenRecord, p: Scatter
    ) -> None:
        self.ex = ex
        self.children = children
        self.token = token
        self.p = p
        self.records: dict[int, ScatterItemRecord] = {}
        self.pulled = 0
        self.started = 0
        self._order = itertools.count(1)
        self._stop = False
        self._tasks: set[asyncio.Task[None]] = set()
        self.scope: CancelScope = ex.root.child(p.id)
        self.progress_id = progress_key(p.id, token.visit)
        self.marks = BatchMarks()
        # Finished items not yet stored, and the lock of the commit that stores them: items that
        # finish while one commit is on its way are stored together by the next.
        self._unsaved: list[tuple[ScatterItemRecord, EventRecord]] = []
        self._saving = asyncio.Lock()

    def finished(self, output: str, to: list[str] | None) -> NodeFinished:
        """The scatter's ``node_finished`` payload: its output, where it went, its counts."""
        ok = sum(1 for r in self.records.values() if r.status == "done")
        return NodeFinished(
            output=output,
            to=to,
            items=len(self.records),
            succeeded=ok,
            failed=len(self.records) - ok,
            started=self.started,
        )

    async def run(self, base: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
        ex, p = self.ex, self.p
        top = 0
        for r in await ex.host.store.scatter_items(ex.view.run.id, self.progress_id):
            if not self.marks.read(r):
                self.records[r.index] = r
                top = max(top, r.order)
        self._order = itertools.count(top + 1)
        ex.running[self.token.id] = (p.id, self.scope)
        try:
            source = await self._open(base)
            if source is not None:
                if p.batch is not None:
                    await self._pump_batches(base, source)
                else:
                    await self._pump(base, source)
                await source.close()
            while self._tasks:
                # (A finished item leaves the set by its task's done callback, which may not
                # have run yet: take what was waited for out here too, or this would spin.)
                items = list(self._tasks)
                await asyncio.gather(*items, return_exceptions=True)
                self._tasks.difference_update(items)
        finally:
            ex.running.pop(self.token.id, None)
            self.scope.close()
        if self.scope.cancellation is not None:
            return None, {}
        return self._route(), self._gather(base)

    # -- pulling ------------

    async def _open(self, base: Mapping[str, Any]) -> _Source | None:
        """The items: the collection at ``source`` (None when the state has none), or what the
        source function gives, called with a read-only copy of ``base``."""
        p = self.p
        if p.source is not None:
            found = get_path(base, p.source)
            return _Source(found) if found is not None else None
        assert p.source_fn is not None
        fn = self.ex.code.source_fns[p.id]
        view = MappingProxyType(copy_state(base))
        made = fn(SourceContext(view, self.ex.view.run.id, p.id, self.token.visit, self.ex.clock))
        if inspect.isawaitable(made):
            made = await made
        return _Source(made, p.source_fn)

    async def _pump(self, base: Mapping[str, Any], source: _Source) -> None:
        p = self.p
        slots = asyncio.Semaphore(p.concurrency)
        interval = timedelta(seconds=1 / p.throttle) if p.throttle else None
        next_start: datetime | None = None
        for index in itertools.count():
            await slots.acquire()
            if self._stop or self.scope.cancellation is not None:
                slots.release()
                return
            item = await source.pull()
            if item is _END:
                slots.release()
                return
            self.pulled += 1
            if index in self.records:
                slots.release()
                continue
            if interval is not None:
                now = self.ex.clock.now()
                if next_start is not None and next_start > now:
                    await self.ex.clock.sleep_until(next_start)
                next_start = max(next_start or now, now) + interval
                if self._stop or self.scope.cancellation is not None:
                    slots.release()
                    return
            self._launch(base, index, item, None, slots)

    async def _pump_batches(self, base: Mapping[str, Any], source: _Source) -> None:
        """Pull items into keyed batches. A released batch is launched by a task of its own, so
        that one released by its idle time starts at that instant even while the source is still
        waiting for its next item; the source is pulled again only once every released batch has
        a slot."""
        assert self.p.batch is not None
        slots = asyncio.Semaphore(self.p.concurrency)
        batches = _Batcher(self.p.batch, self.ex.clock, self.marks, self.records)
        launcher = asyncio.get_running_loop().create_task(
            self._launch_batches(base, batches, slots)
        )
        try:
            while True:
                await batches.released.join()
                if self._stop or self.scope.cancellation is not None:
                    break
                item = await source.pull()
                if item is _END:
                    batches.release_all()
                    break
                batches.add(self.pulled, item)
                self.pulled += 1
            batches.released.put_nowait(_END)
            await launcher
        finally:
            batches.close()
            launcher.cancel()

    async def _launch_batches(
        self, base: Mapping[str, Any], batches: _Batcher, slots: asyncio.Semaphore
    ) -> None:
        """Launch each released batch once it has a slot, recorded as released first (the
        positions of its items: see :class:`BatchMarks`)."""
        while (batch := await batches.released.get()) is not _END:
            key, positions, items = batch
            try:
                await slots.acquire()
                first = positions[0]
                if (
                    first in self.records
                    or self._stop
                    or self.scope.cancellation is not None
                    or not await self._mark(positions, key)
                ):
                    slots.release()
                else:
                    self._launch(base, first, items, key, slots)
            except (StoreConflict, StoreUnavailableError) as exc:
                slots.release()
                self._stop = True
                self.ex.lose_view(exc)
            finally:
                batches.released.task_done()

    async def _mark(self, positions: list[int], key: Any) -> bool:
        """Record a batch as released with the items at ``positions`` (once); False if the run
        has ended meanwhile."""
        if positions[0] in self.marks.released:
            return True  # (released before a crash: marked already)
        ex = self.ex
        marks = BatchMarks.records(ex.view.run.id, self.progress_id, positions, key)
        if not await ex.commit(Commit(ex.view.run.id, scatter=marks), unless_ended=True):
            return False
        self.marks.released[positions[0]] = positions
        return True

    def _launch(
        self, base: Mapping[str, Any], index: int, item: Any, key: Any, slots: asyncio.Semaphore
    ) -> None:
        self.started += 1
        task = asyncio.get_running_loop().create_task(self._item(base, index, item, key))
        self._tasks.add(task)
        self.ex.track(task)

        def done(t: asyncio.Task[None]) -> None:
            self._tasks.discard(t)
            slots.release()

        task.add_done_callback(done)

    # -- one item ------------

    async def _item(self, base: Mapping[str, Any], index: int, item: Any, key: Any) -> None:
        """Run the body on one item (or batch) and record how it ended; nothing is recorded
        when the scatter was cancelled or the run ended meanwhile."""
        state = item_state(base, self.p, item)
        run_key = f"{self.token.id}/{index}"
        try:
            if self.p.body.node is not None:
                ended = await self._run_node(state, index, item, run_key)
            else:
                # (A child run changes the state it is given in place: ``state`` stays the
                # start.)
                ended = await self._run_flow(dict(state), item, index, run_key)
            if ended is None or self.scope.cancellation is not None or self.ex.view.end is not None:
                return
            output, final, error = ended
            await self._record(index, item, key, output, final, error, state)
        except (StoreConflict, StoreUnavailableError, StoreDown) as exc:
            # The item's end is not stored (nor, for a child run, known): the scatter stops
            # here, and the run goes on where it is resumed, from what the store has of it.
            self._stop = True
            lost = exc if isinstance(exc, StoreConflict) else unavailable(self.ex.view.run.id, exc)
            assert lost is not None
            self.ex.lose_view(lost)

    async def _run_node(
        self, state: dict[str, Any], index: int, item: Any, run_key: str
    ) -> _Ended | None:
        """A node body: one attempt, in its window (a node anchor is kept per item). None when
        it was cancelled."""
        ex, p = self.ex, self.p
        impl = ex.code.impls[p.id]
        settings = ex.plan.settings[p.id]
        deadline: datetime | None = COMPUTE
        if needs_node_anchor(settings):
            # A node anchor inside a scatter is kept per item (by index).
            anchor_at = await ex.arming.item_anchor(p.id, str(index))
            deadline = resolve_window(
                settings,
                now=ex.clock.now(),
                run_created_at=ex.view.run.created_at,
                node_anchor=anchor_at,
            ).deadline
        call = AttemptCall(
            impl=impl,
            settings=settings,
            placement=p.id,
            state=state,
            parent=self.scope,
            key=run_key,
            attempt=1,
            visit=self.token.visit,
            # (An item of the run's own collection is copied: what the node changes in
            # ``ctx.item`` stays its own, as what it changes in the state it reads does.)
            item=copy_value(item) if p.source is not None else item,
            deadline=deadline,
        )
        attempt = await ex.token_attempts.invoke(call)
        if attempt.kind == "cancelled":
            return None
        if attempt.kind == "ok":
            assert attempt.state is not None and attempt.output is not None
            final = attempt.state
            # (As they stand: what the node never read is not copied here, see item_result.)
            values = final.as_stored() if isinstance(final, NodeState) else final
            return attempt.output, {**values, **attempt.update}, None
        if attempt.kind == "timeout":
            return "timeout", None, f"timed out after {settings.timeout}"
        assert attempt.error is not None
        info = ex.error_info(attempt.error)  # (redacted and cut to size)
        return "error", None, f"{info.type}: {info.message}"

    async def _run_flow(
        self, state: dict[str, Any], item: Any, index: int, run_key: str
    ) -> _Ended | None:
        """A flow body: a child run, which succeeds only when it completes. None when it was
        cancelled."""
        ex, p = self.ex, self.p
        assert p.body.flow is not None
        attempt, result = await self.children.run_child(
            p.id,
            p.body.flow,
            state,
            ex.plan.settings[p.id],
            key=run_key,
            child_id=child_run_id(
                ex.view.run.id, self.token.id, p.id, self.token.visit, self.token.attempt, index
            ),
            item=item,
            token=None,
            parent=self.scope,
        )
        if attempt.kind == "cancelled":
            return None
        if attempt.kind == "ok" and result is not None and result.lifecycle == "completed":
            return "success", result.state, None
        if attempt.kind == "timeout":
            return "timeout", None, "timed out"
        if result is not None and result.errors:
            return "error", None, f"{result.errors[0].type}: {result.errors[0].message}"
        if attempt.error is not None:
            info = ex.error_info(attempt.error)
            return "error", None, f"{info.type}: {info.message}"
        return "error", None, str(result.lifecycle if result else "failed")

    async def _record(
        self,
        index: int,
        item: Any,
        key: Any,
        output: str,
        final: Mapping[str, Any] | None,
        error: str | None,
        start: Mapping[str, Any],
    ) -> None:
        """Store a finished item (its result, or the item and its error) with its event, so a
        resumed scatter does not run it again; a failure under ``fail_fast`` stops new starts."""
        ex, p = self.ex, self.p
        if final is not None:
            status = "done"
            result: Any = item_result(final, start, p.gather.field)
        else:
            status = "failed"
            result = {"item": item, "error": error}
            if p.on_failure is FailurePolicy.FAIL_FAST:
                self._stop = True
        record = ScatterItemRecord(
            ex.view.run.id,
            self.progress_id,
            index,
            status,
            output,
            result,
            _item_key(p, item, key),
            next(self._order),
        )
        self.records[index] = record
        ev = ex.event(
            self.token,
            ScatterItemFinished(index=index, output=output, status=record.status),
            placement=p.id,
        )
        self._unsaved.append((record, ev))
        await self._save()

    async def _save(self) -> None:
        """Store the finished items not yet stored, in one commit (returns once this task's
        item is stored: by this commit, or by the one before it, which took it along)."""
        async with self._saving:
            batch, self._unsaved = self._unsaved, []
            if not batch:
                return  # (the commit before this one stored it)
            c = Commit(
                self.ex.view.run.id, scatter=[r for r, _ in batch], events=[e for _, e in batch]
            )
            try:
                await self.ex.commit(c, unless_ended=True)
            except Exception:
                # Not stored: the next item's commit tries them again. (A cancelled one is the
                # scatter's end: its items are all cancelled with it.)
                self._unsaved[:0] = batch
                raise

    # -- gathering ------------

    def _route(self) -> str:
        if not self.records:
            return "empty"
        ok = sum(1 for r in self.records.values() if r.status == "done")
        if ok == len(self.records):
            return "all-success"
        return "all-error" if ok == 0 else "partial"

    def _gather(self, base: Mapping[str, Any]) -> dict[str, Any]:
        g = self.p.gather
        by_index = [self.records[i] for i in sorted(self.records)]
        good = [r for r in by_index if r.status == "done"]
        value: Any
        if g.strategy is GatherStrategy.APPEND:
            value = [r.result for r in good]
        elif g.strategy is GatherStrategy.COLLECT:
            value = [r.result for r in sorted(good, key=lambda r: r.order)]
        elif g.strategy is GatherStrategy.PARTITION:
            value = {}
            for r in by_index:
                value.setdefault(r.output or "error", []).append(r.result)
        elif g.strategy is GatherStrategy.MAP:
            value = {r.key: r.result for r in good}
        else:
            assert g.reducer is not None
            fn = self.ex.code.reducers[g.reducer]
            value = copy_state({"v": g.initial})["v"]
            for r in good:
                value = fn(value, r.result)
        head, _, rest = g.target.partition(".")
        if not rest:
            return {head: value}
        current = base.get(head)
        holder = copy_state(current) if isinstance(current, dict) else {}
        set_path(holder, rest, value)
        return {head: holder}


class _Batcher:
    """Pulled items into keyed batches, each item by its position in the source. An item of a
    batch that finished before a crash is skipped; one of a batch that was released and had not
    finished goes back into that batch, released once all its items are in (see
    :class:`BatchMarks`); any other is batched by its key, released by size or idle time."""

    def __init__(
        self, spec: KeyedBatches, clock: Clock, marks: BatchMarks, finished: Mapping[int, Any]
    ) -> None:
        self.spec = spec
        self.clock = clock
        self.marks = marks
        self.finished = finished
        self.buffers: dict[Any, list[tuple[int, Any]]] = {}
        self.timers: dict[Any, TimerHandle] = {}
        self.pinned: dict[int, list[tuple[int, Any]]] = {}
        self.released: asyncio.Queue[Any] = asyncio.Queue()

    def add(self, position: int, item: Any) -> None:
        first = self.marks.batch_of(position, self.finished)
        if first in self.finished:
            return  # its batch finished before
        if first is not None and first in self.marks.released:
            got = self.pinned.setdefault(first, [])
            got.append((position, item))
            if len(got) == len(self.marks.released[first]):
                self._put(self.pinned.pop(first))
            return
        key = self.key_of(item)
        buffer = self.buffers.setdefault(key, [])
        buffer.append((position, item))
        if len(buffer) >= self.spec.size:
            self.release(key)
        elif self.spec.idle is not None:
            old = self.timers.pop(key, None)
            if old is not None:
                old.cancel()
            when = self.clock.now() + self.spec.idle
            self.timers[key] = self.clock.call_at(when, functools.partial(self.release, key))

    def key_of(self, item: Any) -> Any:
        return get_path(item, self.spec.key) if isinstance(item, Mapping) else item

    def release(self, key: Any) -> None:
        timer = self.timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        entries = self.buffers.pop(key, None)
        if entries:
            self._put(entries)

    def release_all(self) -> None:
        """The source has ended: every batch goes (one released before a crash with the items
        that came again, should the source give fewer now)."""
        for key in list(self.buffers):
            self.release(key)
        for first in list(self.pinned):
            self._put(self.pinned.pop(first))

    def _put(self, entries: list[tuple[int, Any]]) -> None:
        entries.sort(key=lambda e: e[0])
        items = [item for _, item in entries]
        self.released.put_nowait((self.key_of(items[0]), [i for i, _ in entries], items))

    def close(self) -> None:
        for timer in self.timers.values():
            timer.cancel()


def item_state(base: Mapping[str, Any], p: Scatter, item: Any) -> dict[str, Any]:
    """An item's state as the scatter started, its values the run state's, shared: the run never
    changes a value in place, a body's node copies what it reads (see
    :class:`~flowtide.engine.state.nodestate.NodeState`), a child run replaces what it changes, and
    :func:`item_result` copies what an item's result still shares."""
    if p.input:
        state: dict[str, Any] = {}
        for child_path, parent_path in p.input.items():
            # (set_path copies the mappings on its way: the run's stay as they are)
            set_path(state, child_path, get_path(base, parent_path))
    else:
        # Without the collection's top-level key (a source function's items are not in state).
        dropped = p.source.partition(".")[0] if p.source is not None else None
        state = {k: v for k, v in base.items() if k != dropped}
    state[p.item_key] = item
    return state


def item_result(final: Mapping[str, Any], start: Mapping[str, Any], field: str | None) -> Any:
    """A finished item's result (its final state, or the value at ``field`` in it), its own: a
    top-level value still the one it started with (``start``: its state as the scatter gave it,
    shared with the run's) is copied, the others are the body's already. So no two results share
    a container, as when read back from the store, and only what was left untouched is copied."""
    if field:
        head = field.partition(".")[0]
        value = get_path(final, field)
        shared = final.get(head, _MISSING) is start.get(head, _MISSING)
        return copy_value(value) if shared else value
    return {k: copy_value(v) if v is start.get(k, _MISSING) else v for k, v in final.items()}


def _item_key(p: Scatter, item: Any, batch_key: Any) -> Any:
    if p.batch is not None:
        return batch_key
    if p.gather.key is None:
        return None
    if isinstance(item, Mapping):
        return get_path(item, p.gather.key)
    return item
