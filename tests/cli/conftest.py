"""Temporary folders made by the commands under test (``flowtide demo`` writes its charts to one
when given no ``--output``) go under each test's own ``tmp_path``."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from flowtide.demo.durable import DurableScene, Step


@pytest.fixture(autouse=True)
def temporary_folders_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


@pytest.fixture(autouse=True)
def store_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands that keep runs keep them in the test's own store, never in the working
    directory."""
    monkeypatch.setenv("FLOWTIDE_STORE", f"sqlite:///{tmp_path / 'runs.db'}")


def canned_scene(example: Path, folder: Path) -> DurableScene:
    """A durable scene as ``flowtide demo`` plays it, without its processes."""
    return DurableScene(
        "sqlite:////tmp/flowtide-demo/payments.db",
        "0123456789abcdef",
        [
            Step(0.0, "flowtide start", "run 01234567 stored in payments.db"),
            Step(1.5, "kill -9", "worker 1 is killed; the run stays in payments.db"),
            Step(8.6, "worker 2", "the window ends 8 s after the first try: expired"),
        ],
        "expired",
        "completed",
        "expired",
    )


@pytest.fixture(autouse=True)
def canned_durable_scene(monkeypatch: pytest.MonkeyPatch) -> None:
    """``flowtide demo``'s durable scene runs processes in real time (seconds): the demo's
    tests see a canned one (``tests/demo/test_durable.py`` plays the real one)."""
    monkeypatch.setattr("flowtide.cli.demo.play_durable", canned_scene)
