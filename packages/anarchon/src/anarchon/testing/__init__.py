"""Contract test suites for backends (needs pytest: ``pip install "anarchon[testing]"``).

A backend's test module subclasses the suites and overrides one fixture,
``backend``, a plain (sync) fixture that returns or yields a fresh backend::

    import pytest
    from anarchon.testing import BackendContract, LeaseContract

    class TestMyBackend(BackendContract, LeaseContract):
        @pytest.fixture
        def backend(self):
            yield MyBackend.from_url("my://localhost")

Every test runs its own event loop: it calls ``await backend.init()`` first
and ``await backend.close()`` last, so the backend must not bind to a loop when
it is built. Tests use unique job names, so a shared server needs no cleanup.
"""

from __future__ import annotations

from anarchon.testing.contract import BackendContract
from anarchon.testing.fleet import Fleet, FleetResult, FleetRun, run_fleet, start_fleet
from anarchon.testing.lease_contract import LeaseContract

__all__ = [
    "BackendContract",
    "Fleet",
    "FleetResult",
    "FleetRun",
    "LeaseContract",
    "run_fleet",
    "start_fleet",
]
