"""The synchronous-commit wrappers of ``durability="replicated"`` (docs/backends/sql.md, "Durability").

Each ``<prefix>*_durable_*`` function first sets ``synchronous_commit`` to
``on`` for its transaction (``set_config(..., true)``, the ``SET LOCAL`` of a
one-statement call; ``remote_apply`` is kept where the server already asks
for it), then calls the plain function. So a claim, a lease extension or a
finish is still one round trip, and its commit returns only once a
synchronous standby has flushed its WAL.

``on`` rather than ``remote_apply``: a promoted standby replays every WAL
record it flushed before it takes writes, and anarchon never reads from a
standby (claims, heartbeats and lease checks go to the primary), so waiting
for the replay as well would add its latency to every claim and protect
nothing more.

A transaction that wrote no WAL does not wait for the standby at commit. A
``won`` claim (a retried claim finding its own token) or a True finish (a
finish repeated after its first commit was in doubt) may have written
nothing; it then writes its own row again, unchanged, so that its commit
waits too: a synchronous commit confirms every earlier commit (WAL order),
the one in doubt included.
"""

from __future__ import annotations

from collections.abc import Callable

from anarchon_sql._durability import DurableCalls
from anarchon_sql.postgres._functions import (
    CLAIM_FUNCTION,
    CLAIM_MANY_FUNCTION,
    FINISH_MANY_FUNCTION,
    FINISH_SAVE_MANY_FUNCTION,
    HEARTBEAT_MANY_FUNCTION,
    finish_arrays,
    save_arrays,
    sql_template,
)

__all__ = [
    "SYNCHRONOUS",
    "durable_calls",
    "durable_functions",
]

CLAIM_DURABLE = "claim_durable_v1"
CLAIM_MANY_DURABLE = "claim_many_durable_v1"
HEARTBEAT_MANY_DURABLE = "heartbeat_many_durable_v1"
FINISH_MANY_DURABLE = "finish_many_durable_v2"
FINISH_SAVE_MANY_DURABLE = "finish_save_many_durable_v2"

SYNCHRONOUS = (
    "set_config('synchronous_commit', CASE current_setting('synchronous_commit')"
    " WHEN 'remote_apply' THEN 'remote_apply' ELSE 'on' END, true)"
)
"""The transaction's ``synchronous_commit``: ``on``, or ``remote_apply`` if already asked for."""

_FINISH_ARGS = "p_jobs, p_slots, p_tokens, p_statuses, p_errors"
_SAVE_ARGS = (
    "p_jobs, p_tokens, p_slots, p_attempts, p_instances, p_statuses, p_reasons, p_started,"
    " p_finished, p_errors, p_manual, p_sizes, p_ttls, p_retention"
)


def durable_functions(table: Callable[[str], str]) -> list[str]:
    """The DDL of the five wrappers (created at start whatever the setting)."""
    runs = table("runs")
    return [
        "\n"
        + sql_template(CLAIM_DURABLE).format(
            function=table(CLAIM_DURABLE),
            synchronous=SYNCHRONOUS,
            claim_function=table(CLAIM_FUNCTION),
            runs=runs,
        ),
        "\n"
        + sql_template(CLAIM_MANY_DURABLE).format(
            function=table(CLAIM_MANY_DURABLE),
            synchronous=SYNCHRONOUS,
            claim_many_function=table(CLAIM_MANY_FUNCTION),
            runs=runs,
        ),
        "\n"
        + sql_template(HEARTBEAT_MANY_DURABLE).format(
            function=table(HEARTBEAT_MANY_DURABLE),
            synchronous=SYNCHRONOUS,
            heartbeat_many_function=table(HEARTBEAT_MANY_FUNCTION),
        ),
        "\n"
        + sql_template("finish_durable_v2").format(
            function=table(FINISH_MANY_DURABLE),
            params=finish_arrays("p"),
            synchronous=SYNCHRONOUS,
            base_function=table(FINISH_MANY_FUNCTION),
            args=_FINISH_ARGS,
            runs=runs,
            arrays="p",
        ),
        "\n"
        + sql_template("finish_durable_v2").format(
            function=table(FINISH_SAVE_MANY_DURABLE),
            params=finish_arrays("f") + "," + save_arrays(),
            synchronous=SYNCHRONOUS,
            base_function=table(FINISH_SAVE_MANY_FUNCTION),
            args=_FINISH_ARGS.replace("p_", "f_") + ", " + _SAVE_ARGS,
            runs=runs,
            arrays="f",
        ),
    ]


def durable_calls(
    table: Callable[[str], str],
    placeholders: Callable[[str], str],
    plain: dict[str, str | None],
) -> DurableCalls:
    """The replicated backend's calls: the dialect's statements (``plain``, by call name) with
    each function name swapped for its wrapper's, and the generic transactions' prologue."""
    swaps = {
        "claim": (CLAIM_FUNCTION, CLAIM_DURABLE),
        "claim_many": (CLAIM_MANY_FUNCTION, CLAIM_MANY_DURABLE),
        "heartbeat_many": (HEARTBEAT_MANY_FUNCTION, HEARTBEAT_MANY_DURABLE),
        "finish_many": (FINISH_MANY_FUNCTION, FINISH_MANY_DURABLE),
        "finish_save_many": (FINISH_SAVE_MANY_FUNCTION, FINISH_SAVE_MANY_DURABLE),
    }
    out: dict[str, str] = {}
    for name, (base, wrapper) in swaps.items():
        sql = plain[name]
        if sql is None or f"{table(base)}(" not in sql:
            raise RuntimeError(f"the {name} statement does not call {table(base)}")
        out[name] = sql.replace(f"{table(base)}(", f"{table(wrapper)}(")
    return DurableCalls(**out, prologue=placeholders(f"SELECT {SYNCHRONOUS}"))
