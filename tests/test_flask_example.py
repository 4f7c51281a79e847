"""The Flask example, for real: ``flask anarchon run`` in a process, the app's test client reads history."""

from __future__ import annotations

import importlib
import re
import time
from pathlib import Path

import pytest
from _processes import Process

ROOT = Path(__file__).resolve().parent.parent
RAN = re.compile(r"cleanup slot=(\d+) on flask-1")


def test_flask_anarchon_run_runs_the_job_and_the_test_client_sees_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    worker = Process(
        ["-m", "flask", "--app", "examples.flask_app", "anarchon", "run"],
        ROOT,
        {"ANARCHON_BACKEND_URL": url, "ANARCHON_INSTANCE_ID": "flask-1"},
    )
    try:
        worker.wait_for(
            lambda line: "running 1 job(s) as flask-1" in line, 60, "flask anarchon run"
        )
        slot = RAN.search(worker.wait_for(RAN.search, 20, "a run of cleanup")).group(1)  # type: ignore[union-attr]
        monkeypatch.setenv("ANARCHON_BACKEND_URL", url)
        monkeypatch.setenv("ANARCHON_INSTANCE_ID", "flask-web")
        monkeypatch.syspath_prepend(str(ROOT))
        module = importlib.import_module("examples.flask_app")
        app = module.create_app()
        try:
            client = app.test_client()
            deadline = time.monotonic() + 20
            while True:
                body = client.get("/jobs/cleanup?limit=50").get_json()
                mine = [r for r in body["runs"] if str(r["slot"]) == slot]
                if mine and mine[0]["status"] == "ok":
                    break
                assert time.monotonic() < deadline, body
                time.sleep(0.2)
            assert mine[0]["instance"] == "flask-1"
            assert {r["instance"] for r in body["runs"]} == {"flask-1"}
        finally:
            module.jobs.scheduler.stop()
    finally:
        assert worker.stop() == 0, worker.output()
    assert "stopping with hand-over" in worker.output()
