"""The example flows that ship with Flowtide.

A wheel carries the repository's ``examples/`` folder as ``flowtide/examples``; a checkout (or an
editable install) reads the repository's ``examples/`` directly.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

DOCUMENT_SUFFIXES = (".jsonld", ".json", ".yaml", ".yml")


def examples_dir() -> Path | None:
    """Where the bundled examples are, or ``None`` when this installation has none."""
    packaged = files("flowtide") / "examples"
    if isinstance(packaged, Path) and packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parents[3] / "examples"
    if checkout.is_dir():
        return checkout
    return None


def bundled_examples() -> list[Path]:
    """Every example flow document, sorted by file name."""
    folder = examples_dir()
    if folder is None:
        return []
    return sorted(
        (p for p in folder.iterdir() if p.is_file() and p.suffix in DOCUMENT_SUFFIXES),
        key=lambda p: p.name,
    )
