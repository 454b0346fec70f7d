"""A small Mermaid flowchart reader for tests: nodes, shapes, labels and labelled edges."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Longest openings first, so "(((" is not read as "(".
SHAPES: tuple[tuple[str, str, str], ...] = (
    ("terminal", '((("', '")))'),
    ("subflow", '[["', '"]]'),
    ("wait", '{{"', '"}}'),
    ("stadium", '(["', '"])'),
    ("scatter", '[/"', '"/]'),
    ("task", '["', '"]'),
    ("join", '{"', '"}'),
)
_ID = r"[^\s\[\]\(\)\{\}\"|]+"
_EDGE = re.compile(rf"^({_ID})\s+-->(?:\|(\"[^\"]*\"|[^|]*)\|)?\s+({_ID})$")
_NODE = re.compile(rf"^({_ID})(.*)$")
_ENTITY = re.compile(r"#(\w+);")
_NAMED = {"quot": '"', "lt": "<", "gt": ">", "amp": "&"}


@dataclass
class Node:
    id: str
    shape: str
    label: str
    notes: list[str]


@dataclass
class Graph:
    direction: str = ""
    comments: list[str] = field(default_factory=list)
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[tuple[str, str | None, str]] = field(default_factory=list)

    def labels(self) -> dict[str, str]:
        return {n.id: n.label for n in self.nodes.values()}

    def edge_set(self) -> list[tuple[str, str | None, str]]:
        return sorted(self.edges, key=lambda e: (e[0], e[1] or "", e[2]))


def decode(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name.isdigit():
            return chr(int(name))
        return _NAMED.get(name, match.group(0))

    return _ENTITY.sub(one, text)


def parse(text: str) -> Graph:
    """Read ``text``; raise ``ValueError`` naming any line that is not understood."""
    graph = Graph()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("%%{"):
            continue
        if line.startswith("%%"):
            graph.comments.append(line[2:].strip())
            continue
        if line.startswith("flowchart "):
            graph.direction = line.split()[1]
            continue
        edge = _EDGE.match(line)
        if edge:
            label = edge.group(2)
            if label is not None:
                label = decode(label[1:-1] if label.startswith('"') else label)
            graph.edges.append((edge.group(1), label, edge.group(3)))
            continue
        node = _NODE.match(line)
        if node:
            rest = node.group(2)
            for shape, opening, closing in SHAPES:
                if rest.startswith(opening) and rest.endswith(closing):
                    body = rest[len(opening) : -len(closing)]
                    if '"' in body:
                        break
                    parts = [decode(p) for p in body.split("<br/>")]
                    graph.nodes[node.group(1)] = Node(node.group(1), shape, parts[0], parts[1:])
                    break
            else:
                raise ValueError(f"line {number}: unknown shape: {raw!r}")
            if node.group(1) in graph.nodes:
                continue
        raise ValueError(f"line {number}: not understood: {raw!r}")
    return graph
