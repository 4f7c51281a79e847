"""anarchon inside a FastAPI app: the scheduler starts and stops with the app's lifespan.

Run it (several copies may share one store; each slot runs once):

    ANARCHON_BACKEND_URL=sqlite:///jobs.db uvicorn examples.fastapi_app:app --port 8000

Then ``GET /jobs/cleanup`` shows the job's recent runs, from every instance.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from anarchon import RunContext, Scheduler
from fastapi import FastAPI

scheduler = Scheduler()  # backend from ANARCHON_BACKEND_URL, else memory://


@scheduler.every("cleanup", "1s", jitter="200ms")
async def cleanup(ctx: RunContext) -> None:
    """Stands in for real work: expire sessions, refresh a cache, send a report..."""


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with scheduler:  # start() on startup; stop() with hand-over on shutdown
        yield


app = FastAPI(lifespan=lifespan)


@app.get("/jobs/{name}")
async def job_runs(name: str, limit: int = 10) -> list[dict[str, Any]]:
    """Recent runs of a job, newest first, across all instances."""
    return [
        {"slot": r.slot, "instance": r.instance_id, "status": r.status, "attempt": r.attempt}
        for r in await scheduler.history(name, limit)
    ]
