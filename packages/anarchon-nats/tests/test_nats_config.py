"""Settings of ``NatsBackend`` that need no server: URLs, names, job checks, stream plans."""

from __future__ import annotations

import ssl

import pytest
from anarchon import Scheduler
from anarchon.backend.registry import installed_backends, resolve_backend
from anarchon.errors import (
    AnarchonError,
    DedupeWindowError,
    InvalidConfigError,
    InvalidJobError,
    UnsupportedError,
)
from anarchon.types import JobLimits
from anarchon_nats import NatsBackend
from anarchon_nats._config import claims_needed, covers, parse_url, plan_stream_update


def _limits(job: str = "job", **overrides: object) -> JobLimits:
    values: dict[str, object] = {
        "job": job,
        "period_ms": 60_000,
        "jitter_ms": 2_000,
        "max_late_ms": 60_000,
        "history_size": 1000,
    }
    values.update(overrides)
    return JobLimits(**values)  # type: ignore[arg-type]


async def _noop(_ctx: object) -> None:
    return None


# URLs and the entry point -----------------------------------------------------


def test_entry_point_is_registered() -> None:
    rows = {scheme: (target, dist) for scheme, target, dist, _v in installed_backends()}
    assert rows["nats"] == ("anarchon_nats:NatsBackend", "anarchon-nats")


def test_url_with_credentials_and_backend_options() -> None:
    backend = resolve_backend("nats://user:s3cret@n1:4222?stream=BILLING&replicas=3")
    assert isinstance(backend, NatsBackend)
    assert backend.servers == ["nats://user:s3cret@n1:4222"]
    assert backend.stream == "BILLING"
    assert backend.replicas == 3
    assert backend.prefix == "cron."
    assert backend.duplicate_window_ms == 300_000
    assert backend.dedupe_window_ms == 300_000
    assert backend.history_size == 1000
    assert "s3cret" not in backend.shown
    assert "s3cret" not in repr(backend)
    assert backend.shown == "nats://user:***@n1:4222"


def test_url_with_several_hosts_and_all_options() -> None:
    backend = NatsBackend.from_url(
        "nats://u:p@a:4222,b:4223?prefix=billing.cron.&duplicate_window_ms=600000"
        "&history_size=50&request_timeout=1.5&name=web&connect_timeout=3"
        "&max_reconnect_attempts=5&dont_randomize=true&creds=/etc/nats/app.creds"
    )
    assert backend.servers == ["nats://u:p@a:4222", "nats://u:p@b:4223"]
    assert backend.prefix == "billing.cron."
    assert backend.duplicate_window_ms == 600_000
    assert backend.history_size == 50
    assert backend.request_timeout == 1.5
    assert backend.connect_options == {
        "name": "web",
        "connect_timeout": 3.0,
        "max_reconnect_attempts": 5,
        "dont_randomize": True,
        "user_credentials": "/etc/nats/app.creds",
    }


def test_url_window_accepts_a_duration_and_keywords_win() -> None:
    backend = NatsBackend.from_url("nats://h?duplicate_window_ms=10m", history_size=7)
    assert backend.duplicate_window_ms == 600_000
    assert backend.history_size == 7


def test_url_tls_files_build_an_ssl_context() -> None:
    servers, kwargs = parse_url(
        "tls://h:4222?tls_ca_file=" + ssl.get_default_verify_paths().openssl_cafile, {}
    )
    assert servers == ["tls://h:4222"]
    assert isinstance(kwargs["tls"], ssl.SSLContext)


def test_url_without_host_is_localhost() -> None:
    assert NatsBackend.from_url("nats://?stream=X").servers == ["nats://localhost:4222"]


