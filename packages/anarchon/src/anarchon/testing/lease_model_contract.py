"""Deprecated path of :mod:`anarchon.testing.contracts.lease_model`."""

from anarchon.testing._moved import warn_moved
from anarchon.testing.contracts.lease_model import *  # noqa: F403

warn_moved(__name__, "anarchon.testing.contracts.lease_model")
