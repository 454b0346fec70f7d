"""Flows and nodes the simulation tests play: a charge with a window and retries, a parent that
runs a review as a subflow, and real implementations to fall back on."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import yaml

from flowtide.authoring.nodes import NodeRegistry, node
from flowtide.documents import load_flow
from flowtide.engine import NodeContext
from flowtide.model.flow import Flow
from flowtide.simulation import Script, parse_script

CHARGE = """
id: urn:test:flow:charge
entrypoints: {main: charge}
node_types:
  - id: urn:test:node:charge
    parks: true
    outputs: [paid, declined]
    settings:
      timeout: PT5M
      retry: {max_attempts: 3, backoff: fixed, initial: PT10S}
placements:
  - id: charge
    kind: task
    node: urn:test:node:charge
    routes: {paid: done, declined: refused, timeout: late}
  - {id: done, kind: terminal, outcome: paid}
  - {id: refused, kind: terminal, outcome: declined}
  - {id: late, kind: terminal, outcome: late}
"""

SLOW = """
id: urn:test:flow:slow
entrypoints: {main: think}
placements:
  - {id: think, kind: task, node: urn:test:node:think, routes: {done: pause, timeout: late}}
  - {id: pause, kind: wait, duration: PT3H, routes: {elapsed: act}}
  - {id: act, kind: task, node: urn:test:node:act, routes: {done: end}}
  - {id: end, kind: terminal}
  - {id: late, kind: terminal, outcome: late}
"""

PARENT = """
id: urn:test:flow:parent
entrypoints: {main: review}
placements:
  - {id: review, kind: subflow, flow: "urn:test:flow:review", routes: {success: end}}
  - {id: end, kind: terminal}
"""

REVIEW = """
id: urn:test:flow:review
entrypoints: {main: approve}
node_types:
  - {id: urn:test:node:approve, parks: true, outputs: [approved, rejected]}
placements:
  - id: approve
    kind: task
    node: urn:test:node:approve
    routes: {approved: ok, rejected: turned-down}
  - {id: ok, kind: terminal, outcome: approved}
  - {id: turned-down, kind: terminal, outcome: rejected}
"""


def flow(text: str, *others: Flow) -> Flow:
    catalog = {f.id: f for f in others}
    return load_flow(text, format="yaml", registry=registry(), catalog=catalog)


def script(text: str) -> Script:
    return parse_script(yaml.safe_load(text))


@node(id="urn:test:node:charge", outputs=["paid", "declined"], register=False)
async def charge(ctx: NodeContext) -> Any:
    """The real charge: pays at once, and says so in the state."""
    ctx.state["charged_by"] = "the real node"
    return "paid"


@node(id="urn:test:node:think", outputs=["done"], timeout="PT1M", register=False)
async def think(ctx: NodeContext) -> str:
    """Thinks for 30 s of the run's clock (its own window: one minute)."""
    await ctx.clock.sleep(timedelta(seconds=30))
    return "done"


@node(id="urn:test:node:act", outputs=["done"], register=False)
def act(ctx: NodeContext) -> str:
    """Sync code, in a worker thread."""
    ctx.state["acted"] = True
    return "done"


@node(id="urn:test:node:crunch", outputs=["done"], timeout="PT1M", register=False)
def crunch(ctx: NodeContext) -> str:
    """Real work in a worker thread (tens of milliseconds), no virtual time at all."""
    ctx.state["digest"] = hashlib.sha256(b"x" * 20_000_000).hexdigest()[:8]
    return "done"


CRUNCH = """
id: urn:test:flow:crunch
entrypoints: {main: crunch}
placements:
  - {id: crunch, kind: task, node: "urn:test:node:crunch", routes: {done: end, timeout: late}}
  - {id: end, kind: terminal}
  - {id: late, kind: terminal, outcome: late}
"""


def registry() -> NodeRegistry:
    """The real implementations (the charge's is left out: see :func:`with_charge`)."""
    found = NodeRegistry()
    for impl in (think, act, crunch):
        found.register(impl)
    return found


def with_charge() -> NodeRegistry:
    found = registry()
    found.register(charge)
    return found


LOOP = """
id: urn:test:flow:loop
entrypoints: {main: tick}
node_types:
  - {id: urn:test:node:check, outputs: [again, stop]}
placements:
  - {id: tick, kind: wait, duration: PT1M, routes: {elapsed: check}}
  - {id: check, kind: task, node: urn:test:node:check, routes: {again: tick, stop: end}}
  - {id: end, kind: terminal}
"""
