"""``NatsBackend`` passes the backend contract suite on a real nats-server, and the shipped scenarios.

NATS claims each slot exactly once and has no leases (docs/leases.md): nothing
takes a crashed instance's run over, so a ``kill -9`` loses the run it was
executing, as documented; everything else stays clean.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from anarchon import Scheduler
from anarchon.backend import Backend
from anarchon.backend.registry import resolve_backend
from anarchon.testing import BackendContract, FleetContract, MembershipContract
from anarchon.testing.contracts.foreign import ForeignDataContract
from anarchon.testing.contracts.scenarios import (
    ClaimOnlyFaultScenarios,
    ControlScenarios,
    HealScenarios,
    OneOffScenarios,
    OutliveStopScenarios,
    StopBoundScenarios,
)
from anarchon_nats import NatsBackend
from anarchon_nats._fleet import control_subject, declaration_subject, member_subject
from anarchon_nats.backend import RECONNECT_AFTER_TIMEOUTS
from anarchon_testservers.nats import NatsServer


class TestNatsBackend(BackendContract, FleetContract, MembershipContract, ForeignDataContract):
    """The default stream and prefix, one backend per test, one per racing thread."""

    supports_history_ttl = False

    async def write_garbage(self, backend: Backend, job: str, slot: int) -> list[str]:
        """Garbage on the job's claims and results subjects, and on three fleet subjects."""
        assert isinstance(backend, NatsBackend)
        store = backend._store
        nc = await store.client()
        subjects = [
            *store.job_subjects(job),
            control_subject(store.prefix, f"{job}~bad"),
            declaration_subject(store.prefix, f"{job}~bad", "i-9"),
            member_subject(store.prefix, f"{job}~bad"),
        ]
        for subject in subjects:
            await nc.jetstream().publish(subject, b'{"slot":1e400,"p":1e400,"ttl":1e400}')
        return subjects

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


_NATS = pytest.param("nats", marks=pytest.mark.scenario)


class TestNatsScenarios(
    OneOffScenarios,
    ControlScenarios,
    ClaimOnlyFaultScenarios,
    OutliveStopScenarios,
    HealScenarios,
    StopBoundScenarios,
):
    """The shipped scenarios that apply to a claim-only store, on one nats-server."""

    one_off_stores = (_NATS,)
    control_stores = (_NATS,)
    claim_only_stores = ("nats",)
    outlive_claim_only_stores = ("nats",)
    heal_stores = ("nats",)
    stop_bound_stores = ("nats",)
    # the backend forces a reconnect after a few requests in a row time out
    heal_call_timeout_s = 1.0 * RECONNECT_AFTER_TIMEOUTS
    heal_reconnects = True

    def scenario_url(
        self, request: pytest.FixtureRequest, store: str, tmp_path: Path, tag: str
    ) -> str:
        unique = uuid.uuid4().hex[:6]
        url = request.getfixturevalue("nats_url")
        return f"{url}?stream={tag.upper()}{unique.upper()}&prefix={tag}{unique}."

    def store_address(self, request: pytest.FixtureRequest, store: str) -> tuple[str, int]:
        server: NatsServer = request.getfixturevalue("nats_server")
        return "127.0.0.1", server.port

    def proxied_backend(self, request: pytest.FixtureRequest, store: str, port: int) -> Backend:
        return NatsBackend(
            f"nats://127.0.0.1:{port}",
            stream=request.getfixturevalue("stream"),
            prefix=request.getfixturevalue("prefix"),
            request_timeout=1.0,
        )

    def stop_bound_scheduler(
        self, request: pytest.FixtureRequest, store: str, port: int
    ) -> Scheduler:
        backend = self.proxied_backend(request, store, port)
        return Scheduler(backend, instance_id="stopper", stop_grace="1s")
