"""Backend resolution through the ``anarchon.backends`` entry points, and URL redaction."""

from __future__ import annotations

import asyncio
import logging
import textwrap
import threading
import uuid
from pathlib import Path

import pytest
from anarchon.backend.memory import MemoryBackend
from anarchon.backend.registry import (
    ENV_VAR,
    EXTRAS,
    _install_hint,
    installed_backends,
    redact_secrets,
    redact_text,
    redact_url,
    resolve_backend,
)
from anarchon.errors import InvalidConfigError, UnknownBackendError
from anarchon.types import ClaimInput


def _claim(backend: MemoryBackend | object, job: str, slot: int, token: str) -> bool:
    assert isinstance(backend, MemoryBackend)
    return asyncio.run(backend.claim(ClaimInput(job, slot, token, f"instance-{token}")))


def _installed_schemes() -> set[str]:
    return {scheme for scheme, _target, _dist, _version in installed_backends()}


# memory:// ---------------------------------------------------------------


def test_memory_url_gives_a_fresh_backend_each_time() -> None:
    first, second = resolve_backend("memory://"), resolve_backend("memory://")
    assert isinstance(first, MemoryBackend)
    assert isinstance(second, MemoryBackend)
    assert first is not second
    assert _claim(first, "job", 1000, "a")
    assert _claim(second, "job", 1000, "b"), "an unnamed memory backend shares nothing"


def test_named_memory_backend_is_shared_in_the_process() -> None:
    name = f"shared-{uuid.uuid4().hex[:8]}"
    first = resolve_backend(f"memory://{name}")
    second = resolve_backend(f"memory://{name}")
    assert first is second
    assert resolve_backend(f"memory://{name}-other") is not first
    assert _claim(first, "job", 1000, "a")
    assert not _claim(second, "job", 1000, "b")

    from_thread: list[object] = []
    thread = threading.Thread(
        target=lambda: from_thread.append(resolve_backend(f"MEMORY://{name}"))
    )
    thread.start()
    thread.join()
    assert from_thread == [first]


def test_named_memory_backend_survives_close() -> None:
    name = f"closed-{uuid.uuid4().hex[:8]}"
    backend = resolve_backend(f"memory://{name}")
    assert _claim(backend, "job", 1000, "a")
    asyncio.run(backend.close())
    again = resolve_backend(f"memory://{name}")
    assert again is backend
    assert not _claim(again, "job", 1000, "b"), "close() must not forget a shared backend's claims"


def test_a_backend_object_is_returned_unchanged() -> None:
    backend = MemoryBackend()
    assert resolve_backend(backend) is backend


def test_none_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"env-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv(ENV_VAR, f"memory://{name}")
    assert resolve_backend(None) is resolve_backend(f"memory://{name}")


