"""Everything a backend author needs (docs/extending.md).

- the interface: :class:`Backend` (claims and history), :class:`RunStore`
  (leases) and :data:`STORE_FORMAT` (:mod:`anarchon.backend.base`);
- per-item fallbacks of the batch calls (:mod:`anarchon.backend.batching`);
- the lease rules as pure functions (:mod:`anarchon.backend.lease_model`);
- the input checks and the answer of the membership members
  (:mod:`anarchon.backend.membership`);
- how long and how many records a store keeps (:mod:`anarchon.backend.retention`)
  and the default history size (:data:`DEFAULT_HISTORY_SIZE`);
- results' JSON (:mod:`anarchon.backend.result_json`) and history merging
  (:mod:`anarchon.backend.history`);
- the lock of an idempotent ``init()`` (:class:`InitOnce`);
- discovery by URL scheme, and URLs without their passwords
  (:mod:`anarchon.backend.registry`);
- the in-process reference backend (:mod:`anarchon.backend.memory`).

The record types a backend exchanges with the scheduler are in :mod:`anarchon.types`.
"""

from __future__ import annotations

from anarchon.backend.base import STORE_FORMAT, Backend, RunStore
from anarchon.backend.batching import DEFAULT_FALLBACK_CONCURRENCY, job_of, per_item
from anarchon.backend.history import DEFAULT_HISTORY_SIZE, build_history
from anarchon.backend.init_once import InitOnce
from anarchon.backend.registry import (
    ENTRY_POINT_GROUP,
    ENV_VAR,
    installed_backends,
    redact_text,
    redact_url,
    resolve_backend,
)
from anarchon.backend.result_json import result_fields, result_json
from anarchon.backend.retention import (
    RETENTION_MARGIN_MS,
    StateRetention,
    history_over,
    history_to_keep,
    kept_runs,
    state_retention_ms,
    states_to_drop,
    ttl_cutoff,
)

__all__ = [
    "DEFAULT_FALLBACK_CONCURRENCY",
    "DEFAULT_HISTORY_SIZE",
    "ENTRY_POINT_GROUP",
    "ENV_VAR",
    "RETENTION_MARGIN_MS",
    "STORE_FORMAT",
    "Backend",
    "InitOnce",
    "RunStore",
    "StateRetention",
    "build_history",
    "history_over",
    "history_to_keep",
    "installed_backends",
    "job_of",
    "kept_runs",
    "per_item",
    "redact_text",
    "redact_url",
    "resolve_backend",
    "result_fields",
    "result_json",
    "state_retention_ms",
    "states_to_drop",
    "ttl_cutoff",
]
