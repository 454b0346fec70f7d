"""OpenTelemetry spans from the typed events: a run's span holds one span per node attempt,
at the events' instants, with how each ended."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from flowtide import Engine
from flowtide.clock import VirtualClock
from flowtide.store import MemoryStore
from flowtide.tracing import SpanHook
from tests.client.approval import approval
from tests.engine.engine_helpers import T0


async def test_a_run_and_its_node_attempts_become_spans() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    clock = VirtualClock(T0, autojump=True)
    store = MemoryStore()
    await store.open()
    engine = Engine(store=store, clock=clock, hooks=[SpanHook(provider.get_tracer("test"))])
    try:
        engine.register_flow(approval())
        handle = await engine.start(approval().id, {"order": "t-1"})
        await engine.wait_parked(handle.run_id)
        await engine.signal(handle.run_id, placement="review", output="approved")
        await engine.wait(handle.run_id)
    finally:
        await engine.close()
        await store.close()
        await clock.aclose()
    spans = {span.name: span for span in exporter.get_finished_spans()}
    run, node = spans[f"run {approval().id}"], spans["node review"]
    assert node.parent is not None and node.parent.span_id == run.context.span_id
    assert node.attributes is not None and node.attributes["flowtide.outcome"] == "parked"
    assert run.attributes is not None and run.attributes["flowtide.lifecycle"] == "completed"
    assert run.status.status_code == StatusCode.OK
    assert run.start_time == int(T0.timestamp() * 1_000_000_000)
    assert run.end_time is not None and run.end_time >= node.end_time  # type: ignore[operator]
