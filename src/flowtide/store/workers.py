"""Workers' heartbeats as stores keep them: the node ids a worker implements and the runs it
waits on as JSON text, beside its plain fields."""

from __future__ import annotations

from dataclasses import replace

from flowtide.store.base import WorkerRecord
from flowtide.store.jsonvalues import decode_json, encode_json

__all__ = ["with_texts", "worker_texts"]


def worker_texts(worker: WorkerRecord) -> tuple[str, str]:
    """The worker's ``nodes`` and ``waiting`` as JSON text (raises ``NotJSONError``)."""
    return encode_json(worker.nodes, "worker/nodes"), encode_json(worker.waiting, "worker/waiting")


def with_texts(worker: WorkerRecord, nodes: str, waiting: str) -> WorkerRecord:
    """``worker`` with its ``nodes`` and ``waiting`` read back from their JSON text."""
    found = decode_json(waiting)
    return replace(
        worker,
        nodes=[str(n) for n in decode_json(nodes)],
        waiting={str(run): [str(n) for n in missing] for run, missing in found.items()},
    )
