"""Flowtide beside LangGraph and DBOS, each engine in a process of its own, alternating.

Run with ``python benchmarks/bench_peers.py [--rounds 3] [--cases step park ...]`` in an
environment with the ``bench`` extra (``pip install -e '.[bench,postgres]'``: LangGraph with its
SQLite and PostgreSQL checkpointers, DBOS). PostgreSQL at ``FLOWTIDE_BENCH_POSTGRES_URL``, by
default the local test server; every process works in a schema of its own, dropped at its end.

Each round runs every case once per engine, each in a fresh process (``--one ENGINE CASE
STORE``, which prints its figures as one JSON line), the engines' order alternating from round
to round; the ratio of each round pairs the figures of that round (> 1: Flowtide is faster).

Cases (the peers' closest equivalents in brackets):

* ``step``: a 200-node chain of sync nodes that each add 1 to a counter, every step committed;
  microseconds per step (LangGraph: ``SqliteSaver``/``PostgresSaver``, ``durability="sync"``;
  DBOS: a workflow of 200 steps). Flowtide's process also measures the floor of one committed
  transaction on the same store just before (``bench_durable``'s floors).
* ``park``: N runs started one after another, each parking at its first node for a signal
  (runs/s); then ``resume``: each signalled in turn and waited for until it completes (runs/s)
  (LangGraph: ``interrupt()``, then ``Command(resume=...)``; DBOS: ``DBOS.recv`` in the
  workflow, ``DBOS.send``). ``--parks 100 1000``.
* ``inflight``: on PostgreSQL, 1,000 parked runs resumed 64 at a time; resumes/s.
* ``fanout``: 100 branches of a trivial node and a gather (Flowtide: a scatter of 100 items,
  all at once, gathered into a list; LangGraph: ``Send`` and a list reducer; DBOS: 100 steps
  under ``asyncio.gather``); milliseconds per run.
* ``split``: a split into 100 placements joined by an ``all`` join (LangGraph: 100 nodes and a
  node waiting for them all); milliseconds per run.
* ``memory``: the 200-chain with no durable store, sync nodes run inline and in a worker
  thread (LangGraph: ``invoke``, and ``ainvoke``, which runs sync nodes in its executor);
  microseconds per step.
* ``state``: CPU per step of the 200-chain whose runs start with 20 KB of state no node touches,
  against empty state, in memory and on SQLite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

from bench_durable import POSTGRES, postgres_floor, sqlite_floor
from machine import describe

from flowtide.authoring import FlowBuilder, node
from flowtide.engine import Engine, NodeContext, Park
from flowtide.model import Flow
from flowtide.store import Store
from flowtide.store.postgres import PostgresStore
from flowtide.store.sqlite import SQLiteStore

CHAIN = 200
BRANCHES = 100
IN_FLIGHT = 64
ENGINES = ("flowtide", "langgraph", "dbos")
Figures = dict[str, float]


def blob() -> dict[str, Any]:
    """About 20 KB of JSON: an order's lines, as a run might carry."""
    lines = [{"sku": f"SKU-{i:05d}", "qty": i % 7 + 1, "note": "n" * 60} for i in range(200)]
    return {"order": {"id": "o-1", "lines": lines}}


# -- Flowtide ------------


@node(id="bench:peers:add", outputs=["next"])
def add(ctx: NodeContext) -> str:
    ctx.state["counter"] = ctx.state.get("counter", 0) + 1
    return "next"


@node(id="bench:peers:add-inline", outputs=["next"], execution="inline")
def add_inline(ctx: NodeContext) -> str:
    ctx.state["counter"] = ctx.state.get("counter", 0) + 1
    return "next"


@node(id="bench:peers:ask", outputs=["answered"], parks=True)
def ask(ctx: NodeContext) -> Any:
    return "answered" if ctx.signal is not None else Park(key=f"ask-{ctx.run_id}")


@node(id="bench:peers:leaf", outputs=["next"])
def leaf(ctx: NodeContext) -> str:
    return "next"


@node(id="bench:peers:square", outputs=["done"])
def square(ctx: NodeContext) -> str:
    ctx.state["square"] = ctx.item * ctx.item
    return "done"


def chain_flow(inline: bool = False) -> Flow:
    b = FlowBuilder(f"urn:bench:peers:chain:{'inline' if inline else 'thread'}")
    impl = add_inline if inline else add
    for i in range(CHAIN):
        b.task(f"n{i}", impl, {"next": f"n{i + 1}" if i + 1 < CHAIN else "end"})
    return b.terminal("end").build()


