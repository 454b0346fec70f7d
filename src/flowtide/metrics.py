"""A worker's Prometheus series (prometheus-client, installed by the extra ``flowtide[server]``):
what its engine measures (:mod:`flowtide.engine.worker.instruments`) and the events it commits.

``flowtide serve --nodes`` puts them on its ``/metrics``; ``flowtide worker --metrics-port N``
serves them on a port of its own (:func:`serve_metrics`). In a program of your own::

    series = WorkerSeries(registry)
    engine = Engine(store=..., instruments=series, hooks=[series.event])
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

from flowtide.engine.worker.instruments import AttemptOutcome
from flowtide.store.base import EventRecord

__all__ = ["ATTEMPT_OUTCOMES", "WorkerSeries", "serve_metrics"]

ATTEMPT_OUTCOMES: dict[str, str] = {
    "ok": "finished",
    "error": "failed",
    "timeout": "timed_out",
    "cancelled": "cancelled",
    "park": "parked",
}
"""The ``outcome`` label of an attempt that ended so: the kind of the event that records it."""

FAST = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
"""Buckets (seconds) for a store's answer: a millisecond on SQLite, a few on a database across
a network; the last ones catch an unavailable store's retries (0.1 s, then doubling)."""

NODES = (0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
"""Buckets (seconds) for node code: from a quick function to an hour-long job."""

LATE = (0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 30.0, 60.0, 300.0)
"""Buckets (seconds) for how late the sweeper takes a run: at once when all is well; the poll
interval (a second) when a notice is lost; more when the workers are full."""


class WorkerSeries:
    """An engine's :class:`~flowtide.engine.worker.instruments.EngineInstruments` as Prometheus
    series in ``registry``, and :meth:`event`, a hook counting the events it commits."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.commits = Histogram(
            "flowtide_commit_seconds",
            "How long the store took to answer a step's commit (retries included)",
            buckets=FAST,
            registry=r,
        )
        self.attempts = Histogram(
            "flowtide_worker_attempt_seconds",
            "How long node attempts' code ran, by how the attempt ended",
            ["outcome"],
            buckets=NODES,
            registry=r,
        )
        self.lateness = Histogram(
            "flowtide_sweeper_lateness_seconds",
            "How long after the earliest wake instant the sweeper claimed the runs due",
            buckets=LATE,
            registry=r,
        )
        self.takeovers = Counter(
            "flowtide_lease_takeovers",
            "Runs this worker took over from another worker (its lease had expired, or resumed)",
            registry=r,
        )
        self.events = Counter(
            "flowtide_worker_events",
            "Events committed by this worker, by kind",
            ["kind"],
            registry=r,
        )

    def commit(self, seconds: float) -> None:
        self.commits.observe(seconds)

    def attempt(self, outcome: AttemptOutcome, seconds: float) -> None:
        self.attempts.labels(outcome=ATTEMPT_OUTCOMES[outcome]).observe(seconds)

    def late(self, seconds: float) -> None:
        self.lateness.observe(seconds)

    def taken_over(self) -> None:
        self.takeovers.inc()

    def event(self, event: EventRecord) -> None:
        """The engine's hook: one more committed event of its kind."""
        self.events.labels(kind=event.kind).inc()


def serve_metrics(registry: CollectorRegistry, port: int, host: str) -> int:
    """Serve ``registry`` as Prometheus text on ``http://host:port/metrics`` from a thread of
    this process (prometheus-client's server) until the process exits; the port served (``0``:
    one the system chose)."""
    server, _ = start_http_server(port, addr=host, registry=registry)
    return int(server.server_port)
