from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import FlowBuilder, node
from flowtide.errors import FlowValidationError
from flowtide.model import Join, JoinMode, Scatter, Subflow, Task, TimeoutAnchor, Wait


@node(outputs=["paid", "declined"], timeout="PT10M", timeout_anchor="node", register=False)
async def collect_payment(ctx: Any) -> str:
    return "paid"


@node(outputs=["retry", "give-up"], register=False)
def offer_retry(ctx: Any) -> str:
    return "retry"


def checkout() -> FlowBuilder:
    return (
        FlowBuilder("urn:shop:flow:checkout", name="checkout")
        .task(
            "collect-payment",
            collect_payment,
            {"paid": "done", "declined": "offer-retry", "timeout": "expired"},
            release_on=["paid"],
        )
        .task("offer-retry", offer_retry, {"retry": "collect-payment", "give-up": "expired"})
        .terminal("done")
        .terminal("expired", "expired")
    )


def test_builds_a_loop_with_settings_and_declared_node_types() -> None:
    builder = checkout()
    flow = builder.build()
    assert flow.entrypoints == {"main": "collect-payment"}
    task = flow.placement("collect-payment")
    assert isinstance(task, Task)
    assert task.node == collect_payment.id
    assert task.settings is not None and task.settings.release_on == ("paid",)
    declared = flow.node_type(collect_payment.id)
    assert declared is not None
    assert declared.settings.timeout == timedelta(minutes=10)
    assert declared.settings.anchor is TimeoutAnchor.NODE
    assert builder.registry.get(collect_payment.id) is collect_payment


def test_every_kind_can_be_built() -> None:
    child = (
        FlowBuilder("urn:test:child")
        .task("only", offer_retry, {"retry": "end", "give-up": "end"})
        .terminal("end")
        .build()
    )
    flow = (
        FlowBuilder("urn:test:all")
        .phase("setup", "pre", offer_retry)
        .task("start", offer_retry, {"retry": ["wait", "scatter"], "give-up": "sub"})
        .wait("wait", "PT10M", then="join")
        .scatter(
            "scatter",
            "items",
            offer_retry,
            {"all-success": "join", "partial": "join", "all-error": "join", "empty": "join"},
            concurrency=4,
            gather={"strategy": "collect"},
        )
        .join("join", "first", {"success": "end", "error": "end", "empty": "end"})
        .subflow("sub", child, {"success": "end", "error": "end"}, input={"x": "y"})
        .phase("cleanup", "post", offer_retry)
        .terminal("end")
        .build()
    )
    assert flow.entrypoints == {"main": "start"}
    assert isinstance(flow.placement("wait"), Wait)
    scatter = flow.placement("scatter")
    assert isinstance(scatter, Scatter) and scatter.concurrency == 4
    join = flow.placement("join")
    assert isinstance(join, Join) and join.mode is JoinMode.FIRST
    assert isinstance(flow.placement("sub"), Subflow)
    assert flow.placement("start").successors() == ("wait", "scatter", "sub")


def test_duplicate_placement_id_names_it() -> None:
    with pytest.raises(FlowValidationError, match="'done' is used twice"):
        checkout().terminal("done")


def test_undeclared_output_names_the_placement() -> None:
    with pytest.raises(FlowValidationError) as info:
        FlowBuilder("urn:x").task("pay", collect_payment, {"refunded": "end"})
    (problem,) = info.value.problems
    assert problem.placement == "pay"
    assert "does not declare output 'refunded'" in problem.message


def test_bad_setting_names_the_placement() -> None:
    with pytest.raises(FlowValidationError) as info:
        FlowBuilder("urn:x").task("pay", collect_payment, {"paid": "end"}, timeout_anchor="nod")
    (problem,) = info.value.problems
    assert problem.placement == "pay"
    assert "settings/timeout_anchor" in problem.message


def test_unknown_setting_names_the_placement() -> None:
    with pytest.raises(FlowValidationError, match="unknown setting 'timout'") as info:
        FlowBuilder("urn:x").task("pay", collect_payment, {"paid": "end"}, timout="PT1M")
    assert info.value.problems[0].placement == "pay"


def test_wait_needs_a_duration_or_an_instant() -> None:
    with pytest.raises(FlowValidationError, match="exactly one of 'duration' and 'until'") as info:
        FlowBuilder("urn:x").wait("w")
    assert info.value.problems[0].placement == "w"


def test_explicit_entrypoints_replace_the_default() -> None:
    flow = checkout().entrypoint("retry", "offer-retry").build()
    assert flow.entrypoints == {"retry": "offer-retry"}


def test_routes_may_name_the_outputs_of_the_placements_own_timers() -> None:
    remind = {"after": "PT1H", "output": "remind"}
    flow = (
        FlowBuilder("urn:x")
        .task(
            "pay",
            collect_payment,
            {"paid": "end", "declined": "end", "remind": "end"},
            timers=[remind],
        )
        .terminal("end")
        .build()
    )
    assert flow.placement("pay").route_map()["remind"] == ("end",)


def test_a_refused_placement_leaves_the_builder_unchanged() -> None:
    builder = FlowBuilder("urn:x").terminal("end")
    with pytest.raises(FlowValidationError):
        builder.task("pay", collect_payment, {"refunded": "end"})
    # The id is still free: nothing of the refused placement was kept.
    builder.task("pay", collect_payment, {"paid": "end", "declined": "end"})
    builder.entrypoint("main", "pay")
    assert [p.id for p in builder.build().placements] == ["end", "pay"]