def park_flow() -> Flow:
    b = FlowBuilder("urn:bench:peers:park")
    return b.task("ask", ask, {"answered": "end"}).terminal("end").build()


def fanout_flow() -> Flow:
    routes = {"all-success": "end", "partial": "end", "all-error": "end", "empty": "end"}
    gather = {"strategy": "append", "field": "square"}
    b = FlowBuilder("urn:bench:peers:fanout")
    b.scatter("each", "items", square, routes, concurrency=BRANCHES, gather=gather)
    return b.terminal("end").build()


def split_flow() -> Flow:
    b = FlowBuilder("urn:bench:peers:split")
    b.task("fork", add_inline, {"next": [f"b{i}" for i in range(BRANCHES)]})
    for i in range(BRANCHES):
        b.task(f"b{i}", leaf, {"next": "join"})
    b.join("join", "all", {"success": "end"})
    return b.terminal("end").build()


@contextmanager
def flowtide_store(store: str, folder: Path) -> Iterator[Callable[[], Store | None]]:
    """Makes the store of the case: None (memory), a SQLite file, or a PostgreSQL schema."""
    schema = f"flowtide_peers_{secrets.token_hex(4)}"
    if store == "memory":
        yield lambda: None
    elif store == "sqlite":
        yield lambda: SQLiteStore(folder / "flowtide.db")
    else:
        try:
            yield lambda: PostgresStore(POSTGRES, schema=schema)
        finally:
            drop_schema(schema)


async def timed_runs(engine: Engine, flow: Flow, runs: int, state: Any = None) -> list[float]:
    """Seconds of each of ``runs`` runs of ``flow`` to its end, after one to warm up."""
    await engine.run(flow, state)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        result = await engine.run(flow, state)
        samples.append(time.perf_counter() - start)
        assert result.lifecycle == "completed", result
    return samples


async def flowtide_case(case: str, store: str, folder: Path, options: Any) -> Figures:
    with flowtide_store(store, folder) as make:
        if case == "step":
            floors = [sqlite_floor(folder) if store == "sqlite" else postgres_floor()]
            async with Engine(store=make(), flows=[chain_flow()]) as engine:
                samples = await timed_runs(engine, chain_flow(), options.runs)
            # (Before and after: on a shared disk the floor moves from one second to the next.)
            floors.append(sqlite_floor(folder) if store == "sqlite" else postgres_floor())
            per_step = statistics.median(samples) / CHAIN * 1e6
            return {"us_per_step": per_step, "floor_us": statistics.fmean(floors)}
        if case in ("park", "inflight"):
            return await flowtide_parks(make(), options.parks, 1 if case == "park" else IN_FLIGHT)
        if case in ("fanout", "split"):
            flow = fanout_flow() if case == "fanout" else split_flow()
            state = {"items": list(range(BRANCHES))} if case == "fanout" else None
            async with Engine(store=make(), flows=[flow]) as engine:
                samples = await timed_runs(engine, flow, options.runs, state)
            return {"ms": statistics.median(samples) * 1000}
        if case == "memory":
            figures = {}
            for kind, flow in (("inline", chain_flow(inline=True)), ("threaded", chain_flow())):
                async with Engine(flows=[flow]) as engine:
                    samples = await timed_runs(engine, flow, options.runs * 4)
                figures[f"{kind}_us"] = statistics.median(samples) / CHAIN * 1e6
            return figures
        assert case == "state"
        return await flowtide_state(make(), options.runs)


async def flowtide_parks(store: Store | None, counts: list[int], in_flight: int) -> Figures:
    flow = park_flow()
    figures: Figures = {}
    gate = asyncio.Semaphore(in_flight)

    async def resume(engine: Engine, run_id: str) -> None:
        async with gate:
            await engine.signal(run_id, placement="ask", payload={"ok": True})
            result = await engine.wait(run_id)
            assert result.lifecycle == "completed", result

    async with Engine(store=store, flows=[flow]) as engine:
        await resume(engine, (await engine.run(flow)).run_id)  # warm up
        for n in counts:
            start = time.perf_counter()
            runs = [(await engine.run(flow)).run_id for _ in range(n)]
            parked = time.perf_counter() - start
            start = time.perf_counter()
            if in_flight == 1:
                for run_id in runs:
                    await resume(engine, run_id)
            else:
                await asyncio.gather(*(resume(engine, run_id) for run_id in runs))
            resumed = time.perf_counter() - start
            figures[f"park_{n}_per_s"] = n / parked
            figures[f"resume_{n}_per_s"] = n / resumed
    if in_flight > 1:
        return {k: v for k, v in figures.items() if k.startswith("resume")}
    return figures


