"""The shipped scenarios (:mod:`anarchon.testing.scenarios`) as suites a backend's tests subclass.

Each class is one concern; a backend's contract test module subclasses the
ones its store supports, once, and names its *stores*: per test, a class
attribute lists the variants to run as ``pytest.param`` values (a strategy,
a server kind), each with the marks it runs under (``scenario`` keeps it out
of the gate)::

    import pytest
    from anarchon.testing.contracts.scenarios import OneOffScenarios

    class TestMyScenarios(OneOffScenarios):
        one_off_stores = (pytest.param("my", marks=pytest.mark.scenario),)

        def scenario_url(self, request, store, tmp_path, tag):
            return f"my://127.0.0.1/{tag}{uuid.uuid4().hex[:6]}"

A class whose stores are left empty gets one skipped test per test: set the
stores of every class you subclass. The hooks get the test's ``request`` (to
reach the session's server fixtures), the store and, for processes, the
test's ``tmp_path`` and a short tag to make names unique with.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest

from anarchon.backend import Backend
from anarchon.scheduler import Scheduler
from anarchon.testing.scenarios import faults
from anarchon.testing.scenarios.clock_step import check_wall_clock_step
from anarchon.testing.scenarios.control import run_control_scenario
from anarchon.testing.scenarios.heal import check_heals
from anarchon.testing.scenarios.one_off import run_one_off_fleet, run_retry_kill9
from anarchon.testing.scenarios.proxy import FaultProxy
from anarchon.testing.scenarios.stop_bound import check_stop_bound

__all__ = [
    "ClaimOnlyFaultScenarios",
    "ClockStepScenarios",
    "ControlScenarios",
    "HealScenarios",
    "LeaseFaultScenarios",
    "OneOffScenarios",
    "OutliveStopScenarios",
    "RetryKill9Scenarios",
    "ScenarioContract",
    "StopBoundScenarios",
]

_STORES = {
    "test_one_off_four_processes": "one_off_stores",
    "test_kill9_during_a_retry": "retry_kill9_stores",
    "test_two_processes_status_pause_resume_skip_drift": "control_stores",
    "test_connections_heal": "heal_stores",
    "test_stop_returns_within_grace_plus_one_call": "stop_bound_stores",
    "test_a_wall_clock_step_changes_nothing": "clock_step_stores",
    "test_kill9_is_taken_over_as_attempt_2": "takeover_stores",
    "test_handover_on_stop": "handover_stores",
    "test_sigstop_zombie_guarded_commits_nothing": "sigstop_stores",
    "test_sigstop_zombie_naive_write_is_refused": "sigstop_stores",
    "test_kill9_loses_the_running_slot_and_nothing_else": "claim_only_stores",
    "test_a_blocking_handler_outlives_stop": "outlive_stores",
    "test_a_blocking_handler_outlives_stop_ten_times": "outlive_stores",
    "test_a_blocking_handler_outlives_stop_claim_only": "outlive_claim_only_stores",
    "test_a_blocking_handler_outlives_stop_claim_only_ten_times": "outlive_claim_only_stores",
}
"""Which class attribute lists the stores of each test."""


class _Scenarios:
    """The parametrization by store every scenario class shares."""

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Run each test once per store its attribute lists (with that store's marks)."""
        attribute = _STORES.get(metafunc.function.__name__)
        if attribute is not None and "store" in metafunc.fixturenames:
            metafunc.parametrize("store", getattr(self, attribute))


class _ProcessScenarios(_Scenarios):
    """Scenarios of separate OS processes: they need a URL each process resolves."""

    def scenario_url(
        self, request: pytest.FixtureRequest, store: str, tmp_path: Path, tag: str
    ) -> str:
        """The URL of ``store`` in a namespace of its own (``tag`` helps name it)."""
        raise NotImplementedError


class OneOffScenarios(_ProcessScenarios):
    """A one-off run declared by 4 processes runs once (docs/one-off-runs.md)."""

    one_off_stores: ClassVar[Sequence[Any]] = ()

    @pytest.mark.slow
    def test_one_off_four_processes(
        self, request: pytest.FixtureRequest, store: str, tmp_path: Path
    ) -> None:
        run_one_off_fleet(self.scenario_url(request, store, tmp_path, "once"), tmp_path)


