"""``NatsBackend`` passes the backend contract suite on a real nats-server."""

from __future__ import annotations

import pytest
from anarchon.backend import Backend
from anarchon.registry import resolve_backend
from anarchon.testing import BackendContract, FleetContract
from anarchon_nats import NatsBackend


class TestNatsBackend(BackendContract, FleetContract):
    """The default stream and prefix, one backend per test, one per racing thread."""

    supports_history_ttl = False

    @pytest.fixture(autouse=True)
    def _server(self, nats_url: str) -> None:
        self.url = nats_url

    @pytest.fixture
    def backend(self) -> Backend:
        return NatsBackend(self.url)

    def peer_backends(self, backend: Backend, count: int) -> list[Backend] | None:
        """One client per thread (a nats-py client belongs to one event loop)."""
        return [NatsBackend(self.url) for _ in range(count)]


class TestNatsBackendFromUrl(TestNatsBackend):
    """The same suite through the registry: ``nats://...?stream=...&prefix=...``."""

    @pytest.fixture
    def backend(self, stream: str, prefix: str) -> Backend:
        url = f"{self.url}?stream={stream}&prefix={prefix}&duplicate_window_ms=120000"
        self.url_with_options = url
        return resolve_backend(url)

    def peer_backends(self, backend: Backend, count: int) -> list[Backend] | None:
        return [resolve_backend(self.url_with_options) for _ in range(count)]
