"""docs/client.md lists every method of the clients, both clients have the same methods, and
its Python compiles."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from flowtide import AsyncClient, Client

DOC = (Path(__file__).resolve().parents[2] / "docs" / "client.md").read_text()


def methods(cls: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(cls, inspect.isfunction) if name[0] != "_"}


def test_both_clients_have_the_same_methods_and_signatures() -> None:
    assert methods(Client) == methods(AsyncClient)
    for name in methods(Client):
        assert inspect.signature(getattr(Client, name)) == inspect.signature(
            getattr(AsyncClient, name)
        ), name


def test_the_doc_lists_every_method_with_its_signature() -> None:
    listed = dict(re.findall(r"^\| `(\w+)\((.*?)\)` \|", DOC, flags=re.M))
    assert set(listed) | {"close"} == methods(Client)
    for name, shown in listed.items():
        assert shown == plain(getattr(Client, name)), name


def plain(method: object) -> str:
    """``method``'s parameters as the doc shows them: no annotations, no ``self``."""
    parts: list[str] = []
    for p in list(inspect.signature(method).parameters.values())[1:]:  # type: ignore[arg-type]
        if (
            p.kind is p.KEYWORD_ONLY
            and "*" not in parts
            and not any(x.startswith("*") for x in parts)
        ):
            parts.append("*")
        star = "*" if p.kind is p.VAR_POSITIONAL else ""
        default = "" if p.default is p.empty else f"={p.default!r}"
        parts.append(f"{star}{p.name}{default}")
    return ", ".join(parts)


def test_the_doc_python_compiles() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC, flags=re.S)
    assert blocks
    handler = blocks[0]
    compile(handler, "client.md", "exec")
    body = handler.split("def approve", 1)[1].splitlines()[1:]
    assert len([line for line in body if line.strip()]) == 5, "the handler's five lines"
