"""What the server counts for Prometheus: requests by route and status and their latency, and
the in-process worker's events by kind (its steps)."""

from __future__ import annotations

from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from flowtide.engine.events import EventKind
from flowtide.store.base import EventRecord

__all__ = ["ATTEMPT_ENDS", "Measures"]

ATTEMPT_ENDS: dict[str, str] = {
    EventKind.NODE_FINISHED.value: "finished",
    EventKind.NODE_FAILED.value: "failed",
    EventKind.NODE_TIMED_OUT.value: "timed_out",
    EventKind.TOKEN_CANCELLED.value: "cancelled",
}
"""The events that end a node attempt, and the outcome label of each (a park ends one too)."""

MOST_OPEN = 100_000
"""How many attempts in flight are remembered at most."""


class Measures:
    """The server's Prometheus series, in a registry of its own (one per application)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "flowtide_http_requests", "HTTP requests answered", ["route", "status"], registry=r
        )
        self.latency = Histogram(
            "flowtide_http_request_seconds", "HTTP request latency", ["route"], registry=r
        )
        self.runs = Gauge(
            "flowtide_runs", "Runs in the store, by lifecycle", ["lifecycle"], registry=r
        )
        self.pending = Gauge(
            "flowtide_requests_pending",
            "Signals and cancels recorded and not yet answered by a worker",
            registry=r,
        )
        self.events = Counter(
            "flowtide_worker_events",
            "Events committed by this server's worker, by kind",
            ["kind"],
            registry=r,
        )
        self.attempts = Histogram(
            "flowtide_worker_attempt_seconds",
            "How long the worker's node attempts took, from start to how they ended",
            ["outcome"],
            registry=r,
        )
        self._started: dict[tuple[str, str | None, int | None], datetime] = {}
        self.held = Gauge("flowtide_worker_runs_held", "Runs the worker holds now", registry=r)
        self.claimed = Gauge(
            "flowtide_worker_sweeper_claimed", "Runs the worker's sweeper has claimed", registry=r
        )
        self.wakeups = Gauge(
            "flowtide_worker_sweeper_wakeups", "Times the worker's sweeper woke", registry=r
        )

    def event(self, event: EventRecord) -> None:
        """The worker's hook: one more committed event of its kind; an attempt's end measured
        from its start (instants of the engine's clock)."""
        self.events.labels(kind=event.kind).inc()
        attempt = (event.run_id, event.token_id, event.attempt)
        if event.kind == EventKind.NODE_STARTED:
            if len(self._started) >= MOST_OPEN:
                self._started.clear()  # (attempts never seen ending: runs given back)
            self._started[attempt] = event.at
        elif event.kind in ATTEMPT_ENDS or event.kind == EventKind.PARKED:
            started = self._started.pop(attempt, None)
            if started is not None:
                seconds = max((event.at - started).total_seconds(), 0.0)
                self.attempts.labels(outcome=ATTEMPT_ENDS.get(event.kind, "parked")).observe(
                    seconds
                )

    def request(self, route: str, status: int, seconds: float) -> None:
        self.requests.labels(route=route, status=str(status)).inc()
        self.latency.labels(route=route).observe(seconds)
