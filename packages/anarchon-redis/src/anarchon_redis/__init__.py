"""Redis and Valkey backends for anarchon.

- :class:`RedisBackend` — ``redis://`` / ``rediss://`` (redis-py asyncio);
- :class:`ValkeyBackend` — ``valkey://`` / ``valkeys://`` (valkey-py asyncio);
- strategies (how exactly one instance wins a slot): :class:`Lease` (the
  default: leases through one Lua claim script), :class:`StreamId`
  (``XADD <slot>-0``), :class:`Idmp` (idempotent ``XADD``, Redis 8.6+) and
  :class:`Script` (a Lua scan of recent claims); the last three are claim-only.

The drivers are optional: ``pip install "anarchon[redis]"`` or
``"anarchon[valkey]"``; importing this package never imports them.
See ``docs/backends/redis.md``.
"""

from __future__ import annotations

from anarchon_redis.backend import DEFAULT_PREFIX, RedisBackend, RedisBackendBase, ValkeyBackend
from anarchon_redis.strategies import STRATEGIES, Idmp, Lease, Script, Strategy, StreamId

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_PREFIX",
    "STRATEGIES",
    "Idmp",
    "Lease",
    "RedisBackend",
    "RedisBackendBase",
    "Script",
    "Strategy",
    "StreamId",
    "ValkeyBackend",
    "__version__",
]