class RetryKill9Scenarios(_ProcessScenarios):
    """A ``kill -9`` during a retry's backoff is taken over (docs/retries.md)."""

    retry_kill9_stores: ClassVar[Sequence[Any]] = ()

    @pytest.mark.slow
    def test_kill9_during_a_retry(
        self, request: pytest.FixtureRequest, store: str, tmp_path: Path
    ) -> None:
        run_retry_kill9(self.scenario_url(request, store, tmp_path, "retry"), tmp_path)


class ControlScenarios(_ProcessScenarios):
    """Two OS processes steered by the CLI (:mod:`anarchon.testing.scenarios.control`)."""

    control_stores: ClassVar[Sequence[Any]] = ()

    @pytest.mark.slow
    def test_two_processes_status_pause_resume_skip_drift(
        self, request: pytest.FixtureRequest, store: str, tmp_path: Path
    ) -> None:
        run_control_scenario(self.scenario_url(request, store, tmp_path, "ctl"), tmp_path)


class LeaseFaultScenarios(_ProcessScenarios):
    """Faults on a store with leases (:mod:`anarchon.testing.scenarios.faults`).

    ``kill9_after_s`` gives a store's ``after_s`` of the ``kill -9`` scenario
    (the scenario's default otherwise).
    """

    takeover_stores: ClassVar[Sequence[Any]] = ()
    handover_stores: ClassVar[Sequence[Any]] = ()
    sigstop_stores: ClassVar[Sequence[Any]] = ()
    kill9_after_s: ClassVar[Mapping[str, float]] = {}

    @pytest.mark.slow
    def test_kill9_is_taken_over_as_attempt_2(
        self, request: pytest.FixtureRequest, store: str, tmp_path: Path
    ) -> None:
        """The other instance takes over as attempt 2; nothing else goes wrong."""
        url = self.scenario_url(request, store, tmp_path, "kill")
        after = {"after_s": self.kill9_after_s[store]} if store in self.kill9_after_s else {}
        report = faults.kill9_takeover(url, tmp_path=tmp_path, **after)
        print(report.summary())
        report.assert_taken_over()

    def test_handover_on_stop(
        self, request: pytest.FixtureRequest, store: str, tmp_path: Path
    ) -> None:
        """``stop()`` of the runner of 3 s handlers hands them over, run once each."""
        url = self.scenario_url(request, store, tmp_path, "hand")
        report = faults.handover_on_stop(url, tmp_path=tmp_path, after_s=6.0)
        print(report.summary())
        report.assert_handed_over()

    @pytest.mark.scenario
    def test_sigstop_zombie_guarded_commits_nothing(
        self, request: pytest.FixtureRequest, store: str, tmp_path: Path
    ) -> None:
        """The fenced example of docs/leases.md, paused past its lease: nothing committed after SIGCONT."""
        url = self.scenario_url(request, store, tmp_path, "stop")
        report = faults.sigstop_past_lease(url, tmp_path=tmp_path, handler="guarded", after_s=3.0)
        print(report.summary())
        report.assert_guarded_commits_nothing()

    @pytest.mark.scenario
    def test_sigstop_zombie_naive_write_is_refused(
        self, request: pytest.FixtureRequest, store: str, tmp_path: Path
    ) -> None:
        """A sync handler that never asks ``still_owner()``: its late write is refused by the fence."""
        url = self.scenario_url(request, store, tmp_path, "stop")
        report = faults.sigstop_past_lease(url, tmp_path=tmp_path, handler="naive", after_s=3.0)
        print(report.summary())
        report.assert_naive_write_refused()


