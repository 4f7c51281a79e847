"""The SQL every SQL backend runs, built once per (dialect, table prefix), placeholders converted.

:class:`Statements` holds the neutral statements (written once: ``?``
placeholders, ``ON CONFLICT``, ``RETURNING``) and :class:`DialectCalls`, the
dialect's optional one-statement calls (``claim_statement`` and the
``*_many_statement``); where a call is None the generic transaction runs.
"""

from __future__ import annotations

from anarchon.errors import InvalidConfigError

from anarchon_sql._dialect import SqlDialect, SqlTables

__all__ = ["DialectCalls", "Statements"]


class DialectCalls:
    """The dialect's one-statement calls, placeholders converted; None where it has none."""

    def __init__(self, dialect: SqlDialect, tables: SqlTables) -> None:
        def prepared(sql: str | None) -> str | None:
            return None if sql is None else dialect.placeholders(sql)

        self.claim = prepared(dialect.claim_statement(tables))
        self.claim_many = prepared(dialect.claim_many_statement(tables))
        self.heartbeat_many = prepared(dialect.heartbeat_many_statement(tables))
        self.finish_many = prepared(dialect.finish_many_statement(tables))
        self.save_many = prepared(dialect.save_many_statement(tables))
        self.finish_save_many = prepared(dialect.finish_save_many_statement(tables))


