"""The status page's JSON endpoints, on the memory backend (registry, controls, leases)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from anarchon import Scheduler
from anarchon.backend.memory import MemoryBackend
from anarchon.context import RunContext
from anarchon.errors import InvalidConfigError
from anarchon.fleet.fingerprints import describe_schedule, fingerprint
from anarchon.fleet.types import Declaration
from anarchon.web import BackendSource, StatusSource, create_app
from fastapi import FastAPI


async def _noop(ctx: RunContext) -> None:
    return None


@pytest.fixture
async def fleet() -> AsyncIterator[MemoryBackend]:
    """A memory store with one job run by a scheduler and declared by two instances."""
    backend = MemoryBackend(leases=True)
    scheduler = Scheduler(backend, instance_id="web-a")
    scheduler.every("tick", "100ms", _noop, jitter=0)
    job = scheduler.jobs["tick"]
    async with scheduler:
        await backend.declare(
            [
                Declaration(
                    job="tick",
                    instance_id=instance,
                    fingerprint=fingerprint(job),
                    schedule=describe_schedule(job.schedule),
                    seen_at=0,
                    expires_at=0,
                )
                for instance in ("web-a", "web-b")
            ],
            ttl_ms=60_000,
        )
        for _ in range(100):
            if len(await backend.history("tick", 10)) >= 3:
                break
            await asyncio.sleep(0.05)
        yield backend


def _client(app: object, base: str = "http://page") -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base)  # type: ignore[arg-type]


async def test_status_lists_the_declared_jobs_with_runs_and_instances(fleet: MemoryBackend) -> None:
    async with _client(create_app(fleet)) as client:
        response = await client.get("/api/status")
    assert response.status_code == 200
    body = response.json()
    assert body["writable"] is False  # no token: read-only unless writes are allowed
    assert body["tokenRequired"] is False
    [job] = body["jobs"]
    assert job["job"] == "tick"
    assert job["schedule"] == "every 100ms"
    assert [i["instance_id"] for i in job["instances"]] == ["web-a", "web-b"]
    assert job["next_slot"] > job["last_run"]["slot"] - 100
    assert job["paused"] is False
    assert job["drift"] == {}
    assert len(job["runs"]) >= 3
    assert {r["instance_id"] for r in job["runs"]} == {"web-a"}
    assert job["runs"][0]["slot"] > job["runs"][-1]["slot"]  # newest first
    assert all(r["attempt"] == 1 for r in job["runs"])


async def test_history_and_active_endpoints(fleet: MemoryBackend) -> None:
    async with _client(create_app(fleet)) as client:
        history = await client.get("/api/jobs/tick/history", params={"limit": 2})
        active = await client.get("/api/jobs/tick/active")
        bad = await client.get("/api/jobs/tick/history", params={"limit": "lots"})
        unknown = await client.get("/api/jobs/nope/history")
    assert history.status_code == 200
    assert len(history.json()) == 2
    assert set(history.json()[0]) >= {"slot", "status", "attempt", "instance_id", "scheduled_at"}
    assert active.status_code == 200
    assert all(lease["job"] == "tick" and "token" not in lease for lease in active.json())
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "ANARCHON_INVALID_CONFIG"
    assert unknown.status_code == 404
    error = unknown.json()["error"]
    assert error["code"] == "ANARCHON_UNKNOWN_JOB"
    assert "tick" in error["message"]


async def test_pause_and_resume_write_the_control_to_the_store(fleet: MemoryBackend) -> None:
    async with _client(create_app(fleet, allow_writes_without_token=True)) as client:
        paused = await client.post("/api/jobs/tick/pause")
        assert paused.status_code == 200
        assert paused.json()["paused"] is True
        assert (await fleet.controls())["tick"].paused is True
        assert (await client.get("/api/status")).json()["jobs"][0]["paused"] is True
        resumed = await client.post("/api/jobs/tick/resume")
        assert resumed.status_code == 200
        assert resumed.json()["paused"] is False
        unknown = await client.post("/api/jobs/nope/pause")
    assert (await fleet.controls())["tick"].paused is False
    assert (await fleet.controls())["tick"].updated_by == "anarchon.web"
    assert unknown.status_code == 404
    assert "nope" not in await fleet.controls()


async def test_a_token_guards_the_buttons_and_read_only_refuses_them(fleet: MemoryBackend) -> None:
    async with _client(create_app(fleet, token="s3cret")) as client:
        missing = await client.post("/api/jobs/tick/pause")
        wrong = await client.post("/api/jobs/tick/pause", headers={"Authorization": "Bearer no"})
        assert missing.status_code == 401
        assert wrong.status_code == 401
        assert missing.json()["error"]["code"] == "ANARCHON_UNAUTHORIZED"
        assert "tick" not in await fleet.controls()
        ok = await client.post("/api/jobs/tick/pause", headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200
        assert (await fleet.controls())["tick"].paused is True
        assert (await client.get("/api/status")).status_code == 200  # reading needs no token
    async with _client(create_app(fleet, read_only=True)) as client:
        refused = await client.post("/api/jobs/tick/resume")
        page = await client.get("/")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "ANARCHON_READ_ONLY"
    assert (await fleet.controls())["tick"].paused is True
    assert "&quot;writable&quot;: false" in page.text


async def test_mounted_in_fastapi_the_page_links_below_its_mount(fleet: MemoryBackend) -> None:
    api = FastAPI()
    api.mount("/ops/status", create_app(fleet, title="billing"))
    async with _client(api) as client:
        page = await client.get("/ops/status/")
        script = await client.get("/ops/status/static/app.js")
        status = await client.get("/ops/status/api/status")
        missing = await client.get("/ops/status/static/secret.py")
    assert page.status_code == 200
    assert '<base href="/ops/status/">' in page.text
    assert "billing" in page.text
    assert script.status_code == 200
    assert "api/status" in script.text
    assert status.json()["jobs"][0]["job"] == "tick"
    assert missing.status_code == 404


async def test_given_jobs_nobody_declares_are_shown_from_history(fleet: MemoryBackend) -> None:
    source = BackendSource(fleet, jobs=["tick", "other"])
    assert isinstance(source, StatusSource)
    assert await source.known() == ["other", "tick"]
    other, tick = await source.status()
    assert (other.job, other.schedule, other.last_run, other.instances) == ("other", "", None, [])
    assert tick.job == "tick"
    assert tick.schedule == "every 100ms"  # from the registry


def test_bad_options_are_refused_at_create_time() -> None:
    backend = MemoryBackend()
    with pytest.raises(InvalidConfigError, match="token"):
        create_app(backend, token="")
    with pytest.raises(InvalidConfigError, match="history_limit"):
        create_app(backend, history_limit=0)
    with pytest.raises(InvalidConfigError, match="refresh_s"):
        create_app(backend, refresh_s=0)
    with pytest.raises(InvalidConfigError, match="per_page"):
        create_app(backend, per_page=0)
    with pytest.raises(InvalidConfigError, match="error_chars"):
        create_app(backend, error_chars=5)
    with pytest.raises(InvalidConfigError, match="allowed_hosts"):
        create_app(backend, allowed_hosts="localhost")
    with pytest.raises(InvalidConfigError, match="trusted_origins"):
        create_app(backend, trusted_origins="https://ops.example.com")
    with pytest.raises(InvalidConfigError, match="list of job names"):
        BackendSource(backend, jobs="tick")