class OutliveStopScenarios(_ProcessScenarios):
    """A sync handler that outlives ``stop()`` keeps its lease: never two live runs of its slot.

    Two OS processes; a sync handler blocking 8 s that ignores cancellation;
    lease 3 s, ``stop_grace`` 1 s; SIGTERM to the runner 2 s into its run
    (:func:`anarchon.testing.scenarios.faults.blocking_handler_at_stop`).
    ``outlive_stores`` are lease stores, ``outlive_claim_only_stores`` stores
    without leases.
    """

    outlive_stores: ClassVar[Sequence[Any]] = ()
    outlive_claim_only_stores: ClassVar[Sequence[Any]] = ()

    def test_a_blocking_handler_outlives_stop(
        self, request: pytest.FixtureRequest, store: str, tmp_path: Path
    ) -> None:
        """No backup starts while the thread lives; its completed run is finished, run once."""
        _check_outlives_stop(self.scenario_url(request, store, tmp_path, "live"), tmp_path)

    @pytest.mark.scenario
    def test_a_blocking_handler_outlives_stop_ten_times(
        self, request: pytest.FixtureRequest, store: str, tmp_path: Path
    ) -> None:
        """The same, 10 times in a row: 0 overlapping live runs in every one."""
        for i in range(10):
            url = self.scenario_url(request, store, tmp_path / str(i), f"live{i}")
            _check_outlives_stop(url, tmp_path / str(i))

    def test_a_blocking_handler_outlives_stop_claim_only(
        self, request: pytest.FixtureRequest, store: str, tmp_path: Path
    ) -> None:
        """Without leases: the slot is claimed once, so no other instance ever starts it."""
        _check_claimed_once(self.scenario_url(request, store, tmp_path, "live"), tmp_path)

    @pytest.mark.scenario
    def test_a_blocking_handler_outlives_stop_claim_only_ten_times(
        self, request: pytest.FixtureRequest, store: str, tmp_path: Path
    ) -> None:
        """The same without leases, 10 times in a row."""
        for i in range(10):
            url = self.scenario_url(request, store, tmp_path / str(i), f"live{i}")
            _check_claimed_once(url, tmp_path / str(i))


def _check_claimed_once(url: str, tmp_path: Path) -> None:
    tmp_path.mkdir(parents=True, exist_ok=True)
    report = faults.blocking_handler_at_stop(url, tmp_path=tmp_path, leases=False)
    print(report.summary())
    assert report.overlaps == [], report.summary()
    assert report.duplicates == {}, report.summary()


def _check_outlives_stop(url: str, tmp_path: Path) -> None:
    tmp_path.mkdir(parents=True, exist_ok=True)
    report = faults.blocking_handler_at_stop(url, tmp_path=tmp_path)
    print(report.summary())
    assert report.overlaps == [], report.summary()
    assert report.duplicates == {}, report.summary()
    assert report.zombies == [], report.summary()
    assert report.lost == [], report.summary()
    assert report.completed_slots >= 1, report.summary()


class ClaimOnlyFaultScenarios(_ProcessScenarios):
    """A ``kill -9`` on a store that claims without leases: the running slot is lost, no more."""

    claim_only_stores: ClassVar[Sequence[Any]] = ()

    # The scenario tier: which slot a kill -9 lands in is timing, and a claim-only store
    # has no take-over to check; the gate's kill -9 tests are on lease stores.
    @pytest.mark.scenario
    def test_kill9_loses_the_running_slot_and_nothing_else(
        self, request: pytest.FixtureRequest, store: str, tmp_path: Path
    ) -> None:
        url = self.scenario_url(request, store, tmp_path, "kill")
        report = faults.kill9_takeover(url, tmp_path=tmp_path, after_s=4.0)
        print(report.summary())
        report.assert_lost_running_slot_only()


class _ProxiedScenarios(_Scenarios):
    """Scenarios that put :class:`~anarchon.testing.scenarios.proxy.FaultProxy` before the store."""

    def store_address(self, request: pytest.FixtureRequest, store: str) -> tuple[str, int]:
        """The store's host and port (the proxy forwards there)."""
        raise NotImplementedError


