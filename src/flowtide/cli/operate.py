"""``flowtide start``, ``signal`` and ``cancel``: act on stored runs, which workers drive."""

from __future__ import annotations

import asyncio
import shlex
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from flowtide.cli.code import Code, current_directory_first, load_modules
from flowtide.cli.common import (
    BadInput,
    ExitCode,
    NodesOption,
    WithOption,
    err,
    escape,
    guarded,
    out,
)
from flowtide.cli.inputs import flows_to_run, parse_deadline, parse_state
from flowtide.cli.stores import (
    DEFAULT,
    JsonOption,
    StoreOption,
    client,
    emit_json,
    resolve_run,
    shown_store,
    store_note,
    store_option,
    unknown_run,
)
from flowtide.client.views import receipt_json
from flowtide.engine import (
    Engine,
    RefusalReason,
    RequestPending,
    SignalReceipt,
    SignalRefused,
    UnknownFlowError,
)
from flowtide.engine.run.children import open_parks
from flowtide.engine.state.limits import InvalidKeyError, ValueTooLargeError
from flowtide.model.flow import Flow
from flowtide.store.base import Store, StoreError, UnknownRunError

FlowArgument = Annotated[
    str,
    typer.Argument(
        metavar="FLOW",
        help="A flow document (JSON-LD, JSON or YAML), or the id of a flow registered in the "
        "store (flowtide flows register): its latest version.",
        show_default=False,
    ),
]
RunArgument = Annotated[
    str, typer.Argument(metavar="RUN", help="The run's id, or the start of it that only it has.")
]


@guarded
def start(
    flow: FlowArgument,
    input: Annotated[
        str, typer.Option("--input", "-i", help="The initial state, a JSON object.")
    ] = "{}",
    deadline: Annotated[
        str | None,
        typer.Option(
            "--deadline",
            help="A deadline for the whole run: a duration (PT5M, or milliseconds) or an "
            "instant with a time zone.",
        ),
    ] = None,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="The run's id (default: a new one).")
    ] = None,
    nodes: NodesOption = None,
    others: WithOption = None,
    store: StoreOption = DEFAULT,
    json_output: JsonOption = False,
) -> None:
    """Start a run of FLOW in the store and print its id; a worker (flowtide worker) runs it.

    FLOW is a flow document, kept in the store with the run, so workers need only the code of
    its nodes (with --nodes, the flow is also checked against that code here); or, when it is
    no file, the id of a flow registered in the store, whose latest version runs. Exits 0 once
    the run is stored, 2 on bad input.
    """
    state = parse_state(input)
    when = parse_deadline(deadline)
    with current_directory_first():
        code = load_modules(nodes or [])
        if Path(flow).exists():
            # Without --nodes the flow is not checked against code: the workers have it.
            flows = flows_to_run(Path(flow), others or [], code if nodes else None)
            started = asyncio.run(_start(store, flows, code, state, when, run_id))
        else:
            if others:
                raise BadInput(f"--with goes with a flow document; {flow!r} is no file")
            started = asyncio.run(_start(store, flow, code, state, when, run_id))
    if json_output:
        emit_json(started)
        return
    rid = started["run_id"]
    out.print(
        f"started run [bold]{escape(rid)}[/] of {escape(started['flow'])} "
        f"(version {escape(started['version'])})"
    )
    where = store_option(store)
    worker = "flowtide worker" + "".join(f" --nodes {shlex.quote(n)}" for n in nodes or []) + where
    out.print(
        f"  [dim]a worker runs it: {escape(worker)}; see it: flowtide show {escape(rid + where)}[/]"
    )
    note = store_note(store)
    if note is not None:
        out.print(f"  [dim]{escape(note)}[/]")


