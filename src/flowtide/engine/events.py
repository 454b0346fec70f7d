"""Event kinds and hooks (DESIGN §8).

Every transition of a run is an :class:`~flowtide.store.EventRecord` (run id, placement, attempt,
instant, token, data) committed to the store with the step that caused it; the store keeps them as
the run's history. Hooks registered on the engine receive each event after it is committed, in
history order (``seq``), one run at a time: a run does not move on while its hooks run, so keep
them quick. A hook may be a plain function or a coroutine function. A hook that raises does not
break the run: the failure is recorded as a ``hook_failed`` event (not passed to hooks again).

Order of a run's events:

* ``run_started``;
* per placement attempt: ``node_started`` then one of ``node_finished`` (data ``output``, ``to``),
  ``node_failed`` (``error``), ``node_timed_out`` (``budget``, ``routed``), followed, for a retried
  failure, by ``node_retried`` (``due``: the instant of the next attempt) and later
  ``timer_fired`` (``purpose: "retry"``) when the backoff is over; a process-isolated node also
  reports ``process_started`` (``pid``) once its subprocess runs;
* ``wait_started`` (``due``) and ``timer_fired`` (``purpose: "wait"``) for a wait placement;
* ``join_arrived`` and ``join_fired`` (``output``, ``arrived``) for joins;
* ``scatter_item_finished`` (``index``, ``output``) per scatter item;
* ``subflow_started`` (``child``) and ``subflow_finished`` (``lifecycle``, ``output``);
* ``terminal_reached`` (``outcome``);
* ``token_cancelled`` (``reason``) for each live token cancelled by the run's end, a deadline, an
  abort, or a ``first``/``quorum`` join;
* ``warning`` (``message``) for a failed ``post`` phase, ``hook_failed`` for a failed hook;
* ``run_finished`` (``lifecycle``, ``outcome``) last.

* ``parked`` (``key``, ``deadline``, ``park``) when a node parks; then one of ``signalled``
  (``output`` or none: the node runs again, ``idempotency_key``), ``node_timed_out`` (a park
  deadline, fired by the sweeper), ``timer_fired`` (``purpose: "timer"``, ``output``,
  ``interrupting``) or ``token_cancelled``;
* ``timer_fired`` with ``interrupting: false`` also for a non-interrupting escalation timer: a
  new token starts on its output and the node keeps waiting.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from enum import StrEnum

from flowtide.store.base import EventRecord

__all__ = ["EventKind", "Hook"]


class EventKind(StrEnum):
    """What an event records (its ``kind``): every transition of a run, as hooks receive it and
    the run's history keeps it."""

    RUN_STARTED = "run_started"
    NODE_STARTED = "node_started"
    PROCESS_STARTED = "process_started"
    NODE_FINISHED = "node_finished"
    NODE_FAILED = "node_failed"
    NODE_TIMED_OUT = "node_timed_out"
    NODE_RETRIED = "node_retried"
    WAIT_STARTED = "wait_started"
    TIMER_FIRED = "timer_fired"
    JOIN_ARRIVED = "join_arrived"
    JOIN_FIRED = "join_fired"
    SCATTER_ITEM_FINISHED = "scatter_item_finished"
    SUBFLOW_STARTED = "subflow_started"
    SUBFLOW_FINISHED = "subflow_finished"
    TERMINAL_REACHED = "terminal_reached"
    TOKEN_CANCELLED = "token_cancelled"
    WARNING = "warning"
    HOOK_FAILED = "hook_failed"
    RUN_FINISHED = "run_finished"
    PARKED = "parked"
    SIGNALLED = "signalled"


Hook = Callable[[EventRecord], None] | Callable[[EventRecord], Awaitable[None]]
"""A callable receiving each committed event."""
