"""Moved to :mod:`anarchon.backend.lease_model`; this path warns ``DeprecationWarning`` and goes in a major version."""

import warnings

from anarchon.backend.lease_model import (
    Blocker,
    ClaimDecision,
    LeaseState,
    ReleaseDecision,
    TokenDecision,
    decide_claim,
    decide_finish,
    decide_heartbeat,
    decide_release,
)

__all__ = [
    "Blocker",
    "ClaimDecision",
    "LeaseState",
    "ReleaseDecision",
    "TokenDecision",
    "decide_claim",
    "decide_finish",
    "decide_heartbeat",
    "decide_release",
]

warnings.warn(
    "anarchon.lease_model moved to anarchon.backend.lease_model; import from there",
    DeprecationWarning,
    stacklevel=2,
)
