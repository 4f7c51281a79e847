"""The PL/pgSQL functions of :class:`~anarchon_sql.PostgresBackend`, created at start.

- ``<prefix>claim_v3(...)``: the whole claim tree (docs/leases.md) of one
  ``(job, slot)`` in one call;
- ``<prefix>claim_many_v3(arrays...)``: ``claim_v3`` for each item of a
  chunk, in one call; items are taken in the order of their job lock, items
  of one job in request order; each row carries the item's 1-based index;
- ``<prefix>heartbeat_many_v1(...)`` and ``<prefix>finish_many_v1(...)``:
  the single heartbeat's or finish's statements for each item, one
  primary-key update each (a set-based ``UPDATE ... FROM unnest()`` was
  planned as a nested loop over the whole table on fresh tables without
  statistics: 25 s for 2,000 finishes);
- ``<prefix>save_many_v1(arrays...)``: ``SqlBackend.save_result``'s
  transaction for each item of a chunk (finish a plain claim's state, upsert
  the result, count the save, trim history), in one call;
- ``<prefix>finish_save_many_v1(arrays...)``: per item the finish and, if it
  answered True, the save (``RunStore.finish_and_save_many``), in one call.

Every batch function takes each item's job lock (``pg_advisory_xact_lock``)
before touching its rows, in one global order (the lock key, then the slot),
so chunks of different instances and members wait for each other but never
in a cycle. The functions' names carry their version, so old and new instances of a
rolling deploy each call their own.
"""

from __future__ import annotations

from collections.abc import Callable

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
]

CLAIM_FUNCTION = "claim_v3"
CLAIM_MANY_FUNCTION = "claim_many_v3"
SAVE_MANY_FUNCTION = "save_many_v1"
HEARTBEAT_MANY_FUNCTION = "heartbeat_many_v1"
FINISH_MANY_FUNCTION = "finish_many_v1"
FINISH_SAVE_MANY_FUNCTION = "finish_save_many_v1"


