"""How a batch of items becomes a few pipelined script calls (internal).

A batch of claims, heartbeats, finishes or results is split into script
calls of at most :data:`CHUNK` items (on a cluster, one job per call) and
sent in one round trip; the replies come back in request order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from anarchon.types import ResultWrite

from anarchon_redis._client import Connection, LuaScript, is_noscript
from anarchon_redis._durability import Durability, run_waited

__all__ = ["CHUNK", "chunks", "group_by_job", "retry_noscript", "run_batched", "run_confirmed"]


CHUNK = 500
"""The most items one script call carries (a batch is split into calls of at most this many)."""


def chunks(one_node: bool, jobs: Sequence[str], size: int = CHUNK) -> list[list[int]]:
    """The items' indexes, per script call.

    On one node any items may share a call (in request order, ``size`` at
    most). On a cluster a script's keys must share one hash slot, so a call
    carries the items of one job only (the driver's pipeline sends each call
    to its node).
    """
    if one_node:
        return [list(range(i, min(i + size, len(jobs)))) for i in range(0, len(jobs), size)]
    by_job: dict[str, list[int]] = {}
    for i, job in enumerate(jobs):
        by_job.setdefault(job, []).append(i)
    return [
        indexes[i : i + size] for indexes in by_job.values() for i in range(0, len(indexes), size)
    ]


async def run_batched(
    conn: Connection,
    script: LuaScript,
    jobs: Sequence[str],
    keys: Callable[[int], Sequence[str]],
    args: Callable[[int], Sequence[Any]],
    shared: Sequence[Any] = (),
    profile: Callable[[int], tuple[Any, ...]] | None = None,
) -> list[Any]:
    """Run a batch script over items ``0..len(jobs)-1``; each item's reply, in request order.

    ``keys(i)`` and ``args(i)`` are item ``i``'s KEYS and ARGV; ``shared``
    goes before every call's ARGV. One pipelined round trip for all the calls.

    With ``profile``, the settings items share are sent once per call: ARGV is
    ``shared``, the number of distinct profiles, the profiles (each a tuple of
    the same length) and then each item's ``args(i)`` followed by the 1-based
    index of its profile. Fewer arguments is less server time per item.
    """
    answers, _why = await run_confirmed(conn, None, script, jobs, keys, args, shared, profile)
    return answers


async def run_confirmed(
    conn: Connection,
    durability: Durability | None,
    script: LuaScript,
    jobs: Sequence[str],
    keys: Callable[[int], Sequence[str]],
    args: Callable[[int], Sequence[Any]],
    shared: Sequence[Any] = (),
    profile: Callable[[int], tuple[Any, ...]] | None = None,
) -> tuple[list[Any], str | None]:
    """:func:`run_batched`, then ``WAIT`` in the same round trip when ``durability`` is replicated.

    Returns the answers and None, or why their writes are not confirmed on
    the replicas (see :mod:`anarchon_redis._durability`).
    """
    if not jobs:
        return [], None
    groups = chunks(conn.one_node, jobs)
    calls: list[tuple[list[str], list[Any]]] = []
    for group in groups:
        call_keys: list[str] = []
        items: list[Any] = []
        profiles: dict[tuple[Any, ...], int] = {}
        for i in group:
            call_keys.extend(keys(i))
            items.extend(args(i))
            if profile is not None:
                items.append(profiles.setdefault(profile(i), len(profiles) + 1))
        call_args: list[Any] = list(shared)
        if profile is not None:
            call_args.append(len(profiles))
            for settings in profiles:
                call_args.extend(settings)
        call_args.extend(items)
        calls.append((call_keys, call_args))
    why: str | None = None
    if durability is not None and durability.replicated:
        replies, why = await run_waited(conn, durability, script, calls)
    else:
        replies = await conn.evalsha_many(script, calls)
    answers: list[Any] = [None] * len(jobs)
    for group, reply in zip(groups, replies, strict=True):
        for i, answer in zip(group, reply, strict=True):
            answers[i] = answer
    return answers, why


def group_by_job(writes: Sequence[ResultWrite]) -> dict[str, ResultWrite]:
    """Each job of ``writes`` (in first-seen order) and its last write (whose settings win)."""
    last: dict[str, ResultWrite] = {}
    for w in writes:
        last[w.job] = w
    return last


async def retry_noscript(
    conn: Connection,
    scripts: Sequence[LuaScript],
    commands: Sequence[tuple[Any, ...]],
    replies: Sequence[Any],
) -> list[Any]:
    """``replies`` of pipelined ``EVALSHA`` ``commands``; those answered ``NOSCRIPT`` (they did
    not run) are sent again once the scripts are loaded. Any other error is raised."""
    out = list(replies)
    again = [n for n, r in enumerate(out) if isinstance(r, BaseException) and is_noscript(r)]
    if again:
        await conn.load_scripts(scripts)
        for n, reply in zip(again, await conn.pipeline([commands[n] for n in again]), strict=True):
            out[n] = reply
    for command, reply in zip(commands, out, strict=True):
        conn.check(reply, (str(command[3]),))
    return out
