"""The status page exposed (docs/operations.md, "Exposing the status page"), on the memory backend.

Writes need a token or an explicit opt-in, a browser's cross-site POST is
refused with and without a token, a Host the app does not know is refused,
error text is cut and has its secrets hidden, and ``api/status`` is paged and
cached.
"""

from __future__ import annotations

import httpx
import pytest
from anarchon.backend.memory import MemoryBackend
from anarchon.backend.registry import redact_secrets
from anarchon.fleet.types import Declaration
from anarchon.types import StoredResult
from anarchon.web import create_app
from anarchon.web._guard import error_text

SECRET_ERROR = (
    "OperationalError: connection to postgresql://admin:hunter2@db.internal:5432/billing"
    " failed; dsn host=db password=hunter2 " + "x" * 5_000
)


async def _fleet(names: list[str], error: str | None = None) -> MemoryBackend:
    backend = MemoryBackend(leases=True)
    await backend.init()
    await backend.declare(
        [Declaration(name, "web-a", "f1", "every 1000ms", 0, 0) for name in names],
        ttl_ms=600_000,
    )
    for name in names:
        result = StoredResult(
            slot=1_000,
            token=f"t-{name}",
            instance_id="web-a",
            status="error" if error else "ok",
            started_at=1_000,
            finished_at=1_010,
            error=error,
        )
        await backend.save_result(name, result, 100, None)
    return backend


def _client(app: object, base: str = "http://127.0.0.1:8080") -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base)  # type: ignore[arg-type]


EVIL_FORM = {"Origin": "https://evil.example", "Content-Type": "application/x-www-form-urlencoded"}


async def test_without_a_token_the_page_is_read_only_unless_writes_are_allowed() -> None:
    backend = await _fleet(["tick"])
    async with _client(create_app(backend)) as client:
        page = await client.get("/")
        refused = await client.post("/api/jobs/tick/pause")
    assert "&quot;writable&quot;: false" in page.text
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "ANARCHON_READ_ONLY"
    assert "allow_writes_without_token" in refused.json()["error"]["message"]
    assert await backend.controls() == {}
    async with _client(create_app(backend, allow_writes_without_token=True)) as client:
        allowed = await client.post("/api/jobs/tick/pause")
    assert allowed.status_code == 200
    assert (await backend.controls())["tick"].paused is True
    async with _client(create_app(backend, read_only=True, token="s3cret")) as client:
        still = await client.post(
            "/api/jobs/tick/resume", headers={"Authorization": "Bearer s3cret"}
        )
    assert still.status_code == 403
    assert still.json()["error"]["code"] == "ANARCHON_READ_ONLY"


