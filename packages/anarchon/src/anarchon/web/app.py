"""The Starlette app of the status page: the HTML page, its script and the JSON endpoints.

Routes (relative to where the app is mounted):

- ``GET /``: the page (plain HTML and a little JavaScript, no build step);
- ``GET /api/status?page=P&per_page=N``: one page of jobs (by name) with
  their recent runs, leases and candidates, and the live members, cached for
  the refresh period;
- ``GET /api/jobs/{job}/history?limit=N`` and ``GET /api/jobs/{job}/active``;
- ``POST /api/jobs/{job}/pause`` and ``POST /api/jobs/{job}/resume``: only
  with ``Authorization: Bearer <token>`` when the app has a token, only when
  the user allowed writes without one when it has none, never when read-only,
  and never from another site.

Every request must name an allowed ``Host`` (``_guard.HostCheck``). Error
text is cut and has its secrets hidden before it is served. Errors are JSON
``{"error": {"code": ..., "message": ...}}``.
"""

from __future__ import annotations

import asyncio
import hmac
import html
import json
import math
from collections.abc import Awaitable, Callable, Sequence
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
from anarchon.web._cache import AnswerCache
from anarchon.web._guard import HostCheck, cross_site, error_text
from anarchon.web.backend_source import BackendSource
from anarchon.web.source import (
    JobView,
    StatusSource,
    control_json,
    lease_json,
    member_json,
    read_page,
    run_json,
    status_json,
)

__all__ = ["create_app"]

MAX_HISTORY = 500
"""The largest ``limit`` the history endpoint accepts."""

MAX_PER_PAGE = 200
"""The largest page of ``api/status`` (``per_page``)."""

_ASSETS = {"app.js": "text/javascript", "style.css": "text/css"}
_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
_PAGE_HEADERS = {
    **_HEADERS,
    # No frame of another site may hold the page (a click on a framed button is
    # a same-origin POST), and it runs only its own script and style.
    "Content-Security-Policy": (
        "default-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'none'"
    ),
    "X-Frame-Options": "DENY",
}
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


def _int_param(request: Request, name: str, default: int, top: int) -> int:
    raw = request.query_params.get(name, str(default))
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= top:
        raise InvalidConfigError(f"{name} must be an integer from 1 to {top}, got {raw!r}")
    return value


