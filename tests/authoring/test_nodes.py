from datetime import timedelta
from typing import Any

import pytest

from flowtide.authoring import NodeImplementation, NodeRegistry, as_node, import_node, node
from flowtide.errors import FlowValidationError, NodeResolutionError
from flowtide.model import TimeoutAnchor


def test_sync_function_becomes_a_threaded_node() -> None:
    @node(outputs=["a", "b"], timeout="PT10M", timeout_anchor="node", register=False)
    def pick(ctx: Any) -> str:
        """Pick a branch."""
        return "a"

    assert isinstance(pick, NodeImplementation)
    assert pick.outputs == ("a", "b")
    assert pick.is_async is False
    assert pick.execution == "thread"
    assert pick.type.settings.timeout == timedelta(minutes=10)
    assert pick.type.settings.anchor is TimeoutAnchor.NODE
    assert pick.type.description == "Pick a branch."
    assert pick(None) == "a"
    # A local function cannot be imported back, so it carries no reference.
    assert pick.type.ref is None
    assert pick.id.endswith("test_sync_function_becomes_a_threaded_node.<locals>.pick")


def test_async_function_runs_on_the_loop() -> None:
    @node(register=False)
    async def fetch(ctx: Any) -> str:
        return "done"

    assert fetch.is_async is True
    assert fetch.execution == "inline"
    assert fetch.outputs == ("done",)


def test_async_node_refuses_thread_or_process_execution() -> None:
    with pytest.raises(TypeError, match="is async"):

        @node(execution="process", register=False)
        async def fetch(ctx: Any) -> str:
            return "done"


def test_inline_and_process_execution_for_sync_code() -> None:
    @node(execution="inline", register=False)
    def cheap(ctx: Any) -> str:
        return "done"

    assert cheap.execution == "inline"


def test_class_with_run_method() -> None:
    class Ask:
        def __init__(self) -> None:
            self.calls = 0

        async def run(self, ctx: Any) -> str:
            self.calls += 1
            return "yes"

    # mypy does not follow class decorators, so apply it as a call.
    ask = node(outputs=["yes", "no"], id="urn:test:node:ask", register=False)(Ask)
    assert ask.id == "urn:test:node:ask"
    assert ask.is_async is True


def test_class_without_run_is_refused() -> None:
    with pytest.raises(TypeError, match="run"):

        @node(register=False)
        class Nothing:
            pass


def test_bad_settings_raise_at_decoration_with_the_node_id() -> None:
    with pytest.raises(FlowValidationError) as info:

        @node(id="urn:test:bad", timeout="ten minutes", register=False)
        def bad(ctx: Any) -> str:
            return "done"

    assert "urn:test:bad" in str(info.value)
    assert "not an ISO 8601 duration" in str(info.value)


def test_duplicate_outputs_are_refused() -> None:
    with pytest.raises(FlowValidationError, match="declared twice"):

        @node(outputs=["a", "a"], register=False)
        def twice(ctx: Any) -> str:
            return "a"


def test_registry_refuses_a_different_node_under_a_taken_id() -> None:
    reg = NodeRegistry()

    @node(id="urn:test:one", register=False)
    def first(ctx: Any) -> str:
        return "done"

    @node(id="urn:test:one", register=False)
    def second(ctx: Any) -> str:
        return "done"

    reg.register(first)
    reg.register(first)  # the same object again is fine
    with pytest.raises(ValueError, match="already registered"):
        reg.register(second)
    assert reg.get("urn:test:one") is first
    assert "urn:test:one" in reg
    assert list(reg) == ["urn:test:one"]


@pytest.mark.parametrize(
    "ref",
    [
        "tests.authoring.nodes_for_import:decorated",
        "tests.authoring.nodes_for_import:plain",
        "urn:nowhere:node",
        "os:rename",
    ],
)
def test_resolve_never_imports_what_a_reference_names(ref: str) -> None:
    reg = NodeRegistry()
    with pytest.raises(NodeResolutionError) as caught:
        reg.resolve(ref)
    assert str(caught.value) == (
        f"node {ref!r} is not registered here: a --nodes module must register it (with @node)"
    )
    assert caught.value.refs == (ref,)
    assert len(reg) == 0


def test_resolve_gives_what_is_registered() -> None:
    from tests.authoring import nodes_for_import

    reg = NodeRegistry()
    reg.register(nodes_for_import.decorated)
    impl = reg.resolve("tests.authoring.nodes_for_import:decorated")
    assert impl is nodes_for_import.decorated
    assert impl.type.settings.timeout == timedelta(seconds=5)


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("urn:nowhere:node", "cannot import module 'urn'"),
        ("no-colon", "not a 'module:attribute' reference"),
        ("tests.authoring.nodes_for_import:missing", "has no attribute 'missing'"),
        ("tests.authoring.nodes_for_import:NOT_CALLABLE", "is not callable"),
        ("flowtide_no_such_module:x", "cannot import module"),
    ],
)
def test_unresolvable_references_say_why(ref: str, message: str) -> None:
    with pytest.raises(NodeResolutionError, match=message):
        import_node(ref)


def test_as_node_passes_implementations_through() -> None:
    @node(register=False)
    def n(ctx: Any) -> str:
        return "done"

    assert as_node(n) is n
