"""Prefixes that cannot collide: a prefix nested in another one used in the store is refused.

Keys are the prefix followed by the job's name, so two applications whose
prefixes nest (``cron:`` and ``cron:a:``) share keys: job ``a:b`` of the
first is job ``b`` of the second, and each silently takes the other's
slots. Any such collision needs one prefix to start with the other, so
:func:`check_prefix` keeps the set of prefixes used in the store
(:data:`PREFIXES_KEY`) and refuses, at ``init()``, a prefix that starts
with another one there or that another one starts with
(docs/backends/redis.md, "Keys"). A prefix is added first and checked after:
of two nesting applications starting at the same moment, neither gets in
(each takes its prefix out again and raises), so they cannot both run.
"""

from __future__ import annotations

from typing import Any, Protocol

from anarchon.errors import InvalidConfigError

from anarchon_redis._client import text

__all__ = ["PREFIXES_KEY", "check_prefix"]

PREFIXES_KEY = "anarchon:prefixes"
"""The set of the prefixes used in this store (outside every prefix's keys: no hash tag)."""


class _Executes(Protocol):
    async def execute(self, *args: Any) -> Any: ...


async def check_prefix(conn: _Executes, prefix: str, shown: str) -> None:
    """Add ``prefix`` to the store's set; refuse it if it nests with one already there.

    A server that refuses the command (an ACL limited to the prefix's own
    keys) is not checked: the caller's ACL already keeps applications apart.
    """
    try:
        added = await conn.execute("SADD", PREFIXES_KEY, prefix)
        members = await conn.execute("SMEMBERS", PREFIXES_KEY)
    except Exception as error:
        if "NOPERM" in str(error) or "permission" in str(error).lower():
            return
        raise
    nested = sorted(
        other
        for other in (text(m) for m in members or ())
        if other != prefix and (other.startswith(prefix) or prefix.startswith(other))
    )
    if not nested:
        return
    if added:
        await conn.execute("SREM", PREFIXES_KEY, prefix)
    raise InvalidConfigError(
        f"{shown}: prefix {prefix!r} nests with prefix {nested[0]!r}, already used in this"
        " store: their keys can collide (a job of one is a job of the other), and each would"
        " take the other's slots; use prefixes where neither starts with the other, or remove"
        f" the unused one from the set {PREFIXES_KEY!r}"
    )
