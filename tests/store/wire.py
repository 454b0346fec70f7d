"""A TCP proxy in front of PostgreSQL that counts round trips, read from what the client sends:
the messages after which it waits for the server's answer (``Sync``, which ends an extended query
or a pipeline's batch; ``Flush``, which asks for the results so far; ``Query``, a simple query).
A ``Sync`` and a ``Flush`` sent one after the other (as psycopg ends a pipeline) are one wait."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from urllib.parse import urlsplit

from psycopg.conninfo import make_conninfo

_STARTUP = 196608
"""The protocol version a startup message carries (3.0); the messages before it (a request for
TLS or GSS encryption, refused here) carry no type byte."""
_SYNC_OR_FLUSH = {ord("S"), ord("H")}


class RoundTrips:
    """Forwards ``127.0.0.1:<port>`` to the server of ``url``; :attr:`count` is how many round
    trips its clients have begun so far."""

    def __init__(self, url: str) -> None:
        target = urlsplit(url)
        self._target = (target.hostname or "127.0.0.1", target.port or 5432)
        self._url = url
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.count = 0
        self.sent: list[str] = []
        """The type of every message the clients sent after starting up, in order."""

    @property
    def url(self) -> str:
        """``url``, through the proxy (without encryption: the proxy reads the messages)."""
        port = self._server.sockets[0].getsockname()[1] if self._server is not None else 0
        return make_conninfo(
            self._url, host="127.0.0.1", port=port, sslmode="disable", gssencmode="disable"
        )

    async def __aenter__(self) -> RoundTrips:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self._target)
        tasks = {
            asyncio.ensure_future(self._from_client(reader, up_writer)),
            asyncio.ensure_future(_pipe(up_reader, writer)),
        }
        self._tasks |= tasks
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks -= tasks
        writer.close()
        up_writer.close()

    async def _from_client(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while True:  # (untyped messages, up to the startup message)
                head = await reader.readexactly(8)
                length, code = struct.unpack("!ii", head)
                writer.write(head + await reader.readexactly(length - 8))
                await writer.drain()
                if code == _STARTUP:
                    break
            last = 0
            while True:
                head = await reader.readexactly(5)
                kind, length = head[0], struct.unpack("!i", head[1:])[0]
                if kind == ord("Q") or (kind in _SYNC_OR_FLUSH and last not in _SYNC_OR_FLUSH):
                    self.count += 1
                self.sent.append(chr(kind))
                last = kind
                writer.write(head + await reader.readexactly(length - 4))
                await writer.drain()
        writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.close()
