"""Parking, resuming and the sweeper, in memory, on the real clock.

Run with ``python benchmarks/bench_parking.py`` (options: ``--runs``, ``--parked``,
``--scenarios``, ``--input``). With ``--input order`` every run starts with a small order in its
state (an id, a customer, two lines, a total), as a real run would, instead of an empty one.

* **park**: start N runs of a one-node flow whose node parks at once; time until every run is
  parked (its executor let go). Parks per second.
* **resume**: signal every parked run with an output (a compare-and-set commit, the executor
  rebuilt from the store, the route to the terminal, the run's end). Resumes per second.
* **sweeper, all due**: N parked tokens whose deadlines fall due over a few seconds (the
  window is as long as parking them took, so the due rate equals the park rate): firing
  lateness (the ``node_timed_out`` instant minus the stored deadline) p50/p99, and firings per
  second.
* **sweeper, due over a few seconds**: N parked tokens whose deadlines are spread evenly over
  five seconds after they were all parked (one flow per timeout, 50 timeouts): firing lateness
  p50/p99 and firings per second. 10,000 come due at about 2,000 a second, 100,000 at about
  10,000 to 20,000 a second (the spread plus the time parking them took).
* **sweeper, a burst**: N parked tokens (10,000 or 100,000), 10,000 of them all due at one
  instant (the clock is moved past their deadlines at once): CPU time per firing, and the
  collector's pauses by generation (count and total) while they fire, then the first full
  collection afterwards (what the firings left for the collector).
* **sweeper, few due among many**: N parked tokens with far deadlines, plus 1,000 parked 50
  every 100 ms, each due two seconds later (500 due per second): the lateness of those 1,000
  should not depend on N.

The sweeper scenarios wait for the sweeper's own count of firings (polled every 10 ms), and only
then read each run's end and history: awaiting 100,000 ends one by one in the same loop while
they fire would take loop time from the sweeper in bursts, and measure that instead.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from machine import describe

from flowtide.authoring import FlowBuilder, node
from flowtide.clock import SystemClock
from flowtide.engine import Engine, NodeContext, Park
from flowtide.model import Flow


@node(id="bench:park", outputs=["ok"])
async def park_node(ctx: NodeContext) -> Any:
    return Park(key=ctx.run_id)


def parking_flow(timeout: str) -> Flow:
    return (
        FlowBuilder(f"urn:bench:park:{timeout}")
        .task("p", park_node, {"ok": "done", "timeout": "late"}, timeout=timeout)
        .terminal("done")
        .terminal("late", "late")
        .build()
    )


def no_input(i: int) -> dict[str, Any] | None:
    return None


def order_input(i: int) -> dict[str, Any] | None:
    return {
        "order": {
            "id": f"o-{i}",
            "customer": {"id": f"c-{i % 977}", "tier": "gold"},
            "lines": [
                {"sku": "A-1", "qty": 2, "price": 9.5},
                {"sku": "B-7", "qty": 1, "price": 20.0},
            ],
            "total": 39.0,
        }
    }


INPUTS = {"none": no_input, "order": order_input}
run_input = no_input
"""What each parked run starts with (``--input``)."""


async def park_many(
    engine: Engine,
    flow: Flow | Sequence[Flow],
    n: int,
    chunk: int = 1000,
    inputs: Sequence[dict[str, Any] | None] | None = None,
) -> list[str]:
    """Park ``n`` runs, ``chunk`` at a time; with several flows, run ``i`` takes flow ``i``
    modulo their number (each chunk spread over all of them). Run ``i`` starts with
    ``inputs[i]``, or else with ``run_input(i)``."""
    if inputs is None:
        inputs = [run_input(i) for i in range(n)]
    flows = [flow] if isinstance(flow, Flow) else list(flow)
    ids: list[str] = []
    for start in range(0, n, chunk):
        runs = [
            engine.run(flows[i % len(flows)], inputs[i])
            for i in range(start, min(n, start + chunk))
        ]
        ids.extend(r.run_id for r in await asyncio.gather(*runs))
    return ids


async def park_rate(engine: Engine) -> float:
    """Parks per second on a batch of 2,000, after a warm-up batch (cancelled); the batch
    measured stays parked, far from its deadline."""
    probe = await park_many(engine, parking_flow("P1D"), 2000)
    for run_id in probe:
        await engine.cancel(run_id)
    await wait_done(engine, probe)
    t0 = time.perf_counter()
    await park_many(engine, parking_flow("P1D"), 2000)
    return 2000 / (time.perf_counter() - t0)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


async def lateness(engine: Engine, run_ids: list[str]) -> list[float]:
    out = []
    for run_id in run_ids:
        for e in await engine.history(run_id):
            if e.kind == "node_timed_out":
                deadline = datetime.fromisoformat(e.data["deadline"])
                out.append((e.at - deadline).total_seconds() * 1000)
    return out


async def bench_park_resume(n: int) -> dict[str, float]:
    engine = Engine()
    flow = parking_flow("P1D")
    await engine.run(flow)  # warm-up
    inputs = [run_input(i) for i in range(n)]  # (the caller's work: made before the clock runs)
    gc.collect()
    t0 = time.perf_counter()
    ids = await park_many(engine, flow, n, inputs=inputs)
    parked = time.perf_counter() - t0
    assert not engine.held_runs(), "parked runs should have been let go"
    t0 = time.perf_counter()
    for run_id in ids:
        await engine.signal(run_id, placement="p", output="ok")
    for run_id in ids:
        await engine.wait(run_id)
    resumed = time.perf_counter() - t0
    await engine.close()
    return {"parks_per_s": n / parked, "resumes_per_s": n / resumed}


async def wait_done(engine: Engine, ids: list[str]) -> None:
    for run_id in ids:
        await engine.wait(run_id)


async def until_fired(engine: Engine, count: int) -> None:
    """Until the sweeper has fired ``count`` entries in all. Polled, every 10 ms: awaiting each
    run's end in turn would compete with the firings for this one thread (when the run awaited
    ends, the loop goes through every later one that ended meanwhile, at once)."""
    while engine.sweeper.statistics().fired < count:  # noqa: ASYNC110 (polled on purpose)
        await asyncio.sleep(0.01)


async def park_and_fire(
    engine: Engine, flows: Flow | Sequence[Flow], n: int
) -> tuple[float, float, list[float]]:
    """Park ``n`` runs, wait until the sweeper has fired them all, close the engine: the seconds
    parking took, the seconds from the first park to the last firing, and each firing's
    lateness."""
    gc.collect()
    fired = engine.sweeper.statistics().fired
    t0 = time.perf_counter()
    ids = await park_many(engine, flows, n)
    parked_in = time.perf_counter() - t0
    await until_fired(engine, fired + n)
    total = time.perf_counter() - t0
    await wait_done(engine, ids)
    late = await lateness(engine, ids)
    await engine.close()
    return parked_in, total, late


def late_figures(late: list[float]) -> dict[str, float]:
    return {
        "p50_ms": statistics.median(late),
        "p99_ms": pct(late, 0.99),
        "max_ms": max(late),
    }


async def bench_sweeper_all_due(n: int) -> dict[str, float]:
    engine = Engine()
    # The window must outlast parking them all: measure the park rate on a small batch first.
    window = n / await park_rate(engine) * 3 + 1.0
    parked_in, total, late = await park_and_fire(engine, parking_flow(f"PT{window:.3f}S"), n)
    first_due = window
    return {
        "parked_in_s": parked_in,
        "window_s": window,
        **late_figures(late),
        "fired_per_s": n / max(1e-9, total - first_due),
    }


async def bench_sweeper_spread(n: int, spread: float = 5.0, steps: int = 50) -> dict[str, float]:
    engine = Engine()
    # Parking must be over before the first deadline: measure the park rate first.
    base = n / await park_rate(engine) * 2 + 1.0
    flows = [parking_flow(f"PT{base + spread * i / steps:.3f}S") for i in range(steps)]
    # (park_many spreads each chunk over every timeout: the deadlines interleave evenly.)
    parked_in, total, late = await park_and_fire(engine, flows, n)
    return {
        "parked_in_s": parked_in,
        "due_over_s": spread + parked_in,
        **late_figures(late),
        "fired_per_s": n / max(1e-9, total - base),
    }


class ShiftedClock(SystemClock):
    """The system clock, moved forward by ``shift``: moving it past many deadlines makes them
    all due at one instant."""

    shift = timedelta(0)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.shift


async def bench_sweeper_burst(n: int, due: int = 10_000) -> dict[str, float]:
    clock = ShiftedClock()
    engine = Engine(clock=clock)
    await park_many(engine, parking_flow("P1D"), max(0, n - due))
    ids = await park_many(engine, parking_flow("PT60S"), due)
    gc.collect()
    pauses = {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}
    started = [0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            pause = pauses[info["generation"]]
            pause[0] += 1
            pause[1] += time.perf_counter() - started[0]

    fired = engine.sweeper.statistics().fired
    gc.callbacks.append(timed)
    cpu = time.process_time()
    clock.shift = timedelta(seconds=61)
    engine.sweeper.wake()
    await until_fired(engine, fired + due)
    cpu = time.process_time() - cpu
    gc.callbacks.remove(timed)
    await wait_done(engine, ids)
    t0 = time.perf_counter()
    gc.collect()
    after = time.perf_counter() - t0
    await engine.close()
    figures = {"cpu_us_per_firing": cpu / due * 1e6}
    for generation, (count, total) in pauses.items():
        figures[f"gen{generation}_count"] = count
        figures[f"gen{generation}_ms"] = total * 1000
    figures["full_collection_after_ms"] = after * 1000
    return figures


async def bench_sweeper_few_due(n: int, due: int = 1000, freeze: bool = False) -> dict[str, float]:
    engine = Engine()
    await park_many(engine, parking_flow("P1D"), n)
    gc.collect()
    if freeze:
        # The memory store keeps every parked run as Python objects that each full collection
        # walks; a database store keeps them outside the heap. Freezing models that.
        gc.freeze()
    # 1,000 more, 50 every 100 ms, each due 2 s after it parked: 500 due per second.
    flow = parking_flow("PT2S")
    fired = engine.sweeper.statistics().fired
    ids: list[str] = []
    for _ in range(due // 50):
        ids += await park_many(engine, flow, 50)
        await asyncio.sleep(0.1)
    await until_fired(engine, fired + due)
    await wait_done(engine, ids)
    late = await lateness(engine, ids)
    stats = engine.sweeper.statistics()
    await engine.close()
    if freeze:
        gc.unfreeze()
    return {**late_figures(late), "batches": stats.batches}


def show(title: str, figures: dict[str, float]) -> None:
    print(title + ": " + ", ".join(f"{k}={v:,.1f}" for k, v in figures.items()), flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--parked", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument(
        "--gc-threshold",
        type=int,
        default=None,
        help="gc.set_threshold(N, 50, 100): fewer collections of the young generation",
    )
    parser.add_argument(
        "--freeze", action="store_true", help="gc.freeze() the background parked runs"
    )
    parser.add_argument(
        "--input",
        choices=sorted(INPUTS),
        default="none",
        help="what each parked run's state starts with: nothing, or a small order",
    )
    parser.add_argument(
        "--scenarios",
        nargs="*",
        default=["park", "all", "spread", "burst", "few"],
        choices=["park", "all", "spread", "burst", "few"],
    )
    args = parser.parse_args()
    global run_input
    run_input = INPUTS[args.input]
    print(describe() + f"; input: {args.input}", flush=True)
    if args.gc_threshold:
        gc.set_threshold(args.gc_threshold, 50, 100)
    if "park" in args.scenarios:
        show(f"park/resume, {args.runs:,} runs", await bench_park_resume(args.runs))
    if "all" in args.scenarios:
        for n in args.parked:
            show(f"sweeper, {n:,} parked, all due", await bench_sweeper_all_due(n))
    if "spread" in args.scenarios:
        for n in args.parked:
            figures = await bench_sweeper_spread(n)
            show(f"sweeper, {n:,} parked, due over a few seconds", figures)
    if "burst" in args.scenarios:
        for n in args.parked:
            figures = await bench_sweeper_burst(n)
            show(f"sweeper, {max(n, 10_000):,} parked, 10,000 due at once", figures)
    if "few" in args.scenarios:
        for n in args.parked:
            figures = await bench_sweeper_few_due(n, freeze=args.freeze)
            show(f"sweeper, {n:,} parked, 1,000 due", figures)


if __name__ == "__main__":
    asyncio.run(main())
