"""``durability``: when a claim, a renewal or a finish counts as written (internal).

``fast`` (default): the primary's answer. Redis replicates asynchronously, so
a failover to a replica that had not received a write loses it.

``replicated``: every batch of claims, heartbeats or finishes is pipelined
with ``WAIT <replicas> <timeout>`` on the same connection (and ``WAITAOF 1 0
<timeout>`` when the primary writes an append-only file and knows the
command: Redis 7.2+, Valkey 8+), in one round trip. ``WAIT`` answers how many
replicas acknowledged every write that connection made so far. Fewer than
asked:

- a claim that won is answered ``uncertain`` (the store holds the lease for
  the caller's token; the scheduler skips the slot unless the job says
  otherwise);
- a heartbeat or finish raises ``BackendUnavailableError`` (transient): the
  scheduler does not extend its local lease, and it sends the finish again,
  which is idempotent by token and writes again, so the next ``WAIT`` covers it.

A retried claim or finish that finds its own token writes its state again
before the ``WAIT``: ``WAIT`` covers only writes made on its connection.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from anarchon.errors import BackendUnavailableError, InvalidConfigError, UnsupportedError

from anarchon_redis._client import Connection, LuaScript, is_noscript, text

log = logging.getLogger("anarchon.redis")

__all__ = [
    "DEFAULT_REPLICAS",
    "DEFAULT_TIMEOUT_MS",
    "DURABILITIES",
    "Durability",
    "check_replication",
    "durability_options",
    "not_confirmed",
    "parse_durability",
    "parse_info",
    "parse_version",
    "replication_facts",
    "run_waited",
]

DURABILITIES = ("fast", "replicated")
DEFAULT_REPLICAS = 1
DEFAULT_TIMEOUT_MS = 500


@dataclass
class Durability:
    """The setting, and what ``init()`` learned of the server."""

    mode: str = "fast"
    replicas: int = DEFAULT_REPLICAS
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    waitaof: bool = False
    """Set at ``init()``: the primary has AOF on and knows ``WAITAOF``."""

    @property
    def replicated(self) -> bool:
        """True when writes wait for replicas."""
        return self.mode == "replicated"

    def describe(self) -> str:
        """``replicated (1 replica, 500 ms)`` or ``fast``."""
        if not self.replicated:
            return "fast"
        noun = "replica" if self.replicas == 1 else "replicas"
        return f"replicated ({self.replicas} {noun}, {self.timeout_ms} ms)"

    def wait_commands(self) -> list[tuple[Any, ...]]:
        """What follows a batch's scripts in the pipeline."""
        commands: list[tuple[Any, ...]] = [("WAIT", self.replicas, self.timeout_ms)]
        if self.waitaof:
            commands.append(("WAITAOF", 1, 0, self.timeout_ms))
        return commands

    def shortfall(self, replies: Sequence[Any]) -> str | None:
        """None when the ``WAIT``/``WAITAOF`` replies confirm the batch, else why not."""
        acked = replies[0]
        if isinstance(acked, BaseException):
            return f"WAIT failed: {acked}"
        if int(acked) < self.replicas:
            return (
                f"WAIT: {int(acked)} of {self.replicas} replica(s) acknowledged within"
                f" {self.timeout_ms} ms"
            )
        if len(replies) > 1:
            aof = replies[1]
            if isinstance(aof, BaseException):
                return f"WAITAOF failed: {aof}"
            if int(aof[0]) < 1:
                return f"WAITAOF: the primary's append-only file not fsynced within {self.timeout_ms} ms"
        return None


def _positive_int(name: str, value: Any, where: str) -> int:
    if isinstance(value, bool):
        raise InvalidConfigError(f"{name} must be a whole number, got {value!r}{where}")
    if isinstance(value, str):
        text = value.strip()
        if not text.isdigit():
            raise InvalidConfigError(f"{name} must be a whole number, got {value!r}{where}")
        value = int(text)
    if not isinstance(value, int):
        raise InvalidConfigError(f"{name} must be a whole number, got {value!r}{where}")
    return value


def parse_durability(mode: Any, replicas: Any, timeout_ms: Any, shown: str = "") -> Durability:
    """Check the three settings (keywords or URL query text); ``InvalidConfigError`` names the bad one."""
    where = f" in {shown!r}" if shown else ""
    name = mode.strip().lower() if isinstance(mode, str) else mode
    if name not in DURABILITIES:
        raise InvalidConfigError(
            f"durability must be one of {', '.join(repr(d) for d in DURABILITIES)},"
            f" got {mode!r}{where}"
        )
    count = _positive_int("durability_replicas", replicas, where)
    if count < 1:
        raise InvalidConfigError(f"durability_replicas must be at least 1, got {count}{where}")
    wait = _positive_int("durability_timeout", timeout_ms, where)
    if wait < 1:
        raise InvalidConfigError(
            f"durability_timeout must be at least 1 ms (0 would wait for ever), got {wait}{where}"
        )
    return Durability(str(name), count, wait)


def durability_options(query: dict[str, str]) -> dict[str, str]:
    """Take the durability settings out of a URL's query (what is left goes to the driver)."""
    return {
        k: query.pop(k)
        for k in ("durability", "durability_replicas", "durability_timeout")
        if k in query
    }


