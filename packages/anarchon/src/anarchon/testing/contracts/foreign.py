"""Contract tests for data a backend did not write (docs/extending.md, "Data the backend did not write").

A subclass overrides the ``backend`` fixture as for
:class:`~anarchon.testing.BackendContract` and :meth:`ForeignDataContract.write_garbage`:
write something that is not anarchon's into every key, table row or subject
the backend owns for a job (and into the shared controls, registry and, on a
backend with membership, the member records), and return the names the
backend gives those places (``ForeignDataError.key``).
Every reader must then answer with a coded
:class:`~anarchon.errors.ForeignDataError` naming the place, or skip the
entry and report it (a WARNING with ``foreign_key``); never a raw
``ValueError`` or ``OverflowError``. The readable controls of other jobs
are still returned.

Garbage everywhere at once shows only the first place each reader trips
over. So a subclass also lists its places in
:attr:`ForeignDataContract.garbage_places` and writes garbage into one of
them at a time with :meth:`ForeignDataContract.write_garbage_at`: each
place alone must then be named by a reader, so no reader may read it
silently (a wrong answer) where another place's garbage used to stop it
first.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar

import pytest

from anarchon.backend import Backend
from anarchon.errors import AnarchonError, ForeignDataError
from anarchon.fleet.controls import pause_job
from anarchon.fleet.status import fleet_status
from anarchon.fleet.types import Declaration, JobControl
from anarchon.testing.contracts._support import ContractBase, new_job, new_token, wall_ms
from anarchon.types import ClaimInput, RunClaim, RunRetry, StoredResult

__all__ = ["EVERY_PLACE", "GARBAGE", "HISTORY_SIZE", "ForeignDataContract"]

GARBAGE: tuple[str, ...] = ("{bad", "1e400", '{"p":1e400,"u":1e400,"at":"x","by":[]}', "[]", "")
"""Values a garbage writer may store (broken JSON, a float too large for an int, ...)."""

HISTORY_SIZE = 10
"""The ``history_size`` every job of the contract is prepared, claimed and saved with."""

EVERY_PLACE = "every place"
"""The one place of :attr:`ForeignDataContract.garbage_places` by default: :meth:`write_garbage`."""

_LEASE_MS = 30_000


def _named(place: str, names: set[str]) -> bool:
    """True if ``place`` is one of ``names``, or one names the key that holds the other."""
    return any(place in name or name in place for name in names)


def _has_membership(backend: Backend) -> bool:
    """True when the backend overrides the membership members (docs/fleet.md, "Membership")."""
    return type(backend).members is not Backend.members


class ForeignDataContract(ContractBase):
    """Every reader of stored data answers garbage with a coded error, or skips and reports it."""

    garbage_places: ClassVar[Sequence[str]] = (EVERY_PLACE,)
    """Override: the places :meth:`write_garbage_at` can corrupt, one test each (your own labels).

    Each test gets a fresh ``backend``. List a place that breaks ``init()``
    (a store format marker) only where the fixture gives each test a store
    of its own (a key prefix, a stream, a table prefix): other tests share
    the marker otherwise.
    """

    async def write_garbage(self, backend: Backend, job: str, slot: int) -> list[str]:
        """Override: write garbage into every place the backend owns; return their names.

        ``job`` has a claimed run at ``slot`` with a result (the places of a
        job exist); also add garbage entries to the shared controls and
        registry (e.g. a control for a job named ``zzz``) and, on a backend
        with membership, a garbage member record. Names are what
        the backend puts in ``ForeignDataError.key`` for those places.
        Leave out what breaks ``init()`` (see :attr:`garbage_places`).
        """
        pytest.fail(f"{type(self).__name__} must override write_garbage()", pytrace=False)

    async def write_garbage_at(
        self, backend: Backend, job: str, slot: int, place: str
    ) -> list[str]:
        """Override with :attr:`garbage_places`: garbage in ``place`` only; return its names.

        ``job`` is as for :meth:`write_garbage` (prepared and claimed with
        :data:`HISTORY_SIZE`). Return what the backend names the place; an
        empty list for garbage no reader parses (every reader must still
        answer as usual). Writing other, readable data so that a reader
        reaches the place (a counter that makes housekeeping due) is fine.
        Default: :meth:`write_garbage` for :data:`EVERY_PLACE`.
        """
        if place != EVERY_PLACE:
            pytest.fail(
                f"{type(self).__name__} lists garbage place {place!r}: override write_garbage_at()",
                pytrace=False,
            )
        return await self.write_garbage(backend, job, slot)

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """One test of :meth:`test_garbage_in_one_place_is_named` per garbage place."""
        if "garbage_place" in metafunc.fixturenames:
            metafunc.parametrize("garbage_place", list(self.garbage_places))
        parent = getattr(super(), "pytest_generate_tests", None)
        if parent is not None:
            parent(metafunc)

    # Helpers -------------------------------------------------------------------

    async def _job_with_a_run(self, b: Backend) -> tuple[str, int, str]:
        """A prepared job with a claimed run that has a result: ``(job, slot, token)``."""
        job = new_job("garbage")
        slot = (wall_ms() // 1000 - 5) * 1000
        token = new_token()
        await b.prepare_job(job, HISTORY_SIZE)
        await b.claim(ClaimInput(job, slot, token, "i-1", HISTORY_SIZE))
        result = StoredResult(slot, token, "i-1", "ok", slot, slot + 1)
        await b.save_result(job, result, HISTORY_SIZE)
        return job, slot, token

    def _readers(
        self, b: Backend, job: str, slot: int, token: str
    ) -> dict[str, Callable[[], Awaitable[Any]]]:
        """Every reader of stored data, by name; those that also write come after the others.

        ``init`` (a new start: store format markers, shared settings) is last.
        """
        later, other = slot + 1000, slot + 2000
        readers: dict[str, Callable[[], Awaitable[Any]]] = {
            "controls": b.controls,
            "declarations": b.declarations,
            "declarations(job)": lambda: b.declarations(job),
            "history": lambda: b.history(job, HISTORY_SIZE),
            "history_many": lambda: b.history_many([job], HISTORY_SIZE),
            "fleet_status": lambda: fleet_status(b),
            "now_ms": b.now_ms,
        }
        if _has_membership(b):
            readers["members"] = b.members
        runs = b.runs
        if runs is not None:
            readers["active"] = lambda: runs.active(job)
            readers["lease_state"] = lambda: runs.lease_state(job, slot, token)
        if _has_membership(b):
            readers["refresh_member"] = lambda: b.refresh_member("i-1", "roster", 120_000)
        readers["prepare_job"] = lambda: b.prepare_job(job, HISTORY_SIZE)
        readers["claim (again)"] = lambda: b.claim(
            ClaimInput(job, slot, token, "i-1", HISTORY_SIZE)
        )
        later_token = new_token()
        readers["claim (next slot)"] = lambda: b.claim(
            ClaimInput(job, later, later_token, "i-2", HISTORY_SIZE)
        )
        readers["save_result"] = lambda: b.save_result(
            job, StoredResult(later, later_token, "i-2", "ok", later, later + 1), HISTORY_SIZE
        )
        manual = new_token()

        async def manual_run() -> None:
            await b.record_manual_run(ClaimInput(job, later, manual, "i-4", HISTORY_SIZE))
            done = StoredResult(later, manual, "i-4", "ok", later, later + 1, manual=True)
            await b.save_result(job, done, HISTORY_SIZE)

        readers["manual run"] = manual_run
        if runs is not None:
            leased = new_token()
            claim = RunClaim(job, other, leased, "i-3", _LEASE_MS, history_size=HISTORY_SIZE)
            retry = RunRetry(job, slot, token, new_token(), "i-1", _LEASE_MS, 3)
            readers["runs.claim (overlap checked)"] = lambda: runs.claim(claim)
            readers["runs.heartbeat"] = lambda: runs.heartbeat(job, slot, token, _LEASE_MS)
            readers["runs.finish"] = lambda: runs.finish(job, slot, token, "ok")
            readers["runs.retry"] = lambda: runs.retry(retry)
            readers["runs.release"] = lambda: runs.release(job, slot, token)
            readers["runs.heartbeat (leased run)"] = lambda: runs.heartbeat(
                job, other, leased, _LEASE_MS
            )
            readers["runs.finish (leased run)"] = lambda: runs.finish(job, other, leased, "ok")

        async def start_again() -> None:
            await b.close()
            await b.init()

        readers["init"] = start_again
        return readers

    async def _read_everything(
        self, b: Backend, job: str, slot: int, token: str
    ) -> dict[str, str | None]:
        """Call every reader; the key each ``ForeignDataError`` named, by reader.

        Any other error fails the test.
        """
        raised: dict[str, str | None] = {}
        for name, reader in self._readers(b, job, slot, token).items():
            try:
                await reader()
            except ForeignDataError as error:
                raised[name] = error.key
            except AnarchonError as error:
                pytest.fail(
                    f"{name} answered garbage with {error.code}, not a foreign-data error: {error}"
                )
            except Exception as error:  # a raw error escaped
                pytest.fail(f"{name} let {type(error).__name__} escape: {error}")
        nameless = [name for name, key in raised.items() if not key]
        assert not nameless, f"a foreign-data error names no key: {nameless}"
        return raised

    @staticmethod
    def _check_named(
        places: Sequence[str], raised: dict[str, str | None], caplog: pytest.LogCaptureFixture
    ) -> None:
        reported = {
            str(r.__dict__["foreign_key"])
            for r in caplog.records
            if r.__dict__.get("foreign_key") is not None
        }
        named = reported | {k for k in raised.values() if k is not None}
        missed = [p for p in places if not _named(p, named)]
        assert not missed, f"garbage read without a report: {missed}; named: {sorted(named)}"

    # Tests -----------------------------------------------------------------------

    def test_every_reader_answers_garbage_with_a_code(
        self, backend: Backend, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Garbage everywhere: each reader raises ``ANARCHON_FOREIGN_DATA`` or skips and reports."""
        caplog.set_level(logging.WARNING)

        async def body(b: Backend) -> None:
            job, slot, token = await self._job_with_a_run(b)
            paused = new_job("paused")
            declared = Declaration(job, "i-1", "f" * 16, "every 1000ms", seen_at=0, expires_at=0)
            await b.declare([declared], 120_000)
            await pause_job(b, paused, by="contract")
            if _has_membership(b):
                await b.refresh_member("i-1", "roster", 120_000)
            places = await self.write_garbage(b, job, slot)
            assert places, "write_garbage() wrote nothing"
            raised = await self._read_everything(b, job, slot, token)
            self._check_named(places, raised, caplog)
            controls = await b.controls()
            assert controls[paused].paused, "a readable pause was hidden by garbage"
            await pause_job(b, paused, by="contract")  # pause and resume still work

        self.run(backend, body)

    def test_garbage_in_one_place_is_named(
        self, backend: Backend, caplog: pytest.LogCaptureFixture, garbage_place: str
    ) -> None:
        """Garbage in one place only: a reader names it (none reads it silently), none fails raw."""
        caplog.set_level(logging.WARNING)

        async def body(b: Backend) -> None:
            job, slot, token = await self._job_with_a_run(b)
            declared = Declaration(job, "i-1", "f" * 16, "every 1000ms", seen_at=0, expires_at=0)
            await b.declare([declared], 120_000)
            if _has_membership(b):
                await b.refresh_member("i-1", "roster", 120_000)
            places = await self.write_garbage_at(b, job, slot, garbage_place)
            raised = await self._read_everything(b, job, slot, token)
            self._check_named(places, raised, caplog)

        self.run(backend, body)

    def test_an_unreadable_control_hides_no_readable_one(
        self, backend: Backend, caplog: pytest.LogCaptureFixture
    ) -> None:
        """One garbage control beside readable ones: they are returned, it is reported once."""
        caplog.set_level(logging.WARNING)

        async def body(b: Backend) -> None:
            paused, skipped = new_job("ctl-paused"), new_job("ctl-skip")
            await b.set_control(JobControl(paused, paused=True, updated_by="cli"))
            await b.set_control(JobControl(skipped, skip_until=1_700_000_000_000))
            places = await self.write_garbage(b, new_job("ctl-none"), 0)
            for _ in range(2):
                got = await b.controls()
                assert got[paused].paused
                assert got[skipped].skip_until == 1_700_000_000_000
            reports = [r for r in caplog.records if r.__dict__.get("foreign_key") is not None]
            keys = [str(r.__dict__["foreign_key"]) for r in reports]
            assert len(keys) == len(set(keys)), f"reported more than once: {keys}"
            assert any(any(p in k or k in p for p in places) for k in keys), keys

        self.run(backend, body)
