"""Resolving a node attempt's window to an absolute instant (DESIGN §3-4).

Every deadline the engine uses for a node goes through :func:`attempt_deadline`, which takes the
anchor; the result is stored on the token, so whoever fires it later needs no anchor logic.
"""

from __future__ import annotations

from datetime import datetime

from flowtide.model.settings import NodeSettings, TimeoutAnchor


def attempt_deadline(
    settings: NodeSettings,
    *,
    now: datetime,
    run_created_at: datetime,
    node_anchor: datetime | None = None,
) -> datetime | None:
    """The end of the attempt's window, or None when the node has no timeout.

    * ``park``: this attempt's start (``now``): every attempt gets a fresh window;
    * ``instance``: the run's creation;
    * ``node``: the stored first arrival at the placement (``node_anchor``), ``now`` when none is
      stored yet. (Storing and releasing node anchors is not done by this engine version: it
      behaves as ``park`` until then.)
    """
    if settings.timeout is None:
        return None
    anchor = settings.anchor
    if anchor is TimeoutAnchor.INSTANCE:
        base = run_created_at
    elif anchor is TimeoutAnchor.NODE and node_anchor is not None:
        base = node_anchor
    else:
        base = now
    return base + settings.timeout
