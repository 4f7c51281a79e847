"""The PL/pgSQL functions of :class:`~anarchon_sql.PostgresBackend`, created at start.

Their bodies are the templates in ``sql/*.sql`` (package data, read with
:mod:`importlib.resources`); ``{name}`` marks what is filled in here: table
and function names of the prefix, the server clock, shared fragments.

- ``<prefix>claim_v3(...)``: the whole claim tree (docs/leases.md) of one
  ``(job, slot)`` in one call;
- ``<prefix>claim_many_v3(arrays...)``: ``claim_v3`` for each item of a
  chunk, in one call; items are taken in the order of their job lock, items
  of one job in request order; each row carries the item's 1-based index;
- ``<prefix>heartbeat_many_v1(...)`` and ``<prefix>finish_many_v2(...)``:
  the single heartbeat's or finish's statements for each item, one
  primary-key update each (a set-based ``UPDATE ... FROM unnest()`` was
  planned as a nested loop over the whole table on fresh tables without
  statistics: 25 s for 2,000 finishes);
- ``<prefix>save_many_v1(arrays...)``: ``SqlBackend.save_result``'s
  transaction for each item of a chunk (finish a plain claim's state, upsert
  the result, count the save, trim history), in one call;
- ``<prefix>finish_save_many_v2(arrays...)``: per item the finish and, if it
  answered True, the save (``RunStore.finish_and_save_many``), in one call.

A finish that finds no state for its run writes it finished by its token
(``out_healed``; docs/durability.md, "Finishes that heal"). The ``*_durable_*``
functions of :mod:`anarchon_sql.postgres._durable` wrap these for
``durability="replicated"``.

Every batch function takes each item's job lock (``pg_advisory_xact_lock``)
before touching its rows, in one global order (the lock key, then the slot),
so chunks of different instances and members wait for each other but never
in a cycle. The functions' names carry their version, so old and new instances of a
rolling deploy each call their own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from importlib import resources

__all__ = [
    "CLAIM_FUNCTION",
    "CLAIM_MANY_FUNCTION",
    "FINISH_MANY_FUNCTION",
    "FINISH_SAVE_MANY_FUNCTION",
    "HEARTBEAT_MANY_FUNCTION",
    "SAVE_MANY_FUNCTION",
    "claim_function",
    "claim_many_function",
    "finish_many_function",
    "finish_save_many_function",
    "heartbeat_many_function",
    "save_many_function",
    "sql_template",
]

CLAIM_FUNCTION = "claim_v3"
CLAIM_MANY_FUNCTION = "claim_many_v3"
SAVE_MANY_FUNCTION = "save_many_v1"
HEARTBEAT_MANY_FUNCTION = "heartbeat_many_v1"
FINISH_MANY_FUNCTION = "finish_many_v2"
FINISH_SAVE_MANY_FUNCTION = "finish_save_many_v2"


@functools.cache
def sql_template(name: str) -> str:
    """The text of ``sql/<name>.sql`` without its final newline."""
    folder = resources.files("anarchon_sql.postgres").joinpath("sql")
    text = folder.joinpath(f"{name}.sql").read_text(encoding="utf-8")
    return text.removesuffix("\n")


def _prefix(table: Callable[[str], str]) -> str:
    """The validated table prefix (letters, digits, ``_``): safe in a literal."""
    return table("x")[:-1]


def claim_function(table: Callable[[str], str], now: str) -> str:
    """The PL/pgSQL claim tree (docs/leases.md). Mirrors the generic claim transaction statement for statement."""
    return "\n" + sql_template(CLAIM_FUNCTION).format(
        function=table(CLAIM_FUNCTION),
        prefix=_prefix(table),
        now=now,
        runs=table("runs"),
        claims=table("claims"),
        results=table("results"),
    )


def claim_many_function(table: Callable[[str], str], now: str) -> str:
    """``claim_many_v3``: ``claim_v3`` for each item, in job-lock order; rows carry the index.

    Under the item's job lock, a run that is already decided for this claim
    (done, or running with a live lease of another token) is answered from a
    plain read, as ``claim_v3`` would answer it; every other item (a new
    slot, its own token, an expired lease) goes through ``claim_v3``. So the
    losers of a race take no row lock and write nothing, and do not hold the
    owner's row until the chunk commits.
    """
    return "\n" + sql_template(CLAIM_MANY_FUNCTION).format(
        function=table(CLAIM_MANY_FUNCTION),
        claim_function=table(CLAIM_FUNCTION),
        prefix=_prefix(table),
        now=now,
        runs=table("runs"),
    )


def _each_item_locked(prefix: str, arrays: str, *, by_slot: bool) -> str:
    """``FOR i IN ... LOOP`` over the items of ``<arrays>_jobs`` in the job locks' order (then the
    slot's, with ``by_slot``, then request order), taking each item's job lock first."""
    jobs, slots = f"{arrays}_jobs", f"{arrays}_slots"
    order = f"{slots}[u.i], u.i" if by_slot else "u.i"
    return "\n" + sql_template("each_item_locked").format(jobs=jobs, order=order, prefix=prefix)


def _save_item(table: Callable[[str], str], now: str) -> str:
    """The statements saving item ``i`` of the save arrays (its job lock already held)."""
    runs, claims, results = table("runs"), table("claims"), table("results")
    keep = (
        "NOT EXISTS (SELECT 1 FROM {runs} AS k WHERE k.job = {t}.job AND k.slot = {t}.slot"
        " AND k.status = 'running')"
    )
    return "\n" + sql_template("save_item").format(
        runs=runs,
        claims=claims,
        results=results,
        jobs=table("jobs"),
        now=now,
        keep_results=keep.format(runs=runs, t=results),
        keep_claims=keep.format(runs=runs, t=claims),
    )


def save_arrays() -> str:
    """The parameters of ``save_many_v1`` (and the save half of ``finish_save_many_v2``)."""
    return "\n" + sql_template("save_arrays")


def _save_locals() -> str:
    """The locals of a save (``saves``, ``size``, ``cut``)."""
    return "\n" + sql_template("save_locals")


def save_many_function(table: Callable[[str], str], now: str) -> str:
    """``save_many_v1``: the result save for each item, items of one job in request order.

    Each item first takes its job's lock, as a claim does, and items are
    taken in the job locks' order (as in ``claim_many_v3``): every chunk then
    locks jobs in one global order, and the rows of a job only under its lock.
    ``p_retention`` is NULL where the backend has not learnt the job's limits
    (run state is then not trimmed).
    """
    return "\n" + sql_template(SAVE_MANY_FUNCTION).format(
        function=table(SAVE_MANY_FUNCTION),
        save_arrays=save_arrays(),
        save_locals=_save_locals(),
        each_item=_each_item_locked(_prefix(table), "p", by_slot=False),
        runs=table("runs"),
        now=now,
        save_item=_save_item(table, now),
    )


def heartbeat_many_function(table: Callable[[str], str], now: str) -> str:
    """``heartbeat_many_v1``: the single heartbeat's ``UPDATE`` for each item; ``(index, renewed)``.

    One primary-key update per item, so the cost never depends on the
    planner's statistics (a fresh table has none). Each item first takes its
    job's lock, in the job locks' order (as ``claim_many_v3``): a claim chunk
    of another instance holds the rows it looked at until it commits, and
    without the same order the two chunks deadlocked.
    """
    return "\n" + sql_template(HEARTBEAT_MANY_FUNCTION).format(
        function=table(HEARTBEAT_MANY_FUNCTION),
        each_item=_each_item_locked(_prefix(table), "p", by_slot=True),
        runs=table("runs"),
        now=now,
    )


def _finish_item(table: Callable[[str], str], now: str, arrays: str) -> str:
    """The statements finishing item ``i`` of the finish arrays (named ``<arrays>_jobs``, ...);
    ``out_ok`` is the answer, ``out_healed`` True when no state was found and one was written."""
    return "\n" + sql_template("finish_item").format(
        runs=table("runs"),
        now=now,
        arrays=arrays,
        job=f"{arrays}_jobs[i]",
        slot=f"{arrays}_slots[i]",
        token=f"{arrays}_tokens[i]",
    )


def finish_arrays(arrays: str) -> str:
    """The finish parameters (``finish_many_v2`` keeps its ``p_`` names: a rolling deploy
    replaces the function, and PostgreSQL refuses to rename a parameter)."""
    return (
        f"\n    {arrays}_jobs text[], {arrays}_slots bigint[], {arrays}_tokens text[],"
        f" {arrays}_statuses text[], {arrays}_errors text[]"
    )


def finish_many_function(table: Callable[[str], str], now: str) -> str:
    """``finish_many_v2``: the single finish for each item; ``(index, answer, healed)``.

    As ``SqlRunStore.finish``: True when the token's running run is finished
    now, or was already finished by the same token (a retried finish), or had
    no state at all (then a finished state is written: ``healed``).
    """
    return "\n" + sql_template(FINISH_MANY_FUNCTION).format(
        function=table(FINISH_MANY_FUNCTION),
        finish_arrays=finish_arrays("p"),
        each_item=_each_item_locked(_prefix(table), "p", by_slot=True),
        finish_item=_finish_item(table, now, "p"),
    )


def finish_save_many_function(table: Callable[[str], str], now: str) -> str:
    """``finish_save_many_v2``: per item the finish of ``finish_many_v2`` and, if it answered
    True, the save of ``save_many_v1``; ``(index, answer, healed)``. A finished run and its
    result are
    written in the same transaction (``RunStore.finish_and_save_many``)."""
    return "\n" + sql_template(FINISH_SAVE_MANY_FUNCTION).format(
        function=table(FINISH_SAVE_MANY_FUNCTION),
        finish_arrays=finish_arrays("f"),
        save_arrays=save_arrays(),
        save_locals=_save_locals(),
        each_item=_each_item_locked(_prefix(table), "f", by_slot=True),
        finish_item=_finish_item(table, now, "f"),
        save_item=_save_item(table, now),
    )
