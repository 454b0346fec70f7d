"""The example flows that ship with Flowtide, and the simulation scripts that play them.

A wheel carries the repository's ``examples/`` folder as ``flowtide/examples``; a checkout (or an
editable install) reads the repository's ``examples/`` directly. A file named
``<name>.simulate.yaml`` (or ``.json``) is a script for ``flowtide simulate``, not a flow.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

DOCUMENT_SUFFIXES = (".jsonld", ".json", ".yaml", ".yml")
SCRIPT_MARK = ".simulate"
"""What the name of a simulation script has before its suffix: ``checkout.simulate.yaml``."""


def examples_dir() -> Path | None:
    """Where the bundled examples are, or ``None`` when this installation has none."""
    packaged = files("flowtide") / "examples"
    if isinstance(packaged, Path) and packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parents[3] / "examples"
    if checkout.is_dir():
        return checkout
    return None


def is_script(path: Path) -> bool:
    """Whether ``path`` names a simulation script (``<name>.simulate.yaml``)."""
    return path.suffix in DOCUMENT_SUFFIXES and path.stem.endswith(SCRIPT_MARK)


def bundled_examples() -> list[Path]:
    """Every example flow document, sorted by file name (the simulation scripts left out)."""
    return [p for p in _bundled() if not is_script(p)]


def bundled_scripts() -> list[Path]:
    """Every bundled simulation script, sorted by file name."""
    return [p for p in _bundled() if is_script(p)]


def _bundled() -> list[Path]:
    folder = examples_dir()
    if folder is None:
        return []
    return sorted(
        (p for p in folder.iterdir() if p.is_file() and p.suffix in DOCUMENT_SUFFIXES),
        key=lambda p: p.name,
    )
