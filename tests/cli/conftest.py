"""Temporary folders made by the commands under test (``flowtide demo`` writes its charts to one
when given no ``--output``) go under each test's own ``tmp_path``."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def temporary_folders_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


@pytest.fixture(autouse=True)
def store_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands that keep runs keep them in the test's own store, never in the working
    directory."""
    monkeypatch.setenv("FLOWTIDE_STORE", f"sqlite:///{tmp_path / 'runs.db'}")