async def _start(
    url: str,
    flows: list[Flow] | str,
    code: Code,
    state: dict[str, Any],
    deadline: timedelta | datetime | None,
    run_id: str | None,
) -> dict[str, Any]:
    """Start a run of the first of ``flows`` (the others: flows it runs), or of the flow
    stored under the id ``flows``."""
    known = flows if isinstance(flows, list) else []
    async with client(url, flows=known, registry=code.registry()) as engine:
        try:
            first = known[0] if known else str(flows)
            handle = await engine.start(first, state, deadline=deadline, run_id=run_id)
        except UnknownFlowError as exc:
            raise await _no_such_flow(engine, exc.flow_id, url) from None
        except (StoreError, ValueTooLargeError, InvalidKeyError) as exc:
            raise BadInput(f"cannot start the run: {exc}") from None
        run = await engine.store.get_run(handle.run_id)
    return {
        "run_id": run.id,
        "flow": run.flow_id,
        "version": run.flow_version,
        "lifecycle": run.lifecycle,
        "deadline": run.deadline,
    }


async def _no_such_flow(engine: Engine, flow: str, url: str) -> BadInput:
    ids = sorted({v.flow_id for v in await engine.store.flow_versions()})
    stored = f"stored flows: {', '.join(ids)}" if ids else "no flow is stored there"
    return BadInput(
        f"{flow!r} is neither a file nor the id of a flow stored in {shown_store(url)} ({stored})"
    )


WaitOption = Annotated[
    float,
    typer.Option(
        "--wait",
        metavar="SECONDS",
        min=0,
        help="How long to wait for the answer of the worker that holds the run (0: return once "
        "recorded).",
    ),
]
OldNodesOption = Annotated[
    list[str] | None,
    typer.Option("--nodes", "-n", hidden=True, help="Not needed any more (ignored)."),
]


@guarded
def signal(
    run: Annotated[
        str | None,
        typer.Argument(
            metavar="[RUN]", help="The run's id, or the start of it (optional with --key)."
        ),
    ] = None,
    placement: Annotated[
        str | None, typer.Option("--placement", "-p", help="The parked placement.")
    ] = None,
    key: Annotated[
        str | None, typer.Option("--key", "-k", help="The park's correlation key.")
    ] = None,
    payload: Annotated[
        str, typer.Option("--payload", help="A JSON object merged into the run's state.")
    ] = "{}",
    output: Annotated[
        str | None,
        typer.Option(
            "--output", help="Move the token on by this output (default: its node runs again)."
        ),
    ] = None,
    idempotency_key: Annotated[
        str | None,
        typer.Option("--idempotency-key", help="Repeating a signal with this key changes nothing."),
    ] = None,
    wait: WaitOption = 10.0,
    nodes: OldNodesOption = None,
    store: StoreOption = DEFAULT,
    json_output: JsonOption = False,
) -> None:
    """Signal a parked token, by RUN and --placement or by --key.

    The signal is recorded in the store and applied by the worker that holds the run (or the
    next one to take it), as of the instant it was recorded: a signal recorded before the
    park's deadline wins. No node code is needed here. Exits 0 when the signal was accepted (or
    answered already, with the same --idempotency-key), 3 when it was refused (the park
    expired, the token moved on, the run ended: the reason is printed), 4 when no worker
    answered within --wait seconds (it stays recorded, and is applied when a worker takes the
    run), 2 on bad input (an unknown run, placement or key, no --placement or --key, a payload
    that is not a JSON object).
    """
    if placement is None and key is None:
        raise BadInput("say which park to signal: --placement PLACEMENT (with RUN) or --key KEY")
    if placement is not None and run is None:
        raise BadInput("--placement needs the RUN it is in")
    data = parse_state(payload, "--payload")
    answer = asyncio.run(_signal(store, run, placement, key, data, output, idempotency_key, wait))
    if isinstance(answer, RequestPending):
        _pending(answer, json_output)
    if isinstance(answer, SignalRefused):
        if json_output:
            emit_json({"accepted": False, "reason": answer.reason, "message": str(answer)})
        else:
            err.print(f"[yellow]refused[/] ({answer.reason}): {escape(str(answer))}")
        raise typer.Exit(ExitCode.REFUSED)
    if json_output:
        emit_json({"accepted": True, **receipt_json(answer)})
        return
    again = " (answered already: nothing changed)" if answer.duplicate else ""
    out.print(
        f"signalled [bold]{escape(answer.placement)}[/] of run {escape(answer.run_id)}{again}"
    )


