"""Which nats-py errors are transient, and JetStream error answers as nats-py's types.

Transient (retried with backoff by the scheduler): the connection closed, lost
or reconnecting, timeouts, "no responders" (a JetStream with no leader yet:
an election, a restart) and JetStream's 503 answers. Everything else reaches
the user (docs/backends/nats.md, "Errors").
"""

from __future__ import annotations

import asyncio
from typing import Any

import nats.errors
from anarchon.errors import AnarchonError, BackendUnavailableError
from nats.js.errors import (
    APIError,
    BadRequestError,
    NotFoundError,
    ServerError,
    ServiceUnavailableError,
)

__all__ = [
    "ERR_DUPLICATE_IN_PROCESS",
    "ERR_LAST_SEQ_NOT_READY",
    "ERR_NOT_FOUND_MSG",
    "ERR_STREAM_NAME_IN_USE",
    "ERR_STREAM_NOT_FOUND",
    "ERR_WRONG_LAST_SEQUENCE",
    "ERR_WRONG_LAST_SEQUENCE_CONSTANT",
    "UNREACHABLE",
    "api_error",
    "is_transient_error",
]

# JetStream error codes (nats-server errors.json).
ERR_NOT_FOUND_MSG = 10037
ERR_STREAM_NAME_IN_USE = 10058
ERR_STREAM_NOT_FOUND = 10059
ERR_WRONG_LAST_SEQUENCE = 10071
ERR_DUPLICATE_IN_PROCESS = 10158
ERR_LAST_SEQ_NOT_READY = 10163
"""503 "expected last sequence per subject temporarily unavailable" (2.11+): ask again."""
ERR_WRONG_LAST_SEQUENCE_CONSTANT = 10164
""""wrong last sequence" without the sequence (2.11+, a clustered stream)."""

UNREACHABLE: tuple[type[BaseException], ...] = (
    nats.errors.TimeoutError,
    nats.errors.NoRespondersError,
    nats.errors.ConnectionClosedError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.ConnectionDrainingError,
    nats.errors.StaleConnectionError,
    nats.errors.OutboundBufferLimitError,
    nats.errors.FlushTimeoutError,
    nats.errors.NoServersError,
    asyncio.TimeoutError,
    OSError,
)
"""Driver exceptions that mean "the server could not be reached or did not answer"."""

_ERROR_CLASSES: dict[int, type[APIError]] = {
    503: ServiceUnavailableError,
    500: ServerError,
    404: NotFoundError,
    400: BadRequestError,
}


def api_error(body: dict[str, Any]) -> APIError | None:
    """The error a JetStream answer carries, as nats-py's own ``APIError`` type, or None."""
    error = body.get("error")
    if not error:
        return None
    code = int(error.get("code") or 0)
    cls = _ERROR_CLASSES.get(code, APIError)
    return cls(
        code=code,
        description=str(error.get("description") or ""),
        err_code=int(error.get("err_code") or 0),
    )


def is_transient_error(error: BaseException) -> bool:
    """True for errors that may pass when the same call is retried.

    ``BackendUnavailableError`` (what the backend raises for all of these),
    nats-py's connection and timeout errors, and JetStream 503 answers
    (no leader, a cluster electing one, JetStream restarting). Other anarchon
    errors and other JetStream answers are not transient.
    """
    if isinstance(error, BackendUnavailableError):
        return True
    if isinstance(error, AnarchonError):
        return False
    if isinstance(error, APIError):
        return error.code == 503
    return isinstance(error, UNREACHABLE)
