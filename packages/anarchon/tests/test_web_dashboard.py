"""``anarchon dashboard`` serves the status page over HTTP (a real uvicorn process)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _dashboard(*args: str, token: str | None = None) -> Iterator[str]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "ANARCHON_DASHBOARD_TOKEN"}
    if token is not None:
        env["ANARCHON_DASHBOARD_TOKEN"] = token
    command = [sys.executable, "-m", "anarchon.cli", "dashboard", "--port", str(port), *args]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.communicate()[1].decode()
            try:
                httpx.get(url + "/api/status", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the dashboard did not start in 60 s"
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_the_dashboard_serves_the_page_and_guards_the_buttons_with_the_token() -> None:
    with _dashboard("--backend", "memory://", "--job", "nightly", token="t0ken") as url:
        page = httpx.get(url + "/")
        status = httpx.get(url + "/api/status").json()
        refused = httpx.post(url + "/api/jobs/nightly/pause")
        cross = httpx.post(
            url + "/api/jobs/nightly/pause",
            headers={
                "Authorization": "Bearer t0ken",
                "Origin": "https://evil.example",
                "Content-Type": "application/x-www-form-urlencoded",
            },
        )
        between = httpx.get(url + "/api/status").json()
        paused = httpx.post(
            url + "/api/jobs/nightly/pause", headers={"Authorization": "Bearer t0ken"}
        )
        after = httpx.get(url + "/api/status").json()
    assert page.status_code == 200
    assert "static/app.js" in page.text
    assert [job["job"] for job in status["jobs"]] == ["nightly"]
    assert status["tokenRequired"] is True
    assert refused.status_code == 401
    assert cross.status_code == 403  # a cross-site POST, even with the token
    assert cross.json()["error"]["code"] == "ANARCHON_CROSS_SITE"
    assert between["jobs"][0]["paused"] is False
    assert paused.status_code == 200
    assert after["jobs"][0]["paused"] is True


def test_read_only_refuses_writes() -> None:
    with _dashboard("--backend", "memory://", "--job", "nightly", "--read-only") as url:
        refused = httpx.post(url + "/api/jobs/nightly/pause")
        status = httpx.get(url + "/api/status").json()
    assert refused.status_code == 403
    assert status["writable"] is False
    assert status["jobs"][0]["paused"] is False


def test_without_a_backend_it_is_a_one_line_error() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANARCHON_BACKEND_URL"}
    done = subprocess.run(
        [sys.executable, "-m", "anarchon.cli", "dashboard"], env=env, capture_output=True, text=True
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "anarchon: ANARCHON_INVALID_CONFIG: give --backend or set ANARCHON_BACKEND_URL"
    ]


def test_without_a_token_it_is_read_only_and_refuses_foreign_hosts_and_sites() -> None:
    with _dashboard("--backend", "memory://", "--job", "nightly") as url:
        status = httpx.get(url + "/api/status").json()
        refused = httpx.post(url + "/api/jobs/nightly/pause")
        rebound = httpx.get(url + "/api/status", headers={"Host": "evil.example"})
    assert status["writable"] is False
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "ANARCHON_READ_ONLY"
    assert rebound.status_code == 400
    assert rebound.json()["error"]["code"] == "ANARCHON_UNKNOWN_HOST"
    with _dashboard(
        "--backend",
        "memory://",
        "--job",
        "nightly",
        "--allow-writes-without-token",
        "--allowed-host",
        "ops.example.com",
    ) as url:
        cross = httpx.post(
            url + "/api/jobs/nightly/pause",
            headers={"Origin": "https://evil.example", "Host": "ops.example.com"},
        )
        named = httpx.get(url + "/api/status", headers={"Host": "ops.example.com"})
        loopback = httpx.get(url + "/api/status")
        paused = httpx.post(
            url + "/api/jobs/nightly/pause",
            headers={"Origin": "http://ops.example.com", "Host": "ops.example.com"},
        )
    assert cross.status_code == 403
    assert cross.json()["error"]["code"] == "ANARCHON_CROSS_SITE"
    assert named.status_code == 200
    assert loopback.status_code == 400  # allowed_hosts given: only those names
    assert paused.status_code == 200
