"""What every strategy implements for the backend (internal).

A runtime is one strategy bound to one store. It reaches the store only
through :class:`Store`, a small protocol the backend implements (its key
prefix, its connection, its name for messages), never through the backend's
own members, so no runtime module imports the backend.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Protocol

from anarchon.backend import RunStore
from anarchon.errors import UnsupportedError
from anarchon.types import ClaimInput, JobLimits, ResultWrite, RunRecord, StoredResult

from anarchon_redis._client import Connection, LuaScript

__all__ = ["Runtime", "Store", "refuse_lease_options"]


def refuse_lease_options(limits: JobLimits, strategy: str) -> None:
    """Raise ``UnsupportedError`` if the job asks for leases (a claim-only strategy has none)."""
    given = limits.lease_options_given()
    if given:
        raise UnsupportedError(
            f"job {limits.job!r}: option(s) {', '.join(given)} need leases; the"
            f" {strategy} strategy has none (use strategy=lease)"
        )


class Store(Protocol):
    """What a runtime needs of the backend it serves."""

    @property
    def prefix(self) -> str:
        """The key prefix (``cron:`` by default)."""

    async def connection(self) -> Connection:
        """The connection, opened (``init()``) first if needed."""

    def describe(self) -> str:
        """Where the store is, for messages (the password hidden)."""


class Runtime(abc.ABC):
    """One strategy bound to one store: the backend delegates its store calls here."""

    scripts: tuple[LuaScript, ...] = ()
    """Scripts loaded at ``init()``."""
    runs: RunStore | None = None
    """The lease store, for strategies with leases."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def ready(self) -> Connection:
        """The store's connection (``init()`` first if needed)."""
        return await self.store.connection()

    def key_types(self, job: str) -> dict[str, str]:
        """The keys of ``job`` and the Redis type each must have (checked by ``prepare_job``)."""
        return {}

    async def check_server(  # noqa: B027
        self, conn: Connection, server: str, version: tuple[int, ...]
    ) -> None:
        """Refuse a server this strategy cannot use (``server`` is ``redis`` or ``valkey``)."""

    def check_job(self, limits: JobLimits) -> None:  # noqa: B027
        """Refuse a job the strategy cannot run safely; learn its retention needs."""

    async def prepare_job(self, job: str, history_size: int) -> None:  # noqa: B027
        """One-time per-job set-up."""

    @abc.abstractmethod
    async def claim_many(self, inputs: Sequence[ClaimInput]) -> list[bool]:
        """True for exactly one token per ``(job, slot)``, again for that token; in request order."""

    async def claim(self, input: ClaimInput) -> bool:
        """One claim: a batch of one (:meth:`claim_many`), so it answers as the batch would."""
        return (await self.claim_many((input,)))[0]

    @abc.abstractmethod
    async def record_manual_run(self, input: ClaimInput) -> int | None:
        """Record a manual run (never de-duplicated)."""

    @abc.abstractmethod
    async def save_results(self, writes: Sequence[ResultWrite]) -> None:
        """Store how each run ended, and trim each job's history."""

    async def save_result(
        self, job: str, result: StoredResult, history_size: int, history_ttl_ms: int | None
    ) -> None:
        """One result: a batch of one (:meth:`save_results`)."""
        await self.save_results((ResultWrite(job, result, history_size, history_ttl_ms),))

    @abc.abstractmethod
    async def history(self, job: str, limit: int) -> list[RunRecord]:
        """Recent runs, newest first."""
