"""Flow documents, by flow id and content digest, written once over a
:class:`~flowtide.store.sqlcore.connector.Connector`."""

from __future__ import annotations

from datetime import datetime

from flowtide.store.base import StoredFlow, StoredFlowVersion, UnknownStoredFlow
from flowtide.store.jsonvalues import decode_json
from flowtide.store.sqlcore.connector import Connector
from flowtide.store.sqlcore.rows import flow_version_of_row

__all__ = ["SQLFlows"]


class SQLFlows:
    """The stored flows of :class:`~flowtide.store.base.Store`, as a SQL store keeps them."""

    def __init__(self, connector: Connector) -> None:
        self._db = connector
        self._d = connector.dialect

    async def put_flow(self, flow: StoredFlow, stored_at: datetime | None) -> bool:
        """Store a flow; one stored already is kept as it is. True if it is new."""
        params = {
            "flow_id": flow.flow_id,
            "digest": flow.digest,
            "version": flow.version,
            "document": self._d.json(flow.document, "document"),
            "stored_at": self._d.maybe_instant(stored_at),
        }
        return bool(await self._db.write("put_flow", params))  # (a row: it was new)

    async def get_flow(self, flow_id: str, digest: str) -> StoredFlow:
        rows = await self._db.read("get_flow", {"flow_id": flow_id, "digest": digest})
        if not rows:
            raise UnknownStoredFlow(flow_id, digest)
        version, document = rows[0]
        return StoredFlow(flow_id, version, digest, decode_json(document))

    async def latest_flow(self, flow_id: str) -> StoredFlow:
        rows = await self._db.read("latest_flow", {"flow_id": flow_id})
        if not rows:
            raise UnknownStoredFlow(flow_id)
        version, digest, document = rows[0]
        return StoredFlow(flow_id, version, digest, decode_json(document))

    async def flow_versions(self, flow_id: str | None) -> list[StoredFlowVersion]:
        rows = await self._db.read("flow_versions", {"flow_id": flow_id})
        return [flow_version_of_row(row, self._d) for row in rows]
