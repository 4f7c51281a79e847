"""Candidates and live members as operators see them: ``fleet_status``, ``fleet_members``,
``anarchon status``/``members`` and the status page, on schedulers sharing one memory store.

The candidates shown must be the instances that hold the job in their
timetable: the view computes them from the store the way the schedulers do.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

import httpx
import pytest
from anarchon import Backend, MemoryBackend, RunContext, Scheduler
from anarchon._core import rendezvous_candidates
from anarchon._scheduler.candidates import MEMBER_TTL_MS
from anarchon.backend.registry import resolve_backend
from anarchon.cli import fleet as fleet_cli
from anarchon.cli.commands import build_parser
from anarchon.errors import UnsupportedError
from anarchon.fleet.roster import candidates_by_job, candidates_of, roster_label, roster_of
from anarchon.fleet.status import fleet_members, fleet_status
from anarchon.fleet.types import Declaration, JobControl, Member
from anarchon.types import RunRecord
from anarchon.web import create_app

JOBS = 8
PERIOD = "300ms"


async def _noop(ctx: RunContext) -> None:
    return None


async def _until(predicate: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


def _held(scheduler: Scheduler) -> set[str]:
    """The jobs in the scheduler's timetable: the ones it claims."""
    parts = scheduler._parts
    assert parts is not None
    return {name for name in scheduler.jobs if name in parts.wakeups.timetable}


def _settled(fleet: list[Scheduler], k: int) -> bool:
    """Every instance sees every member and holds exactly its candidate jobs."""
    names = sorted(s.instance_id for s in fleet)
    for s in fleet:
        parts = s._parts
        if parts is None or list(parts.candidates.group) != names:
            return False
        mine = {n for n in s.jobs if s.instance_id in rendezvous_candidates(names, n, k)}
        if _held(s) != mine:
            return False
    return True


class RegistryOnly(MemoryBackend):
    """A memory store with the fleet registry but no membership records, as a backend
    written before them: its membership members are the interface's defaults."""

    refresh_member = Backend.refresh_member
    leave_member = Backend.leave_member
    members = Backend.members


@dataclass
class Fleet:
    backend: MemoryBackend
    url: str
    schedulers: list[Scheduler]

    def holders(self) -> dict[str, set[str]]:
        """Job -> the instances whose timetable holds it."""
        found: dict[str, set[str]] = {}
        for s in self.schedulers:
            for name in _held(s):
                found.setdefault(name, set()).add(s.instance_id)
        return found


async def _start(size: int, **options: object) -> Fleet:
    url = f"memory://members-view-{uuid.uuid4().hex[:8]}"
    backend = resolve_backend(url)
    assert isinstance(backend, MemoryBackend)
    schedulers = [
        Scheduler(backend, instance_id=f"web-{n}", **options)  # type: ignore[arg-type]
        for n in range(size)
    ]
    for scheduler in schedulers:
        for j in range(JOBS):
            scheduler.every(f"job-{j}", PERIOD, _noop)
        await scheduler.start()
    return Fleet(backend, url, schedulers)


@pytest.fixture
async def fleet() -> AsyncIterator[Fleet]:
    """Three instances with the default two candidates per job, settled."""
    found = await _start(3)
    try:
        await _until(lambda: _settled(found.schedulers, 2))
        yield found
    finally:
        for s in found.schedulers:
            await s.stop()


@pytest.fixture
async def racing() -> AsyncIterator[Fleet]:
    """Two instances with ``candidates=None``: every instance claims, no record is written."""
    found = await _start(2, candidates=None)
    try:
        yield found
    finally:
        for s in found.schedulers:
            await s.stop()


async def test_status_shows_the_candidates_that_hold_each_job(fleet: Fleet) -> None:
    statuses = await fleet_status(fleet.backend)
    holders = fleet.holders()
    assert [s.job for s in statuses] == [f"job-{j}" for j in range(JOBS)]
    for status in statuses:
        assert len(status.candidates) == 2
        assert set(status.candidates) == holders[status.job], status.job
        # rank order: the first candidate is rank 0 of the group
        assert status.candidates == rendezvous_candidates(
            ["web-0", "web-1", "web-2"], status.job, 2
        )
    [one] = await fleet_status(fleet.backend, ["job-3"])
    assert one.candidates == next(s.candidates for s in statuses if s.job == "job-3")


