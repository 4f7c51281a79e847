"""Deprecated path of :mod:`anarchon.testing.contracts.job_retry`."""

from anarchon.testing._moved import warn_moved
from anarchon.testing.contracts.job_retry import *  # noqa: F403

warn_moved(__name__, "anarchon.testing.contracts.job_retry")
