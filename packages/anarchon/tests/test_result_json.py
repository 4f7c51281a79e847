"""The results' JSON (anarchon.backend.result_json): the Rust core writes exactly what ``json.dumps`` would."""

from __future__ import annotations

import json

from anarchon import _core
from anarchon.backend.result_json import result_json
from anarchon.types import StoredResult
from hypothesis import given
from hypothesis import strategies as st

_TEXT = st.text(max_size=40)
_ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=40)
"""Lone surrogates too (they take the json fallback)."""
_MS = st.none() | st.integers(min_value=-(2**63), max_value=2**63 - 1)
_BIG = st.integers(min_value=-(2**70), max_value=2**70)


def _reference(result: StoredResult) -> str:
    return json.dumps(
        {
            "slot": result.slot,
            "token": result.token,
            "instance_id": result.instance_id,
            "status": result.status,
            "started_at": result.started_at,
            "finished_at": result.finished_at,
            "error": result.error,
            "attempt": result.attempt,
            "manual": result.manual,
            "reason": result.reason,
        },
        separators=(",", ":"),
        sort_keys=True,
    )


@given(
    slot=st.integers(min_value=-(2**63), max_value=2**63 - 1),
    token=_TEXT,
    instance=_TEXT,
    status=st.sampled_from(["ok", "error", "timeout", "cancelled", "skipped"]) | _TEXT,
    started=_MS,
    finished=_MS,
    error=st.none() | _TEXT,
    attempt=st.integers(min_value=0, max_value=1000),
    manual=st.booleans(),
    reason=st.none() | st.sampled_from(["overlap", "paused"]) | _TEXT,
)
def test_result_json_writes_what_json_dumps_writes(
    slot: int,
    token: str,
    instance: str,
    status: str,
    started: int | None,
    finished: int | None,
    error: str | None,
    attempt: int,
    manual: bool,
    reason: str | None,
) -> None:
    result = StoredResult(
        slot, token, instance, status, started, finished, error, attempt, manual, reason=reason
    )
    assert _core.result_json(result) is not None  # the Rust path, not the fallback
    assert result_json(result) == _reference(result)


@given(
    slot=_BIG,
    token=_ANY_TEXT,
    error=st.none() | _ANY_TEXT,
    started=st.none() | _BIG,
)
def test_what_the_core_does_not_take_goes_through_json(
    slot: int, token: str, error: str | None, started: int | None
) -> None:
    result = StoredResult(slot, token, "host:1", "error", started, None, error, 2, True, None)
    assert result_json(result) == _reference(result)


def test_a_lone_surrogate_and_a_big_int_take_the_fallback() -> None:
    surrogate = StoredResult(1, "t\ud800", "i", "ok")
    big = StoredResult(2**64, "t", "i", "ok")
    assert _core.result_json(surrogate) is None
    assert _core.result_json(big) is None
    assert result_json(surrogate) == _reference(surrogate)
    assert result_json(big) == _reference(big)
