"""Serving the application with uvicorn until SIGTERM or Ctrl-C."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

import uvicorn
from fastapi import FastAPI

__all__ = ["run_server"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Server(uvicorn.Server):
    """Stops on SIGTERM or Ctrl-C (a second one: at once) and returns, so that the process
    exits 0 once stopped, as ``flowtide worker`` does (uvicorn raises the signal again)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        previous = {s: signal.signal(s, self.handle_exit) for s in STOP_SIGNALS}
        try:
            yield
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)


def run_server(app: FastAPI, host: str, port: int) -> None:
    """Serve ``app`` on ``host``:``port`` until stopped (its lifespan drains its worker)."""
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
    _Server(config).run()
