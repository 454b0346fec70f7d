"""The memory store's flow documents: each version kept once, by flow id and digest, in the
order first stored."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from flowtide.store.base import StoredFlow, StoredFlowVersion, UnknownStoredFlow
from flowtide.store.jsonvalues import decode_json, encode_json
from flowtide.store.memory.tables import Tables

__all__ = ["Flows"]


class Flows:
    """The flow documents kept in ``tables``."""

    def __init__(self, tables: Tables) -> None:
        self._flows = tables.flows
        self._runs = tables.runs

    def put_flow(self, flow: StoredFlow, *, stored_at: datetime | None = None) -> bool:
        text = encode_json(flow.document, "document")
        key = (flow.flow_id, flow.digest)
        if key in self._flows:
            return False
        self._flows[key] = (flow.version, text, stored_at)
        return True

    def get_flow(self, flow_id: str, digest: str) -> StoredFlow:
        kept = self._flows.get((flow_id, digest))
        if kept is None:
            raise UnknownStoredFlow(flow_id, digest)
        version, text, _ = kept
        return StoredFlow(flow_id, version, digest, decode_json(text))

    def latest_flow(self, flow_id: str) -> StoredFlow:
        digests = [digest for fid, digest in self._flows if fid == flow_id]
        if not digests:
            raise UnknownStoredFlow(flow_id)
        return self.get_flow(flow_id, digests[-1])

    def flow_versions(self, flow_id: str | None = None) -> Sequence[StoredFlowVersion]:
        runs: dict[tuple[str, object], int] = {}
        for row in self._runs.values():
            key = (row.record.flow_id, decode_json(row.options).get("flow_digest"))
            runs[key] = runs.get(key, 0) + 1
        kept = [(key, value) for key, value in self._flows.items() if flow_id in (None, key[0])]
        last = {fid: digest for (fid, digest), _ in kept}
        found = [
            StoredFlowVersion(
                fid, version, digest, stored_at, runs.get((fid, digest), 0), last[fid] == digest
            )
            for (fid, digest), (version, _, stored_at) in kept
        ]
        # (By id, each id's in the order first stored: the sort is stable.)
        return sorted(found, key=lambda v: v.flow_id)
