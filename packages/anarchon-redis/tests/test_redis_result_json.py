"""The results' JSON: the template encoder writes exactly what ``json.dumps`` would."""

from __future__ import annotations

import json

from anarchon.types import StoredResult
from anarchon_redis._runtime import encode_result
from hypothesis import given
from hypothesis import strategies as st

_TEXT = st.text(max_size=40)
_MS = st.none() | st.integers(min_value=-(2**63), max_value=2**63 - 1)


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
def test_encode_result_writes_what_json_dumps_writes(
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
    encoded = encode_result(result)
    assert encoded == _reference(result)
