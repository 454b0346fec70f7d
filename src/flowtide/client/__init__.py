"""Clients for applications: start, signal, cancel and read runs, and register flows, from the
store alone (workers run the nodes). :class:`Client` for synchronous code, :class:`AsyncClient`
for asyncio."""

from flowtide.client.aio import AsyncClient
from flowtide.client.registration import FlowSource
from flowtide.client.results import RegisteredFlow, RunSummary
from flowtide.client.sync import Client
from flowtide.store.base import StoredFlowVersion

__all__ = [
    "AsyncClient",
    "Client",
    "FlowSource",
    "RegisteredFlow",
    "RunSummary",
    "StoredFlowVersion",
]
