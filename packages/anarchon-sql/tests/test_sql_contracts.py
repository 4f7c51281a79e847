"""The contract suites (fleet registry and membership included) against PostgreSQL, SQLite and the example subclass (extension path).

The shipped scenarios (``ScenarioContract``) run on PostgreSQL and SQLite; SQLite
(a file, no server) is locked instead of blackholed when ``stop()`` is timed.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest
from anarchon import Scheduler
from anarchon.backend import Backend
from anarchon.testing import (
    BackendContract,
    FleetContract,
    LeaseContract,
    LeaseModelContract,
    MembershipContract,
)
from anarchon.testing.contracts.foreign import HISTORY_SIZE, ForeignDataContract
from anarchon.testing.contracts.scenarios import (
    ClockStepScenarios,
    ControlScenarios,
    HealScenarios,
    LeaseFaultScenarios,
    OneOffScenarios,
    OutliveStopScenarios,
    RetryKill9Scenarios,
    StopBoundScenarios,
)
from anarchon_sql import PostgresBackend, SqliteBackend
from anarchon_sql._backend import SqlBackend
from anarchon_testservers.postgres import PgServer

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "threaded_sqlite.py"


def load_example() -> Any:
    """The example module ``examples/threaded_sqlite.py`` (not part of the package)."""
    spec = importlib.util.spec_from_file_location("anarchon_sql_example_threaded", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SHARED_PLACES = ("controls", "fleet", "members", "claims", "results", "runs", "jobs")
"""Garbage places a test on the default table prefix may write (other tests read them too)."""

OWN_TABLES_PLACES = (*SHARED_PLACES, "meta")
"""With tables of the test's own: also the store format marker (read by ``init()``)."""


async def _write_garbage_at(backend: Backend, job: str, slot: int, place: str) -> list[str]:
    """Garbage in one table the backend reads; none where a typed column refuses it."""
    assert isinstance(backend, SqlBackend)
    client = await backend._session.ready()
    t, q = backend.tables, backend.dialect.placeholders
    big = "9000000000000000000"
    writes = {
        "controls": [
            (
                f"{t('controls')}[job='{job}~bad']",
                f"INSERT INTO {t('controls')} (job, paused) VALUES ('{job}~bad', '{{bad')",
            ),
            (
                f"{t('controls')}[job='{job}~big']",
                f"INSERT INTO {t('controls')} (job, paused) VALUES ('{job}~big', 7)",
            ),
        ],
        "fleet": [
            (
                f"{t('fleet')}[job='{job}~bad' instance_id='i-9']",
                f"INSERT INTO {t('fleet')} (job, instance_id, fingerprint, schedule, seen_at,"
                f" expires_at) VALUES ('{job}~bad', 'i-9', 'f', 's', '1e400', {big})",
            )
        ],
        "members": [
            (
                f"{t('members')}[instance_id='{job}~bad']",
                f"INSERT INTO {t('members')} (instance_id, roster, seen_at, expires_at)"
                f" VALUES ('{job}~bad', 'r', '1e400', {big})",
            ),
        ],
        "claims": [
            (
                t("claims"),
                f"INSERT INTO {t('claims')} (job, token, slot, attempt, instance_id, claimed_at,"
                f" manual) VALUES ('{job}', 'garbage', '{{bad', 1, 'i', 0, 0)",
            )
        ],
        "results": [
            (
                t("results"),
                f"INSERT INTO {t('results')} (job, token, slot, attempt, instance_id, status,"
                f" manual) VALUES ('{job}', 'garbage', '1e400', 1, 'i', 'ok', 0)",
            ),
            # The next save trims history (every history_size // 2 saves) at the slot of the
            # 10th newest result: SQLite sorts these text slots above every number.
            *[
                (
                    None,
                    f"INSERT INTO {t('results')} (job, token, slot, attempt, instance_id, status,"
                    f" manual) VALUES ('{job}', 'garbage', 'x{n}', 1, 'i', 'ok', 0)",
                )
                for n in range(HISTORY_SIZE)
            ],
            (None, f"UPDATE {t('jobs')} SET saves = 4 WHERE job = '{job}'"),
        ],
        "runs": [
            (
                t("runs"),
                f"UPDATE {t('runs')} SET released = '{{bad', status = 'running',"
                f" lease_expires_at = '{{bad' WHERE job = '{job}'",
            )
        ],
        "jobs": [
            (t("jobs"), f"UPDATE {t('jobs')} SET saves = '1e400' WHERE job = '{job}'"),
        ],
        "meta": [
            (t("meta"), f"UPDATE {t('meta')} SET value = '{{bad' WHERE key = 'store_format'"),
        ],
    }[place]
    places: list[str] = []
    for name, statement in writes:
        try:
            await client.all(q(statement), ())
        except Exception:  # a typed column refuses it: nothing unreadable can be there
            continue
        if name is not None:
            places.append(name)
    return places


