"""Which nodes a run needs that an engine cannot resolve: read from the flow document the run
was started on (never from an error's text), for the run to say what it waits for."""

from __future__ import annotations

from collections.abc import Callable

from flowtide.engine.flows.stored_flows import flow_from_stored
from flowtide.errors import NodeResolutionError
from flowtide.model.flow import Flow, node_ref
from flowtide.store.base import Store, StoreError

__all__ = ["MissingNodes"]


class MissingNodes:
    """The node ids of a run's flow that ``resolve`` refuses (``NodeResolutionError``), by
    flow document (each document is looked at once); ``registered(flow_id)`` gives a flow this
    engine knows by id, for a run recorded without its document."""

    def __init__(
        self,
        store: Store,
        registered: Callable[[str], Flow],
        resolve: Callable[[str], object],
    ) -> None:
        self._store = store
        self._registered = registered
        self._resolve = resolve
        self._known: dict[tuple[str, str], list[str]] = {}

    async def of_run(self, run_id: str) -> list[str]:
        """The node ids ``run_id`` needs that do not resolve here (none if its flow cannot be
        read: that is said elsewhere)."""
        try:
            run = await self._store.get_run(run_id)
            digest = run.options.get("flow_digest")
            key = (run.flow_id, digest if isinstance(digest, str) else "")
            if key not in self._known:
                flow = await self._flow(run.flow_id, key[1])
                self._known[key] = sorted(
                    {ref for p in flow.placements if (ref := node_ref(p)) and not self._ok(ref)}
                )
        except (StoreError, LookupError, ValueError):
            return []
        return list(self._known[key])

    async def _flow(self, flow_id: str, digest: str) -> Flow:
        if not digest:  # (a run recorded without its document: the flow known here by id)
            return self._registered(flow_id)
        return flow_from_stored(await self._store.get_flow(flow_id, digest))

    def _ok(self, ref: str) -> bool:
        try:
            self._resolve(ref)
        except NodeResolutionError:
            return False
        return True
