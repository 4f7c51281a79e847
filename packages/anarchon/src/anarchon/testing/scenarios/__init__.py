"""Shipped scenarios: real processes, injected faults, counts (no pytest needed).

:mod:`~anarchon.testing.scenarios.faults` (``kill -9``, ``SIGSTOP``, a blocking handler,
a hand-over) counted by :mod:`~anarchon.testing.scenarios.fault_report`;
:mod:`~anarchon.testing.scenarios.heal`, :mod:`~anarchon.testing.scenarios.stop_bound`
and :mod:`~anarchon.testing.scenarios.slow_link` through
:mod:`~anarchon.testing.scenarios.proxy`; :mod:`~anarchon.testing.scenarios.clock_step`,
:mod:`~anarchon.testing.scenarios.control` (the CLI's fleet controls) and
:mod:`~anarchon.testing.scenarios.one_off` (one-off runs, a retry's ``kill -9``).
Worker processes are ``python -m`` of :mod:`~anarchon.testing.scenarios.fault_worker`,
:mod:`~anarchon.testing.scenarios.one_off` and ``_control_worker``.
"""