def replication_facts(info: Mapping[str, str]) -> tuple[str, int]:
    """``(role, connected replicas)`` from ``INFO replication``."""
    role = info.get("role", "?")
    try:
        connected = int(info.get("connected_slaves", "0"))
    except ValueError:
        connected = 0
    return role, connected


async def run_waited(
    conn: Connection,
    durability: Durability,
    script: LuaScript,
    calls: Sequence[tuple[Sequence[str], Sequence[Any]]],
) -> tuple[list[Any], str | None]:
    """``EVALSHA`` each call then ``WAIT`` (and ``WAITAOF``), pipelined on one connection.

    Returns the scripts' replies and None, or why the writes are not confirmed.
    A ``NOSCRIPT`` answer (the server restarted or flushed its scripts) loads
    the script and sends the whole pipeline again: every script here is
    idempotent for its caller's token, and writes again, so the second
    ``WAIT`` covers the batch. Errors other than ``NOSCRIPT`` are raised.
    """
    commands: list[tuple[Any, ...]] = [("EVALSHA", script.sha, len(k), *k, *a) for k, a in calls]
    waits = durability.wait_commands()
    replies = await conn.pipeline([*commands, *waits])
    if any(isinstance(r, Exception) and is_noscript(r) for r in replies[: len(commands)]):
        await conn.load_scripts((script,))
        replies = await conn.pipeline([*commands, *waits])
    scripts, acks = list(replies[: len(commands)]), replies[len(commands) :]
    for (keys, _args), reply in zip(calls, scripts, strict=True):
        conn.check(reply, keys)
    return scripts, durability.shortfall(acks)


def parse_version(raw: str) -> tuple[int, ...]:
    """``"7.2.4"`` → ``(7, 2, 4)``."""
    parts = []
    for piece in raw.strip().split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def parse_info(reply: Any) -> dict[str, str]:
    """``INFO`` as a dict (redis-py parses it; a raw client returns the text).

    A cluster client answers per node (``{node: info}``): the first node's is used.
    """
    if (
        isinstance(reply, Mapping)
        and reply
        and all(isinstance(v, (Mapping, str, bytes)) for v in reply.values())
    ):
        first = next(iter(reply.values()))
        if isinstance(first, (Mapping, str, bytes)) and not any(
            text(k) in ("redis_version", "valkey_version") for k in reply
        ):
            return parse_info(first)
    if isinstance(reply, Mapping):
        return {text(k): text(v) for k, v in reply.items()}
    found = {}
    for line in text(reply).splitlines():
        key, sep, value = line.partition(":")
        if sep and not line.startswith("#"):
            found[key.strip()] = value.strip()
    return found


async def check_replication(
    conn: Connection, durability: Durability, server: str, where: str
) -> None:
    """Log what the durability setting protects against, from ``INFO replication``.

    ``replicated`` also learns whether ``WAITAOF`` applies (AOF on, Redis
    7.2+ or Valkey 8+), and is refused on a cluster client (``WAIT`` must
    follow the writes on their node's connection).
    """
    if durability.replicated and not conn.one_node:
        raise UnsupportedError(
            f"{where}: durability='replicated' is not supported on a Redis"
            " Cluster client yet; use a primary with replicas (redis:// or"
            " redis+sentinel://)"
        )
    try:
        info = parse_info(await conn.execute("INFO", "replication"))
        persistence = (
            parse_info(await conn.execute("INFO", "persistence")) if durability.replicated else {}
        )
    except BackendUnavailableError:
        raise
    except Exception as error:  # an ACL without INFO: nothing to report
        log.info("anarchon: %s: cannot read INFO replication (%s)", where, error)
        return
    role, connected = replication_facts(info)
    if not durability.replicated:
        if connected:
            log.info(
                "anarchon: %s: durability=fast with %d replica(s): a claim, renewal or finish"
                " is acknowledged by the primary alone; a failover to a replica that had not"
                " received it loses it (a slot may run twice); durability='replicated'"
                " waits for replicas",
                where,
                connected,
            )
        return
    name, _sp, version = server.partition(" ")
    number = parse_version(version or "0")
    aof = persistence.get("aof_enabled") == "1"
    durability.waitaof = aof and number >= ((8, 0) if name == "valkey" else (7, 2))
    disk = " and the primary's AOF is fsynced (WAITAOF)" if durability.waitaof else ""
    log.info(
        "anarchon: %s: durability=%s: a claim, renewal or finish counts once %d replica(s)"
        " acknowledged it%s; %d replica(s) connected now (role %s). Protects against a"
        " failover to a replica that acknowledged; not against one to a replica that did"
        " not (Sentinel may promote any), nor against losing the primary and every replica",
        where,
        durability.describe(),
        durability.replicas,
        disk,
        connected,
        role,
    )
    if connected < durability.replicas:
        log.warning(
            "anarchon: %s: durability=replicated asks %d replica(s) but %d are connected:"
            " every claim is uncertain (skipped unless the job says if_uncertain='run') and"
            " no lease can be renewed until enough replicas are",
            where,
            durability.replicas,
            connected,
        )


def not_confirmed(where: str, what: str, why: str) -> BackendUnavailableError:
    """The transient error of a heartbeat or finish whose replication was not confirmed."""
    return BackendUnavailableError(f"{where}: {what} not confirmed on the replicas ({why})")
