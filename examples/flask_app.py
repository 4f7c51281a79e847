"""anarchon in a Flask app (docs/flask.md).

Run the jobs (several copies may share one store; each slot runs once):

    ANARCHON_BACKEND_URL=sqlite:///jobs.db flask --app examples.flask_app anarchon run

and the web app, which reads the runs through the sync facade:

    ANARCHON_BACKEND_URL=sqlite:///jobs.db flask --app examples.flask_app run
"""

from __future__ import annotations

import os
from typing import Any

from anarchon import RunContext
from anarchon.contrib.flask import Anarchon
from flask import Flask, request

jobs = Anarchon()


@jobs.every("cleanup", "1s", jitter=0)
def cleanup(ctx: RunContext) -> None:
    """Stands in for real work: expire sessions, refresh a cache..."""
    print(f"cleanup slot={ctx.slot} on {ctx.instance_id}", flush=True)


def create_app() -> Flask:
    """The app factory: the backend comes from the environment, as in production."""
    app = Flask(__name__)
    app.config["ANARCHON_BACKEND_URL"] = os.environ.get(
        "ANARCHON_BACKEND_URL", "sqlite:///anarchon-jobs.db"
    )
    app.config["ANARCHON_INSTANCE_ID"] = os.environ.get("ANARCHON_INSTANCE_ID")
    jobs.init_app(app)

    @app.get("/jobs/<name>")
    def job_runs(name: str) -> dict[str, Any]:
        records = jobs.scheduler.history(name, int(request.args.get("limit", "10")))
        return {
            "job": name,
            "runs": [
                {"slot": r.slot, "instance": r.instance_id, "status": r.status} for r in records
            ],
        }

    return app
