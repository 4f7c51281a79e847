"""The sync facade on the memory backend (and the refusal of a call from the scheduler's loop)."""

from __future__ import annotations

import uuid

import pytest
from anarchon.backend import Backend
from anarchon.memory import MemoryBackend
from anarchon.testing import SyncFacadeContract


class TestMemorySync(SyncFacadeContract):
    @pytest.fixture
    def backend(self) -> Backend:
        return MemoryBackend.from_url(f"memory://sync-{uuid.uuid4().hex[:8]}")
