"""OpenTelemetry spans built on the typed events (extra ``flowtide[otel]``): one span per run,
from ``run_started`` to ``run_finished``, and one per node attempt inside it, from
``node_started`` to how the attempt ended (finished, failed, timed out, cancelled, parked),
each at the instants the events carry.

Give :class:`SpanHook` to a worker's engine as a hook (``Engine(hooks=[SpanHook()])``;
``flowtide serve --nodes`` does when OpenTelemetry is installed). The spans go to the tracer
provider the application configured (none: the API's no-op one); a run that a worker takes
over from another has its span made from the events this worker sees."""

from __future__ import annotations

from datetime import datetime

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from flowtide.engine.events import EventKind
from flowtide.store.base import EventRecord

__all__ = ["SpanHook"]

ENDS = {
    EventKind.NODE_FINISHED.value: StatusCode.OK,
    EventKind.PARKED.value: StatusCode.OK,
    EventKind.NODE_FAILED.value: StatusCode.ERROR,
    EventKind.NODE_TIMED_OUT.value: StatusCode.ERROR,
    EventKind.TOKEN_CANCELLED.value: StatusCode.UNSET,
}
"""The events that end a node attempt's span, with the span's status."""

MOST_OPEN = 100_000
"""How many open spans are kept at most (those of runs given back are never ended here)."""


def _ns(when: datetime) -> int:
    return int(when.timestamp() * 1_000_000_000)


class SpanHook:
    """An engine hook that turns a run's events into spans (see the module's notes)."""

    def __init__(self, tracer: Tracer | None = None) -> None:
        self._tracer = tracer if tracer is not None else trace.get_tracer("flowtide")
        self._runs: dict[str, Span] = {}
        self._attempts: dict[tuple[str, str | None, int | None], Span] = {}

    def __call__(self, event: EventRecord) -> None:
        if len(self._runs) + len(self._attempts) >= MOST_OPEN:
            self._runs.clear()
            self._attempts.clear()
        kind = event.kind
        if kind == EventKind.RUN_STARTED:
            self._runs[event.run_id] = self._tracer.start_span(
                f"run {event.data.get('flow', '')}".strip(),
                start_time=_ns(event.at),
                attributes={
                    "flowtide.run_id": event.run_id,
                    "flowtide.flow": str(event.data.get("flow", "")),
                    "flowtide.version": str(event.data.get("version", "")),
                },
            )
        elif kind == EventKind.NODE_STARTED:
            self._start_attempt(event)
        elif kind in ENDS:
            span = self._attempts.pop((event.run_id, event.token_id, event.attempt), None)
            if span is not None:
                span.set_attribute("flowtide.outcome", kind)
                span.set_status(Status(ENDS[kind]))
                span.end(end_time=_ns(event.at))
        elif kind == EventKind.RUN_FINISHED:
            run = self._runs.pop(event.run_id, None)
            if run is not None:
                lifecycle = str(event.data.get("lifecycle", ""))
                run.set_attribute("flowtide.lifecycle", lifecycle)
                failed = lifecycle in ("failed", "timed_out")
                run.set_status(Status(StatusCode.ERROR if failed else StatusCode.OK))
                run.end(end_time=_ns(event.at))

    def _start_attempt(self, event: EventRecord) -> None:
        parent = self._runs.get(event.run_id)
        context = trace.set_span_in_context(parent) if parent is not None else None
        self._attempts[(event.run_id, event.token_id, event.attempt)] = self._tracer.start_span(
            f"node {event.placement}",
            context=context,
            start_time=_ns(event.at),
            attributes={
                "flowtide.run_id": event.run_id,
                "flowtide.placement": event.placement or "",
                "flowtide.token_id": event.token_id or "",
                "flowtide.attempt": event.attempt or 0,
            },
        )
