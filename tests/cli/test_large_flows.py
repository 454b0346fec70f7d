"""Checking a large flow costs in proportion to its size: 100,000 placements are checked in
seconds, not in hours."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flowtide.cli.loading import load_files
from flowtide.errors import Problem


def chain(folder: Path, count: int) -> Path:
    """A flow of ``count`` tasks in a row whose nodes it does not declare (one warning each)."""
    placements = [
        {
            "id": f"p{i}",
            "kind": "task",
            "node": f"urn:test:node:n{i}",
            "routes": {"done": f"p{i + 1}" if i + 1 < count else "end"},
        }
        for i in range(count)
    ]
    document = {
        "id": "urn:test:flow:chain",
        "entrypoints": {"main": "p0"},
        "placements": [*placements, {"id": "end", "kind": "terminal"}],
    }
    path = folder / f"chain-{count}.json"
    path.write_text(json.dumps(document))
    return path


def test_checking_placements_without_node_types_is_linear(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Counted, not timed: each warning is compared with a few others at most, never with all
    # of them (20,000 warnings compared one by one are 200 million comparisons).
    count = 20_000
    path = chain(tmp_path, count)
    compared = 0
    equal = Problem.__eq__

    def counting(self: Problem, other: object) -> bool:
        nonlocal compared
        compared += 1
        return equal(self, other)

    monkeypatch.setattr(Problem, "__eq__", counting)
    (loaded,) = load_files([path])
    assert loaded.flow is not None and len(loaded.warnings) == count
    assert compared < 4 * count, compared
