"""What both contract suites share: the ``backend`` fixture to override and an event-loop runner."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import ClassVar, TypeVar

import pytest

from anarchon.backend import Backend

__all__ = ["ContractBase", "new_job", "new_token", "run_with_backend", "wall_ms"]

T = TypeVar("T")


def new_job(prefix: str) -> str:
    """A job name no other test uses (letters, digits and ``-`` only: valid on every backend)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def new_token() -> str:
    """A fresh claim token."""
    return uuid.uuid4().hex


def wall_ms() -> int:
    """The local wall clock in ms."""
    return time.time_ns() // 1_000_000


def run_with_backend(
    backend: Backend, body: Callable[[Backend], Awaitable[T]], timeout_s: float
) -> T:
    """Run ``body(backend)`` on a new event loop: ``init()`` first, ``close()`` last.

    Each contract test owns its loop, so a backend must not bind to a loop
    before ``init()`` (clients are connected there and closed in the same loop).
    """

    async def main() -> T:
        await backend.init()
        try:
            return await asyncio.wait_for(body(backend), timeout_s)
        finally:
            await backend.close()

    return asyncio.run(main())


class ContractBase:
    """Base of the contract suites: one fixture to override, and a runner."""

    timeout_s: ClassVar[float] = 60.0
    """Time limit of one contract test's body."""

    @pytest.fixture
    def backend(self) -> Iterator[Backend]:
        """Override: yield a fresh backend (a plain, sync fixture).

        The backend must not bind to an event loop when built: every test
        calls ``await backend.init()`` inside its own loop and
        ``await backend.close()`` at its end. Tests use unique job names, so a
        shared server needs no cleanup between tests.
        """
        pytest.fail(
            f"{type(self).__name__} must override the `backend` fixture "
            "(a sync fixture that yields a fresh backend)",
            pytrace=False,
        )

    def run(self, backend: Backend, body: Callable[[Backend], Awaitable[T]]) -> T:
        """Run one test body against ``backend`` in a fresh event loop."""
        return run_with_backend(backend, body, self.timeout_s)