async def flowtide_state(store: Store | None, runs: int) -> Figures:
    """CPU per step with empty state and with 20 KB no node touches."""
    flow = chain_flow()
    figures = {}
    async with Engine(store=store, flows=[flow]) as engine:
        for name, state in (("empty", None), ("20kb", blob())):
            await engine.run(flow, state)
            start = time.process_time()
            for _ in range(runs):
                await engine.run(flow, state)
            figures[f"cpu_{name}_us"] = (time.process_time() - start) / runs / CHAIN * 1e6
    figures["ratio"] = figures["cpu_20kb_us"] / figures["cpu_empty_us"]
    return figures


# -- LangGraph ------------


class Counter(TypedDict, total=False):
    counter: int
    order: dict[str, Any]


def _append(left: list[int], right: list[int]) -> list[int]:
    return left + right


class Fanned(TypedDict, total=False):
    items: list[int]
    squares: Annotated[list[int], _append]
    done: bool


def lg_chain() -> Any:
    from langgraph.graph import END, START, StateGraph

    def add_one(state: Counter) -> dict[str, Any]:
        return {"counter": state.get("counter", 0) + 1}

    g: Any = StateGraph(Counter)
    for i in range(CHAIN):
        g.add_node(f"n{i}", add_one)
    g.add_edge(START, "n0")
    for i in range(CHAIN - 1):
        g.add_edge(f"n{i}", f"n{i + 1}")
    g.add_edge(f"n{CHAIN - 1}", END)
    return g


def lg_park() -> Any:
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def ask_node(state: Counter) -> dict[str, Any]:
        answer = interrupt("ask")
        return {"counter": 1 if answer else 0}

    g: Any = StateGraph(Counter)
    g.add_node("ask", ask_node)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    return g


def lg_fanout() -> Any:
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send

    def each(state: dict[str, Any]) -> dict[str, Any]:
        return {"squares": [state["item"] * state["item"]]}

    def spread(state: Fanned) -> list[Any]:
        return [Send("each", {"item": i}) for i in state["items"]]

    g: Any = StateGraph(Fanned)
    g.add_node("each", each)
    g.add_conditional_edges(START, spread, ["each"])
    g.add_edge("each", END)
    return g


def lg_split() -> Any:
    from langgraph.graph import END, START, StateGraph

    def fork(state: Fanned) -> dict[str, Any]:
        return {}

    def branch(state: Fanned) -> dict[str, Any]:
        return {}

    g: Any = StateGraph(Fanned)
    g.add_node("fork", fork)
    g.add_node("join", fork)
    g.add_edge(START, "fork")
    for i in range(BRANCHES):
        g.add_node(f"b{i}", branch)
        g.add_edge("fork", f"b{i}")
    g.add_edge([f"b{i}" for i in range(BRANCHES)], "join")
    g.add_edge("join", END)
    return g


@contextmanager
def lg_saver(store: str, folder: Path) -> Iterator[Any]:
    """LangGraph's checkpointer on the store: SQLite in WAL mode with ``synchronous=FULL``,
    or PostgreSQL in a schema of its own."""
    if store == "memory":
        yield None
    elif store == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        connection = sqlite3.connect(folder / "langgraph.db", check_same_thread=False)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        try:
            yield SqliteSaver(connection)
        finally:
            connection.close()
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        schema = make_schema("langgraph")
        try:
            with PostgresSaver.from_conn_string(in_schema(schema)) as saver:
                saver.setup()
                yield saver
        finally:
            drop_schema(schema)


def lg_config(thread: str) -> dict[str, Any]:
    return {"recursion_limit": CHAIN + 10, "configurable": {"thread_id": thread}}


def lg_timed(graph: Any, state: Any, runs: int, durability: str | None) -> list[float]:
    extra = {"durability": durability} if durability else {}
    graph.invoke(state, lg_config("warm"), **extra)
    samples = []
    for i in range(runs):
        start = time.perf_counter()
        graph.invoke(state, lg_config(f"t{i}"), **extra)
        samples.append(time.perf_counter() - start)
    return samples


