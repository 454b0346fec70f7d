"""A PostgreSQL connection lost while ``COMMIT`` is under way: whether the transaction was
applied is unknown, and the store says so (:class:`~flowtide.store.CommitOutcomeUnknown`), so
that the commit is not sent again (it could be applied twice). Lost before ``COMMIT``, nothing
was applied: the store is only down (:class:`~flowtide.store.StoreDown`), and a commit may be
sent again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from flowtide.store import Commit, CommitOutcomeUnknown, RunRecord, StoreDown
from tests.postgres_schemas import Schemas

# A constraint trigger deferred to COMMIT that ends its own connection there, for one run.
DOOM = """
CREATE FUNCTION {schema}.doom() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_terminate_backend(pg_backend_pid());
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER doom AFTER UPDATE ON {schema}.runs
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.id = 'doomed')
    EXECUTE FUNCTION {schema}.doom();
"""


async def test_a_connection_lost_while_committing_leaves_the_outcome_unknown(
    schemas: Schemas,
) -> None:
    schema = schemas.new()
    async with schemas.store(schema) as store:
        now = datetime.now(UTC)
        for run_id in ("doomed", "fine"):
            await store.create_run(RunRecord(run_id, "urn:test:doom", "1", "pending", now), {})
        leases = {
            run_id: await store.acquire_run(run_id, "me", now, now + timedelta(minutes=1))
            for run_id in ("doomed", "fine")
        }
        schemas.query(DOOM, schema)
        with pytest.raises(CommitOutcomeUnknown):
            await store.commit(Commit("doomed", lease=leases["doomed"], release=True))
        assert issubclass(CommitOutcomeUnknown, StoreDown)  # (the store is down, for now)
        # The store goes on, on another connection.
        await store.commit(Commit("fine", lease=leases["fine"], release=True))
        assert await store.lease_of("fine") is None
