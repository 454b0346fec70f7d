"""The docs link to one another by paths and headings that exist; engine.md is for users, and
architecture.md, for contributors, holds how the engine is built."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, as GitHub makes them."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    headings = re.findall(r"^#+ (.+)$", text, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_leads_somewhere(page: Path) -> None:
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: {target}"
        if anchor:
            assert anchor in anchors(linked), f"{page.name}: {target}"


def test_the_engine_doc_is_for_users_and_architecture_for_contributors() -> None:
    engine = (ROOT / "docs" / "engine.md").read_text()
    architecture = (ROOT / "docs" / "architecture.md").read_text()
    assert "## How the engine is built" not in engine
    for internal in ("StepLock", "claim_runs", "Commit.expect", "RunView", "RunHost"):
        assert internal not in engine, internal
        assert internal in architecture, internal
    assert "(architecture.md)" in engine
    assert "(docs/architecture.md)" in (ROOT / "README.md").read_text()
    assert "(engine.md)" in architecture
