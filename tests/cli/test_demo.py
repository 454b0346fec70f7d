"""``flowtide demo`` reads well at 80 columns: whole words, one time notation, scenes that say
what they show, and where the charts went."""

from __future__ import annotations

import io
import re
import tempfile
from pathlib import Path

import pytest
from rich.console import Console

from flowtide.cli import demo as demo_command
from tests.cli.conftest import canned_scene

BOX_DRAWING = re.compile("[\u2500-\u257f]")


def play(width: int, output: Path | None, monkeypatch: pytest.MonkeyPatch) -> str:
    """The demo's text as a terminal ``width`` columns wide shows it."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, highlight=False, soft_wrap=True, no_color=True)
    monkeypatch.setattr(demo_command, "out", console)
    demo_command.demo(output=output, show=False, json_output=False)
    return buffer.getvalue()


def words(text: str) -> set[str]:
    return set(BOX_DRAWING.sub(" ", text).split())


@pytest.fixture(scope="module")
def narrow_and_wide(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    charts = tmp_path_factory.mktemp("charts")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(demo_command, "play_durable", canned_scene)
        narrow = play(80, charts, monkeypatch)
        wide = play(400, charts, monkeypatch)
    return narrow, wide


def test_no_line_is_wider_than_80_columns(narrow_and_wide: tuple[str, str]) -> None:
    narrow, _ = narrow_and_wide
    assert max(len(line) for line in narrow.splitlines()) <= 80


def test_no_word_is_broken_at_80_columns(narrow_and_wide: tuple[str, str]) -> None:
    # Wrapped on spaces only: every word at 80 columns is a word of the unwrapped text.
    narrow, wide = narrow_and_wide
    assert words(narrow) - words(wide) == set()
    assert "…" not in narrow


def test_times_are_since_the_run_started(narrow_and_wide: tuple[str, str]) -> None:
    narrow, _ = narrow_and_wide
    clock_like = [w for w in words(narrow) if re.search(r"\d:\d\d", w)]
    assert clock_like
    for word in clock_like:
        assert re.fullmatch(r"\+\d+:\d\d(:\d\d)?(\.\d)?[.,)]*", word), word
    assert not re.search(r"\d{4}-\d\d-\d\d|\d\d:\d\dZ| min\b", narrow)


def test_each_scene_says_in_one_line_what_it_shows(narrow_and_wide: tuple[str, str]) -> None:
    narrow, _ = narrow_and_wide
    titles = [line for line in narrow.splitlines() if re.match(r"\d\. ", line)]
    assert [t[0] for t in titles] == ["1", "2", "3", "4", "5"]
    for number, (title, _setting) in enumerate(demo_command.SCENES, start=1):
        assert f"{number}. {title}" in titles


def test_it_says_where_the_charts_went(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "default"
    monkeypatch.setattr(tempfile, "mkdtemp", lambda prefix: str(folder))
    text = play(80, None, monkeypatch)
    assert f"Mermaid charts written to {folder}, one <example>.mmd each." in " ".join(text.split())
    assert sorted(p.name for p in folder.iterdir()) == [
        "checkout-node-anchor.mmd",
        "checkout-wait-branch.mmd",
        "escalation-ladder.mmd",
        "support-dispatcher-timeouts.mmd",
        "support-dispatcher.mmd",
    ]
