"""Contract tests for the fleet registry and fleet-wide controls (docs/fleet.md).

Override the ``backend`` fixture as for :class:`~anarchon.testing.BackendContract`.
``ttl_ms`` is the short registry TTL waited out to see entries expire.
"""

from __future__ import annotations

import asyncio
from typing import ClassVar

from anarchon.backend import Backend
from anarchon.fleet.types import Declaration, JobControl
from anarchon.testing.contracts._support import ContractBase, new_job

__all__ = ["FleetContract"]


def _declaration(job: str, instance: str, fingerprint: str = "f" * 16) -> Declaration:
    return Declaration(job, instance, fingerprint, "every 1000ms", seen_at=0, expires_at=0)


class FleetContract(ContractBase):
    """``declare``/``declarations`` and ``set_control``/``controls`` of a backend."""

    ttl_ms: ClassVar[int] = 1_500
    """A registry TTL short enough to wait out (ms); raise it for a slow server."""
    long_ttl_ms: ClassVar[int] = 120_000

    def test_declarations_round_trip_with_store_times(self, backend: Backend) -> None:
        """Every declared entry comes back, stamped with store time and ``ttl_ms``."""

        async def body(b: Backend) -> None:
            job_a, job_b = new_job("fleet-a"), new_job("fleet-b")
            await b.declare(
                [_declaration(job_a, "i-1"), _declaration(job_b, "i-1", "0123456789abcdef")],
                self.long_ttl_ms,
            )
            await b.declare([_declaration(job_a, "i-2")], self.long_ttl_ms)
            mine = [d for d in await b.declarations() if d.job in (job_a, job_b)]
            assert sorted((d.job, d.instance_id) for d in mine) == sorted(
                [(job_a, "i-1"), (job_a, "i-2"), (job_b, "i-1")]
            )
            only_a = await b.declarations(job_a)
            assert sorted(d.instance_id for d in only_a) == ["i-1", "i-2"]
            b_entry = next(d for d in mine if d.job == job_b)
            assert b_entry.fingerprint == "0123456789abcdef"
            assert b_entry.schedule == "every 1000ms"
            assert b_entry.expires_at - b_entry.seen_at == self.long_ttl_ms
            assert b_entry.seen_at > 1_600_000_000_000  # store time, not what was sent

        self.run(backend, body)

    def test_refresh_replaces_one_entry_per_instance(self, backend: Backend) -> None:
        """Declaring again updates the entry (new fingerprint, later seen_at); no duplicates."""

        async def body(b: Backend) -> None:
            job = new_job("fleet-refresh")
            await b.declare([_declaration(job, "i-1", "a" * 16)], self.long_ttl_ms)
            first = await b.declarations(job)
            await asyncio.sleep(0.02)
            await b.declare([_declaration(job, "i-1", "b" * 16)], self.long_ttl_ms)
            second = await b.declarations(job)
            assert len(first) == 1
            assert len(second) == 1
            assert second[0].fingerprint == "b" * 16
            assert second[0].seen_at >= first[0].seen_at

        self.run(backend, body)

    def test_entries_expire_when_not_refreshed(self, backend: Backend) -> None:
        """An instance that stops refreshing drops out after its TTL; a refreshed one stays."""

        async def body(b: Backend) -> None:
            job = new_job("fleet-expire")
            await b.declare([_declaration(job, "gone")], self.ttl_ms)
            await b.declare([_declaration(job, "stays")], self.long_ttl_ms)
            assert sorted(d.instance_id for d in await b.declarations(job)) == ["gone", "stays"]
            await asyncio.sleep(self.ttl_ms / 1000 + 0.5)
            assert [d.instance_id for d in await b.declarations(job)] == ["stays"]

        self.run(backend, body)

    def test_controls_replace_and_read_back(self, backend: Backend) -> None:
        """``set_control`` replaces the job's control (``paused_at``/``resumed_at`` included);
        ``controls`` returns all of them."""

        async def body(b: Backend) -> None:
            job_a, job_b = new_job("ctl-a"), new_job("ctl-b")
            await b.set_control(JobControl(job_a, paused=True, updated_by="cli"))
            await b.set_control(JobControl(job_b, skip_until=1_700_000_000_000))
            got = await b.controls()
            assert got[job_a].paused is True
            assert got[job_a].skip_until is None
            assert got[job_a].updated_by == "cli"
            assert got[job_a].updated_at is not None
            assert got[job_b].paused is False
            assert got[job_b].skip_until == 1_700_000_000_000
            assert got[job_a].paused_at is None
            assert got[job_a].resumed_at is None
            await b.set_control(
                JobControl(
                    job_a, paused=False, paused_at=1_700_000_001_000, resumed_at=1_700_000_002_345
                )
            )
            again = await b.controls()
            assert again[job_a].paused is False
            assert again[job_a].updated_by is None
            assert again[job_a].paused_at == 1_700_000_001_000
            assert again[job_a].resumed_at == 1_700_000_002_345
            assert again[job_b] == got[job_b]

        self.run(backend, body)

    def test_empty_declare_is_harmless(self, backend: Backend) -> None:
        """``declare([])`` stores nothing and does not fail."""

        async def body(b: Backend) -> None:
            job = new_job("fleet-empty")
            await b.declare([], self.long_ttl_ms)
            assert await b.declarations(job) == []

        self.run(backend, body)