async def test_members_count_the_jobs_each_instance_holds(fleet: Fleet) -> None:
    members = await fleet_members(fleet.backend)
    now = await fleet.backend.now_ms()
    assert [m.instance_id for m in members] == ["web-0", "web-1", "web-2"]
    assert {m.k for m in members} == {2}
    assert len({m.group for m in members}) == 1
    assert members[0].group.startswith("k2-")
    assert len(members[0].group) == len("k2-") + 8
    for member, scheduler in zip(members, fleet.schedulers, strict=True):
        assert member.candidate_of == len(_held(scheduler))
        assert member.seen_at <= now
        assert member.expires_at - member.seen_at == MEMBER_TTL_MS
    assert sum(m.candidate_of or 0 for m in members) == JOBS * 2


async def test_a_fleet_with_candidates_none_shows_none(racing: Fleet) -> None:
    statuses = await fleet_status(racing.backend)
    assert len(statuses) == JOBS
    assert all(s.candidates == [] for s in statuses)
    assert all(len(s.instances) == 2 for s in statuses)
    assert await fleet_members(racing.backend) == []


async def test_a_backend_without_membership_shows_no_candidates() -> None:
    backend = RegistryOnly()
    schedulers = [Scheduler(backend, instance_id=f"p-{n}") for n in range(2)]
    for scheduler in schedulers:
        scheduler.every("job-0", PERIOD, _noop)
        await scheduler.start()
    try:
        [status] = await fleet_status(backend)
        assert status.candidates == []
        assert [i.instance_id for i in status.instances] == ["p-0", "p-1"]
        with pytest.raises(UnsupportedError):
            await fleet_members(backend)
    finally:
        for scheduler in schedulers:
            await scheduler.stop()


def test_candidates_by_job_is_candidates_of_for_each_job() -> None:
    old = roster_of(2, [("a", "f1"), ("b", "f1")])
    new = roster_of(3, [("a", "f2"), ("b", "f1")])
    members = [Member(f"o{n}", old, 0, 1) for n in range(5)]
    members += [Member(f"n{n}", new, 0, 1) for n in range(4)]
    members.append(Member("x", "not-ours", 0, 1))
    declaring = {"a": ["o1", "n3"], "b": ["o0"], "c": ["x"], "d": []}
    every = candidates_by_job(members, declaring)
    assert every == {job: candidates_of(job, members, ids) for job, ids in declaring.items()}
    assert len(every["a"]) == 3 + 2
    assert every["c"] == every["d"] == []
    assert roster_label(old) == old[:11]
    assert roster_label("not-ours-at-all") == "not-ours-at-"


# The command line, in this process (the memory store is the process's) ----------------


async def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(list(argv))
    runner = fleet_cli.members_command if args.command == "members" else fleet_cli.status_command
    code = await runner(args)
    out, err = capsys.readouterr()
    return code, out, err


