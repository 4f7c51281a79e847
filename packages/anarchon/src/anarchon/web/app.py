"""The Starlette app of the status page: the HTML page, its script and the JSON endpoints.

Routes (relative to where the app is mounted):

- ``GET /``: the page (plain HTML and a little JavaScript, no build step);
- ``GET /api/status``: every job with its recent runs and leases;
- ``GET /api/jobs/{job}/history?limit=N`` and ``GET /api/jobs/{job}/active``;
- ``POST /api/jobs/{job}/pause`` and ``POST /api/jobs/{job}/resume``: only
  when the app is not read-only, and with ``Authorization: Bearer <token>``
  when it has a token.

Errors are JSON ``{"error": {"code": ..., "message": ...}}``.
"""

from __future__ import annotations

import asyncio
import hmac
import html
import json
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from anarchon.backend.base import Backend
from anarchon.errors import (
    AnarchonError,
    BackendUnavailableError,
    InvalidConfigError,
    UnknownJobError,
    UnsupportedError,
)
from anarchon.web.backend_source import BackendSource
from anarchon.web.source import StatusSource, control_json, lease_json, run_json, status_json

__all__ = ["create_app"]

MAX_HISTORY = 500
"""The largest ``limit`` the history endpoint accepts."""

_ASSETS = {"app.js": "text/javascript", "style.css": "text/css"}
_STATUS_CODES: list[tuple[type[AnarchonError], int]] = [
    (UnknownJobError, 404),
    (UnsupportedError, 501),
    (InvalidConfigError, 400),
    (BackendUnavailableError, 503),
]


def _asset(name: str) -> str:
    return (
        resources.files("anarchon.web")
        .joinpath("static")
        .joinpath(name)
        .read_text(encoding="utf-8")
    )


def _error(code: str, message: str, status: int) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def _anarchon_error(error: AnarchonError) -> JSONResponse:
    status = next((s for kind, s in _STATUS_CODES if isinstance(error, kind)), 500)
    return _error(error.code, error.message, status)


Endpoint = Callable[[Request], Awaitable[Response]]


def _guarded(endpoint: Endpoint) -> Endpoint:
    async def run(request: Request) -> Response:
        try:
            return await endpoint(request)
        except AnarchonError as error:
            return _anarchon_error(error)

    return run


def create_app(
    source: StatusSource | Backend | str,
    *,
    token: str | None = None,
    read_only: bool = False,
    history_limit: int = 40,
    refresh_s: float = 2.0,
    title: str = "anarchon",
) -> Starlette:
    """The status page as a Starlette app (mount it anywhere, or serve it as is).

    ``source`` is a :class:`~anarchon.web.StatusSource`, a
    :class:`~anarchon.Backend` or a backend URL. With ``read_only`` the page
    has no buttons and the write endpoints answer 403; with a ``token`` they
    need ``Authorization: Bearer <token>`` (the page asks for it). The page
    shows ``history_limit`` runs per job and refreshes every ``refresh_s`` s.
    """
    if token is not None and (not isinstance(token, str) or not token):
        raise InvalidConfigError("token must be a non-empty string or None")
    if isinstance(history_limit, bool) or not isinstance(history_limit, int):
        raise InvalidConfigError(f"history_limit must be an integer, got {history_limit!r}")
    if not 1 <= history_limit <= MAX_HISTORY:
        raise InvalidConfigError(f"history_limit must be 1 to {MAX_HISTORY}, got {history_limit}")
    if not isinstance(refresh_s, (int, float)) or not 0.2 <= refresh_s <= 3600:
        raise InvalidConfigError(f"refresh_s must be 0.2 to 3600 seconds, got {refresh_s!r}")
    data: StatusSource = BackendSource(source) if isinstance(source, (Backend, str)) else source
    config = {
        "writable": not read_only,
        "tokenRequired": token is not None,
        "refreshMs": int(refresh_s * 1000),
        "title": title,
    }

    async def page(request: Request) -> Response:
        root = request.scope.get("root_path", "").rstrip("/")
        body = (
            _asset("index.html")
            .replace("{{base}}", html.escape(root + "/", quote=True))
            .replace("{{title}}", html.escape(title))
            .replace("{{config}}", html.escape(json.dumps(config), quote=True))
        )
        return HTMLResponse(body)

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _ASSETS:
            return _error("ANARCHON_NOT_FOUND", f"no asset {name!r}", 404)
        return Response(_asset(name), media_type=_ASSETS[name])

    async def job_entry(job: dict[str, Any]) -> dict[str, Any]:
        name = job["job"]
        runs, leases = await asyncio.gather(data.history(name, history_limit), data.active(name))
        return {
            **job,
            "runs": [run_json(r) for r in runs],
            "leases": [lease_json(name, run) for run in leases],
        }

    async def status(request: Request) -> Response:
        jobs, now = await asyncio.gather(data.status(), data.now_ms())
        entries = await asyncio.gather(*(job_entry(status_json(j)) for j in jobs))
        return JSONResponse({"now": now, **config, "jobs": list(entries)})

    async def history(request: Request) -> Response:
        raw = request.query_params.get("limit", str(history_limit))
        try:
            limit = int(raw)
        except ValueError:
            limit = 0
        if not 1 <= limit <= MAX_HISTORY:
            raise InvalidConfigError(
                f"limit must be an integer from 1 to {MAX_HISTORY}, got {raw!r}"
            )
        runs = await data.history(request.path_params["job"], limit)
        return JSONResponse([run_json(r) for r in runs])

    async def active(request: Request) -> Response:
        job = request.path_params["job"]
        return JSONResponse([lease_json(job, run) for run in await data.active(job)])

    def write(action: Callable[[str], Awaitable[Any]]) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            if read_only:
                return _error("ANARCHON_READ_ONLY", "this status page is read-only", 403)
            if token is not None:
                given = request.headers.get("authorization", "")
                expected = f"Bearer {token}"
                if not hmac.compare_digest(given.encode(), expected.encode()):
                    return _error("ANARCHON_UNAUTHORIZED", "a valid token is required", 401)
            control = await action(request.path_params["job"])
            return JSONResponse(control_json(control))

        return endpoint

    routes = [
        Route("/", _guarded(page)),
        Route("/static/{name}", _guarded(asset)),
        Route("/api/status", _guarded(status)),
        Route("/api/jobs/{job}/history", _guarded(history)),
        Route("/api/jobs/{job}/active", _guarded(active)),
        Route("/api/jobs/{job}/pause", _guarded(write(data.pause)), methods=["POST"]),
        Route("/api/jobs/{job}/resume", _guarded(write(data.resume)), methods=["POST"]),
    ]
    return Starlette(routes=routes)
