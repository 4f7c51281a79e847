"""Deprecated path of :mod:`anarchon.testing.scenarios.fault_report`."""

from anarchon.testing._moved import warn_moved
from anarchon.testing.scenarios.fault_report import *  # noqa: F403

warn_moved(__name__, "anarchon.testing.scenarios.fault_report")
