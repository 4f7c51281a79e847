"""``FaultProxy``: a TCP proxy between one instance and its store, for fault scenarios.

It runs its own event loop in a daemon thread, so a test (sync or async) or
a process harness can switch its mode at any moment:

- ``pass``: bytes flow both ways.
- ``blackhole``: connections are still accepted, but nothing is forwarded, on
  old and new connections alike; bytes wait in the socket buffers (as packets
  wait for TCP retransmission), so after :meth:`FaultProxy.heal` they are
  delivered in order, as after a real partition heals.
- ``dead_flows``: the connections open at the switch go silently dead for
  good (nothing forwarded, nothing closed: a NAT or firewall that forgot the
  flow), while new connections work.
- ``latency``: bytes flow, each chunk delayed by ``latency_ms`` towards the
  store and by ``return_ms`` (default: the same) back to the client, in order.

::

    proxy = FaultProxy("127.0.0.1", redis_port).start()
    url = f"redis://127.0.0.1:{proxy.port}/0"
    ...
    proxy.blackhole()
    ...
    proxy.heal()
    proxy.stop()
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

from anarchon.errors import InvalidConfigError

__all__ = ["MODES", "FaultProxy"]

MODES = ("pass", "blackhole", "dead_flows", "latency")
"""The proxy's modes (see the module docstring)."""

_CHUNK = 65536


@dataclass(eq=False)
class _Flow:
    """One proxied connection; ``dead`` flows never forward again."""

    writers: list[asyncio.StreamWriter] = field(default_factory=list)
    dead: bool = False


class FaultProxy:
    """A TCP proxy to ``target_host:target_port`` whose mode can be switched at any time."""

    def __init__(self, target_host: str, target_port: int, *, host: str = "127.0.0.1") -> None:
        self.target_host = target_host
        self.target_port = target_port
        self.host = host
        self._port = 0
        self._mode = "pass"
        self._latency_s = 0.0
        self._return_s = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self._open: asyncio.Event | None = None
        self._flows: set[_Flow] = set()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.accepted = 0

    # Lifecycle ---------------------------------------------------------

    @property
    def port(self) -> int:
        """The port the proxy listens on (after :meth:`start`)."""
        return self._port

    @property
    def mode(self) -> str:
        """The current mode."""
        return self._mode

    def start(self) -> FaultProxy:
        """Listen on a free port in a daemon thread; returns ``self``."""
        self._thread = threading.Thread(target=self._serve, name="fault-proxy", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise self._error
        if not self._port:
            raise RuntimeError("the fault proxy did not start within 10 s")
        return self

    def stop(self) -> None:
        """Close every connection and the listener; stop the thread."""
        loop = self._loop
        if loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # Modes -------------------------------------------------------------

    def set_mode(self, mode: str, *, latency_ms: int = 0, return_ms: int | None = None) -> int:
        """Switch to ``mode`` (one of :data:`MODES`).

        For ``latency``: ``latency_ms`` towards the store, ``return_ms`` back
        (``None``: the same). Returns how many open connections the switch
        made dead (``dead_flows``), else 0.
        """
        if mode not in MODES:
            raise InvalidConfigError(f"unknown proxy mode {mode!r}; expected one of {MODES}")
        back = latency_ms if return_ms is None else return_ms
        if latency_ms < 0 or back < 0:
            raise InvalidConfigError(
                f"latency must be >= 0 ms each way, got {latency_ms} and {back}"
            )
        loop = self._loop
        if loop is None:
            raise InvalidConfigError("the proxy is not started")
        done = threading.Event()
        killed = 0

        def switch() -> None:
            nonlocal killed
            assert self._open is not None
            self._mode = mode
            self._latency_s = latency_ms / 1000 if mode == "latency" else 0.0
            self._return_s = back / 1000 if mode == "latency" else 0.0
            if mode == "dead_flows":
                for flow in self._flows:
                    killed += not flow.dead
                    flow.dead = True
            if mode == "blackhole":
                self._open.clear()
            else:
                self._open.set()
            done.set()

        loop.call_soon_threadsafe(switch)
        if not done.wait(10):
            raise RuntimeError("the fault proxy did not switch its mode within 10 s")
        return killed

    def blackhole(self) -> None:
        """Forward nothing on any connection (connections are still accepted)."""
        self.set_mode("blackhole")

    def kill_flows(self) -> int:
        """The open connections go silently dead; new ones work. Returns how many died."""
        return self.set_mode("dead_flows")

    def latency(self, ms: int, *, return_ms: int | None = None) -> None:
        """Delay every chunk by ``ms`` towards the store and ``return_ms`` (default ``ms``) back.

        Chunks keep their order: a chunk is read, held for the delay, then
        written, so a later chunk waits behind an earlier one.
        """
        self.set_mode("latency", latency_ms=ms, return_ms=return_ms)

    def heal(self) -> None:
        """Back to ``pass``: held bytes are delivered; dead flows stay dead."""
        self.set_mode("pass")

    # Internals (the proxy's thread) -----------------------------------

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._listen())
        except BaseException as error:  # reported to start()
            self._error = error
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _listen(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._server = await asyncio.start_server(self._accept, self.host, 0)
        self._port = int(self._server.sockets[0].getsockname()[1])

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for flow in list(self._flows):
            for writer in flow.writers:
                writer.close()
        self._flows.clear()
        current = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._forward(reader, writer)
        except asyncio.CancelledError:
            # stop() cancels every connection's task on purpose; ending quietly here keeps
            # asyncio from logging "Exception in callback ... CancelledError" for each.
            return

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        flow = _Flow(writers=[writer])
        self._flows.add(flow)
        try:
            # In a blackhole, even the connection to the store waits (SYNs are lost).
            await self._gate(flow)
            up_reader, up_writer = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            writer.close()
            self._flows.discard(flow)
            return
        flow.writers.append(up_writer)
        try:
            await asyncio.gather(
                self._pump(flow, reader, up_writer, back=False),
                self._pump(flow, up_reader, writer, back=True),
            )
        finally:
            self._flows.discard(flow)
            for w in flow.writers:
                w.close()

    async def _gate(self, flow: _Flow) -> None:
        """Wait until ``flow`` may forward; a dead flow waits forever."""
        assert self._open is not None
        while True:
            if flow.dead:
                await asyncio.Event().wait()
            await self._open.wait()
            if not flow.dead:
                return

    async def _pump(
        self,
        flow: _Flow,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        back: bool,
    ) -> None:
        """Forward one direction: a delay line (each chunk held for the latency, in order)."""
        loop = asyncio.get_running_loop()
        line: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()
        sender = loop.create_task(self._deliver(flow, line, writer))
        try:
            while True:
                await self._gate(flow)
                data = await reader.read(_CHUNK)
                if not data:
                    break
                delay = self._return_s if back else self._latency_s
                line.put_nowait((loop.time() + delay, data))
            line.put_nowait(None)
            await sender
        except OSError:
            return  # the peer reset the connection: this direction is over
        finally:
            sender.cancel()
            writer.close()

    async def _deliver(
        self,
        flow: _Flow,
        line: asyncio.Queue[tuple[float, bytes] | None],
        writer: asyncio.StreamWriter,
    ) -> None:
        loop = asyncio.get_running_loop()
        while (item := await line.get()) is not None:
            due, data = item
            if (wait := due - loop.time()) > 0:
                await asyncio.sleep(wait)
            await self._gate(flow)  # a blackhole or dead flow holds what was read
            writer.write(data)
            await writer.drain()
