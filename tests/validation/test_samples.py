"""Every broken sample gives exactly the problems declared in ``expected.yaml``; good ones none.

Native samples (``.json``, ``.yaml``) go through :func:`build_flow`; malformed text and JSON-LD
go through :func:`flowtide.documents.load_document`, which maps pointers back to the document.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from flowtide.documents import load_document
from flowtide.errors import FlowValidationError, Problem
from flowtide.validation import build_flow

SAMPLES = Path(__file__).parent / "samples"
BROKEN = SAMPLES / "broken"
GOOD = SAMPLES / "good"
EXPECTED: dict[str, list[dict[str, str]]] = yaml.safe_load(
    (BROKEN / "expected.yaml").read_text(encoding="utf-8")
)
NATIVE = (".json", ".yaml")


def _samples(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name != "expected.yaml")


def _parse(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)


def _load_problems(path: Path) -> list[Problem]:
    """Every problem the documents layer reports for a file, errors raised or warnings kept."""
    try:
        return list(load_document(path).warnings)
    except FlowValidationError as exc:
        return list(exc.problems)


def _problems(path: Path) -> list[Problem]:
    if path.suffix in NATIVE and not path.stem.startswith("malformed"):
        flow, problems = build_flow(_parse(path))
        errors = [p for p in problems if p.severity == "error"]
        assert (flow is None) == bool(errors)
        return problems
    return _load_problems(path)


def _match(problems: list[Problem], expected: list[dict[str, str]]) -> None:
    found = Counter((p.severity, p.pointer) for p in problems)
    wanted = Counter((e.get("severity", "error"), e["pointer"]) for e in expected)
    listing = "\n".join(str(p) for p in problems)
    assert found == wanted, f"problems found:\n{listing}"
    unused = list(problems)
    for entry in expected:
        severity = entry.get("severity", "error")
        hit = next(
            (
                p
                for p in unused
                if p.pointer == entry["pointer"]
                and p.severity == severity
                and entry["contains"] in p.message
            ),
            None,
        )
        assert hit is not None, (
            f"no {severity} at {entry['pointer']!r} saying {entry['contains']!r}"
        )
        unused.remove(hit)


def test_every_broken_sample_declares_its_problems() -> None:
    assert sorted(EXPECTED) == sorted(p.name for p in _samples(BROKEN))


@pytest.mark.parametrize("path", _samples(BROKEN), ids=lambda p: p.name)
def test_broken_sample(path: Path) -> None:
    _match(_problems(path), EXPECTED[path.name])


@pytest.mark.parametrize(
    "path",
    [p for p in _samples(BROKEN) if p.suffix in NATIVE and not p.stem.startswith("malformed")],
    ids=lambda p: p.name,
)
def test_broken_sample_loads_with_the_same_pointers(path: Path) -> None:
    """The documents layer reports the same problems at the same places for native documents."""
    direct = Counter((p.severity, p.pointer) for p in _problems(path))
    assert Counter((p.severity, p.pointer) for p in _load_problems(path)) == direct


@pytest.mark.parametrize("path", _samples(GOOD), ids=lambda p: p.name)
def test_good_sample_has_no_errors(path: Path) -> None:
    if path.suffix in NATIVE:
        flow, problems = build_flow(_parse(path))
        assert flow is not None
    else:
        problems = list(load_document(path).warnings)
    assert [p for p in problems if p.severity == "error"] == []
    assert all("is not declared" in p.message for p in problems)
