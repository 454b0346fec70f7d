"""The dashboard's files ship inside the package, every asset local (no CDN), and the vendored
Mermaid bundle is the one its notes name."""

from __future__ import annotations

import hashlib
import re
from importlib.resources import files

STATIC = files("flowtide.server") / "static"


def test_every_page_asset_is_in_the_package() -> None:
    index = (STATIC / "index.html").read_text(encoding="utf-8")
    for asset in re.findall(r'(?:src|href)="(/static/[^"]+)"', index):
        assert (STATIC / asset.removeprefix("/static/")).is_file(), asset
    scripts = [p for p in STATIC.iterdir() if p.name.endswith(".js")]
    for script in scripts:
        text = script.read_text(encoding="utf-8")
        for module in re.findall(r'from "\./([^"]+)"', text):
            assert (STATIC / module).is_file(), f"{script.name} imports {module}"
        assert "https://" not in text and "http://" not in text, f"{script.name} loads remotely"


def test_the_vendored_mermaid_is_the_version_and_checksum_its_notes_give() -> None:
    notes = (STATIC / "vendor" / "README.md").read_text(encoding="utf-8")
    bundle = (STATIC / "vendor" / "mermaid.min.js").read_bytes()
    version = re.search(r"\| (\d+\.\d+\.\d+) \| MIT", notes)
    checksum = re.search(r"sha256 of `mermaid.min.js`: `([0-9a-f]{64})`", notes)
    assert version is not None and checksum is not None
    assert f'version:"{version.group(1)}"'.encode() in bundle
    assert hashlib.sha256(bundle).hexdigest() == checksum.group(1)
    assert (STATIC / "vendor" / "mermaid.LICENSE").read_text(encoding="utf-8").startswith("The MIT")
