"""Fleet membership in Redis (docs/backends/redis.md, "Keys"; docs/fleet.md, "Membership").

One key for every strategy, a plain hash (one key per call, so a cluster
needs no hash tag):

- ``<prefix>members``: field ``<instance_id>`` → JSON ``{"r": roster, "seen":
  ms, "exp": ms}`` (server clock).

A refresh is one ``EVALSHA`` of ``lua/members.lua``: ``HSET`` of the field at
``TIME``, ``HDEL`` of the expired fields and the whole hash back, so its cost
grows with the members, never with the jobs. A read runs the same script
without writing. A field that is not such JSON is left in place, skipped and
reported once by key and field (:mod:`anarchon.backend.foreign`); the key
holding another type raises ``ForeignDataError`` naming it.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from anarchon.backend.foreign import entry_name, skip_unreadable, stored_int
from anarchon.backend.membership import live_members
from anarchon.fleet.types import Member

from anarchon_redis._client import Connection, text
from anarchon_redis._fleet import hash_pairs
from anarchon_redis._lua import MEMBERS

__all__ = ["leave", "members", "refresh"]


def _key(prefix: str) -> str:
    return prefix + "members"


def _member(instance_id: str, raw: str) -> Member:
    value = json.loads(raw)
    roster = value["r"]
    if not isinstance(roster, str):
        raise TypeError(f"r is not a string: {roster!r}")
    return Member(instance_id, roster, stored_int(value["seen"]), stored_int(value["exp"]))


def _answer(key: str, reply: Any) -> list[Member]:
    """The script's ``{now, HGETALL}`` as the live members, sorted; unreadable fields skipped."""
    now = stored_int(text(reply[0]))
    found = (
        skip_unreadable(entry_name(key, field), "a member record", partial(_member, field, raw))
        for field, raw in hash_pairs(reply[1])
    )
    return live_members((m for m in found if m is not None), now)


async def refresh(
    conn: Connection, prefix: str, instance_id: str, roster: str, ttl_ms: int
) -> list[Member]:
    """Write this instance's record at server time, drop expired ones; every live member."""
    key = _key(prefix)
    reply = await conn.evalsha(MEMBERS, (key,), (instance_id, roster, str(ttl_ms)))
    return _answer(key, reply)


async def leave(conn: Connection, prefix: str, instance_id: str) -> None:
    """``HDEL`` this instance's record (nothing if there is none)."""
    await conn.execute("HDEL", _key(prefix), instance_id)


async def members(conn: Connection, prefix: str) -> list[Member]:
    """Every live member, sorted (the script's read: nothing is written)."""
    key = _key(prefix)
    return _answer(key, await conn.evalsha(MEMBERS, (key,), ("", "", "")))