def claim_function(table: Callable[[str], str], now: str) -> str:
    """The PL/pgSQL claim tree (docs/leases.md). Mirrors ``SqlBackend._claim_tx`` statement for statement."""
    runs, claims, results = table("runs"), table("claims"), table("results")
    prefix = table("x")[:-1]  # the validated table prefix (letters, digits, _): safe in a literal
    return f"""
CREATE OR REPLACE FUNCTION {table(CLAIM_FUNCTION)}(
    p_job text, p_slot bigint, p_token text, p_instance text, p_lease_ms bigint,
    p_max_attempts integer, p_overlap boolean, p_deadline bigint, p_create boolean,
    p_early bigint, p_overlap_wait boolean,
    OUT out_kind text, OUT out_attempt integer, OUT out_runner text, OUT out_lease bigint,
    OUT out_token text)
LANGUAGE plpgsql VOLATILE AS $anarchon$
DECLARE
    t bigint;
    r record;
    b record;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('{prefix}job:' || p_job, 0));
    t := {now};
    SELECT s.attempt, s.token, s.status, s.runner, s.lease_expires_at, s.started_at, s.released
      INTO r FROM {runs} AS s WHERE s.job = p_job AND s.slot = p_slot FOR UPDATE;
    IF NOT FOUND THEN
        out_attempt := 0;
        IF p_early IS NOT NULL AND p_slot > t + p_early THEN
            out_kind := 'early';
            RETURN;
        END IF;
        IF p_deadline IS NOT NULL AND t > p_deadline THEN
            out_kind := 'late';
            RETURN;
        END IF;
        IF NOT p_create THEN
            out_kind := 'none';
            RETURN;
        END IF;
        IF NOT p_overlap THEN
            SELECT s.runner, s.lease_expires_at INTO b FROM {runs} AS s
             WHERE s.job = p_job AND s.status = 'running' AND s.slot < p_slot
               AND s.lease_expires_at > t
             ORDER BY s.slot DESC LIMIT 1;
            IF FOUND AND p_overlap_wait THEN
                out_kind := 'overlap';
                out_runner := b.runner;
                out_lease := b.lease_expires_at;
                RETURN;
            END IF;
            IF FOUND THEN
                INSERT INTO {runs} (job, slot, attempt, max_attempts, token, status, runner,
                                    lease_expires_at, started_at, finished_at, released)
                VALUES (p_job, p_slot, 0, p_max_attempts, p_token, 'skipped', p_instance,
                        t, t, t, 0);
                INSERT INTO {results} (job, token, slot, attempt, instance_id, status, reason,
                                       started_at, finished_at, error, manual)
                VALUES (p_job, p_token, p_slot, 1, p_instance, 'skipped', 'overlap', t, t, NULL, 0)
                ON CONFLICT (job, slot, token) DO NOTHING;
                out_kind := 'overlap';
                out_runner := b.runner;
                out_lease := b.lease_expires_at;
                out_token := p_token;
                RETURN;
            END IF;
        END IF;
        INSERT INTO {runs} (job, slot, attempt, max_attempts, token, status, runner,
                            lease_expires_at, started_at, finished_at, released)
        VALUES (p_job, p_slot, 1, p_max_attempts, p_token, 'running', p_instance,
                t + p_lease_ms, t, NULL, 0);
        INSERT INTO {claims} (job, token, slot, attempt, instance_id, claimed_at, manual)
        VALUES (p_job, p_token, p_slot, 1, p_instance, t, 0)
        ON CONFLICT (job, slot, token) DO NOTHING;
        out_kind := 'won';
        out_attempt := 1;
        out_runner := p_instance;
        out_lease := t + p_lease_ms;
        out_token := p_token;
        RETURN;
    END IF;
    out_token := r.token;
    IF r.token = p_token AND r.status = 'running' AND r.released = 0 THEN
        out_lease := greatest(r.lease_expires_at, t + p_lease_ms);
        IF out_lease <> r.lease_expires_at THEN
            UPDATE {runs} SET lease_expires_at = out_lease
             WHERE job = p_job AND slot = p_slot;
        END IF;
        out_kind := 'won';
        out_attempt := r.attempt;
        out_runner := r.runner;
        RETURN;
    END IF;
    out_attempt := r.attempt;
    out_runner := r.runner;
    out_lease := r.lease_expires_at;
    IF r.status <> 'running' OR r.token = p_token THEN
        out_kind := 'done';
        RETURN;
    END IF;
    IF r.lease_expires_at > t THEN
        out_kind := 'running';
        RETURN;
    END IF;
    IF r.attempt < p_max_attempts THEN
        IF r.released = 0 THEN
            INSERT INTO {results} (job, token, slot, attempt, instance_id, status, reason,
                                   started_at, finished_at, error, manual)
            VALUES (p_job, r.token, p_slot, r.attempt, r.runner, 'interrupted', 'lease_lost',
                    r.started_at, greatest(r.lease_expires_at, r.started_at), NULL, 0)
            ON CONFLICT (job, slot, token) DO NOTHING;
        END IF;
        UPDATE {runs} SET attempt = r.attempt + 1, token = p_token, runner = p_instance,
               lease_expires_at = t + p_lease_ms, max_attempts = p_max_attempts,
               started_at = t, released = 0, end_reason = NULL
         WHERE job = p_job AND slot = p_slot;
        INSERT INTO {claims} (job, token, slot, attempt, instance_id, claimed_at, manual)
        VALUES (p_job, p_token, p_slot, r.attempt + 1, p_instance, t, 0)
        ON CONFLICT (job, slot, token) DO NOTHING;
        out_kind := 'won';
        out_attempt := r.attempt + 1;
        out_runner := p_instance;
        out_lease := t + p_lease_ms;
        out_token := p_token;
        RETURN;
    END IF;
    IF r.released = 0 THEN
        INSERT INTO {results} (job, token, slot, attempt, instance_id, status, reason,
                               started_at, finished_at, error, manual)
        VALUES (p_job, r.token, p_slot, r.attempt, r.runner, 'interrupted',
                'attempts_exhausted', r.started_at, greatest(t, r.started_at), NULL, 0)
        ON CONFLICT (job, slot, token) DO NOTHING;
    END IF;
    UPDATE {runs} SET status = 'interrupted', finished_at = t
     WHERE job = p_job AND slot = p_slot;
    out_kind := 'done';
END
$anarchon$"""


