"""Stand-in node implementations for the bundled examples, so they can run end to end.

Each module holds the nodes of some examples, under the IRIs the examples name, in its ``NODES``
(what ``flowtide run FILE --nodes MODULE`` registers), and a scripted run for ``flowtide demo``.
:data:`EXAMPLE_NODES` says which module runs which bundled example.
"""

from flowtide.demo.approval import approval_registry, run_approval_demo
from flowtide.demo.checkout import checkout_registry, run_checkout_demo
from flowtide.demo.dispatcher import (
    DEMO_MESSAGES,
    dispatcher_registry,
    run_dispatcher_demo,
)

EXAMPLE_NODES: dict[str, str] = {
    "checkout-node-anchor.yaml": "flowtide.demo.checkout",
    "checkout-wait-branch.yaml": "flowtide.demo.checkout",
    "escalation-ladder.yaml": "flowtide.demo.approval",
    "support-dispatcher-timeouts.jsonld": "flowtide.demo.dispatcher",
    "support-dispatcher.jsonld": "flowtide.demo.dispatcher",
}
"""Bundled example file name -> the module whose ``NODES`` run it."""

__all__ = [
    "DEMO_MESSAGES",
    "EXAMPLE_NODES",
    "approval_registry",
    "checkout_registry",
    "dispatcher_registry",
    "run_approval_demo",
    "run_checkout_demo",
    "run_dispatcher_demo",
]