@pytest.mark.parametrize("value", [None, "", "   "])
def test_none_without_environment_is_memory(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv(ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(ENV_VAR, value)
    first, second = resolve_backend(None), resolve_backend(None)
    assert isinstance(first, MemoryBackend)
    assert first is not second


# Errors --------------------------------------------------------------------


def test_unknown_option_is_invalid_config() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        resolve_backend("memory://x?window_ms=10")
    assert caught.value.code == "ANARCHON_INVALID_CONFIG"
    assert "window_ms" in str(caught.value)
    with pytest.raises(InvalidConfigError):
        MemoryBackend.from_url("memory://", strategy="lease")


def test_option_given_twice_is_invalid_config() -> None:
    with pytest.raises(InvalidConfigError, match="twice"):
        resolve_backend("memory://x?a=1&a=2")


@pytest.mark.parametrize("url", ["localhost:6379", "/tmp/db.sqlite", "://host"])
def test_not_a_url_is_invalid_config(url: str) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        resolve_backend(url)
    assert caught.value.code == "ANARCHON_INVALID_CONFIG"


def test_unknown_known_scheme_names_the_extra() -> None:
    # Schemes whose backend is installed here resolve instead; the wheel-install test
    # (tests/test_packaging.py, a fresh venv without the extras) covers every scheme.
    for scheme in sorted(set(EXTRAS) - _installed_schemes()):
        url = f"{scheme}://admin:hunter2@db.example:1234/0?password=alsosecret"
        with pytest.raises(UnknownBackendError) as caught:
            resolve_backend(url)
        error = caught.value
        assert error.code == "ANARCHON_UNKNOWN_BACKEND"
        assert f'pip install "anarchon[{EXTRAS[scheme]}]"' in str(error)
        assert "hunter2" not in str(error)
        assert "alsosecret" not in str(error)
    for scheme, extra in EXTRAS.items():
        assert _install_hint(scheme) == f'pip install "anarchon[{extra}]"'


def test_extras_table_matches_the_spec() -> None:
    assert EXTRAS == {
        "redis": "redis",
        "rediss": "redis",
        "redis+sentinel": "redis",
        "redis+cluster": "redis",
        "valkey": "valkey",
        "valkeys": "valkey",
        "valkey+sentinel": "valkey",
        "valkey+cluster": "valkey",
        "nats": "nats",
        "postgresql": "postgres",
        "postgres": "postgres",
        "sqlite": "sqlite",
    }


def test_other_unknown_scheme_lists_installed_schemes() -> None:
    with pytest.raises(UnknownBackendError) as caught:
        resolve_backend("gopher://user:pw@host")
    message = str(caught.value)
    assert "gopher" in message
    assert "memory://" in message
    assert "pip install" not in message
    assert ":pw@" not in message


def test_installed_backends_lists_memory() -> None:
    rows = installed_backends()
    assert ("memory", "anarchon.backend.memory:MemoryBackend") in {(r[0], r[1]) for r in rows}
    memory = next(r for r in rows if r[0] == "memory")
    assert memory[2] == "anarchon"
    assert memory[3]
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)


# Real plugins installed at test time ---------------------------------------


def _install_plugin(root: Path, scheme: str, target: str, module: str, source: str) -> None:
    """Write a real distribution (module + .dist-info with an entry point) under ``root``."""
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    info = root / f"{module.replace('_', '-')}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text(f"[anarchon.backends]\n{scheme} = {target}\n")


def test_query_options_are_passed_to_from_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = uuid.uuid4().hex[:8]
    scheme, module = f"echo{token}", f"anarchon_echo_{token}"
    _install_plugin(
        tmp_path,
        scheme,
        f"{module}:EchoBackend",
        module,
        """
        from anarchon.backend.memory import MemoryBackend

        class EchoBackend(MemoryBackend):
            @classmethod
            def from_url(cls, url, **options):
                backend = cls()
                backend.seen = (url, options)
                return backend
        """,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    url = f"{scheme}://cache:6379/1?strategy=script&window_ms=600000&prefix=billing:cron:"
    backend = resolve_backend(url)
    assert backend.seen == (  # type: ignore[attr-defined]
        url,
        {"strategy": "script", "window_ms": "600000", "prefix": "billing:cron:"},
    )
    rows = {r[0]: r for r in installed_backends()}
    assert rows[scheme] == (scheme, f"{module}:EchoBackend", module, "1.2.3")


def test_plugin_that_fails_to_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    token = uuid.uuid4().hex[:8]
    scheme, module = f"broken{token}", f"anarchon_broken_{token}"
    _install_plugin(
        tmp_path,
        scheme,
        f"{module}:Backend",
        module,
        """
        import a_driver_that_is_not_installed_anywhere
        """,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with (
        caplog.at_level(logging.ERROR, logger="anarchon"),
        pytest.raises(UnknownBackendError) as caught,
    ):
        resolve_backend(f"{scheme}://user:s3cr3t@host/0")
    error = caught.value
    assert error.code == "ANARCHON_UNKNOWN_BACKEND"
    assert isinstance(error.__cause__, ModuleNotFoundError)
    assert "a_driver_that_is_not_installed_anywhere" in str(error)
    assert module in str(error)
    logged = [r for r in caplog.records if r.name == "anarchon"]
    assert logged, "the import failure must be logged on the anarchon logger"
    assert scheme in logged[0].getMessage()
    assert all("s3cr3t" not in r.getMessage() for r in caplog.records)


def test_entry_point_that_is_not_a_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = uuid.uuid4().hex[:8]
    scheme, module = f"notabackend{token}", f"anarchon_nab_{token}"
    _install_plugin(tmp_path, scheme, f"{module}:Thing", module, "class Thing:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UnknownBackendError, match="not a Backend"):
        resolve_backend(f"{scheme}://x")


# redact_url ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://user:s3cret@host:6379/0", "redis://user:***@host:6379/0"),
        ("redis://:s3cret@host", "redis://:***@host"),
        ("rediss://host:6380", "rediss://host:6380"),
        ("redis://user@host", "redis://user@host"),
        (
            "postgresql://app:p%40ss@db/app?sslmode=require",
            "postgresql://app:***@db/app?sslmode=require",
        ),
        ("nats://u:s3cret@n1:4222,n2:4222", "nats://u:***@n1:4222,n2:4222"),
        ("redis://h/0?password=s3cret&prefix=a:b", "redis://h/0?password=***&prefix=a:b"),
        ("memory://", "memory://"),
        ("sqlite:////abs/path.db", "sqlite:////abs/path.db"),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected


@pytest.mark.parametrize(
    "url", ["redis://u:s3cret@[::1", "redis://u:s3cret@h/0#frag", "nats://u:s3:cr:et@h?token=t0k"]
)
def test_redact_url_never_shows_the_secret(url: str) -> None:
    shown = redact_url(url)
    assert "s3" not in shown
    assert "t0k" not in shown
    assert shown.startswith(url.split(":")[0] + "://u:***@")


# Malformed URLs carrying a password: the secret is hidden in every shape.
SECRET = "hunter2"
MALFORMED = [
    # (url, what redact_url shows)
    ("cron:hunter2@cache:6379/0", "cron:***@cache:6379/0"),  # scheme left out, or "//" missing
    ("redis:/u:hunter2@cache:6379/0", "redis:/u:***@cache:6379/0"),  # one slash
    ("redis:u:hunter2@cache", "redis:u:***@cache"),  # no slash
    ("redis:hunter2@cache", "redis:***@cache"),
    ("redis:///u:hunter2@cache/0", "redis:///u:***@cache/0"),  # three slashes
    ("u:hunter2@cache:6379", "u:***@cache:6379"),  # no scheme
    (":hunter2@cache", ":***@cache"),
    ("hunter2@cache", "***@cache"),
    ("redis://u:hun/ter2@cache/0", "redis://u:***@cache/0"),  # raw "/" in the password
    ("redis://u:hun?ter2@cache/0?db=1", "redis://u:***@cache/0?db=1"),  # raw "?"
    ("redis://u:hun#ter2@cache", "redis://u:***@cache"),  # raw "#"
    ("redis://u:hun@ter2@cache", "redis://u:***@cache"),  # raw "@"
    ("redis://u:hunter2", "redis://u:***"),  # "@host" left out: the "port" is the password
    ("redis://u:hunter2@", "redis://u:***@"),
    ("nats://hunter2@n1:4222", "nats://***@n1:4222"),  # a NATS token
    ("nats://u:p@n1:4222,u2:hunter2@n2:4222", "nats://u:***@n2:4222"),
    ("mystore://hunter2@host", "mystore://***@host"),  # unknown scheme: may be a token
    ("redis://cache/0?password=hunter2", "redis://cache/0?password=***"),
    ("redis:cache?Password=hunter2&db=1", "redis:cache?Password=***&db=1"),
    ("redis://cache/0?sslpassword=hunter2", "redis://cache/0?sslpassword=***"),
    # libpq key=value DSNs
    ("host=db password=hunter2 dbname=app", "host=db password=*** dbname=app"),
    ("host=db password = 'hun ter2' user=app", "host=db password = *** user=app"),
    ("password='hunter2", "password=***"),  # an unterminated quote
    ("host=db PASSWORD=hunter2", "host=db PASSWORD=***"),
]


@pytest.mark.parametrize(("url", "shown"), MALFORMED)
def test_redact_url_hides_the_password_of_malformed_urls(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    for piece in ("hunter2", "hun", "ter2"):
        assert piece not in redact_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:////tmp/a@b.db",
        "sqlite:///relative.db",
        "redis://user@host:6379/0",
        "postgresql://app@db/app?sslmode=require",
        "memory://",
    ],
)
def test_redact_url_leaves_urls_without_a_secret_alone(url: str) -> None:
    assert redact_url(url) == url


@pytest.mark.parametrize("url", [url for url, _ in MALFORMED])
def test_resolve_backend_errors_never_show_the_password(url: str) -> None:
    refused: InvalidConfigError | UnknownBackendError | None = None
    try:
        backend = resolve_backend(url)
    except (InvalidConfigError, UnknownBackendError) as error:
        refused = error
    if refused is None:  # a shape the backend accepts (redis-py reads "u:hun@ter2@cache")
        text = f"{backend!r} {backend}"
    else:
        assert refused.code in {"ANARCHON_INVALID_CONFIG", "ANARCHON_UNKNOWN_BACKEND"}
        causes = [refused, refused.__cause__, refused.__context__]
        text = " ".join(str(c) for c in causes if c is not None)
    assert "hunter2" not in text, text
    assert "ter2" not in text, text


def test_an_unparseable_url_error_hides_the_password() -> None:
    # urlsplit's own message quotes the netloc.
    url = "redis://u:hunter2@ca\uff03che:6379/0"  # a fullwidth "#" in the host
    with pytest.raises(InvalidConfigError) as caught:
        resolve_backend(url)
    assert "hunter2" not in str(caught.value)
    assert caught.value.__cause__ is None


def test_redact_text_hides_every_secret_of_a_url() -> None:
    url = "redis://admin:hunter2@cache:6379/0?token=t0ken"
    message = "AUTH failed for admin with hunter2 (token t0ken) at cache:6379"
    shown = redact_text(message, url)
    assert "hunter2" not in shown
    assert "t0ken" not in shown
    assert "admin" in shown
    assert "cache:6379" in shown
    assert redact_text("no secret here", "redis://cache/0") == "no secret here"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "cannot connect to postgresql://admin:hunter2@db:5432/app (timeout)",
            "cannot connect to postgresql://admin:***@db:5432/app (timeout)",
        ),
        (
            "two: redis://:a@h/0 and nats://tok3n@h:4222",
            "two: redis://:***@h/0 and nats://***@h:4222",
        ),
        ("dsn host=db password=hunter2 user=x", "dsn host=db password=*** user=x"),
        ("{'password': 'hunter2', 'user': 'bob'}", "{'password': '***', 'user': 'bob'}"),
        ('{"db_password": "s e c"}', '{"db_password": "***"}'),
        ("redis://h:6379/0?token=abc&db=1", "redis://h:6379/0?token=***&db=1"),
        (
            "plain error: x=1, see https://example.com/a?b=c",
            "plain error: x=1, see https://example.com/a?b=c",
        ),
    ],
)
def test_redact_secrets_hides_passwords_in_any_text(text: str, shown: str) -> None:
    assert redact_secrets(text) == shown


def test_redact_secrets_is_linear_on_long_words() -> None:
    # a match starts only where a word starts; 200,000 characters of one word are one pass
    word = "a" * 200_000
    assert redact_secrets(word) == word
    assert redact_secrets("x:" * 50_000) == "x:" * 50_000
