"""Flowtide's HTTP server (``flowtide serve``, extra ``flowtide[server]``): the API on a
store, its operations endpoints, and the dashboard's files. The server is a client: it needs
no node code (with ``--nodes`` it also runs a worker in the same process)."""

from flowtide.server.app import create_app
from flowtide.server.auth import Tokens, load_tokens
from flowtide.server.callbacks import callback_token

__all__ = ["Tokens", "callback_token", "create_app", "load_tokens"]
