"""The memory backend passes the contract suites, fresh and as a named shared backend."""

from __future__ import annotations

import uuid

import pytest
from anarchon.backend import Backend
from anarchon.backend.memory import MemoryBackend
from anarchon.backend.registry import resolve_backend
from anarchon.testing import BackendContract, FleetContract, LeaseContract, MembershipContract


class TestMemoryBackend(BackendContract):
    thread_safe = True

    @pytest.fixture
    def backend(self) -> Backend:
        return MemoryBackend()


class TestMemoryFleet(FleetContract):
    @pytest.fixture
    def backend(self) -> Backend:
        return MemoryBackend()


class TestMemoryMembership(MembershipContract):
    @pytest.fixture
    def backend(self) -> Backend:
        return MemoryBackend()


class TestNamedMemoryMembership(MembershipContract):
    """``memory://name``: the schedulers of one process share the records."""

    @pytest.fixture
    def backend(self) -> Backend:
        return resolve_backend(f"memory://members-{uuid.uuid4().hex[:8]}")


class TestMemoryLeases(LeaseContract):
    @pytest.fixture
    def backend(self) -> Backend:
        return MemoryBackend()


class TestNamedMemoryBackend(BackendContract, LeaseContract):
    """``memory://name`` through the registry: one shared backend, both suites in one class."""

    thread_safe = True

    @pytest.fixture
    def backend(self) -> Backend:
        return resolve_backend(f"memory://contract-{uuid.uuid4().hex[:8]}")
