"""Checking a large flow costs in proportion to its size: 100,000 placements are checked in
seconds, not in hours."""

from __future__ import annotations

import json
import time
from pathlib import Path

from flowtide.cli.loading import load_files


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


def checked_in(path: Path, count: int) -> float:
    started = time.perf_counter()
    (loaded,) = load_files([path])
    took = time.perf_counter() - started
    assert loaded.flow is not None and len(loaded.warnings) == count
    return took


def test_checking_placements_without_node_types_is_linear(tmp_path: Path) -> None:
    small, large = 2_500, 20_000
    small_path, large_path = chain(tmp_path, small), chain(tmp_path, large)
    quick = min(checked_in(small_path, small) for _ in range(3))
    slow = checked_in(large_path, large)
    # Eight times the placements: about eight times the time when linear, 64 when quadratic.
    assert slow < 25 * quick, (quick, slow)