def langgraph_case(case: str, store: str, folder: Path, options: Any) -> Figures:
    if case == "inflight":
        return asyncio.run(lg_in_flight(options.parks))
    with lg_saver(store, folder) as saver:
        durability = "sync" if saver is not None else None
        if case == "step":
            graph = lg_chain().compile(checkpointer=saver)
            samples = lg_timed(graph, {"counter": 0}, options.runs, durability)
            return {"us_per_step": statistics.median(samples) / CHAIN * 1e6}
        if case == "park":
            return lg_parks(lg_park().compile(checkpointer=saver), options.parks)
        if case in ("fanout", "split"):
            graph = (lg_fanout() if case == "fanout" else lg_split()).compile(checkpointer=saver)
            state = {"items": list(range(BRANCHES))} if case == "fanout" else {}
            samples = lg_timed(graph, state, options.runs, durability)
            return {"ms": statistics.median(samples) * 1000}
        if case == "memory":
            graph = lg_chain().compile()
            inline = lg_timed(graph, {"counter": 0}, options.runs * 4, None)

            async def threaded() -> list[float]:
                await graph.ainvoke({"counter": 0}, lg_config("warm"))
                samples = []
                for i in range(options.runs * 4):
                    start = time.perf_counter()
                    await graph.ainvoke({"counter": 0}, lg_config(f"a{i}"))
                    samples.append(time.perf_counter() - start)
                return samples

            return {
                "inline_us": statistics.median(inline) / CHAIN * 1e6,
                "threaded_us": statistics.median(asyncio.run(threaded())) / CHAIN * 1e6,
            }
        assert case == "state"
        graph = lg_chain().compile(checkpointer=saver)
        figures: Figures = {}
        states: list[tuple[str, dict[str, Any]]] = [("empty", {"counter": 0})]
        states.append(("20kb", {"counter": 0, **blob()}))
        for name, state in states:
            extra = {"durability": durability} if durability else {}
            graph.invoke(state, lg_config(f"warm-{name}"), **extra)
            start = time.process_time()
            for i in range(options.runs):
                graph.invoke(state, lg_config(f"{name}-{i}"), **extra)
            figures[f"cpu_{name}_us"] = (time.process_time() - start) / options.runs / CHAIN * 1e6
        figures["ratio"] = figures["cpu_20kb_us"] / figures["cpu_empty_us"]
        return figures


def lg_parks(graph: Any, counts: list[int]) -> Figures:
    from langgraph.types import Command

    figures: Figures = {}
    for n in counts:
        threads = [f"park-{n}-{i}" for i in range(n)]
        start = time.perf_counter()
        for thread in threads:
            out = graph.invoke({"counter": 0}, lg_config(thread), durability="sync")
            assert "__interrupt__" in out, out
        parked = time.perf_counter() - start
        start = time.perf_counter()
        for thread in threads:
            out = graph.invoke(Command(resume=True), lg_config(thread), durability="sync")
            assert out["counter"] == 1, out
        resumed = time.perf_counter() - start
        figures[f"park_{n}_per_s"] = n / parked
        figures[f"resume_{n}_per_s"] = n / resumed
    return figures


