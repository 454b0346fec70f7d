"""What an engine measures of its own work, for a metrics system to keep.

The engine calls its instruments at four spots, each once per occurrence and never with a value
below zero: when a step's commit has been answered (:meth:`~EngineInstruments.commit`), when a
node attempt's code has ended (:meth:`~EngineInstruments.attempt`), when the sweeper takes the
runs whose wake instant has come (:meth:`~EngineInstruments.late`) and when it takes over a run
another worker held (:meth:`~EngineInstruments.taken_over`).
Durations are in seconds of the engine's clock (virtual time on a virtual clock). Instruments
are called on the engine's event loop and must return at once; the default,
:data:`NO_INSTRUMENTS`, keeps nothing. :mod:`flowtide.metrics` keeps them as Prometheus series.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, Protocol

__all__ = [
    "NO_INSTRUMENTS",
    "AttemptOutcome",
    "EngineInstruments",
    "NoInstruments",
    "seconds",
    "timed",
]

AttemptOutcome = Literal["ok", "error", "timeout", "cancelled", "park"]
"""How a node attempt's code ended: it returned an output, raised, ran out of its window, was
cancelled, or parked."""


class EngineInstruments(Protocol):
    """Where an engine reports what it measures (see the module)."""

    def commit(self, seconds: float) -> None:
        """A step's commit was answered by the store ``seconds`` after it was first sent (the
        tries again after a store error and their backoffs included; a conflict too)."""

    def attempt(self, outcome: AttemptOutcome, seconds: float) -> None:
        """A node attempt's code ran for ``seconds`` and ended so."""

    def late(self, seconds: float) -> None:
        """The sweeper claimed runs due ``seconds`` after the earliest wake instant the store
        gave it (a due entry, a run to start, a lease that expired): the first of those it
        claimed, unless that run was held alive by another worker."""

    def taken_over(self) -> None:
        """This worker took a run another worker held: that worker's lease had expired (it
        died, or did not renew in time), or this engine resumed the run from its live lease
        (``Engine.resume``). Counted once, here: not for a run nobody held (new, given back),
        nor one a worker had set aside, nor by the worker it was taken from."""


class NoInstruments:
    """Instruments that keep nothing (an engine's default)."""

    def commit(self, seconds: float) -> None:
        pass

    def attempt(self, outcome: AttemptOutcome, seconds: float) -> None:
        pass

    def late(self, seconds: float) -> None:
        pass

    def taken_over(self) -> None:
        pass


NO_INSTRUMENTS: EngineInstruments = NoInstruments()


def timed(instruments: EngineInstruments) -> bool:
    """Whether ``instruments`` keep durations (:data:`NO_INSTRUMENTS` does not: the engine then
    reads no clock to time its work for them)."""
    return instruments is not NO_INSTRUMENTS


def seconds(since: datetime, until: datetime) -> float:
    """The seconds from ``since`` to ``until``, never below zero (a clock set back)."""
    return max((until - since).total_seconds(), 0.0)
