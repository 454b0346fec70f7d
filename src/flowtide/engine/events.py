"""Event kinds and hooks.

Every transition of a run is an :class:`~flowtide.store.EventRecord` (run id, placement, attempt,
instant, token, data) committed to the store with the step that caused it; the store keeps them as
the run's history. Each kind has one typed payload (:mod:`flowtide.engine.event_types`, which
says what each field means): ``data`` holds its fields, optional ones (``?`` below) only when
set, and :func:`~flowtide.engine.event_data.payload_of` reads a record's payload back. Each
payload class is named after its kind (``node_started``: ``NodeStarted``), but ``warning``'s is
``RunWarning``. Instants are ISO 8601 text, durations seconds.

=========================  ======================================  ===============================
kind                       when                                    fields
=========================  ======================================  ===============================
``run_started``            the run's first step                    flow, version, deadline
``node_started``           an attempt starts: a task, a scatter,   visit, kind, deadline, node?,
                           a subflow or a phase (``kind``)         phase?, subflow?
``process_started``        a process-isolated node's subprocess    pid
                           runs
``node_finished``          an attempt returned an output           output, to?, items?,
                           (a scatter adds its counts)             succeeded?, failed?, started?
``node_failed``            an attempt raised                       error (type, message,
                                                                   details, traceback)
``node_timed_out``         an attempt or a park passed its         budget, routed, deadline?, to?
                           deadline
``node_retried``           a failure will be retried (after        due, next_attempt, delay,
                           ``node_failed`` or ``node_timed_out``)  error
``wait_started``           a token waits at a wait placement       due
``timer_fired``            a wait elapsed, a retry backoff ended,  purpose, output?, index?,
                           an escalation timer fired               anchor?, interrupting?, to?
``join_arrived``           a branch arrived at a join              split, branch
``join_fired``             a join fired                            output, arrived, branches, to?
``scatter_item_finished``  a scatter item finished                 index, output, status
``subflow_started``        a subflow started its child run         child
``subflow_finished``       a subflow's child run ended             child, lifecycle, outcome,
                                                                   output, to?
``terminal_reached``       a token reached a terminal              outcome
``token_cancelled``        a live token was cancelled (the run     reason, join?
                           ended; a ``first``/``quorum`` join)
``warning``                a ``post`` phase failed; a due instant  message, purpose?, due?
                           could not fire here and was put back
``hook_failed``            a hook raised (not passed to hooks)     hook, event, error
``run_finished``           the run's last event                    lifecycle, outcome, errors
``parked``                 a node parked its token                 key, deadline, park
``signalled``              a signal was accepted                   output, idempotency_key, keys,
                                                                   park, to?
=========================  ======================================  ===============================

Order: ``run_started`` first and ``run_finished`` last. Per attempt, ``node_started`` then one
of ``node_finished``, ``node_failed``, ``node_timed_out`` or ``parked``; a retried failure adds
``node_retried`` and, when the backoff is over, ``timer_fired`` (purpose ``retry``) before the
next ``node_started``. A park ends with ``signalled``, ``node_timed_out``, ``timer_fired``
(an interrupting escalation timer) or ``token_cancelled``; a non-interrupting timer's
``timer_fired`` starts new tokens and the node keeps waiting.

Hooks registered on the engine receive each event after it is committed, in history order
(``seq``), one run at a time: a run does not move on while its hooks run, so keep them quick. A
hook may be a plain function or a coroutine function; it gets the record and calls
``payload_of`` for the typed payload. A hook that raises does not break the run: the failure is
recorded as a ``hook_failed`` event (not passed to hooks again).
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