def claim_many_function(table: Callable[[str], str], now: str) -> str:
    """``claim_many_v1``: ``claim_v1`` for each item, in job-lock order; rows carry the index.

    Under the item's job lock, a run that is already decided for this claim
    (done, or running with a live lease of another token) is answered from a
    plain read, as ``claim_v1`` would answer it; every other item (a new
    slot, its own token, an expired lease) goes through ``claim_v1``. So the
    losers of a race take no row lock and write nothing, and do not hold the
    owner's row until the chunk commits.
    """
    runs = table("runs")
    prefix = table("x")[:-1]  # the validated table prefix: safe in a literal
    return f"""
CREATE OR REPLACE FUNCTION {table(CLAIM_MANY_FUNCTION)}(
    p_jobs text[], p_slots bigint[], p_tokens text[], p_instances text[], p_lease_ms bigint[],
    p_max_attempts integer[], p_overlap boolean[], p_deadlines bigint[], p_create boolean[],
    p_early bigint[], p_overlap_wait boolean[],
    OUT out_i integer, OUT out_kind text, OUT out_attempt integer, OUT out_runner text,
    OUT out_lease bigint, OUT out_token text)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE AS $anarchon$
DECLARE
    i integer;
    c record;
    r record;
    t bigint;
BEGIN
    FOR i IN
        SELECT u.i FROM generate_subscripts(p_jobs, 1) AS u(i)
         ORDER BY hashtextextended('{prefix}job:' || p_jobs[u.i], 0), u.i
    LOOP
        out_i := i;
        PERFORM pg_advisory_xact_lock(hashtextextended('{prefix}job:' || p_jobs[i], 0));
        t := {now};
        SELECT s.attempt, s.token, s.status, s.runner, s.lease_expires_at, s.released
          INTO r FROM {runs} AS s WHERE s.job = p_jobs[i] AND s.slot = p_slots[i];
        IF FOUND AND NOT (r.token = p_tokens[i] AND r.status = 'running' AND r.released = 0)
           AND (r.status <> 'running' OR r.token = p_tokens[i] OR r.lease_expires_at > t) THEN
            out_attempt := r.attempt;
            out_runner := r.runner;
            out_lease := r.lease_expires_at;
            out_token := r.token;
            IF r.status <> 'running' OR r.token = p_tokens[i] THEN
                out_kind := 'done';
            ELSE
                out_kind := 'running';
            END IF;
            RETURN NEXT;
            CONTINUE;
        END IF;
        SELECT * INTO c FROM {table(CLAIM_FUNCTION)}(
            p_jobs[i], p_slots[i], p_tokens[i], p_instances[i], p_lease_ms[i],
            p_max_attempts[i], p_overlap[i], p_deadlines[i], p_create[i],
            p_early[i], p_overlap_wait[i]);
        out_kind := c.out_kind;
        out_attempt := c.out_attempt;
        out_runner := c.out_runner;
        out_lease := c.out_lease;
        out_token := c.out_token;
        RETURN NEXT;
    END LOOP;
END
$anarchon$"""


def _each_item_locked(prefix: str, arrays: str, *, by_slot: bool) -> str:
    """``FOR i IN ... LOOP`` over the items of ``<arrays>_jobs`` in the job locks' order (then the
    slot's, with ``by_slot``, then request order), taking each item's job lock first."""
    jobs, slots = f"{arrays}_jobs", f"{arrays}_slots"
    order = f"{slots}[u.i], u.i" if by_slot else "u.i"
    return f"""
    FOR i IN
        SELECT u.i FROM generate_subscripts({jobs}, 1) AS u(i)
         ORDER BY hashtextextended('{prefix}job:' || {jobs}[u.i], 0), {order}
    LOOP
        PERFORM pg_advisory_xact_lock(hashtextextended('{prefix}job:' || {jobs}[i], 0));"""


