"""Moved to :mod:`anarchon.fleet.status`; this path warns ``DeprecationWarning`` and goes in a major version."""

import warnings

from anarchon.fleet.status import (
    InstanceDeclaration,
    JobStatus,
    LastRun,
    fleet_status,
    unknown_jobs_error,
)

__all__ = ["InstanceDeclaration", "JobStatus", "LastRun", "fleet_status", "unknown_jobs_error"]

warnings.warn(
    "anarchon.status moved to anarchon.fleet.status; import from there",
    DeprecationWarning,
    stacklevel=2,
)
