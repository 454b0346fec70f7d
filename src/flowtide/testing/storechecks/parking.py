"""Checks of what parking keeps: node anchors and park records."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from flowtide.store.base import Commit, NodeAnchor, ParkStatus, Store, StoreError
from flowtide.testing.storechecks.support import at, new_run, park, raises, same


async def node_anchors_are_stored_and_released(store: Store) -> None:
    await new_run(store)
    await new_run(store, "s")
    same(await store.node_anchor("r", "a", None), None, "an anchor never stored")
    same(list(await store.node_anchors("r")), [], "the anchors of a run without any")
    await store.commit(
        Commit(
            "r",
            anchors=[
                NodeAnchor("r", "a", None, at(1)),
                NodeAnchor("r", "a", "0", at(2)),
                NodeAnchor("r", "b", None, at(3)),
            ],
        )
    )
    await store.commit(Commit("s", anchors=[NodeAnchor("s", "a", None, at(4))]))
    same(await store.node_anchor("r", "a", None), at(1), "a stored anchor")
    same(await store.node_anchor("r", "a", "0"), at(2), "an item's anchor")
    same(await store.node_anchor("r", "a", "1"), None, "another item's anchor")
    same(await store.node_anchor("s", "a", None), at(4), "another run's anchor")

    def listed(anchors: Iterable[NodeAnchor]) -> list[tuple[str, str | None]]:
        return sorted(((a.placement, a.item) for a in anchors), key=str)

    same(
        listed(await store.node_anchors("r")),
        [("a", "0"), ("a", None), ("b", None)],
        "the run's anchors",
    )
    await store.commit(Commit("r", anchors_released=[("a", None), ("a", "0"), ("zz", None)]))
    same(await store.node_anchor("r", "a", None), None, "a released anchor")
    same(list(await store.node_anchors("r")), [NodeAnchor("r", "b", None, at(3))], "anchors left")
    same(await store.node_anchor("s", "a", None), at(4), "another run's anchor after a release")
    # Released, then stored again by a later first arrival: a fresh window.
    await store.commit(Commit("r", anchors=[NodeAnchor("r", "a", None, at(9))]))
    same(await store.node_anchor("r", "a", None), at(9), "an anchor stored after its release")


async def parks_are_found_by_filters_in_order(store: Store) -> None:
    await new_run(store)
    await new_run(store, "s")
    with raises(StoreError, "parks() without a run id nor a key"):
        await store.parks()
    same(list(await store.parks(run_id="r")), [], "the parks of a run that never parked")
    first = park("r", 1, key="k", deadline=at(10), payload={"url": "u"})
    await store.commit(Commit("r", parks=[first]))
    await store.commit(Commit("s", parks=[park("s", 1, key="k")]))
    await store.commit(Commit("r", parks=[park("r", 2), park("r", 1, epoch=2, key="k")]))

    async def ids(
        run_id: str | None = None,
        key: str | None = None,
        placement: str | None = None,
        open_only: bool = False,
    ) -> list[str]:
        found = await store.parks(run_id=run_id, key=key, placement=placement, open_only=open_only)
        return [p.id for p in found]

    same(await ids(run_id="r"), ["r.1#1", "r.2#1", "r.1#2"], "a run's parks")
    same(await ids(key="k"), ["r.1#1", "s.1#1", "r.1#2"], "the parks of a key")
    same(await ids(key="k", run_id="s"), ["s.1#1"], "the parks of a key in one run")
    same(await ids(run_id="r", placement="p2"), ["r.2#1"], "a run's parks at a placement")
    same(await ids(key="none"), [], "the parks of a key never used")
    same((await store.parks(run_id="r"))[0], first, "a park as it was written")
    # Closing a park rewrites it in place: it keeps its position.
    closed = replace(first, status=ParkStatus.SIGNALLED, closed_at=at(5), closed_by="signal")
    await store.commit(Commit("r", parks=[closed]))
    same(await ids(run_id="r"), ["r.1#1", "r.2#1", "r.1#2"], "a run's parks after a close")
    same(await ids(run_id="r", open_only=True), ["r.2#1", "r.1#2"], "a run's open parks")
    same(await ids(key="k", open_only=True), ["s.1#1", "r.1#2"], "a key's open parks")
    same((await store.parks(key="k"))[0], closed, "a closed park")
