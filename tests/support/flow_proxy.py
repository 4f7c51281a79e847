"""A small asyncio TCP proxy whose established flows can be killed silently.

``freeze()`` makes every flow open at that moment drop all bytes in both
directions while its sockets stay open: what a client sees when a NAT forgets
its flows or the host's address moves. Connections opened afterwards are
forwarded normally. It runs on the test's event loop (127.0.0.1, a free port).
"""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["FlowProxy"]


class _Flow:
    __slots__ = ("frozen", "writers")

    def __init__(self) -> None:
        self.frozen = False
        self.writers: list[asyncio.StreamWriter] = []


class FlowProxy:
    """Forwards 127.0.0.1:``port`` to ``target_host:target_port``."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.flows: list[_Flow] = []
        self.accepted = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> FlowProxy:
        """Listen on a free port (``self.port``)."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def freeze(self) -> int:
        """Silently kill every established flow; returns how many."""
        live = [flow for flow in self.flows if not flow.frozen]
        for flow in live:
            flow.frozen = True
        return len(live)

    async def close(self) -> None:
        """Stop listening and close every flow."""
        if self._server is not None:
            self._server.close()
        for flow in self.flows:
            for writer in flow.writers:
                writer.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        flow = _Flow()
        flow.writers = [writer, up_writer]
        self.flows.append(flow)
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pump(source, sink, flow))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter, flow: _Flow) -> None:
        try:
            while True:
                data = await source.read(65536)
                if not data:
                    break
                if flow.frozen:
                    continue  # dropped: the peer never learns
                sink.write(data)
                await sink.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            if not flow.frozen:
                sink.close()
