"""A JSON line per request on the ``flowtide.server`` log (``serve --log-json``), and each
request counted for ``/metrics``. A line names the route's template, never the path as sent (a
callback URL's token is a secret), and never a header."""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flowtide.server.measures import Measures

__all__ = ["RequestLog", "route_of"]

log = logging.getLogger("flowtide.server")


def route_of(scope: Scope) -> str:
    """The template of the route the request matched (``/api/runs/{run}``), or ``other``:
    the router leaves the route it matched in the scope."""
    route = scope.get("route")
    return str(getattr(route, "path", "other"))


class RequestLog:
    def __init__(self, app: ASGIApp, *, enabled: bool, metrics: Measures) -> None:
        self.app = app
        self.enabled = enabled
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sent(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sent)
        finally:
            seconds = time.perf_counter() - started
            route = route_of(scope)
            self.metrics.request(route, status, seconds)
            if self.enabled:
                line = {
                    "at": datetime.now(UTC).isoformat(),
                    "method": scope.get("method"),
                    "route": route,
                    "status": status,
                    "ms": round(seconds * 1000, 3),
                }
                log.info(json.dumps(line))