class Statements:
    """Every statement the backend runs, built once per (dialect, prefix), placeholders converted."""

    def __init__(self, dialect: SqlDialect, tables: SqlTables) -> None:
        if not dialect.now_ms:
            raise InvalidConfigError(
                f"{type(dialect).__name__}.now_ms must be an SQL expression reading the server clock"
            )
        q = dialect.placeholders
        now = dialect.now_ms
        runs, claims, results, jobs, meta = (
            tables.runs,
            tables.claims,
            tables.results,
            tables.jobs,
            tables.meta,
        )
        keep_running = (
            f"NOT EXISTS (SELECT 1 FROM {runs} AS r WHERE r.job = {{t}}.job"
            f" AND r.slot = {{t}}.slot AND r.status = 'running')"
        )
        self.now = q(f"SELECT {now}")
        # Meta and set-up.
        self.create_meta = (
            f"CREATE TABLE IF NOT EXISTS {meta} ("
            f"key {dialect.text} PRIMARY KEY, value {dialect.text} NOT NULL)"
        )
        self.meta_get = q(f"SELECT key, value FROM {meta}")
        self.meta_put = q(
            f"INSERT INTO {meta} (key, value) VALUES (?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        )
        self.job_row = q(f"SELECT 1 FROM {jobs} WHERE job = ?")
        self.prepare_job = q(
            f"INSERT INTO {jobs} (job, saves) VALUES (?, 0) ON CONFLICT (job) DO NOTHING"
        )
        # The claim transaction (generic path).
        self.run_row = q(
            "SELECT attempt, max_attempts, token, status, runner, lease_expires_at,"
            f" started_at, released FROM {runs} WHERE job = ? AND slot = ?{dialect.for_update}"
        )
        self.lease_state = q(
            f"SELECT token, status, released FROM {runs} WHERE job = ? AND slot = ?"
        )
        self.live_older = q(
            f"SELECT runner, lease_expires_at FROM {runs} WHERE job = ? AND status = 'running'"
            " AND slot < ? AND lease_expires_at > ? ORDER BY slot DESC LIMIT 1"
        )
        self.insert_run = q(
            f"INSERT INTO {runs} (job, slot, attempt, max_attempts, token, status, runner,"
            " lease_expires_at, started_at, finished_at, released)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)"
        )
        self.insert_claim = q(
            f"INSERT INTO {claims} (job, token, slot, attempt, instance_id, claimed_at, manual)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (job, slot, token) DO NOTHING"
        )
        self.insert_result = q(
            f"INSERT INTO {results} (job, token, slot, attempt, instance_id, status, reason,"
            " started_at, finished_at, error, manual) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (job, slot, token) DO NOTHING"
        )
        self.extend_lease = q(f"UPDATE {runs} SET lease_expires_at = ? WHERE job = ? AND slot = ?")
        self.take_over = q(
            f"UPDATE {runs} SET attempt = ?, token = ?, runner = ?, lease_expires_at = ?,"
            " max_attempts = ?, started_at = ?, released = 0, end_reason = NULL"
            " WHERE job = ? AND slot = ?"
        )
        self.end_run = q(
            f"UPDATE {runs} SET status = ?, finished_at = ?, end_reason = ?"
            " WHERE job = ? AND slot = ?"
        )
        # Leases.
        self.heartbeat = q(
            f"UPDATE {runs} SET lease_expires_at = {now} + ? WHERE job = ? AND slot = ?"
            " AND token = ? AND status = 'running' AND released = 0 RETURNING lease_expires_at"
        )
        self.finish = q(
            f"UPDATE {runs} SET status = 'finished', finished_at = {now}, outcome = ?, error = ?"
            " WHERE job = ? AND slot = ? AND token = ? AND status = 'running' AND released = 0"
            " RETURNING slot"
        )
        self.heal_finish = q(
            f"INSERT INTO {runs} (job, slot, attempt, max_attempts, token, status, runner,"
            " lease_expires_at, started_at, finished_at, released, outcome, error)"
            f" VALUES (?, ?, 1, 1, ?, 'finished', '', {now}, {now}, {now}, 0, ?, ?)"
            " ON CONFLICT (job, slot) DO NOTHING RETURNING slot"
        )
        self.state_of = q(
            f"SELECT status, end_reason FROM {runs} WHERE job = ? AND slot = ? AND token = ?"
        )
        self.release_row = q(
            f"SELECT {now}, attempt, max_attempts, runner, started_at, status, released,"
            f" end_reason FROM {runs} WHERE job = ? AND slot = ? AND token = ?{dialect.for_update}"
        )
        self.release_lease = q(
            f"UPDATE {runs} SET lease_expires_at = ?, released = 1, end_reason = 'handed_over'"
            " WHERE job = ? AND slot = ?"
        )
        self.active = q(
            f"SELECT {now}, slot, attempt, runner, lease_expires_at, token FROM {runs}"
            " WHERE job = ? AND status = 'running' ORDER BY slot"
        )
        # History.
        self.manual_claim = q(
            f"INSERT INTO {claims} (job, token, slot, attempt, instance_id, claimed_at, manual)"
            f" VALUES (?, ?, ?, 1, ?, {now}, 1) ON CONFLICT (job, slot, token) DO NOTHING"
        )
        self.finish_plain = q(
            f"UPDATE {runs} SET status = 'finished', finished_at = {now}, outcome = ?, error = ?"
            " WHERE job = ? AND slot = ? AND token = ? AND status = 'running'"
        )
        self.upsert_result = q(
            f"INSERT INTO {results} (job, token, slot, attempt, instance_id, status, reason,"
            " started_at, finished_at, error, manual) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (job, slot, token) DO UPDATE SET slot = excluded.slot,"
            " attempt = excluded.attempt, instance_id = excluded.instance_id,"
            " status = excluded.status, reason = excluded.reason,"
            " started_at = excluded.started_at, finished_at = excluded.finished_at,"
            " error = excluded.error, manual = excluded.manual"
        )
        self.count_save = q(
            f"INSERT INTO {jobs} (job, saves) VALUES (?, 1)"
            f" ON CONFLICT (job) DO UPDATE SET saves = {jobs}.saves + 1 RETURNING saves"
        )
        self.cut = q(
            f"SELECT slot FROM {results} WHERE job = ? ORDER BY slot DESC LIMIT 1 OFFSET ?"
        )
        self.trim_results = q(
            f"DELETE FROM {results} WHERE job = ? AND slot < ? AND "
            + keep_running.format(t=results)
        )
        self.trim_claims = q(
            f"DELETE FROM {claims} WHERE job = ? AND slot < ? AND " + keep_running.format(t=claims)
        )
        self.trim_runs = q(
            f"DELETE FROM {runs} WHERE job = ? AND slot < ? AND status <> 'running'"
            f" AND slot < {now} - ?"
        )
        self.ttl_results = q(
            f"DELETE FROM {results} WHERE job = ? AND slot < {now} - ? AND "
            + keep_running.format(t=results)
        )
        self.ttl_claims = q(
            f"DELETE FROM {claims} WHERE job = ? AND slot < {now} - ? AND "
            + keep_running.format(t=claims)
        )
        self.history_claims = q(
            f"SELECT slot, token, instance_id, claimed_at, manual, attempt FROM {claims}"
            " WHERE job = ? ORDER BY slot DESC, attempt DESC LIMIT ?"
        )
        self.history_results = q(
            "SELECT slot, token, instance_id, status, started_at, finished_at, error, attempt,"
            f" manual, reason FROM {results} WHERE job = ? ORDER BY slot DESC, attempt DESC LIMIT ?"
        )
        self.calls = DialectCalls(dialect, tables)