def _save_item(table: Callable[[str], str], now: str) -> str:
    """The statements saving item ``i`` of the save arrays (its job lock already held)."""
    runs, claims, results, jobs = table("runs"), table("claims"), table("results"), table("jobs")
    keep = (
        "NOT EXISTS (SELECT 1 FROM {runs} AS k WHERE k.job = {t}.job AND k.slot = {t}.slot"
        " AND k.status = 'running')"
    )
    keep_results = keep.format(runs=runs, t=results)
    keep_claims = keep.format(runs=runs, t=claims)
    return f"""
        INSERT INTO {results} (job, token, slot, attempt, instance_id, status, reason,
                               started_at, finished_at, error, manual)
        VALUES (p_jobs[i], p_tokens[i], p_slots[i], p_attempts[i], p_instances[i],
                p_statuses[i], p_reasons[i], p_started[i], p_finished[i], p_errors[i],
                p_manual[i])
        ON CONFLICT (job, slot, token) DO UPDATE SET slot = excluded.slot,
            attempt = excluded.attempt, instance_id = excluded.instance_id,
            status = excluded.status, reason = excluded.reason,
            started_at = excluded.started_at, finished_at = excluded.finished_at,
            error = excluded.error, manual = excluded.manual;
        INSERT INTO {jobs} AS j (job, saves) VALUES (p_jobs[i], 1)
        ON CONFLICT (job) DO UPDATE SET saves = j.saves + 1
        RETURNING j.saves INTO saves;
        size := greatest(p_sizes[i], 1);
        IF saves % greatest(size / 2, 1) = 0 THEN
            SELECT r.slot INTO cut FROM {results} AS r WHERE r.job = p_jobs[i]
             ORDER BY r.slot DESC LIMIT 1 OFFSET size - 1;
            IF FOUND THEN
                DELETE FROM {results} WHERE job = p_jobs[i] AND slot < cut AND {keep_results};
                DELETE FROM {claims} WHERE job = p_jobs[i] AND slot < cut AND {keep_claims};
                IF p_retention[i] IS NOT NULL THEN
                    DELETE FROM {runs} WHERE job = p_jobs[i] AND slot < cut
                       AND status <> 'running' AND slot < {now} - p_retention[i];
                END IF;
            END IF;
        END IF;
        IF p_ttls[i] IS NOT NULL THEN
            DELETE FROM {results} WHERE job = p_jobs[i] AND slot < {now} - p_ttls[i]
               AND {keep_results};
            DELETE FROM {claims} WHERE job = p_jobs[i] AND slot < {now} - p_ttls[i]
               AND {keep_claims};
        END IF;"""


_SAVE_ARRAYS = """
    p_jobs text[], p_tokens text[], p_slots bigint[], p_attempts integer[], p_instances text[],
    p_statuses text[], p_reasons text[], p_started bigint[], p_finished bigint[], p_errors text[],
    p_manual integer[], p_sizes integer[], p_ttls bigint[], p_retention bigint[]"""
"""The parameters of ``save_many_v1`` (and the save half of ``finish_save_many_v1``)."""

_SAVE_LOCALS = """
    saves bigint;
    size integer;
    cut bigint;"""


def save_many_function(table: Callable[[str], str], now: str) -> str:
    """``save_many_v1``: ``SqlBackend._save_tx`` for each item, items of one job in request order.

    Each item first takes its job's lock, as a claim does, and items are
    taken in the job locks' order (as in ``claim_many_v1``): every chunk then
    locks jobs in one global order, and the rows of a job only under its lock. ``p_retention`` is NULL where the
    backend has not learnt the job's limits (run state is then not trimmed).
    """
    runs = table("runs")
    prefix = table("x")[:-1]  # the validated table prefix: safe in a literal
    return f"""
CREATE OR REPLACE FUNCTION {table(SAVE_MANY_FUNCTION)}({_SAVE_ARRAYS})
RETURNS integer
LANGUAGE plpgsql VOLATILE AS $anarchon$
DECLARE
    i integer;
    n integer := 0;{_SAVE_LOCALS}
BEGIN{_each_item_locked(prefix, "p", by_slot=False)}
        IF p_manual[i] = 0 AND p_statuses[i] <> 'running' THEN
            UPDATE {runs} SET status = 'finished', finished_at = {now}, outcome = p_statuses[i],
                   error = p_errors[i]
             WHERE job = p_jobs[i] AND slot = p_slots[i] AND token = p_tokens[i]
               AND status = 'running';
        END IF;{_save_item(table, now)}
        n := n + 1;
    END LOOP;
    RETURN n;
END
$anarchon$"""