def _check_int(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidConfigError(f"{name} must be an integer, got {value!r}")
    if not low <= value <= high:
        raise InvalidConfigError(f"{name} must be {low} to {high}, got {value}")
    return value


def create_app(
    source: StatusSource | Backend | str,
    *,
    token: str | None = None,
    read_only: bool = False,
    history_limit: int = 40,
    refresh_s: float = 2.0,
    title: str = "anarchon",
    allow_writes_without_token: bool = False,
    allowed_hosts: Sequence[str] | None = None,
    trusted_origins: Sequence[str] = (),
    hide_errors: bool = False,
    error_chars: int = 500,
    per_page: int = 50,
) -> Starlette:
    """The status page as a Starlette app (mount it anywhere, or serve it as is).

    ``source`` is a :class:`~anarchon.web.StatusSource`, a
    :class:`~anarchon.Backend` or a backend URL. The page shows ``per_page``
    jobs at a time (``api/status?page=P``), ``history_limit`` runs per job, and
    refreshes every ``refresh_s`` s; the answer is cached that long.

    Writes (pause, resume; docs/operations.md, "Exposing the status page"):

    - with a ``token`` they need ``Authorization: Bearer <token>`` (the page
      asks for it);
    - without one the page is read-only, unless ``allow_writes_without_token``
      lets anyone who reaches it pause jobs;
    - ``read_only`` refuses them in every case;
    - a browser's cross-site ``POST`` is refused (403 ``ANARCHON_CROSS_SITE``):
      ``Sec-Fetch-Site`` or ``Origin`` must name this page, or an origin in
      ``trusted_origins`` (``"https://ops.example.com"``).

    ``allowed_hosts`` lists the ``Host`` names the app answers (``.example.com``
    for a domain and its subdomains, ``*`` for any); by default a request that
    arrived on a loopback address must name ``localhost``, ``127.0.0.1`` or
    ``::1``, others any host. Another host answers 400 ``ANARCHON_UNKNOWN_HOST``.

    Handlers' error text is cut to ``error_chars`` characters and has the
    passwords of URLs and ``password=``-like values hidden; with
    ``hide_errors`` it is shown only to requests with the token.
    """
    if token is not None and (not isinstance(token, str) or not token):
        raise InvalidConfigError("token must be a non-empty string or None")
    _check_int("history_limit", history_limit, 1, MAX_HISTORY)
    _check_int("per_page", per_page, 1, MAX_PER_PAGE)
    _check_int("error_chars", error_chars, 20, 100_000)
    if not isinstance(refresh_s, (int, float)) or not 0.2 <= refresh_s <= 3600:
        raise InvalidConfigError(f"refresh_s must be 0.2 to 3600 seconds, got {refresh_s!r}")
    if isinstance(trusted_origins, str):
        raise InvalidConfigError("trusted_origins must be a list of origins, not one string")
    trusted = [str(origin).strip().rstrip("/") for origin in trusted_origins]
    hosts = HostCheck(allowed_hosts)
    data: StatusSource = BackendSource(source) if isinstance(source, (Backend, str)) else source
    writable = not read_only and (token is not None or bool(allow_writes_without_token))
    config = {
        "writable": writable,
        "tokenRequired": token is not None,
        "errorsNeedToken": bool(hide_errors),
        "refreshMs": int(refresh_s * 1000),
        "perPage": per_page,
        "title": title,
    }
    answers = AnswerCache(float(refresh_s))

    def has_token(request: Request) -> bool:
        if token is None:
            return False
        given = request.headers.get("authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())

    def shows_errors(request: Request) -> bool:
        return not hide_errors or has_token(request)

    def shown_error(error: str | None, show: bool) -> str | None:
        return error_text(error, error_chars) if show else None

    def run_view(record: Any, show: bool) -> dict[str, Any]:
        values = run_json(record)
        values["error"] = shown_error(record.error, show)
        return values

    def guarded(endpoint: Endpoint) -> Endpoint:
        async def run(request: Request) -> Response:
            refused = hosts.refusal(request.headers.get("host"), request.scope.get("server"))
            try:
                if refused is not None:
                    response: Response = _error("ANARCHON_UNKNOWN_HOST", refused, 400)
                else:
                    response = await endpoint(request)
            except AnarchonError as error:
                response = _anarchon_error(error)
            response.headers.update(_HEADERS)
            return response

        return run

    async def page(request: Request) -> Response:
        root = request.scope.get("root_path", "").rstrip("/")
        body = (
            _asset("index.html")
            .replace("{{base}}", html.escape(root + "/", quote=True))
            .replace("{{title}}", html.escape(title))
            .replace("{{config}}", html.escape(json.dumps(config), quote=True))
        )
        return HTMLResponse(body, headers=_PAGE_HEADERS)

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _ASSETS:
            return _error("ANARCHON_NOT_FOUND", f"no asset {name!r}", 404)
        return Response(_asset(name), media_type=_ASSETS[name])

    def job_json(view: JobView, show: bool) -> dict[str, Any]:
        name = view.status.job
        entry = status_json(view.status)
        if entry.get("last_run") is not None:
            entry["last_run"]["error"] = shown_error(entry["last_run"]["error"], show)
        entry["runs"] = [run_view(r, show) for r in view.runs]
        entry["leases"] = [lease_json(name, run) for run in view.leases]
        return entry

    async def status(request: Request) -> Response:
        number = _int_param(request, "page", 1, 1_000_000)
        size = _int_param(request, "per_page", per_page, MAX_PER_PAGE)
        show = shows_errors(request)

        async def build() -> bytes:
            found, now = await asyncio.gather(
                read_page(data, (number - 1) * size, size, history_limit), data.now_ms()
            )
            answer = {
                "now": now,
                **config,
                "page": number,
                "per_page": size,
                "pages": max(1, math.ceil(found.total / size)),
                "total": found.total,
                "jobs": [job_json(view, show) for view in found.jobs],
                "members": None
                if found.members is None
                else [member_json(member) for member in found.members],
            }
            return json.dumps(answer, separators=(",", ":"), ensure_ascii=False).encode()

        body = await answers.get((number, size, show), build)
        return Response(body, media_type="application/json")

    async def history(request: Request) -> Response:
        limit = _int_param(request, "limit", history_limit, MAX_HISTORY)
        runs = await data.history(request.path_params["job"], limit)
        show = shows_errors(request)
        return JSONResponse([run_view(r, show) for r in runs])

    async def active(request: Request) -> Response:
        job = request.path_params["job"]
        return JSONResponse([lease_json(job, run) for run in await data.active(job)])

    def write(action: Callable[[str], Awaitable[Any]]) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            refused = cross_site(request.headers, request.url.scheme, trusted)
            if refused is not None:
                return _error("ANARCHON_CROSS_SITE", refused, 403)
            if read_only:
                return _error("ANARCHON_READ_ONLY", "this status page is read-only", 403)
            if not writable:
                return _error(
                    "ANARCHON_READ_ONLY",
                    "this status page has no token, so it is read-only; give it a token"
                    " (or allow_writes_without_token=True)",
                    403,
                )
            if token is not None and not has_token(request):
                return _error("ANARCHON_UNAUTHORIZED", "a valid token is required", 401)
            control = await action(request.path_params["job"])
            answers.clear()
            return JSONResponse(control_json(control))

        return endpoint

    routes = [
        Route("/", guarded(page)),
        Route("/static/{name}", guarded(asset)),
        Route("/api/status", guarded(status)),
        Route("/api/jobs/{job}/history", guarded(history)),
        Route("/api/jobs/{job}/active", guarded(active)),
        Route("/api/jobs/{job}/pause", guarded(write(data.pause)), methods=["POST"]),
        Route("/api/jobs/{job}/resume", guarded(write(data.resume)), methods=["POST"]),
    ]
    return Starlette(routes=routes)
