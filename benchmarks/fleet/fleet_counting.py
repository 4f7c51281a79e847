"""Client-side store counters of a benchmark worker (``benchmarks/fleet/fleet.py``).

What is counted in-process, per store kind:

- **redis**: every write of redis-py's asyncio connection
  (``send_packed_command``: one command, or one whole pipeline) is one round
  trip (``round_trips``); every command packed (``pack_command``, also for
  each command of a pipeline) is counted by name (``cmd:<name>``), so the
  parent can tell the commands the client sent from the ones the server's
  scripts ran (``INFO commandstats`` counts both).
- **sqlite**: every ``sqlite3`` connection opened afterwards (aiosqlite opens
  them with ``sqlite3.connect`` in its thread) gets a trace callback: every
  statement executed is counted (``statements``), and so is every ``BEGIN``
  (``transactions``: the explicit transactions; a write statement outside one
  would be a transaction of its own, which the backends do not send).
- **postgres**, **nats**, **memory**: nothing in-process; PostgreSQL and
  NATS are counted by the server (see ``fleet_stores``).

The counting costs well under a microsecond per call; it is on in both the
anarchon fleet and the raw reference, so they are measured alike.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable
from typing import Any

_counts: Counter[str] = Counter()


def snapshot() -> dict[str, float]:
    """The counters so far (a copy)."""
    return {key: float(value) for key, value in _counts.items()}


def install(kind: str) -> Callable[[], dict[str, float]]:
    """Start counting for store ``kind``; returns :func:`snapshot`."""
    if kind == "redis":
        _install_redis()
    elif kind == "sqlite":
        _install_sqlite()
    return snapshot


def _install_redis() -> None:
    from redis.asyncio import connection

    owner: Any = next(c for c in connection.Connection.__mro__ if "send_packed_command" in vars(c))
    packer: Any = next(c for c in connection.Connection.__mro__ if "pack_command" in vars(c))
    send = owner.send_packed_command
    pack = packer.pack_command
    counts = _counts

    async def send_packed_command(self: Any, command: Any, check_health: bool = True) -> None:
        counts["round_trips"] += 1
        await send(self, command, check_health)

    def pack_command(self: Any, *args: Any) -> Any:
        if args:
            name = args[0]
            if isinstance(name, bytes):
                name = name.decode()
            counts[f"cmd:{str(name).split()[0].lower()}"] += 1
        return pack(self, *args)

    owner.send_packed_command = send_packed_command
    packer.pack_command = pack_command


def _install_sqlite() -> None:
    connect = sqlite3.connect
    counts = _counts

    def trace(statement: str) -> None:
        counts["statements"] += 1
        if statement.lstrip()[:5].upper() == "BEGIN":
            counts["transactions"] += 1

    def counting_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = connect(*args, **kwargs)
        conn.set_trace_callback(trace)
        return conn

    sqlite3.connect = counting_connect  # type: ignore[assignment]