async def _write_garbage(backend: Backend, job: str, slot: int) -> list[str]:
    """Garbage in every table the backend reads but the store format marker."""
    names: list[str] = []
    for place in SHARED_PLACES:
        names += await _write_garbage_at(backend, job, slot, place)
    return names


class _ForeignData(ForeignDataContract):
    """Garbage in the tables, one place at a time too."""

    garbage_places: ClassVar[Sequence[str]] = SHARED_PLACES

    async def write_garbage(self, backend: Backend, job: str, slot: int) -> list[str]:
        """Garbage wherever the column types let it in."""
        return await _write_garbage(backend, job, slot)

    async def write_garbage_at(
        self, backend: Backend, job: str, slot: int, place: str
    ) -> list[str]:
        """Garbage in one table, where its column types let it in."""
        return await _write_garbage_at(backend, job, slot, place)


class TestPostgres(BackendContract, LeaseContract, FleetContract, MembershipContract, _ForeignData):
    """``PostgresBackend`` from a URL: it opens (and closes) its own pool."""

    @pytest.fixture
    def backend(self, pg_dsn: str) -> Backend:
        self.dsn = pg_dsn
        return PostgresBackend.from_url(pg_dsn)

    def peer_backends(self, backend: Backend, count: int) -> list[Backend] | None:
        return [PostgresBackend(self.dsn) for _ in range(count)]


class TestPostgresOwnTables(_ForeignData):
    """Garbage on tables of the test's own (``table_prefix``): the store format marker too."""

    garbage_places = OWN_TABLES_PLACES

    @pytest.fixture
    def backend(self, pg_dsn: str, prefix: str) -> Backend:
        return PostgresBackend.from_url(f"{pg_dsn}?table_prefix={prefix}")


class TestPostgresNotReadCommitted(LeaseContract):
    """A server whose default isolation is SERIALIZABLE: claims still run at READ COMMITTED."""

    @pytest.fixture
    def backend(self, pg_dsn: str) -> Backend:
        options = "options=-c%20default_transaction_isolation%3Dserializable"
        return PostgresBackend.from_url(f"{pg_dsn}?{options}&table_prefix=serial_")


class TestSqlite(BackendContract, LeaseContract, FleetContract, MembershipContract, _ForeignData):
    """``SqliteBackend`` on a temp file (aiosqlite, WAL)."""

    garbage_places = OWN_TABLES_PLACES  # a file of the test's own

    @pytest.fixture
    def backend(self, sqlite_path: str) -> Backend:
        self.path = sqlite_path
        return SqliteBackend.from_url(f"sqlite:///{sqlite_path}")

    def peer_backends(self, backend: Backend, count: int) -> list[Backend] | None:
        return [SqliteBackend(self.path) for _ in range(count)]


class TestExampleSubclass(BackendContract, LeaseContract, FleetContract, MembershipContract):
    """The documented extension path: a hand-written SqlClient + SqlDialect + SqlBackend."""

    @pytest.fixture
    def backend(self, sqlite_path: str) -> Backend:
        module = load_example()
        self.module, self.path = module, sqlite_path
        built: Backend = module.ThreadedSqliteBackend(sqlite_path)
        return built

    def peer_backends(self, backend: Backend, count: int) -> list[Backend] | None:
        return [self.module.ThreadedSqliteBackend(self.path) for _ in range(count)]


def test_example_file_exists() -> None:
    assert os.path.exists(EXAMPLE)