def heartbeat_many_function(table: Callable[[str], str], now: str) -> str:
    """``heartbeat_many_v1``: the single heartbeat's ``UPDATE`` for each item; ``(index, renewed)``.

    One primary-key update per item, so the cost never depends on the
    planner's statistics (a fresh table has none). Each item first takes its
    job's lock, in the job locks' order (as ``claim_many_v1``): a claim chunk
    of another instance holds the rows it looked at until it commits, and
    without the same order the two chunks deadlocked.
    """
    runs = table("runs")
    prefix = table("x")[:-1]  # the validated table prefix: safe in a literal
    return f"""
CREATE OR REPLACE FUNCTION {table(HEARTBEAT_MANY_FUNCTION)}(
    p_lease_ms bigint, p_jobs text[], p_slots bigint[], p_tokens text[],
    OUT out_i integer, OUT out_ok boolean)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE AS $anarchon$
DECLARE
    i integer;
BEGIN{_each_item_locked(prefix, "p", by_slot=True)}
        UPDATE {runs} SET lease_expires_at = {now} + p_lease_ms
         WHERE job = p_jobs[i] AND slot = p_slots[i] AND token = p_tokens[i]
           AND status = 'running' AND released = 0;
        out_i := i;
        out_ok := FOUND;
        RETURN NEXT;
    END LOOP;
END
$anarchon$"""


def _finish_item(table: Callable[[str], str], now: str, arrays: str) -> str:
    """The statements finishing item ``i`` of the finish arrays (named ``<arrays>_jobs``, ...);
    ``out_ok`` is the answer."""
    runs = table("runs")
    job, slot, token = f"{arrays}_jobs[i]", f"{arrays}_slots[i]", f"{arrays}_tokens[i]"
    return f"""
        UPDATE {runs} SET status = 'finished', finished_at = {now},
               outcome = {arrays}_statuses[i], error = {arrays}_errors[i]
         WHERE job = {job} AND slot = {slot} AND token = {token}
           AND status = 'running' AND released = 0;
        out_ok := FOUND;
        IF NOT out_ok THEN
            out_ok := EXISTS (SELECT 1 FROM {runs} AS s WHERE s.job = {job}
                               AND s.slot = {slot} AND s.token = {token}
                               AND s.status = 'finished');
        END IF;"""


def _finish_arrays(arrays: str) -> str:
    """The finish parameters (``finish_many_v1`` keeps its ``p_`` names: a rolling deploy
    replaces the function, and PostgreSQL refuses to rename a parameter)."""
    return (
        f"\n    {arrays}_jobs text[], {arrays}_slots bigint[], {arrays}_tokens text[],"
        f" {arrays}_statuses text[], {arrays}_errors text[]"
    )


def finish_many_function(table: Callable[[str], str], now: str) -> str:
    """``finish_many_v1``: the single finish for each item; ``(index, answer)``.

    As ``SqlRunStore.finish``: True when the token's running run is finished
    now, or was already finished by the same token (a retried finish).
    """
    prefix = table("x")[:-1]  # the validated table prefix: safe in a literal
    return f"""
CREATE OR REPLACE FUNCTION {table(FINISH_MANY_FUNCTION)}({_finish_arrays("p")},
    OUT out_i integer, OUT out_ok boolean)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE AS $anarchon$
DECLARE
    i integer;
BEGIN{_each_item_locked(prefix, "p", by_slot=True)}
        out_i := i;{_finish_item(table, now, "p")}
        RETURN NEXT;
    END LOOP;
END
$anarchon$"""


def finish_save_many_function(table: Callable[[str], str], now: str) -> str:
    """``finish_save_many_v1``: per item the finish of ``finish_many_v1`` and, if it answered
    True, the save of ``save_many_v1``; ``(index, answer)``. A finished run and its result are
    written in the same transaction (``RunStore.finish_and_save_many``)."""
    prefix = table("x")[:-1]  # the validated table prefix: safe in a literal
    return f"""
CREATE OR REPLACE FUNCTION {table(FINISH_SAVE_MANY_FUNCTION)}({_finish_arrays("f")},{_SAVE_ARRAYS},
    OUT out_i integer, OUT out_ok boolean)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE AS $anarchon$
DECLARE
    i integer;{_SAVE_LOCALS}
BEGIN{_each_item_locked(prefix, "f", by_slot=True)}
        out_i := i;{_finish_item(table, now, "f")}
        IF out_ok THEN{_save_item(table, now)}
        END IF;
        RETURN NEXT;
    END LOOP;
END
$anarchon$"""