def _pending(pending: RequestPending, json_output: bool) -> NoReturn:
    """Say that a request is recorded and waits for a worker; exit 4."""
    if json_output:
        emit_json(
            {
                "accepted": None,
                "pending": True,
                "run_id": pending.run_id,
                "request_id": pending.request_id,
                "kind": pending.kind,
                "waited": pending.waited,
            }
        )
    else:
        waited = f"within {pending.waited:g} s" if pending.waited else "yet"
        err.print(
            f"[yellow]recorded[/]: the {pending.kind} of run {escape(pending.run_id)} is request "
            f"{escape(pending.request_id)}; no worker answered it {waited}. It is applied when "
            f"a worker takes the run (flowtide show {escape(pending.run_id)} lists it)."
        )
    raise typer.Exit(ExitCode.PENDING)


async def _signal(
    url: str,
    run: str | None,
    placement: str | None,
    key: str | None,
    payload: dict[str, Any],
    output: str | None,
    idempotency_key: str | None,
    wait: float,
) -> SignalReceipt | SignalRefused | RequestPending:
    async with client(url) as engine:
        if run is not None:
            run = await resolve_run(engine.store, run, url)
        try:
            if run is not None:
                await engine.store.get_run(run)
            return await engine.signal(
                run,
                placement=placement,
                key=key,
                payload=payload,
                output=output,
                idempotency_key=idempotency_key,
                wait=wait,
            )
        except SignalRefused as exc:
            if exc.reason is RefusalReason.UNKNOWN:
                raise await _misaddressed(engine.store, exc, run) from None
            return exc
        except RequestPending as exc:
            return exc
        except UnknownRunError as exc:
            raise unknown_run(exc, url) from None
        except (ValueTooLargeError, InvalidKeyError) as exc:
            raise BadInput(str(exc)) from None


async def _misaddressed(store: Store, refused: SignalRefused, run: str | None) -> BadInput:
    """A signal to a placement or key no token ever parked at: the user's mistake, said with
    what is parked."""
    if run is None:
        return BadInput(f"{refused}; no parked token has this key")
    parks = await open_parks(store, run)
    where = sorted({p.placement for p in parks})
    keys = sorted({p.key for p in parks if p.key is not None})
    if not where:
        return BadInput(f"{refused}; nothing is parked in run {run!r}")
    said = f"parked in run {run!r}: {', '.join(where)}"
    if keys:
        said += f" (keys: {', '.join(keys)})"
    return BadInput(f"{refused}; {said}")


@guarded
def cancel(
    run: RunArgument,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why, kept with the run's result.")
    ] = None,
    wait: WaitOption = 10.0,
    nodes: OldNodesOption = None,
    store: StoreOption = DEFAULT,
    json_output: JsonOption = False,
) -> None:
    """Cancel RUN: its running nodes are cancelled and it ends ``cancelled``.

    The cancel is recorded in the store and applied by the worker that holds the run (or the
    next one to take it). Exits 0 when it was cancelled, 3 when it had already ended (its
    lifecycle is printed), 4 when no worker answered within --wait seconds (it stays recorded),
    2 for an unknown run.
    """
    answer = asyncio.run(_cancel(store, run, reason, wait))
    if isinstance(answer, RequestPending):
        _pending(answer, json_output)
    run, cancelled, lifecycle = answer
    if json_output:
        emit_json({"run_id": run, "cancelled": cancelled, "lifecycle": lifecycle})
    elif cancelled:
        out.print(f"cancelled run [bold]{escape(run)}[/]")
    else:
        err.print(f"run {escape(run)} had already ended: {lifecycle}")
    if not cancelled:
        raise typer.Exit(ExitCode.REFUSED)


async def _cancel(
    url: str, given: str, reason: str | None, wait: float
) -> tuple[str, bool, str] | RequestPending:
    async with client(url) as engine:
        run = await resolve_run(engine.store, given, url)
        try:
            cancelled = await engine.cancel(run, reason, wait=wait)
            record = await engine.store.get_run(run)
        except RequestPending as exc:
            return exc
        except UnknownRunError as exc:
            raise unknown_run(exc, url) from None
    return run, cancelled, record.lifecycle


__all__ = ["cancel", "signal", "start"]