async def lg_in_flight(counts: list[int]) -> Figures:
    """Parked runs resumed ``IN_FLIGHT`` at a time on PostgreSQL (the async checkpointer on a
    pool of connections)."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.types import Command
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    schema = make_schema("langgraph")
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    pool: Any = AsyncConnectionPool(in_schema(schema), max_size=16, kwargs=kwargs, open=False)
    figures: Figures = {}
    try:
        await pool.open()
        saver = AsyncPostgresSaver(pool)
        await saver.setup()
        graph = lg_park().compile(checkpointer=saver)
        gate = asyncio.Semaphore(IN_FLIGHT)

        async def resume(thread: str) -> None:
            async with gate:
                config = lg_config(thread)
                out = await graph.ainvoke(Command(resume=True), config, durability="sync")
                assert out["counter"] == 1, out

        for n in counts:
            threads = [f"park-{n}-{i}" for i in range(n)]
            for thread in threads:
                await graph.ainvoke({"counter": 0}, lg_config(thread), durability="sync")
            start = time.perf_counter()
            await asyncio.gather(*(resume(t) for t in threads))
            figures[f"resume_{n}_per_s"] = n / (time.perf_counter() - start)
    finally:
        await pool.close()
        drop_schema(schema)
    return figures


# -- DBOS ------------


def dbos_case(case: str, store: str, folder: Path, options: Any) -> Figures:
    from dbos import DBOS, DBOSConfig

    schema = make_schema("dbos") if store == "postgres" else None
    url = POSTGRES if store == "postgres" else f"sqlite:///{folder / 'dbos.db'}"
    config: DBOSConfig = {
        "name": "bench",
        "system_database_url": url,
        # (its default polls for messages every second on SQLite: a resume would wait for it)
        "notification_listener_polling_interval_sec": 0.01,
    }
    if schema is not None:
        config["dbos_system_schema"] = schema
    DBOS(config=config)
    waiting: dict[str, asyncio.Event] = {}

    @DBOS.step()
    def add_one(counter: int) -> int:
        return counter + 1

    @DBOS.workflow()
    def chain() -> int:
        counter = 0
        for _ in range(CHAIN):
            counter = add_one(counter)
        return counter

    @DBOS.workflow()
    async def parked(tag: str) -> bool:
        waiting[tag].set()  # (in recv from here on: parked)
        answer = await DBOS.recv_async("go", timeout_seconds=3600)
        return bool(answer)

    @DBOS.step()
    async def square_step(i: int) -> int:
        return i * i

    @DBOS.workflow()
    async def fanned(items: list[int]) -> list[int]:
        return list(await asyncio.gather(*(square_step(i) for i in items)))

    DBOS.launch()
    try:
        if case == "step":
            chain()
            samples = []
            for _ in range(options.runs):
                start = time.perf_counter()
                assert chain() == CHAIN
                samples.append(time.perf_counter() - start)
            return {"us_per_step": statistics.median(samples) / CHAIN * 1e6}
        if case in ("park", "inflight"):
            in_flight = 1 if case == "park" else IN_FLIGHT
            return asyncio.run(dbos_parks(DBOS, parked, waiting, options.parks, in_flight))
        assert case == "fanout"

        async def fan() -> list[float]:
            await fanned(list(range(BRANCHES)))
            samples = []
            for _ in range(options.runs):
                start = time.perf_counter()
                await fanned(list(range(BRANCHES)))
                samples.append(time.perf_counter() - start)
            return samples

        return {"ms": statistics.median(asyncio.run(fan())) * 1000}
    finally:
        DBOS.destroy()
        if schema is not None:
            drop_schema(schema)


async def dbos_parks(
    dbos: Any,
    parked: Callable[[str], Awaitable[bool]],
    waiting: dict[str, asyncio.Event],
    counts: list[int],
    in_flight: int,
) -> Figures:
    figures: Figures = {}
    gate = asyncio.Semaphore(in_flight)

    async def park(tag: str) -> Any:
        waiting[tag] = asyncio.Event()
        handle = await dbos.start_workflow_async(parked, tag)
        await waiting[tag].wait()
        return handle

    async def resume(handle: Any) -> None:
        async with gate:
            await dbos.send_async(handle.workflow_id, True, "go")
            assert await handle.get_result() is True

    await resume(await park("warm"))
    for n in counts:
        start = time.perf_counter()
        handles = [await park(f"{n}-{i}") for i in range(n)]
        parked_in = time.perf_counter() - start
        start = time.perf_counter()
        if in_flight == 1:
            for handle in handles:
                await resume(handle)
        else:
            await asyncio.gather(*(resume(h) for h in handles))
        resumed = time.perf_counter() - start
        if in_flight == 1:
            figures[f"park_{n}_per_s"] = n / parked_in
        figures[f"resume_{n}_per_s"] = n / resumed
    return figures


# -- PostgreSQL schemas ------------


def make_schema(prefix: str) -> str:
    import psycopg

    schema = f"{prefix}_peers_{secrets.token_hex(4)}"
    with psycopg.connect(POSTGRES, autocommit=True) as connection:
        connection.execute(f'CREATE SCHEMA "{schema}"')
    return schema


def drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def in_schema(schema: str) -> str:
    """The PostgreSQL URL whose connections work in ``schema``."""
    joiner = "&" if "?" in POSTGRES else "?"
    return f"{POSTGRES}{joiner}options=-csearch_path%3D{schema}"


# -- the rounds ------------

CASES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # case: (stores, engines)
    "step": (("sqlite", "postgres"), ENGINES),
    "park": (("sqlite", "postgres"), ENGINES),
    "inflight": (("postgres",), ENGINES),
    "fanout": (("sqlite", "postgres"), ENGINES),
    "split": (("sqlite", "postgres"), ("flowtide", "langgraph")),
    "memory": (("memory",), ("flowtide", "langgraph")),
    "state": (("memory", "sqlite"), ("flowtide", "langgraph")),
}
HIGHER_IS_BETTER = ("_per_s",)


def one(engine: str, case: str, store: str, options: Any) -> Figures:
    folder = Path(tempfile.mkdtemp(prefix="flowtide-peers-"))
    if engine == "flowtide":
        return asyncio.run(flowtide_case(case, store, folder, options))
    if engine == "langgraph":
        return langgraph_case(case, store, folder, options)
    return dbos_case(case, store, folder, options)


def in_process(engine: str, case: str, store: str, options: Any) -> Figures | None:
    """The figures of one case of one engine, measured in a process of its own."""
    command = [sys.executable, __file__, "--one", engine, case, store]
    command += ["--runs", str(options.runs), "--parks", *map(str, options.parks)]
    if case == "inflight":
        command[-len(options.parks) :] = [str(max(options.parks))]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=900, cwd=Path(__file__).parent
        )
    except subprocess.TimeoutExpired:
        print(f"  {engine} {case} {store}: took too long", flush=True)
        return None
    if done.returncode != 0:
        print(f"  {engine} {case} {store}: failed\n{done.stderr[-2000:]}", flush=True)
        return None
    figures: Figures = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def ratio(metric: str, ours: float, theirs: float) -> float:
    """> 1: Flowtide is faster."""
    if metric == "ratio" or metric.startswith("floor"):
        return float("nan")
    if any(metric.endswith(h) for h in HIGHER_IS_BETTER):
        return ours / theirs
    return theirs / ours


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5, help="timed runs per figure (median)")
    parser.add_argument("--parks", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--cases", nargs="+", choices=tuple(CASES), default=list(CASES))
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    parser.add_argument("--one", nargs=3, metavar=("ENGINE", "CASE", "STORE"))
    options = parser.parse_args()
    if options.one:
        engine, case, store = options.one
        print(json.dumps(one(engine, case, store, options)), flush=True)
        return
    print(describe(), flush=True)
    found: dict[tuple[str, str, str], list[Figures | None]] = {}
    for r in range(options.rounds):
        for case in options.cases:
            stores, engines = CASES[case]
            order = [e for e in engines if e in options.engines]
            if r % 2:
                order.reverse()
            for store in stores:
                for engine in order:
                    figures = in_process(engine, case, store, options)
                    found.setdefault((case, store, engine), []).append(figures)
                    print(f"round {r + 1} {case} {store} {engine}: {figures}", flush=True)
    report(found, options)


def report(found: dict[tuple[str, str, str], list[Figures | None]], options: Any) -> None:
    """Per case, store and metric: each engine's figure per round and the paired ratios."""
    print(
        "\n| case | store | metric | Flowtide (rounds) | peer | peer (rounds) | ratio per round |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for case in options.cases:
        stores, engines = CASES[case]
        for store in stores:
            ours = found.get((case, store, "flowtide"), [])
            metrics = sorted({m for f in ours if f for m in f})
            for metric in metrics:
                mine = [f.get(metric) if f else None for f in ours]
                compared = False
                for peer in engines[1:]:
                    kept = found.get((case, store, peer), [])
                    theirs = [f.get(metric) if f else None for f in kept]
                    if not any(t is not None for t in theirs):
                        continue
                    compared = True
                    ratios = [
                        f"{ratio(metric, a, b):.2f}" if a and b else "-"
                        for a, b in zip(mine, theirs, strict=False)
                    ]
                    print(
                        f"| {case} | {store} | {metric} | {shown(mine)} | {peer} | "
                        f"{shown(theirs)} | {' / '.join(ratios)} |"
                    )
                if not compared:
                    print(f"| {case} | {store} | {metric} | {shown(mine)} | - | - | - |")


def shown(values: list[float | None]) -> str:
    return " / ".join(f"{v:,.1f}" if v is not None else "-" for v in values)


if __name__ == "__main__":
    main()
