"""The FastAPI example: the app's lifespan runs the scheduler, and a job runs."""

from __future__ import annotations

import importlib
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parent.parent


def test_job_runs_inside_the_app_lifespan(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    example = importlib.import_module("examples.fastapi_app")
    with TestClient(example.app) as client:
        deadline = time.monotonic() + 10
        runs: list[dict[str, object]] = []
        while time.monotonic() < deadline and len(runs) < 2:
            time.sleep(0.2)
            runs = client.get("/jobs/cleanup").json()
        assert len(runs) >= 2
        assert all(run["status"] in {"ok", "running"} for run in runs)
        assert runs[0]["slot"] > runs[1]["slot"]  # type: ignore[operator]
    assert not example.scheduler._started  # the lifespan stopped it
