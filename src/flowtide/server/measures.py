"""What the server counts for Prometheus: requests by route and status and their latency, and
the in-process worker's series (:class:`~flowtide.metrics.WorkerSeries`)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from flowtide.metrics import WorkerSeries

__all__ = ["Measures"]


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
        self.worker = WorkerSeries(r)
        """The in-process worker's instruments and event hook (``serve --nodes``)."""
        self.held = Gauge("flowtide_worker_runs_held", "Runs the worker holds now", registry=r)
        self.claimed = Gauge(
            "flowtide_worker_sweeper_claimed", "Runs the worker's sweeper has claimed", registry=r
        )
        self.wakeups = Gauge(
            "flowtide_worker_sweeper_wakeups", "Times the worker's sweeper woke", registry=r
        )

    def request(self, route: str, status: int, seconds: float) -> None:
        self.requests.labels(route=route, status=str(status)).inc()
        self.latency.labels(route=route).observe(seconds)
