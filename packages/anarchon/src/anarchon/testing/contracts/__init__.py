"""The contract suites a backend's tests subclass (they need pytest and hypothesis).

:mod:`~anarchon.testing.contracts.backend` (``BackendContract``),
:mod:`~anarchon.testing.contracts.lease`, :mod:`~anarchon.testing.contracts.lease_model`,
:mod:`~anarchon.testing.contracts.sync`, :mod:`~anarchon.testing.contracts.fleet`,
:mod:`~anarchon.testing.contracts.membership` (``MembershipContract``),
:mod:`~anarchon.testing.contracts.foreign` (``ForeignDataContract``: garbage in every place),
:mod:`~anarchon.testing.contracts.retry`, :mod:`~anarchon.testing.contracts.job_retry`,
:mod:`~anarchon.testing.contracts.one_off` and the shipped scenarios run per backend,
:mod:`~anarchon.testing.contracts.scenarios` (``ScenarioContract``).
"""
