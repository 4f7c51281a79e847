"""The Lua scripts, run with ``EVALSHA`` (Redis 5+, Valkey), loaded from ``lua/*.lua``.

Each script is its body ``lua/<name>.lua`` after the shared snippets it uses
(``lua/lib/*.lua``: helpers such as ``now_ms``, the run state codec, trimming),
joined in the order :func:`_script` is given them. Every part is read as text
and preceded by one newline, as when the parts were Python strings: a script's
source, and so its SHA1 (what ``EVALSHA`` names it by), changes only when its
Lua does.

``lease`` scripts touch only the keys of one job, which share the hash tag
``{<prefix><job>}``; they read the server clock with ``TIME`` (allowed before
writes since Redis 5, where scripts replicate by their effects). Claim-only
scripts touch one key each.

Run state lives in the ``state`` hash, one field per slot, as a small JSON
object (``cjson``) with these keys:

====  =========================================================
``a``  attempt (0 for a skipped slot)
``t``  token of the current attempt
``s``  status: ``running``, ``finished``, ``interrupted``, ``skipped``
``r``  runner (instance id of the current attempt)
``l``  lease expiry (server ms)
``b``  start of the current attempt (server ms)
``m``  max_attempts of the claim that started it
``x``  1 once released (hand-over), else 0
``e``  end reason (``handed_over``), when released
``f``  finish time (server ms), once ended
``o``  outcome given to ``finish`` (``ok``, ``error``, ...)
====  =========================================================

Bookkeeping fields sit beside the slots: ``~act`` (the slots of runs not
ended yet, comma-separated, written in the same ``HSET`` as the run's state),
``~n`` (writes so far, written the same way: trimming is checked every
``min(16, history_size)`` writes, not on each), ``~keep`` (the longest any
instance asked run state to be kept, ms), ``~ttl`` (when history is next
checked against ``history_ttl``) and ``~st`` (when run state may next be
trimmed, once every candidate was still needed). The scripts read these as
they write them (``whole()`` in ``lib/prelude.lua``: decimal digits only; Lua's
``tonumber`` also takes ``1e400``, ``nan`` and ``0x10``): anything else ends the
script with ``ANARCHON_FOREIGN_DATA <key>[<field>]`` (a claim trims before it
writes its run, so one that meets garbage writes nothing). A won claim is one ``HGET``,
one ``HMGET`` and one ``HSET``, a losing one an ``HGET``; a finish one
``HMGET`` and one ``HSET``; a result one ``ZADD`` (the scheduler sends a
finish and its result in one ``finish-save`` call) (and one ``HGET`` unless
the saving instance finished the run). As
``~act`` is rewritten whole, a write costs O(runs in progress of the job):
nothing for the usual one or two, noticeable for a job with thousands.

Every lease script but ``retry``, ``active`` and ``prepare`` takes a batch:
KEYS and ARGV hold one group per item, items run in order at one ``TIME``,
and the reply is one answer per item. The claim and save scripts take the
settings items share once per call (profiles, see ``run_batched``).

Results are JSON objects in the ``results`` sorted set, scored by slot. A
scheduled run's claim record is its run state (history reads the runs
``~act`` lists); the ``runs`` stream holds manual runs, and the claims
releases up to 0.1.0 appended (an entry per attempt, first field the slot).
"""

from __future__ import annotations

from importlib.resources import files

from anarchon_redis._client import LuaScript

__all__ = [
    "IDMP_CLAIM",
    "IDMP_PREPARE",
    "IDMP_SCRIPTS",
    "LEASE_ACTIVE",
    "LEASE_CLAIM",
    "LEASE_FINISH",
    "LEASE_FINISH_SAVE",
    "LEASE_HEARTBEAT",
    "LEASE_PREPARE",
    "LEASE_RELEASE_MANY",
    "LEASE_RETRY",
    "LEASE_SAVE",
    "LEASE_SCRIPTS",
    "MEMBERS",
    "SCRIPT_CLAIM",
    "SCRIPT_SCRIPTS",
    "SET_MAX",
    "STREAM_ID_SCRIPTS",
    "TRIM_DEDUPE",
    "TRIM_STREAM",
]

_LUA = files("anarchon_redis") / "lua"


def _part(path: str) -> str:
    """One ``.lua`` file, preceded by a newline (the layout the SHA1s were taken of)."""
    return "\n" + (_LUA / path).read_text(encoding="utf-8")


def _script(name: str, *libs: str) -> LuaScript:
    """Script ``name``: the snippets ``lua/lib/<lib>.lua`` in order, then ``lua/<name>.lua``."""
    source = "".join(_part(f"lib/{lib}.lua") for lib in libs) + _part(f"{name}.lua")
    return LuaScript(name, source)


LEASE_CLAIM = _script("claim", "prelude", "state", "results", "trim")
LEASE_HEARTBEAT = _script("heartbeat", "prelude", "state")
LEASE_FINISH = _script("finish", "prelude", "state", "finish")
LEASE_FINISH_SAVE = _script("finish-save", "prelude", "state", "finish")
LEASE_RELEASE_MANY = _script("release-many", "prelude", "state", "results", "release")
LEASE_SAVE = _script("save", "prelude", "state", "results", "trim")
LEASE_ACTIVE = _script("active", "prelude", "state")
LEASE_PREPARE = _script("prepare", "prelude", "state")
LEASE_RETRY = _script("retry", "prelude", "state", "results")
"""``RunStore.retry`` of the ``lease`` strategy (docs/leases.md, "Retries").

On the keys of one job: if the failed attempt's token still holds the running
run and attempts are left, the next attempt starts under the same runner with
a new token and a new lease (server clock); the run state is its claim record.
Loaded on first use (``EVALSHA`` reloads it on ``NOSCRIPT``), not at ``init()``.
"""

TRIM_STREAM = _script("trim-stream", "prelude")

MEMBERS = _script("members", "prelude")
"""Fleet membership, every strategy (:mod:`anarchon_redis._members`): a refresh or a read of
``<prefix>members`` at one ``TIME``. Loaded on first use (``EVALSHA`` reloads it on
``NOSCRIPT``), not at ``init()``."""

LEASE_SCRIPTS = (
    LEASE_CLAIM,
    LEASE_HEARTBEAT,
    LEASE_FINISH,
    LEASE_FINISH_SAVE,
    LEASE_RELEASE_MANY,
    LEASE_SAVE,
    LEASE_ACTIVE,
    LEASE_PREPARE,
)
"""Every script of the ``lease`` strategy loaded at ``init()``."""

STREAM_ID_SCRIPTS = (TRIM_STREAM,)
"""Every script of the ``stream-id`` strategy (loaded at ``init()``)."""

SCRIPT_CLAIM = _script("script-claim", "prelude", "field")
IDMP_PREPARE = _script("idmp-prepare", "prelude", "idmp-create")
IDMP_CLAIM = _script("idmp-claim", "prelude", "field", "idmp-create")
TRIM_DEDUPE = _script("trim-dedupe", "prelude", "field")
SET_MAX = _script("set-max")

SCRIPT_SCRIPTS = (SCRIPT_CLAIM, TRIM_DEDUPE, TRIM_STREAM, SET_MAX)
"""Every script of the ``script`` strategy (loaded at ``init()``)."""

IDMP_SCRIPTS = (IDMP_PREPARE, IDMP_CLAIM, TRIM_DEDUPE, TRIM_STREAM, SET_MAX)
"""Every script of the ``idmp`` strategy (loaded at ``init()``)."""