@pytest.mark.parametrize(
    "headers",
    [
        EVIL_FORM,
        {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
        {"Sec-Fetch-Site": "same-site", "Origin": "https://other.127.0.0.1"},
        {"Origin": "null"},
        {"Origin": "http://127.0.0.1:9999"},  # another port is another origin
    ],
    ids=["simple-form", "sec-fetch-cross-site", "sec-fetch-same-site", "null", "other-port"],
)
async def test_a_cross_site_post_is_refused_with_and_without_a_token(
    headers: dict[str, str],
) -> None:
    backend = await _fleet(["tick"])
    open_app = create_app(backend, allow_writes_without_token=True)
    token_app = create_app(backend, token="s3cret")
    async with _client(open_app) as client:
        anonymous = await client.post("/api/jobs/tick/pause", headers=headers, content="a=b")
    async with _client(token_app) as client:
        with_token = await client.post(
            "/api/jobs/tick/pause",
            headers={**headers, "Authorization": "Bearer s3cret"},
            content="a=b",
        )
    for refused in (anonymous, with_token):
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "ANARCHON_CROSS_SITE"
    assert await backend.controls() == {}


async def test_same_origin_and_non_browser_posts_pass() -> None:
    backend = await _fleet(["tick"])
    app = create_app(backend, token="s3cret", trusted_origins=["https://ops.example.com"])
    auth = {"Authorization": "Bearer s3cret"}
    async with _client(app) as client:
        same = await client.post(
            "/api/jobs/tick/pause", headers={**auth, "Sec-Fetch-Site": "same-origin"}
        )
        origin = await client.post(
            "/api/jobs/tick/resume", headers={**auth, "Origin": "http://127.0.0.1:8080"}
        )
        trusted = await client.post(
            "/api/jobs/tick/pause",
            headers={**auth, "Origin": "https://ops.example.com", "Sec-Fetch-Site": "cross-site"},
        )
        script = await client.post("/api/jobs/tick/resume", headers=auth)  # curl: neither header
    assert [r.status_code for r in (same, origin, trusted, script)] == [200, 200, 200, 200]


async def test_an_unknown_host_is_refused() -> None:
    backend = await _fleet(["tick"])
    # On a loopback address (the ASGI scope's server), only loopback names by default:
    # a DNS-rebinding page reaches the app under its own name.
    async with _client(create_app(backend, allow_writes_without_token=True)) as client:
        rebound = await client.get("/api/status", headers={"Host": "evil.example"})
        write = await client.post("/api/jobs/tick/pause", headers={"Host": "evil.example"})
        page = await client.get("/", headers={"Host": "evil.example:8080"})
        for name in ("localhost:8080", "127.0.0.1:8080", "[::1]:8080"):
            assert (await client.get("/api/status", headers={"Host": name})).status_code == 200
    for refused in (rebound, write, page):
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == "ANARCHON_UNKNOWN_HOST"
        assert "allowed_hosts" in refused.json()["error"]["message"]
    assert await backend.controls() == {}
    app = create_app(backend, allowed_hosts=["ops.example.com", ".corp.example"])
    async with _client(app, base="http://10.0.0.5:8080") as client:
        assert (await client.get("/api/status", headers={"Host": "ops.example.com"})).is_success
        assert (await client.get("/api/status", headers={"Host": "a.corp.example:443"})).is_success
        assert (await client.get("/api/status", headers={"Host": "corp.example"})).is_success
        other = await client.get("/api/status", headers={"Host": "evil.example"})
        suffix = await client.get("/api/status", headers={"Host": "evilcorp.example"})
    assert (other.status_code, suffix.status_code) == (400, 400)
    async with _client(create_app(backend), base="http://10.0.0.5:8080") as client:
        # not on loopback and no allowed_hosts: any host (documented)
        assert (await client.get("/api/status", headers={"Host": "any.example"})).is_success


async def test_error_text_is_redacted_and_truncated_before_anyone_reads_it() -> None:
    backend = await _fleet(["tick"], error=SECRET_ERROR)
    async with _client(create_app(backend, error_chars=200)) as client:
        status = (await client.get("/api/status")).json()
        history = (await client.get("/api/jobs/tick/history")).json()
    [job] = status["jobs"]
    for shown in (job["last_run"]["error"], job["runs"][0]["error"], history[0]["error"]):
        assert "hunter2" not in shown
        assert "postgresql://admin:***@db.internal:5432/billing" in shown
        assert "password=***" in shown
        assert len(shown) == 200
        assert shown.endswith("…")


async def test_hide_errors_shows_error_text_only_with_the_token() -> None:
    backend = await _fleet(["tick"], error="boom at postgresql://u:pw@db/x")
    app = create_app(backend, token="s3cret", hide_errors=True)
    async with _client(app) as client:
        anonymous = (await client.get("/api/status")).json()
        wrong = (await client.get("/api/status", headers={"Authorization": "Bearer no"})).json()
        history = (await client.get("/api/jobs/tick/history")).json()
        holder = (
            await client.get("/api/status", headers={"Authorization": "Bearer s3cret"})
        ).json()
    assert anonymous["errorsNeedToken"] is True
    for body in (anonymous, wrong):
        assert body["jobs"][0]["last_run"]["error"] is None
        assert body["jobs"][0]["runs"][0]["error"] is None
        assert body["jobs"][0]["last_run"]["status"] == "error"
    assert history[0]["error"] is None
    assert holder["jobs"][0]["last_run"]["error"] == "boom at postgresql://u:***@db/x"


async def test_status_is_paged_by_job_name() -> None:
    names = [f"job-{i:02d}" for i in range(7)]
    backend = await _fleet(list(reversed(names)))
    async with _client(create_app(backend, per_page=3)) as client:
        first = (await client.get("/api/status")).json()
        last = (await client.get("/api/status", params={"page": 3})).json()
        wide = (await client.get("/api/status", params={"per_page": 10})).json()
        beyond = (await client.get("/api/status", params={"page": 9})).json()
        bad = await client.get("/api/status", params={"per_page": 201})
    assert (first["page"], first["per_page"], first["pages"], first["total"]) == (1, 3, 3, 7)
    assert [j["job"] for j in first["jobs"]] == names[:3]
    assert [j["job"] for j in last["jobs"]] == names[6:]
    assert [j["job"] for j in wide["jobs"]] == names
    assert beyond["jobs"] == []
    assert beyond["pages"] == 3
    assert all(len(j["runs"]) == 1 for j in wide["jobs"])
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "ANARCHON_INVALID_CONFIG"


async def test_status_is_cached_for_the_refresh_period_and_a_write_clears_it() -> None:
    backend = await _fleet(["tick"])
    app = create_app(backend, refresh_s=600, allow_writes_without_token=True)
    async with _client(app) as client:
        before = (await client.get("/api/status")).json()
        await backend.declare([Declaration("new", "web-b", "f1", "every 1000ms", 0, 0)], 600_000)
        cached = (await client.get("/api/status")).json()
        await client.post("/api/jobs/tick/pause")
        after = (await client.get("/api/status")).json()
    assert [j["job"] for j in before["jobs"]] == ["tick"]
    assert cached == before
    assert [j["job"] for j in after["jobs"]] == ["new", "tick"]
    assert after["jobs"][1]["paused"] is True


def test_error_text_cuts_long_text_and_keeps_short_text() -> None:
    assert error_text(None, 100) is None
    assert error_text("short", 100) == "short"
    cut = error_text("postgresql://admin:hunter2@db/x " + "y" * 10_000, 50)
    assert cut is not None
    assert len(cut) == 50
    assert "hunter2" not in cut
    # redacted before the cut: no part of a password survives at the edge
    edge = error_text("y" * 40 + " postgresql://admin:hunter2@db", 64)
    assert edge is not None
    assert "hunt" not in edge
    assert edge.endswith("***…")
    assert redact_secrets("{'token': 'abc', 'user': 'bob'}") == "{'token': '***', 'user': 'bob'}"


async def test_no_other_site_may_frame_the_page() -> None:
    backend = await _fleet(["tick"])
    async with _client(create_app(backend, token="s3cret")) as client:
        page = await client.get("/")
        status = await client.get("/api/status")
    assert page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert status.headers["x-content-type-options"] == "nosniff"