async def test_cli_members_lists_the_live_instances(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = await _cli(capsys, "members", "--backend", fleet.url, "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert [r["instance_id"] for r in rows] == ["web-0", "web-1", "web-2"]
    assert {r["k"] for r in rows} == {2}
    assert sum(r["candidate_of"] for r in rows) == JOBS * 2
    assert set(rows[0]) == {"instance_id", "k", "group", "seen_at", "expires_at", "candidate_of"}
    code, out, err = await _cli(capsys, "members", "--backend", fleet.url)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == [
        "instance",
        "k",
        "roster",
        "seen",
        "expires",
        "in",
        "candidate",
        "of",
    ]
    assert [line.split()[0] for line in lines[2:]] == ["web-0", "web-1", "web-2"]
    for line, scheduler in zip(lines[2:], fleet.schedulers, strict=True):
        cells = line.split()
        assert cells[1] == "2"
        assert cells[3].endswith("s")  # seen "0.4s ago"
        assert cells[4] == "ago"
        assert float(cells[5].rstrip("s")) <= 4.0  # expires within the record's 4 s
        assert cells[6] == str(len(_held(scheduler)))


async def test_cli_status_shows_the_candidates(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = await _cli(capsys, "status", "--backend", fleet.url, "--json")
    assert code == 0, err
    holders = fleet.holders()
    rows = json.loads(out)
    assert {r["job"]: set(r["candidates"]) for r in rows} == holders
    code, out, err = await _cli(capsys, "status", "--backend", fleet.url)
    assert code == 0, err
    header, _, *lines = out.splitlines()
    column = header.index("candidates")  # the table pads each column to one width
    for line in lines:
        shown = line[column:].split()[0]
        assert set(shown.split(",")) == holders[line.split()[0]], line


async def test_cli_members_of_a_fleet_without_records_is_a_hint(
    racing: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = await _cli(capsys, "members", "--backend", racing.url)
    assert code == 0
    assert out.strip() == f"anarchon: {fleet_cli.NO_MEMBERS_HINT}"
    assert "candidates=None" in out
    code, out, err = await _cli(capsys, "members", "--backend", racing.url, "--json")
    assert code == 0
    assert json.loads(out) == []
    assert err.strip() == f"anarchon: {fleet_cli.NO_MEMBERS_HINT}"
    code, out, err = await _cli(capsys, "status", "--backend", racing.url, "--json")
    assert code == 0, err
    assert [r["candidates"] for r in json.loads(out)] == [[]] * JOBS


async def test_cli_members_of_a_backend_without_membership_is_a_hint(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RegistryOnly()

    async def open_store(args: object) -> RegistryOnly:
        await store.init()
        return store

    monkeypatch.setattr(fleet_cli, "open_backend", open_store)
    code, out, err = await _cli(capsys, "members", "--backend", "memory://")
    assert code == 0
    assert "keeps no membership records" in out
    assert out.count("\n") == 1
    code, out, err = await _cli(capsys, "members", "--backend", "memory://", "--json")
    assert (code, json.loads(out)) == (0, [])
    assert "keeps no membership records" in err


# The status page ------------------------------------------------------------------


def _client(app: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://page")  # type: ignore[arg-type]


async def test_page_api_shows_candidates_and_members(fleet: Fleet) -> None:
    async with _client(create_app(fleet.backend, per_page=3)) as client:
        first = (await client.get("/api/status")).json()
        last = (await client.get("/api/status", params={"page": 3})).json()
        page = await client.get("/")
    holders = fleet.holders()
    jobs = first["jobs"] + last["jobs"]
    assert [j["job"] for j in first["jobs"]] == ["job-0", "job-1", "job-2"]
    assert all(set(j["candidates"]) == holders[j["job"]] for j in jobs)
    for answer in (first, last):  # every page shows every member, counted over every job
        members = answer["members"]
        assert [m["instance_id"] for m in members] == ["web-0", "web-1", "web-2"]
        counts = {m["instance_id"]: m["candidate_of"] for m in members}
        assert counts == {s.instance_id: len(_held(s)) for s in fleet.schedulers}
        assert all(m["seen_at"] <= answer["now"] for m in members)
        assert all(m["expires_at"] - m["seen_at"] == MEMBER_TTL_MS for m in members)
    assert 'id="members"' in page.text


async def test_page_api_members_are_empty_or_null_without_records(racing: Fleet) -> None:
    async with _client(create_app(racing.backend)) as client:
        body = (await client.get("/api/status")).json()
    assert body["members"] == []
    assert all(j["candidates"] == [] for j in body["jobs"])
    store = RegistryOnly()
    scheduler = Scheduler(store, instance_id="p-0")
    scheduler.every("job-0", PERIOD, _noop)
    async with scheduler, _client(create_app(store)) as client:
        body = (await client.get("/api/status")).json()
    assert body["members"] is None
    assert [j["candidates"] for j in body["jobs"]] == [[]]


# Bounded store calls -----------------------------------------------------------------


class CountingBackend(MemoryBackend):
    """A memory store that counts the fleet reads (every call still reaches it)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    async def members(self) -> list[Member]:
        self.calls["members"] += 1
        return await super().members()

    async def declarations(self) -> list[Declaration]:
        self.calls["declarations"] += 1
        return await super().declarations()

    async def controls(self) -> dict[str, JobControl]:
        self.calls["controls"] += 1
        return await super().controls()

    async def history_many(self, jobs: Sequence[str], limit: int) -> dict[str, list[RunRecord]]:
        self.calls["history_many"] += 1
        return await super().history_many(jobs, limit)


@pytest.mark.parametrize("size", [2, 6])
async def test_the_views_read_the_members_once_whatever_the_fleet(size: int) -> None:
    backend = CountingBackend()
    await backend.init()
    roster = roster_of(2, [("job-0", "f"), ("job-1", "f")])
    await backend.declare(
        [
            Declaration(job, f"i{n}", "f", "every 1000ms", 0, 0)
            for n in range(size)
            for job in ("job-0", "job-1")
        ],
        600_000,
    )
    for n in range(size):
        await backend.refresh_member(f"i{n}", roster, 600_000)
    backend.calls.clear()
    statuses = await fleet_status(backend)
    assert all(len(s.candidates) == 2 for s in statuses)
    assert backend.calls == Counter(members=1, declarations=1, controls=1, history_many=1)
    backend.calls.clear()
    members = await fleet_members(backend)
    assert len(members) == size
    assert sum(m.candidate_of or 0 for m in members) == 4
    assert backend.calls == Counter(members=1, declarations=1)
    backend.calls.clear()
    async with _client(create_app(backend)) as client:
        body = (await client.get("/api/status")).json()
        again = (await client.get("/api/status")).json()  # within the refresh period: cached
    assert len(body["members"]) == size
    assert again == body
    assert backend.calls == Counter(members=1, declarations=1, controls=1, history_many=1)
