"""``build_history``: claim records + stored results → RunRecords, newest first."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from anarchon.backend.history import build_history
from anarchon.types import ClaimRecord, RunRecord, StoredResult

SLOT = 1_800_000_000_000


def test_claim_and_result_merge_into_one_record() -> None:
    claims = [ClaimRecord("job", SLOT, "t1", "web-1", at=SLOT + 7)]
    results = [StoredResult(SLOT, "t1", "web-1", "ok", SLOT + 10, SLOT + 45)]
    assert build_history("job", claims, results, 10) == [
        RunRecord(
            job="job",
            slot=SLOT,
            instance_id="web-1",
            status="ok",
            attempt=1,
            manual=False,
            started_at=SLOT + 10,
            finished_at=SLOT + 45,
            duration_ms=35,
        )
    ]


def test_claim_without_result_is_running_from_its_claim_time() -> None:
    (record,) = build_history("job", [ClaimRecord("job", SLOT, "t1", "web-2", SLOT + 3)], [], 10)
    assert record.status == "running"
    assert record.instance_id == "web-2"
    assert record.started_at == SLOT + 3
    assert record.finished_at is None
    assert record.duration_ms is None
    assert record.scheduled_at == datetime.fromtimestamp(SLOT / 1000, tz=timezone.utc)
    assert record.run_id == f"job:{SLOT}"


def test_result_without_claim_still_appears() -> None:
    skipped = StoredResult(SLOT, "t9", "web-3", "skipped", SLOT, SLOT, reason="overlap")
    (record,) = build_history("job", [], [skipped], 10)
    assert (record.status, record.reason, record.instance_id, record.attempt) == (
        "skipped",
        "overlap",
        "web-3",
        1,
    )


def test_newest_first_by_slot_then_attempt_and_limit() -> None:
    claims = [
        ClaimRecord("job", SLOT, "a1", "web-1", SLOT + 1, attempt=1),
        ClaimRecord("job", SLOT + 1000, "b1", "web-1", SLOT + 1001, attempt=1),
        ClaimRecord("job", SLOT, "a2", "web-2", SLOT + 500, attempt=2),
    ]
    results = [
        StoredResult(
            SLOT, "a1", "web-1", "interrupted", SLOT + 1, SLOT + 300, attempt=1, reason="lease_lost"
        ),
        StoredResult(SLOT, "a2", "web-2", "error", SLOT + 500, SLOT + 600, "boom", attempt=2),
    ]
    records = build_history("job", claims, results, 10)
    assert [(r.slot, r.attempt, r.status) for r in records] == [
        (SLOT + 1000, 1, "running"),
        (SLOT, 2, "error"),
        (SLOT, 1, "interrupted"),
    ]
    assert records[1].error == "boom"
    assert records[2].reason == "lease_lost"
    assert all(r.job == "job" for r in records)
    assert [r.slot for r in build_history("job", claims, results, 2)] == [SLOT + 1000, SLOT]
    assert build_history("job", claims, results, 0) == []
    assert build_history("job", claims, results, -5) == []


def test_final_status_wins_over_running_and_claims_are_not_duplicated() -> None:
    claims = [
        ClaimRecord("job", SLOT, "t1", "web-1", SLOT + 1),
        ClaimRecord("job", SLOT, "t1", "web-1", SLOT + 2),  # a claim recorded twice (retry)
    ]
    results = [
        StoredResult(SLOT, "t1", "web-1", "ok", SLOT + 1, SLOT + 20),
        StoredResult(SLOT, "t1", "web-1", "running", SLOT + 1, None),
    ]
    (record,) = build_history("job", claims, results, 10)
    assert record.status == "ok"


def test_manual_runs_of_one_slot_are_separate_records() -> None:
    claims = [
        ClaimRecord("job", SLOT, "m1", "web-1", SLOT, manual=True),
        ClaimRecord("job", SLOT, "m2", "web-2", SLOT + 5, manual=True),
    ]
    results = [StoredResult(SLOT, "m1", "web-1", "ok", SLOT, SLOT + 9, manual=True)]
    records = build_history("job", claims, results, 10)
    assert len(records) == 2
    assert all(r.manual for r in records)
    assert sorted((r.instance_id, r.status) for r in records) == [
        ("web-1", "ok"),
        ("web-2", "running"),
    ]


@dataclass(frozen=True)
class _Row:
    """A backend's own row type: only the attribute names matter."""

    slot: int
    token: str
    instance_id: str
    at: int


def test_any_objects_with_the_fields_are_accepted() -> None:
    (record,) = build_history("job", [_Row(SLOT, "t", "web-9", SLOT + 4)], [], 10)  # type: ignore[list-item]
    assert (record.instance_id, record.status, record.attempt, record.manual) == (
        "web-9",
        "running",
        1,
        False,
    )


def test_exported_from_the_package() -> None:
    import anarchon

    assert anarchon.build_history is build_history