def test_example_clients_opening_a_fresh_file_together_all_open(tmp_path: Path) -> None:
    """Switching a fresh file to WAL can answer "database is locked" at once (no busy
    handler); the example retries it, so clients opened together all open (a CI run of
    the cross-thread race failed so before)."""
    module = load_example()
    failures: list[BaseException] = []

    def open_and_close(path: str) -> None:
        async def main() -> None:
            client = module.ThreadedSqliteClient(path)
            try:
                await client.open()
                assert (await client.all("PRAGMA journal_mode"))[0][0] == "wal"
            finally:
                await client.close()

        try:
            asyncio.run(main())
        except BaseException as error:
            failures.append(error)

    for round_ in range(100):
        path = str(tmp_path / f"fresh-{round_}.db")
        threads = [threading.Thread(target=open_and_close, args=(path,)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    assert not failures, f"{len(failures)} opens failed, the first: {failures[0]!r}"


class TestPostgresModel(LeaseModelContract):
    """PostgreSQL answers every lease operation like the reference model (anarchon.backend.lease_model)."""

    @pytest.fixture
    def backend(self, pg_dsn: str) -> Backend:
        return PostgresBackend.from_url(pg_dsn)


class TestSqliteModel(LeaseModelContract):
    """SQLite answers every lease operation like the reference model (anarchon.backend.lease_model)."""

    @pytest.fixture
    def backend(self, sqlite_path: str) -> Backend:
        return SqliteBackend.from_url(f"sqlite:///{sqlite_path}")


_POSTGRES = pytest.param("postgres", marks=pytest.mark.scenario)


def _lease_scheduler(url: str) -> Scheduler:
    return Scheduler(url, instance_id="stopper", lease="3s", heartbeat="1s", stop_grace="1s")


class TestSqlScenarios(
    OneOffScenarios,
    RetryKill9Scenarios,
    ControlScenarios,
    LeaseFaultScenarios,
    OutliveStopScenarios,
    HealScenarios,
    StopBoundScenarios,
    ClockStepScenarios,
):
    """The shipped scenarios on PostgreSQL (a server) and SQLite (two processes on one file)."""

    one_off_stores = (_POSTGRES, "sqlite")
    retry_kill9_stores = (_POSTGRES, "sqlite")
    control_stores = ("sqlite", _POSTGRES)
    takeover_stores = ("postgres", "sqlite")
    kill9_after_s: ClassVar[dict[str, float]] = {"sqlite": 4.0}
    handover_stores = ("sqlite", "postgres")
    outlive_stores = ("postgres", "sqlite")
    sigstop_stores = ("postgres",)
    heal_stores = ("postgres",)
    stop_bound_stores = ("postgres", "sqlite")
    clock_step_stores = ("postgres",)

    def _server(self, request: pytest.FixtureRequest) -> PgServer:
        server: PgServer = request.getfixturevalue("pg_server")
        return server

    def scenario_url(
        self, request: pytest.FixtureRequest, store: str, tmp_path: Path, tag: str
    ) -> str:
        if store == "sqlite":
            return f"sqlite:///{tmp_path / f'{tag}.db'}"
        return f"{self._server(request).dsn}?table_prefix={tag}{uuid.uuid4().hex[:6]}_"

    def store_address(self, request: pytest.FixtureRequest, store: str) -> tuple[str, int]:
        return "127.0.0.1", self._server(request).port

    def _proxied_dsn(self, request: pytest.FixtureRequest, port: int) -> str:
        return f"postgresql://postgres@127.0.0.1:{port}/{self._server(request).database}"

    def proxied_backend(self, request: pytest.FixtureRequest, store: str, port: int) -> Backend:
        dsn = self._proxied_dsn(request, port)
        return PostgresBackend(f"{dsn}?call_timeout={self.heal_call_timeout_s}&pool_size=2")

    def stop_bound_scheduler(
        self, request: pytest.FixtureRequest, store: str, port: int
    ) -> Scheduler:
        return _lease_scheduler(f"{self._proxied_dsn(request, port)}?table_prefix=stopbound_")

    @contextmanager
    def stop_bound_case(
        self, request: pytest.FixtureRequest, store: str
    ) -> Iterator[tuple[Scheduler, Callable[[], None]]]:
        """SQLite: another connection holds an exclusive transaction (every other one waits)."""
        if store != "sqlite":
            with super().stop_bound_case(request, store) as case:
                yield case
            return
        path = request.getfixturevalue("sqlite_path")
        locker = sqlite3.connect(path, isolation_level=None, timeout=0.1)

        def lock() -> None:
            locker.execute("BEGIN EXCLUSIVE")

        try:
            yield _lease_scheduler(f"sqlite:///{path}"), lock
        finally:
            locker.close()

    def clock_step_backend(self, request: pytest.FixtureRequest, store: str) -> Backend:
        dsn = self._server(request).dsn
        return PostgresBackend(dsn, table_prefix=request.getfixturevalue("prefix"))


@pytest.fixture(scope="session")
def pg_replicated_dsn() -> Iterator[str]:
    """A primary with a synchronous standby (``pg_basebackup -R``): its DSN."""
    from anarchon_testservers.postgres import start_postgres, start_standby

    primary = start_postgres()
    try:
        standby = start_standby(primary, synchronous=True)
        try:
            yield primary.dsn
        finally:
            standby.stop()
    finally:
        primary.stop()


class TestPostgresReplicated(LeaseContract, LeaseModelContract):
    """``durability="replicated"`` on a primary with a synchronous standby: the synchronous
    wrappers keep every answer of the lease contract (and its model and healing)."""

    @pytest.fixture
    def backend(self, pg_replicated_dsn: str) -> Backend:
        return PostgresBackend.from_url(f"{pg_replicated_dsn}?durability=replicated")
