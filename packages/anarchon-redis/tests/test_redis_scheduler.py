"""The scheduler on a real Redis/Valkey: hand-over on stop, and the CLI reading the store."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid

from anarchon import RunContext, Scheduler
from anarchon.types import RunClaim, StoredResult
from anarchon_redis import RedisBackend, ValkeyBackend
from anarchon_testservers.redis import Server
from due_now import yearly_due_now

DUE = yearly_due_now()
"""A yearly slot due a minute before import: no other slot falls inside a test."""


def test_graceful_stop_hands_over_to_a_backup(server: Server) -> None:
    """A stops while its handler runs: B takes over at once as attempt 2 (handed_over)."""
    cls = RedisBackend if server.kind == "redis" else ValkeyBackend
    job = f"handover-{uuid.uuid4().hex[:8]}"
    started: list[tuple[str, int]] = []

    async def handler(ctx: RunContext) -> None:
        started.append((ctx.instance_id, ctx.attempt))
        await asyncio.sleep(3600)

    def make(instance: str) -> Scheduler:
        scheduler = Scheduler(
            cls(server.url), instance_id=instance, lease="10s", heartbeat="300ms", stop_grace=0.2
        )
        scheduler.cron(job, DUE, handler, jitter=0, max_late="2h", max_attempts=3)
        return scheduler

    async def main() -> None:
        a, b = make("runner-a"), make("backup-b")
        await a.start()
        try:
            for _ in range(200):
                if started:
                    break
                await asyncio.sleep(0.02)
            assert started == [("runner-a", 1)]
            await b.start()
            await asyncio.sleep(0.5)  # b has claimed and is a backup now
            assert started == [("runner-a", 1)]
            loop = asyncio.get_running_loop()
            stopped = loop.time()
            await a.stop()
            for _ in range(200):
                if len(started) == 2:
                    break
                await asyncio.sleep(0.02)
            assert started == [("runner-a", 1), ("backup-b", 2)]
            assert loop.time() - stopped < 0.2 + 0.3 + 1.0, (
                "the backup took over within a heartbeat"
            )
            records = (await b.history(job, 10))[:2]
            assert [(r.attempt, r.instance_id, r.status, r.reason) for r in records] == [
                (2, "backup-b", "running", None),
                (1, "runner-a", "interrupted", "handed_over"),
            ]
        finally:
            await a.stop()
            await b.stop()

    asyncio.run(main())


def test_cli_reads_history_and_active_runs(redis_server: Server) -> None:
    """``anarchon history`` / ``anarchon active`` against the store, by URL."""
    job = f"cli-{uuid.uuid4().hex[:8]}"
    url = redis_server.url

    async def fill() -> None:
        backend = RedisBackend(url)
        runs = backend.runs
        assert runs is not None
        await backend.init()
        try:
            now = await backend.now_ms()
            slot = now - now % 1000 - 5000
            assert (await runs.claim(RunClaim(job, slot, "t1", "inst-a", 60_000))).won
            assert await runs.finish(job, slot, "t1", "ok")
            await backend.save_result(
                job, StoredResult(slot, "t1", "inst-a", "ok", slot, slot + 7), 100
            )
            claim = RunClaim(job, slot + 1000, "t2", "inst-b", 60_000, overlap=True)
            assert (await runs.claim(claim)).won
        finally:
            await backend.close()

    asyncio.run(fill())
    cli = [sys.executable, "-m", "anarchon.cli"]
    done = subprocess.run(
        [*cli, "history", job, "--backend", url, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [(r["instance_id"], r["status"]) for r in rows] == [
        ("inst-b", "running"),
        ("inst-a", "ok"),
    ]
    done = subprocess.run(
        [*cli, "active", job, "--backend", url], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "inst-b" in done.stdout
    assert "inst-a" not in done.stdout