@pytest.mark.parametrize(
    "url",
    [
        "nats://h:4222?strem=typo",
        "nats://h:4222?sslmode=require",
        "nats://user:hunter2@h:4222?bogus=1",
        "nats://h:4222?replicas=three",
        "nats://h:4222?history_size=",
        "nats://h:4222?duplicate_window_ms=5x",
        "nats://h:4222?dont_randomize=maybe",
        "nats://h:4222/path",
        "nats://h:4222?stream=A&stream=B",
        "nats://a:1,,b:2",
        "redis://h:6379",
    ],
)
def test_bad_urls_are_invalid_config(url: str) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        NatsBackend.from_url(url)
    assert caught.value.code == "ANARCHON_INVALID_CONFIG"
    assert "hunter2" not in str(caught.value)


def test_unknown_option_through_the_registry_is_invalid_config() -> None:
    with pytest.raises(InvalidConfigError, match="unknown option"):
        resolve_backend("nats://h:4222?window_ms=1000")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"stream": "a.b"},
        {"stream": "has space"},
        {"stream": ""},
        {"prefix": "cron"},
        {"prefix": "cron.*."},
        {"prefix": "."},
        {"prefix": "a..b."},
        {"duplicate_window_ms": 50},
        {"duplicate_window_ms": 1.5},
        {"history_size": 0},
        {"replicas": 0},
        {"replicas": 7},
        {"request_timeout": 0},
        {"servers": []},
    ],
)
def test_bad_settings_are_invalid_config(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidConfigError):
        NatsBackend(**kwargs)  # type: ignore[arg-type]


def test_connection_excludes_servers_and_connect_options() -> None:
    fake = object()
    with pytest.raises(InvalidConfigError, match="not both"):
        NatsBackend("nats://other:4222", connection=fake)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigError, match="already made"):
        NatsBackend(connection=fake, token="t")  # type: ignore[arg-type]


# Job checks -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a.b", "a*", "a>", "a b", "ünï", "a/b", "x" * 201, ""])
def test_job_names_must_be_subject_tokens(name: str) -> None:
    with pytest.raises(InvalidJobError) as caught:
        NatsBackend().check_job(_limits(name))
    assert caught.value.code == "ANARCHON_INVALID_JOB"


def test_normal_job_is_accepted() -> None:
    NatsBackend().check_job(_limits("Nightly_report-2"))


def test_history_ttl_is_unsupported() -> None:
    with pytest.raises(UnsupportedError) as caught:
        NatsBackend().check_job(_limits(history_ttl_ms=3_600_000))
    assert caught.value.code == "ANARCHON_UNSUPPORTED"


@pytest.mark.parametrize("option", [{"overlap": False}, {"max_attempts": 3}, {"catch_up_ms": 0}])
def test_lease_options_are_unsupported_even_at_their_defaults(option: dict[str, object]) -> None:
    with pytest.raises(UnsupportedError, match="need leases"):
        NatsBackend().check_job(_limits("job", **option))


def test_jitter_plus_max_late_must_be_below_the_window() -> None:
    backend = NatsBackend(duplicate_window_ms=62_000)
    with pytest.raises(DedupeWindowError) as caught:
        backend.check_job(_limits(jitter_ms=2_000, max_late_ms=60_000))
    assert caught.value.code == "ANARCHON_DEDUPE_WINDOW"
    backend.check_job(_limits(jitter_ms=1_999, max_late_ms=60_000))


def test_history_size_above_the_stream_limit_is_refused() -> None:
    backend = NatsBackend(history_size=100)
    backend.check_job(_limits(history_size=100))
    with pytest.raises(UnsupportedError, match="history_size=101") as caught:
        backend.check_job(_limits(history_size=101))
    assert caught.value.code == "ANARCHON_UNSUPPORTED"
    # The job option's default is not a request: such a job gets the stream's limit.
    backend.check_job(_limits(history_size=1000))
    with pytest.raises(UnsupportedError):
        NatsBackend(history_size=2000).check_job(_limits(history_size=2001))


def test_fast_jobs_raise_the_per_subject_limit() -> None:
    backend = NatsBackend(history_size=10, duplicate_window_ms=60_000)
    assert backend.per_subject_limit() == 10
    backend.check_job(_limits("slow", period_ms=3_600_000, max_late_ms=50_000))
    assert backend.per_subject_limit() == 10 + 2  # one window holds 2 claims: 2+0+10 > 10
    backend.check_job(_limits("fast", period_ms=200, jitter_ms=50, max_late_ms=1_000))
    assert backend.per_subject_limit() == claims_needed(60_000, 200) == 301 + 30 + 10


