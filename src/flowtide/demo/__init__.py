"""Stand-in node implementations for the bundled examples, so they can run end to end."""

from flowtide.demo.checkout import run_checkout_demo
from flowtide.demo.dispatcher import (
    DEMO_MESSAGES,
    dispatcher_registry,
    run_dispatcher_demo,
)

__all__ = ["DEMO_MESSAGES", "dispatcher_registry", "run_checkout_demo", "run_dispatcher_demo"]
