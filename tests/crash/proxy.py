"""A TCP proxy between worker processes and PostgreSQL, in the test's event loop, that can cut
every connection and refuse new ones for a while (an outage), or answer new ones as a server
out of connections does ("too many clients already", SQLSTATE 53300) while those made go on,
then let them through again."""

from __future__ import annotations

import asyncio
import contextlib
import struct

_ENCRYPTION_REQUESTS = {80877103, 80877104}
"""The codes of a startup packet asking for TLS or GSS encryption (refused here: ``N``)."""
_CANCEL_REQUEST = 80877102
"""The code of a packet asking to cancel a query running on another connection."""
_TOO_MANY = b"SFATAL\0VFATAL\0C53300\0Msorry, too many clients already\0\0"
"""The fields of the error a server out of connections answers a new one with."""


class Proxy:
    """Forwards ``127.0.0.1:<port>`` to ``host:port``; :meth:`cut` starts an outage,
    :meth:`crowd` a want of connections, :meth:`restore` ends either."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.down = False
        self.full = False
        self.port = 0

    async def __aenter__(self) -> Proxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def cut(self) -> None:
        """Reset every connection through the proxy, and refuse new ones until restored."""
        self.down = True
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    def crowd(self) -> None:
        """Answer every new connection as a server that has none left, until restored (the
        connections made go on)."""
        self.full = True

    def restore(self) -> None:
        self.down = self.full = False

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.down:
            writer.transport.abort()
            return
        if self.full:
            with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                await _refuse(reader, writer, self._target)
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        self._writers -= {writer, up_writer}


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.transport.abort()


async def _refuse(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: tuple[str, int]
) -> None:
    """Read the client's startup packet and answer it with "too many clients already" (a
    request to cancel a query is passed on: a server out of connections still takes those)."""
    while True:
        head = await reader.readexactly(8)
        length, code = struct.unpack("!ii", head)
        packet = head + await reader.readexactly(length - 8)
        if code == _CANCEL_REQUEST:
            _, up_writer = await asyncio.open_connection(*target)
            up_writer.write(packet)
            await up_writer.drain()
            up_writer.close()
            return
        if code not in _ENCRYPTION_REQUESTS:
            break
        writer.write(b"N")
        await writer.drain()
    writer.write(b"E" + struct.pack("!i", len(_TOO_MANY) + 4) + _TOO_MANY)
    await writer.drain()