def test_scheduler_refuses_what_nats_cannot_do() -> None:
    scheduler = Scheduler(NatsBackend())
    with pytest.raises(InvalidJobError):
        scheduler.every("billing.daily", "1h", _noop)
    with pytest.raises(UnsupportedError):
        scheduler.every("ttl", "1h", _noop, history_ttl="1d")
    with pytest.raises(UnsupportedError):
        scheduler.every("overlap", "1h", _noop, overlap=False)
    with pytest.raises(UnsupportedError):
        scheduler.every("catch", "1h", _noop, catch_up="1h")
    with pytest.raises(DedupeWindowError):
        scheduler.every("late", "1h", _noop, max_late="5m")
    with pytest.raises(UnsupportedError):
        Scheduler(NatsBackend(), lease="10s")
    scheduler.every("fine", "1h", _noop)
    assert list(scheduler.jobs) == ["fine"]


def test_errors_are_anarchon_errors() -> None:
    with pytest.raises(AnarchonError):
        NatsBackend(stream="a.b")


# Pure helpers -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "subject", "expected"),
    [
        ("cron.>", "cron.a.claims", True),
        ("cron.>", "cron.>", True),
        ("cron.>", "cron", False),
        ("cron.*.claims", "cron.a.claims", True),
        ("cron.*.claims", "cron.*.claims", True),
        ("cron.*", "cron.>", False),
        (">", "cron.>", True),
        ("cron.a.>", "cron.>", False),
        ("other.>", "cron.>", False),
        ("cron.a", "cron.a", True),
    ],
)
def test_covers(pattern: str, subject: str, expected: bool) -> None:
    assert covers(pattern, subject) is expected


def _existing(**overrides: object) -> dict[str, object]:
    config: dict[str, object] = {
        "name": "CRON",
        "subjects": ["cron.>"],
        "retention": "limits",
        "storage": "file",
        "max_age": 0,
        "max_msgs_per_subject": 1000,
        "duplicate_window": 300_000 * 1_000_000,
        "num_replicas": 1,
        "description": "theirs",
    }
    config.update(overrides)
    return config


def test_plan_no_change() -> None:
    plan = plan_stream_update(
        _existing(), prefix="cron.", window_ms=300_000, per_subject=1000, replicas=None
    )
    assert plan.changes == []


def test_plan_each_rule() -> None:
    plan = plan_stream_update(
        _existing(
            duplicate_window=120 * 10**9,
            max_msgs_per_subject=5,
            subjects=["other.>", "cron.a.>"],
            num_replicas=3,
        ),
        prefix="cron.",
        window_ms=300_000,
        per_subject=1000,
        replicas=None,
    )
    assert plan.config["duplicate_window"] == 300 * 10**9
    assert plan.config["max_msgs_per_subject"] == 1000
    assert plan.config["subjects"] == ["other.>", "cron.>"]
    assert plan.config["num_replicas"] == 3, "replicas are not touched when not given"
    assert plan.config["description"] == "theirs"
    assert len(plan.changes) == 3
    again = plan_stream_update(
        plan.config, prefix="cron.", window_ms=300_000, per_subject=1000, replicas=1
    )
    assert again.changes == ["num_replicas 3 -> 1"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"retention": "workqueue"}, "retention"),
        ({"retention": "interest"}, "retention"),
        ({"max_age": 60 * 10**9}, "max_age"),
        ({"mirror": {"name": "X"}}, "mirror"),
        ({"sealed": True}, "sealed"),
    ],
)
def test_plan_refuses_unsafe_streams(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        plan_stream_update(
            _existing(**overrides),
            prefix="cron.",
            window_ms=300_000,
            per_subject=1000,
            replicas=None,
        )
