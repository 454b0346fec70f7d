"""The SQL stores' reads, written once over a :class:`~flowtide.store.sqlcore.connector.Connector`:
each is one named statement (its own snapshot). A read of one run's rows joins them to the run,
so that the same statement tells an unknown run (no row) from a run that has none (one row of
NULLs): :func:`~flowtide.store.sqlcore.connector.run_rows`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from flowtide.store.base import (
    ENDED_LIFECYCLES,
    DueEntry,
    EventRecord,
    NodeAnchor,
    ParkRecord,
    ParkStatus,
    RunRecord,
    RunSnapshot,
    ScatterItemRecord,
    SignalAnswer,
    SignalRequest,
    StoreError,
    TokenRecord,
    TokenStatus,
    UnknownRunError,
    prefix_end,
)
from flowtide.store.jsonvalues import decode_json
from flowtide.store.sqlcore.connector import Connector, Row, joined, run_rows
from flowtide.store.sqlcore.params import Dialect
from flowtide.store.sqlcore.pruning import prunable
from flowtide.store.sqlcore.rows import (
    anchor_of_row,
    answer_of_row,
    due_of_row,
    event_of_row,
    lease_of_row,
    park_of_row,
    request_of_row,
    run_of_row,
    scatter_of_row,
    token_of_row,
)

__all__ = ["SQLReads", "snapshot_of_rows"]

_ENDED = sorted(ENDED_LIFECYCLES)


class SQLReads:
    """The reads of :class:`~flowtide.store.base.Store` (runs, state, tokens, history, due
    entries, anchors, parks, signal answers and requests, scatter items), as a SQL store makes
    them."""

    def __init__(self, connector: Connector) -> None:
        self._db = connector
        self._d = connector.dialect

    async def get_run(self, run_id: str) -> RunRecord:
        rows = await self._db.read("get_run", {"run_id": run_id})
        if not rows:
            raise UnknownRunError(run_id)
        return run_of_row(rows[0], self._d)

    async def list_runs(self, lifecycle: str | None) -> list[RunRecord]:
        if lifecycle is None:
            rows = await self._db.read("list_runs", {})
        else:
            rows = await self._db.read("list_runs_by_lifecycle", {"lifecycle": lifecycle})
        return [run_of_row(row, self._d) for row in rows]

    async def run_ids(self, prefix: str, limit: int) -> list[str]:
        end = prefix_end(prefix)
        params = {"prefix": prefix, "end": end, "limit": max(limit, 0)}
        name = "run_ids_between" if end is not None else "run_ids_from"
        return [str(row[0]) for row in await self._db.read(name, params)]

    async def prunable_runs(self, ended_before: datetime, limit: int, after: str) -> list[str]:
        """Up to ``limit`` ids of runs a prune would delete now, after ``after``."""
        params = prunable(ended_before, limit, after, self._d)
        return [str(row[0]) for row in await self._db.read("prunable_runs", params)]

    async def get_state(self, run_id: str) -> dict[str, Any]:
        rows = await run_rows(self._db, "get_state", {"run_id": run_id})
        return {key: decode_json(value) for key, value in rows}

    async def tokens(
        self, run_id: str, statuses: Sequence[TokenStatus] | None
    ) -> list[TokenRecord]:
        if statuses is None:
            rows = await run_rows(self._db, "tokens", {"run_id": run_id})
        else:
            wanted = self._d.array([str(status) for status in statuses])
            params = {"run_id": run_id, "statuses": wanted}
            rows = await run_rows(self._db, "tokens_by_status", params)
        return [token_of_row(run_id, row, self._d) for row in rows]

    async def token(self, run_id: str, token_id: str) -> TokenRecord | None:
        rows = await run_rows(self._db, "token", {"run_id": run_id, "token_id": token_id})
        return token_of_row(run_id, rows[0], self._d) if rows else None

    async def history(self, run_id: str, after: int) -> list[EventRecord]:
        rows = await run_rows(self._db, "history", {"run_id": run_id, "after": after})
        return [event_of_row(run_id, row, self._d) for row in rows]

    async def due_of(self, run_id: str) -> list[DueEntry]:
        rows = await run_rows(self._db, "due_of", {"run_id": run_id})
        return [due_of_row(run_id, row, self._d) for row in rows]

    async def node_anchor(self, run_id: str, placement: str, item: str | None) -> datetime | None:
        params = {"run_id": run_id, "placement": placement, "item": self._d.anchor_item(item)}
        rows = await self._db.read("node_anchor", params)
        return self._d.read_instant(rows[0][0]) if rows else None

    async def node_anchors(self, run_id: str) -> list[NodeAnchor]:
        rows = await self._db.read("node_anchors", {"run_id": run_id})
        return [anchor_of_row(run_id, row, self._d) for row in rows]

    async def parks(
        self, run_id: str | None, key: str | None, placement: str | None, open_only: bool
    ) -> list[ParkRecord]:
        """The parks of a key (in one run, if ``run_id``), else of a run."""
        if run_id is None and key is None:
            raise StoreError("parks() needs a run_id or a key")
        params = {
            "run_id": run_id,
            "key": key,
            "placement": placement,
            "open_only": open_only,
            "parked": str(ParkStatus.PARKED),
        }
        name = "parks_by_key" if key is not None else "parks_by_run"
        return [park_of_row(row, self._d) for row in await self._db.read(name, params)]

    async def signal_answer(self, key: str) -> SignalAnswer | None:
        rows = await self._db.read("signal_answer", {"key": key})
        return answer_of_row(rows[0]) if rows else None

    async def signal_request(self, request_id: str) -> SignalRequest | None:
        rows = await self._db.read("signal_request", {"id": request_id})
        return request_of_row(rows[0], self._d) if rows else None

    async def pending_requests(self, run_id: str) -> list[SignalRequest]:
        params = {"run_id": run_id, "ended": self._d.array(_ENDED)}
        rows = await self._db.read("pending_requests", params)
        return [request_of_row(row, self._d) for row in rows]

    async def scatter_items(self, run_id: str, progress: str) -> list[ScatterItemRecord]:
        params = {"run_id": run_id, "progress": progress}
        return [scatter_of_row(row) for row in await self._db.read("scatter_items", params)]


def snapshot_of_rows(run_id: str, together: Sequence[Sequence[Row]], d: Dialect) -> RunSnapshot:
    """The snapshot of run ``run_id`` from the rows of ``load_run_record``, ``get_state``,
    ``tokens``, ``history_after_checkpoint``, the open ``parks_by_run``, ``node_anchors`` and
    ``due_of``, in that order (raises :class:`UnknownRunError` if the first has none)."""
    run, state, tokens, history, open_parks, anchors, due = together
    if not run:
        raise UnknownRunError(run_id)
    record, held = run[0][:15], run[0][15:]
    return RunSnapshot(
        run_of_row(record, d),
        {key: decode_json(value) for key, value in joined(state)},
        [token_of_row(run_id, row, d) for row in joined(tokens)],
        [event_of_row(run_id, row, d) for row in joined(history)],
        [park_of_row(row, d) for row in open_parks],
        [anchor_of_row(run_id, row, d) for row in anchors],
        [due_of_row(run_id, row, d) for row in joined(due)],
        lease_of_row((run_id, *held), d),
        int(held[1]),
    )