class HealScenarios(_ProxiedScenarios):
    """Connections that heal (:mod:`anarchon.testing.scenarios.heal`): dead flows, a blackhole.

    Either way the next slot runs within one heartbeat plus
    ``heal_call_timeout_s`` of the store being reachable again. With
    ``heal_reconnects`` the backend must also have opened a new connection
    after its flows died.
    """

    heal_stores: ClassVar[Sequence[Any]] = ()
    heal_call_timeout_s: ClassVar[float] = 1.5
    heal_reconnects: ClassVar[bool] = False

    def proxied_backend(self, request: pytest.FixtureRequest, store: str, port: int) -> Backend:
        """A backend of ``store`` that connects to 127.0.0.1:``port`` (the proxy)."""
        raise NotImplementedError

    @pytest.mark.scenario
    @pytest.mark.parametrize("fault", ["dead_flows", "blackhole"])
    def test_connections_heal(self, request: pytest.FixtureRequest, store: str, fault: str) -> None:
        async def main(proxy: FaultProxy) -> None:
            result = await check_heals(
                lambda port: self.proxied_backend(request, store, port),
                proxy,
                fault=fault,
                heartbeat_s=1.0,
                call_timeout_s=self.heal_call_timeout_s,
            )
            print(
                f"{store} {fault}: healed in {result.recovered_s:.2f} s, {result.slots_lost} lost"
            )
            if self.heal_reconnects and fault == "dead_flows":
                assert result.reconnected, "the backend never opened a new connection"

        with FaultProxy(*self.store_address(request, store)) as proxy:
            asyncio.run(main(proxy))


class StopBoundScenarios(_ProxiedScenarios):
    """``stop()`` with the store down returns within ``stop_grace`` plus one call timeout.

    The store goes down behind a blackholing proxy (docs/leases.md, "Stopping");
    a store without a server overrides :meth:`stop_bound_case`.
    """

    stop_bound_stores: ClassVar[Sequence[Any]] = ()

    def stop_bound_scheduler(
        self, request: pytest.FixtureRequest, store: str, port: int
    ) -> Scheduler:
        """A scheduler (``stop_grace="1s"``) on ``store`` through 127.0.0.1:``port``."""
        raise NotImplementedError

    @contextmanager
    def stop_bound_case(
        self, request: pytest.FixtureRequest, store: str
    ) -> Iterator[tuple[Scheduler, Callable[[], None]]]:
        """The scheduler to stop and the fault that takes its store down."""
        with FaultProxy(*self.store_address(request, store)) as proxy:
            yield self.stop_bound_scheduler(request, store, proxy.port), proxy.blackhole

    @pytest.mark.scenario
    def test_stop_returns_within_grace_plus_one_call(
        self, request: pytest.FixtureRequest, store: str
    ) -> None:
        async def main() -> float:
            with self.stop_bound_case(request, store) as (scheduler, fault):
                return await check_stop_bound(scheduler, fault)

        print(f"{store}: stop() took {asyncio.run(main()):.2f} s with the store down")


class ClockStepScenarios(_Scenarios):
    """A +40 s wall-clock step on one instance mid-run changes nothing (docs/concepts.md).

    Store time is the store's clock at the last sync plus monotonic time, so
    the stepped instance runs no slot early, none twice, and loses none.
    """

    clock_step_stores: ClassVar[Sequence[Any]] = ()

    def clock_step_backend(self, request: pytest.FixtureRequest, store: str) -> Backend:
        """A fresh backend of ``store`` (called once per instance)."""
        raise NotImplementedError

    @pytest.mark.scenario
    def test_a_wall_clock_step_changes_nothing(
        self, request: pytest.FixtureRequest, store: str
    ) -> None:
        asyncio.run(
            check_wall_clock_step(
                lambda: self.clock_step_backend(request, store), every="200ms", seconds=4.0
            )
        )


class ScenarioContract(
    OneOffScenarios,
    RetryKill9Scenarios,
    ControlScenarios,
    LeaseFaultScenarios,
    OutliveStopScenarios,
    ClaimOnlyFaultScenarios,
    HealScenarios,
    StopBoundScenarios,
    ClockStepScenarios,
):
    """Every shipped scenario, for a store that has them all (else subclass the concerns)."""
