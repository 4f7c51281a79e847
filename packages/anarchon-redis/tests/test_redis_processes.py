"""Separate OS processes on real servers: exactly once per slot, ``kill -9`` takeover, server restart.

- 3 processes (8 in the scenario tier) x (Redis, Valkey) x (lease, stream-id), plus ``idmp`` on Redis
  8.6 and ``script`` on Valkey: a 200 ms job for at least 20 s; every slot of
  the common window ran exactly once (``anarchon.testing.fleet``).
- 4 processes x 2,000 jobs every 1 s on Redis (lease) for at least 10 s: every
  job-slot exactly once, no outage logged (``anarchon.testing.fleet``).
- redis-server (``appendonly yes``, ``appendfsync always``) is killed and
  restarted while runs are in flight: no slot runs twice, each scheduler logs
  the outage once, and it resumes on its own.

The ``kill -9`` takeover is the shipped scenario
``anarchon.testing.scenarios.faults.kill9_takeover`` (test_redis_faults.py).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from anarchon.testing.fleet import Fleet, read_history, run_fleet, start_fleet
from anarchon_testservers.redis import Server, start_server

PERIOD_MS = 200


# 8 processes, exactly once (the shared harness, anarchon.testing.fleet) -----------------

# (processes, window): a small race in the gate, the 8-process fleet in the scenario tier
FLEETS = [
    pytest.param(3, 5.0, id="3-processes"),
    pytest.param(8, 10.0, id="8-processes", marks=pytest.mark.scenario),
]


def _url(server: Server, strategy: str) -> str:
    return f"{server.url}?strategy={strategy}&prefix=f{uuid.uuid4().hex[:8]}:"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "strategy"),
    # Each strategy once, the two servers shared out between them (the contract
    # suites run every strategy on every server).
    [
        ("redis", "lease"),
        ("valkey", "stream-id"),
        ("redis86", "idmp"),
        ("valkey", "script"),
    ],
)
@pytest.mark.parametrize(("processes", "window_s"), FLEETS)
def test_processes_each_slot_exactly_once(
    kind: str,
    strategy: str,
    processes: int,
    window_s: float,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    """A few processes (8 in the scenario tier) run a 200 ms job (jitter 50 ms): each slot once.

    Checked by ``anarchon.testing.fleet.run_fleet``, history included.
    """
    server: Server = request.getfixturevalue(f"{kind}_server")
    url = _url(server, strategy)
    result = run_fleet(
        url,
        tmp_path=tmp_path,
        processes=processes,
        window_s=window_s,
        startup_s=10.0,
        reader=url,
        job_options={"overlap": True} if strategy == "lease" else None,
    )
    print(result.summary())


@pytest.mark.scenario
@pytest.mark.slow
def test_four_processes_two_thousand_jobs_every_second(
    redis_server: Server, tmp_path: Path
) -> None:
    """4 processes x 2,000 jobs every 1 s (jitter 0, lease) for >= 10 s on Redis.

    Every job-slot of the common window runs exactly once, none is missed, and
    no process logs an outage (nor anything else at WARNING). This needs the
    scheduler's batched claim path as well as the backend's.
    """
    url = _url(redis_server, "lease")
    result = run_fleet(
        url,
        tmp_path=tmp_path,
        processes=4,
        jobs=2000,
        every_ms=1000,
        jitter_ms=0,
        window_s=10.0,
        startup_s=20.0,
        reader=url,
        check=False,
    )
    print(result.summary())
    outages = [
        line
        for log in result.stderr
        for line in log.splitlines()
        # The scheduler's outage line ("store ... unreachable (...); retrying with backoff").
        if "retrying with backoff" in line or "Too many connections" in line
    ]
    assert outages == [], outages[:5]
    result.assert_exactly_once()
    warnings = [line for log in result.stderr for line in log.splitlines() if "WARNING" in line]
    assert warnings == [], warnings[:5]


# Server restart while runs are in flight -------------------------------------------------------


@pytest.fixture
def persistent_redis() -> Iterator[Server]:
    """A redis-server of its own with ``appendonly yes`` and ``appendfsync always``."""
    try:
        server = start_server("redis", appendonly=True)
    except RuntimeError as error:
        pytest.fail(f"cannot start redis-server: {error}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


RESTART_PROCESSES = 4


@pytest.mark.scenario
@pytest.mark.slow
def test_server_restart_no_double_run_one_log_and_recovery(
    persistent_redis: Server, tmp_path: Path
) -> None:
    """Two fleets (lease, stream-id) of 4 processes; the server is killed and restarted mid-run."""
    server = persistent_redis
    startup_s, before_s, outage_s, after_s = 8.0, 4.0, 2.0, 6.0
    fleets: dict[str, Fleet] = {}
    urls = {strategy: _url(server, strategy) for strategy in ("lease", "stream-id")}
    try:
        for strategy, url in urls.items():
            # The lease outlives the outage plus the scheduler's backoff: no backup takes over.
            fleets[strategy] = start_fleet(
                url,
                tmp_path=tmp_path / strategy,
                processes=RESTART_PROCESSES,
                window_s=before_s + outage_s + after_s,
                startup_s=startup_s,
                every_ms=PERIOD_MS,
                jitter_ms=50,
                handler_ms=100,
                scheduler_options={"lease": "10s", "heartbeat": "2s"}
                if strategy == "lease"
                else None,
                job_options={"overlap": True} if strategy == "lease" else None,
                log_level="INFO",
            )
        for found in fleets.values():
            found.wait_started(startup_s + 20)
        time.sleep(before_s)
        server.kill()  # a crash while handlers run and claims are in flight
        down_ms = int(time.time() * 1000)
        time.sleep(outage_s)
        server.start()
        up_ms = int(time.time() * 1000)
        results = {strategy: found.wait() for strategy, found in fleets.items()}
    finally:
        for found in fleets.values():
            found.kill()

    for strategy, result in results.items():
        assert result.returncodes == [0] * RESTART_PROCESSES, result.stderr
        ran = Counter(r.slot for r in result.runs)
        duplicates = {slot: n for slot, n in ran.items() if n > 1}
        assert not duplicates, f"{strategy}: slots run more than once: {duplicates}"
        window = result.window
        after = [s for s in window if s >= up_ms + 3000]
        assert after, "the run did not go on long enough after the restart"
        assert all(ran[s] == 1 for s in after), f"{strategy}: did not resume on its own"
        before = [s for s in window if s < down_ms - 1000]
        assert all(ran[s] == 1 for s in before), f"{strategy}: slots missed before the outage"
        during = [s for s in window if down_ms <= s <= up_ms]
        print(
            f"{strategy}: {len(window)} slots, {sum(1 for s in window if ran[s])} ran,"
            f" {sum(1 for s in during if ran[s])}/{len(during)} of those due during the outage"
        )
        if strategy == "lease":
            # Slots due during the outage are claimed late, once the store is back.
            missed = [s for s in window if ran[s] == 0]
            assert not missed, f"lease: {len(missed)} slots never ran: {missed[:10]}"
        for i, log in enumerate(result.stderr):
            outages = [line for line in log.splitlines() if "retrying with backoff" in line]
            assert len(outages) == 1, (
                f"proc-{i} {strategy}: outage logged {len(outages)} times:\n{log}"
            )
            assert "anarchon: store redis reachable again" in log, log
        records = read_history(urls[strategy], result.job, 2000)
        per_slot = Counter(r.slot for r in records if not r.manual)
        assert set(per_slot.values()) == {1}, f"{strategy}: history has a slot twice"
