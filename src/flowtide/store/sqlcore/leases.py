"""Leases and wake instants, written once over a
:class:`~flowtide.store.sqlcore.connector.Connector`: each is one statement, whose ``UPDATE``
re-checks who may take the run and brings its wake instant up to date, so that claims from
many connections (in many processes) never hand one run to two owners. How each backend makes
that hold is in its ``queries.sql``: SQLite's write lock, taken from ``BEGIN IMMEDIATE`` on;
PostgreSQL's row locks (``FOR UPDATE SKIP LOCKED``)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from flowtide.store.base import ENDED_LIFECYCLES, RUNNABLE_LIFECYCLES, Lease, UnknownRunError
from flowtide.store.sqlcore.connector import Connector, Row
from flowtide.store.sqlcore.params import Params
from flowtide.store.sqlcore.rows import lease_of_row

__all__ = ["SQLLeases"]

_ENDED = sorted(ENDED_LIFECYCLES)
_RUNNABLE = sorted(RUNNABLE_LIFECYCLES)


class SQLLeases:
    """The leases of :class:`~flowtide.store.base.Store` (claim, acquire, renew, release, read)
    and the next wake instant, as a SQL store makes them. ``own_clock`` (each call's): the
    database's clock is "now", and a lease runs for the term asked (``expires - now``) from it
    (:attr:`~flowtide.store.base.Store.own_clock`)."""

    def __init__(self, connector: Connector) -> None:
        self._db = connector
        self._d = connector.dialect

    def _clock(self, now: datetime | None, expires: datetime, own_clock: bool) -> Params:
        """How a lease's statement judges "now" and sets the expiry: on the database's clock
        for the term asked (``now`` None), or at the instants given."""
        term = None if now is None else self._d.duration(expires - now)
        when = None if own_clock or now is None else self._d.instant(now)
        return {
            "now": when,
            "term": term,
            "expires": self._d.instant(expires),
            "ended": self._d.array(_ENDED),
            "runnable": self._d.array(_RUNNABLE),
        }

    async def next_wake(self) -> datetime | None:
        rows = await self._db.read("next_wake", {})
        return self._d.maybe_read_instant(rows[0][0]) if rows else None

    async def claim_runs(
        self, owner: str, now: datetime, expires: datetime, limit: int, *, own_clock: bool
    ) -> list[Lease]:
        """The runs taken, by run id."""
        if limit <= 0:
            return []  # (SQLite would read a negative LIMIT as none at all)
        params = {"owner": owner, "limit": limit} | self._clock(now, expires, own_clock)
        rows = await self._db.write("claim_runs", params, tell=True)
        return sorted(self._leases(rows), key=_run_id)

    async def acquire_run(
        self,
        run_id: str,
        owner: str,
        now: datetime,
        expires: datetime,
        *,
        force: bool,
        own_clock: bool,
    ) -> Lease | None:
        params = {"run_id": run_id, "owner": owner, "force": force}
        rows = await self._db.write("acquire_run", params | self._clock(now, expires, own_clock))
        if rows:
            return self._leases(rows)[0]
        if not (await self._db.read("run_exists", {"run_id": run_id}))[0][0]:
            raise UnknownRunError(run_id)
        return None  # (it has ended, or another owner holds it alive)

    async def renew_leases(
        self,
        owner: str,
        expires: datetime,
        now: datetime | None,
        run_ids: Collection[str] | None,
        *,
        own_clock: bool,
    ) -> list[Lease]:
        only = None if run_ids is None else self._d.array(sorted(run_ids))
        params = {"owner": owner, "run_ids": only} | self._clock(now, expires, own_clock)
        rows = await self._db.write("renew_leases", params)
        return sorted(self._leases(rows), key=_run_id)

    async def release_runs(self, owner: str) -> list[str]:
        params = {"owner": owner, "ended": self._d.array(_ENDED)}
        params["runnable"] = self._d.array(_RUNNABLE)
        rows = await self._db.write("release_runs", params, tell=True)
        return sorted(str(row[0]) for row in rows)

    async def lease_of(self, run_id: str) -> Lease | None:
        rows = await self._db.read("lease_of", {"run_id": run_id})
        if not rows:
            raise UnknownRunError(run_id)
        return lease_of_row(rows[0], self._d)

    def _leases(self, rows: Sequence[Row]) -> list[Lease]:
        taken = [lease_of_row(row, self._d) for row in rows]
        return [lease for lease in taken if lease is not None]


def _run_id(lease: Lease) -> str:
    return lease.run_id
