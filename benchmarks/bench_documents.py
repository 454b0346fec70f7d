"""Reading large flow documents: what ``flowtide validate`` and ``flowtide render`` spend.

Run with ``python benchmarks/bench_documents.py [placements ...]`` (default: 5,000 and 50,000;
``--runs N`` repeats each measurement in N fresh processes). Each document is a chain of blocks
of four placements: a task whose ``ok`` output splits into a task and a wait (``PT1M``), both
joined by an ``all`` join that leads to the next block; every task routes ``failed`` to a
terminal, every other task has a timeout, and the document declares the nodes' outputs: eight
node types shared by the tasks, or, with ``--own-node-types``, one for each task. It is written
once as YAML and once as JSON (the native shape), then, in a process of its own for each format
and run:

* **parse**: the text read into data (YAML: libyaml's C loader when PyYAML has it);
* **validate**: what ``flowtide validate`` does, the parse included (``load_files``: read,
  build, every check);
* **render**: what ``flowtide render`` does, the validation included, then the Mermaid chart.

The figures are seconds, the lowest and highest over the runs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine import describe

from flowtide.cli.loading import load_files
from flowtide.documents import Format, dump_flow, load_flow
from flowtide.documents.formats import parse_text
from flowtide.render import render_mermaid

NODE_TYPES = 8
"""How many node implementations the tasks share (each declared with its outputs)."""


def document(placements: int, *, own_node_types: bool = False) -> dict[str, Any]:
    """Native document data with ``placements`` placements (rounded down to 4 blocks + 2)."""
    blocks = max(1, (placements - 2) // 4)
    items: list[dict[str, Any]] = []
    nodes: list[str] = []
    for b in range(blocks):
        if own_node_types:
            nodes += [f"urn:bench:node:start-{b}", f"urn:bench:node:work-{b}"]
        else:
            nodes += [f"urn:bench:node:{b % NODE_TYPES}", f"urn:bench:node:{(b + 1) % NODE_TYPES}"]
        after = f"start-{b + 1}" if b + 1 < blocks else "done"
        settings = {"settings": {"timeout": "PT10M"}} if b % 2 == 0 else {}
        items += [
            {
                "id": f"start-{b}",
                "kind": "task",
                "node": nodes[-2],
                "routes": {"ok": [f"work-{b}", f"pause-{b}"], "failed": "failed"},
                **settings,
            },
            {
                "id": f"work-{b}",
                "kind": "task",
                "node": nodes[-1],
                "routes": {"ok": f"join-{b}", "failed": "failed"},
            },
            {
                "id": f"pause-{b}",
                "kind": "wait",
                "duration": "PT1M",
                "routes": {"elapsed": f"join-{b}"},
            },
            {
                "id": f"join-{b}",
                "kind": "join",
                "mode": "all",
                "routes": {"success": after, "error": "failed", "empty": "failed"},
            },
        ]
    items += [
        {"id": "done", "kind": "terminal"},
        {"id": "failed", "kind": "terminal", "outcome": "failed"},
    ]
    return {
        "id": f"urn:bench:flow:documents-{placements}",
        "entrypoints": {"main": "start-0"},
        "node_types": [{"id": ref, "outputs": ["ok", "failed"]} for ref in dict.fromkeys(nodes)],
        "placements": items,
    }


def write(placements: int, folder: Path, *, own_node_types: bool = False) -> dict[str, Path]:
    """The document as YAML and JSON files in ``folder``, written as Flowtide dumps them."""
    flow = load_flow(document(placements, own_node_types=own_node_types))
    paths = {}
    for fmt, suffix in ((Format.YAML, ".yaml"), (Format.JSON, ".json")):
        path = folder / f"flow-{placements}{suffix}"
        path.write_text(dump_flow(flow, fmt), encoding="utf-8")
        paths[fmt.value] = path
    return paths


def measure(path: Path, fmt: str) -> dict[str, float]:
    """Seconds to parse, to validate and to render the document at ``path``, in this process."""
    text = path.read_text(encoding="utf-8")
    t0 = time.perf_counter()
    parse_text(text, Format(fmt), str(path))
    t1 = time.perf_counter()
    (validated,) = load_files([path])
    t2 = time.perf_counter()
    assert validated.flow is not None and not validated.errors, validated.problems[:3]
    (loaded,) = load_files([path])
    assert loaded.flow is not None
    render_mermaid(loaded.flow)
    t3 = time.perf_counter()
    return {"parse": t1 - t0, "validate": t2 - t1, "render": t3 - t2}


def _span(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.2f} s" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}-{high:.2f} s"


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        print(json.dumps(measure(Path(sys.argv[2]), sys.argv[3])))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[5_000, 50_000])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per measurement")
    parser.add_argument(
        "--own-node-types", action="store_true", help="declare a node type for each task"
    )
    args = parser.parse_args()
    import yaml

    from flowtide.documents import formats

    fast = getattr(formats, "FAST_YAML_LOADER", None) is not None
    loader = "libyaml (CSafeLoader)" if fast else "PyYAML's pure-Python loader"
    print(describe())
    print(f"PyYAML {yaml.__version__}; Flowtide reads YAML with {loader}")
    print()
    print("| placements | format | size | parse | validate | render |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as folder:
        for size in args.sizes:
            paths = write(size, Path(folder), own_node_types=args.own_node_types)
            for fmt, path in paths.items():
                runs = []
                for _ in range(args.runs):
                    out = subprocess.run(
                        [sys.executable, __file__, "--one", str(path), fmt],
                        capture_output=True,
                        text=True,
                        check=True,
                    )
                    runs.append(json.loads(out.stdout))
                megabytes = path.stat().st_size / 1e6
                cells = " | ".join(
                    _span([r[k] for r in runs]) for k in ("parse", "validate", "render")
                )
                print(f"| {size:,} | {fmt.upper()} | {megabytes:.1f} MB | {cells} |", flush=True)


if __name__ == "__main__":
    main()
