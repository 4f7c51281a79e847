"""Contract test suites for backends (needs pytest and hypothesis: ``pip install "anarchon[testing]"``).

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

import importlib
from typing import TYPE_CHECKING, Any

from anarchon.testing.fake_clock import FakeClock
from anarchon.testing.fleet import Fleet, FleetResult, FleetRun, run_fleet, start_fleet
from anarchon.testing.uncertain import UncertainClaims, make_claims_uncertain

if TYPE_CHECKING:
    from anarchon.testing.contracts.backend import BackendContract
    from anarchon.testing.contracts.fleet import FleetContract
    from anarchon.testing.contracts.lease import LeaseContract
    from anarchon.testing.contracts.lease_model import LeaseModelContract
    from anarchon.testing.contracts.membership import MembershipContract
    from anarchon.testing.contracts.sync import SyncFacadeContract

__all__ = [
    "BackendContract",
    "FakeClock",
    "Fleet",
    "FleetContract",
    "FleetResult",
    "FleetRun",
    "LeaseContract",
    "LeaseModelContract",
    "MembershipContract",
    "SyncFacadeContract",
    "UncertainClaims",
    "make_claims_uncertain",
    "run_fleet",
    "start_fleet",
]


_CONTRACTS = {
    "BackendContract": "anarchon.testing.contracts.backend",
    "FleetContract": "anarchon.testing.contracts.fleet",
    "LeaseContract": "anarchon.testing.contracts.lease",
    "LeaseModelContract": "anarchon.testing.contracts.lease_model",
    "MembershipContract": "anarchon.testing.contracts.membership",
    "SyncFacadeContract": "anarchon.testing.contracts.sync",
}
"""The suites by name, and their modules."""


def __getattr__(name: str) -> Any:
    # The contract suites need pytest; import them only when asked for, so the
    # fleet harness works without pytest installed.
    if name in _CONTRACTS:
        return getattr(importlib.import_module(_CONTRACTS[name]), name)
    raise AttributeError(f"module 'anarchon.testing' has no attribute {name!r}")
