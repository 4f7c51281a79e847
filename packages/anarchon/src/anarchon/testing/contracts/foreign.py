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
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from anarchon.backend import Backend
from anarchon.errors import AnarchonError, ForeignDataError
from anarchon.fleet.controls import pause_job
from anarchon.fleet.status import fleet_status
from anarchon.fleet.types import Declaration, JobControl
from anarchon.testing.contracts._support import ContractBase, new_job, new_token, wall_ms
from anarchon.types import ClaimInput, StoredResult

__all__ = ["GARBAGE", "ForeignDataContract"]

GARBAGE: tuple[str, ...] = ("{bad", "1e400", '{"p":1e400,"u":1e400,"at":"x","by":[]}', "[]", "")
"""Values a garbage writer may store (broken JSON, a float too large for an int, ...)."""


def _has_membership(backend: Backend) -> bool:
    """True when the backend overrides the membership members (docs/fleet.md, "Membership")."""
    return type(backend).members is not Backend.members


class ForeignDataContract(ContractBase):
    """Every reader of stored data answers garbage with a coded error, or skips and reports it."""

    async def write_garbage(self, backend: Backend, job: str, slot: int) -> list[str]:
        """Override: write garbage into every place the backend owns; return their names.

        ``job`` has a claimed run at ``slot`` with a result (the places of a
        job exist); also add garbage entries to the shared controls and
        registry (e.g. a control for a job named ``zzz``) and, on a backend
        with membership, a garbage member record. Names are what
        the backend puts in ``ForeignDataError.key`` for those places.
        """
        pytest.fail(f"{type(self).__name__} must override write_garbage()", pytrace=False)

    def test_every_reader_answers_garbage_with_a_code(
        self, backend: Backend, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Garbage everywhere: each reader raises ``ANARCHON_FOREIGN_DATA`` or skips and reports."""
        caplog.set_level(logging.WARNING)

        async def body(b: Backend) -> None:
            job, paused = new_job("garbage"), new_job("paused")
            slot = (wall_ms() // 1000 - 5) * 1000
            token = new_token()
            await b.prepare_job(job, 10)
            await b.claim(ClaimInput(job, slot, token, "i-1", 10))
            await b.save_result(job, StoredResult(slot, token, "i-1", "ok", slot, slot + 1), 10)
            declared = Declaration(job, "i-1", "f" * 16, "every 1000ms", seen_at=0, expires_at=0)
            await b.declare([declared], 120_000)
            await pause_job(b, paused, by="contract")
            membership = _has_membership(b)
            if membership:
                await b.refresh_member("i-1", "roster", 120_000)
            places = await self.write_garbage(b, job, slot)
            assert places, "write_garbage() wrote nothing"
            raised: dict[str, str | None] = {}
            readers: dict[str, Callable[[], Awaitable[Any]]] = {
                "controls": b.controls,
                "declarations": b.declarations,
                "declarations(job)": lambda: b.declarations(job),
                "history": lambda: b.history(job, 10),
                "history_many": lambda: b.history_many([job], 10),
                "fleet_status": lambda: fleet_status(b),
            }
            if membership:
                readers["members"] = b.members
                readers["refresh_member"] = lambda: b.refresh_member("i-1", "roster", 120_000)
            runs = b.runs
            if runs is not None:
                readers["active"] = lambda: runs.active(job)
                readers["lease_state"] = lambda: runs.lease_state(job, slot, token)
            for name, reader in readers.items():
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
            controls = await b.controls()
            assert controls[paused].paused, "a readable pause was hidden by garbage"
            await pause_job(b, paused, by="contract")  # pause and resume still work
            reported = {
                str(r.__dict__["foreign_key"])
                for r in caplog.records
                if r.__dict__.get("foreign_key") is not None
            }
            named = reported | {k for k in raised.values() if k is not None}
            missed = [p for p in places if not any(p in n or n in p for n in named)]
            assert not missed, f"garbage read without a report: {missed}; named: {sorted(named)}"

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
