"""Run history on the stream: results published, claims and results read back and merged.

Results go to ``<prefix><job>.results``. History reads a job's claims and
results subjects with a short-lived consumer (or every job's through one, for
many jobs) and merges them with :func:`anarchon.build_history`. A message
that is not such a record is skipped and reported once, by its subject.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from functools import partial
from typing import Any

import nats.errors
from anarchon.backend.foreign import skip_unreadable, stored_int
from anarchon.backend.history import build_history
from anarchon.backend.result_json import result_json
from anarchon.errors import BackendError, BackendUnavailableError
from anarchon.types import ClaimRecord, ResultWrite, RunRecord, StoredResult
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.errors import APIError

from anarchon_nats._connection import API, STORED_ACK, dumps
from anarchon_nats._errors import ERR_NOT_FOUND_MSG, UNREACHABLE, api_error
from anarchon_nats._pipeline import BATCH_CHUNK, Request
from anarchon_nats._store import Store

__all__ = ["History"]

log = logging.getLogger("anarchon.nats")

_HISTORY_BATCH = 1000
"""Messages asked for per pull of a history consumer."""


class History:
    """The results a backend writes and the history it reads, on the store's stream."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._connection = store.connection
        self._stream = store.stream.name

    # Results -------------------------------------------------------------------

    def _result_request(self, job: str, result: StoredResult) -> Request:
        subject = self._store.job_subjects(job)[1]
        return subject, result_json(result).encode(), None

    async def save_result(self, job: str, result: StoredResult) -> None:
        """Publish the result to ``<prefix><job>.results``."""
        nc = await self._store.client()
        subject, payload, _headers = self._result_request(job, result)
        await self._connection.publish(nc, subject, payload, "result")

    async def save_results(self, writes: Sequence[ResultWrite]) -> None:
        """Publish each result: chunks of publishes pipelined; the first error raised after its chunk."""
        if not writes:
            return
        connection = self._connection
        nc = await self._store.client()
        for start in range(0, len(writes), BATCH_CHUNK):
            chunk = writes[start : start + BATCH_CHUNK]
            requests = [self._result_request(w.job, w.result) for w in chunk]
            first: BaseException | None = None
            for msg in await connection.send(nc, requests, "result"):
                if msg is not None and STORED_ACK.fullmatch(msg.data):
                    continue
                try:
                    problem = api_error(connection.answer(msg, "result"))
                    if problem is not None:
                        raise connection.answer_error(problem, "result")
                except (BackendError, BackendUnavailableError) as error:
                    first = first or error
            if first is not None:
                raise first

    # Reading -------------------------------------------------------------------

    async def history(self, job: str, limit: int) -> list[RunRecord]:
        """``job``'s recent runs, newest first, waiting for the newest messages (a cluster)."""
        claims_subject, results_subject = self._store.job_subjects(job)
        nc = await self._store.client()
        with self._connection.driver_errors("history"):
            messages = await self._read_subjects(
                nc,
                f"{self._store.prefix}{job}.>",
                (claims_subject, results_subject, f"{claims_subject}.*"),
            )
        return self._history_of(job, messages, limit)

    async def history_many(self, names: Sequence[str], limit: int) -> dict[str, list[RunRecord]]:
        """The history of each of ``names`` (distinct), read through one consumer for all."""
        for name in names:
            self._store.job_subjects(name)  # checks the name
        nc = await self._store.client()
        with self._connection.driver_errors("history"):
            messages = await self._read_all_jobs(nc)
        prefix = self._store.prefix
        by_job: dict[str, list[tuple[str, bytes]]] = {name: [] for name in names}
        for subject, data in messages:
            # <prefix><job>.<...>: a job name is one token
            found = by_job.get(subject[len(prefix) :].partition(".")[0])
            if found is not None:
                found.append((subject, data))
        return {name: self._history_of(name, found, limit) for name, found in by_job.items()}

    def _history_of(
        self, job: str, messages: Sequence[tuple[str, bytes]], limit: int
    ) -> list[RunRecord]:
        """``job``'s history from the messages on its subjects (``<prefix><job>.>``, any order).

        A message on a subject anarchon does not write there (``<job>.x``,
        ``<job>.claims.x``) is skipped and reported once. Deeper subjects
        are left alone: a job named ``_fleet`` has the fleet's below its own.
        """
        base = len(self._store.job_subjects(job)[0]) - len("claims")  # <prefix><job>.
        claims: list[ClaimRecord] = []
        results: list[StoredResult] = []
        for subject, data in messages:
            tail = subject[base:]
            kind, _dot, rest = tail.partition(".")
            if kind == "claims" and (not rest or _SLOT_TOKEN.fullmatch(rest)):
                # <claims>, or a compare-and-set claim on <claims>.<slot>
                claim = skip_unreadable(subject, "a claim record", partial(_claim_of, job, data))
                if claim is not None:
                    claims.append(claim)
            elif tail == "results":
                result = skip_unreadable(subject, "a result record", partial(_result_of, data))
                if result is not None:
                    results.append(result)
            elif kind in ("claims", "results") or not rest:
                skip_unreadable(subject, "a claim or result record", partial(_not_ours, subject))
        cap = self._store.stream.history_cap(job)
        return build_history(job, claims, results, min(limit, cap))

    async def _read_subjects(
        self, nc: Client, filter_subject: str, subjects: Sequence[str]
    ) -> list[tuple[str, bytes]]:
        """Every stored message on ``filter_subject``, oldest first, with an ephemeral consumer.

        The newest sequence of each of ``subjects`` is asked of the stream leader
        first, and the consumer is read until it has delivered it: in a cluster
        the consumer may live on a replica that is a moment behind, and history
        must show the claims this instance has just made.
        """
        target = 0
        for subject in subjects:
            last = await self._last_sequence(nc, subject)
            target = max(target, last)
        if not target:
            return []
        out: list[tuple[str, bytes]] = []
        async with self._history_consumer(nc, filter_subject) as (consumer, _pending):
            await self._pull(nc, consumer, target, out)
        return out

    async def _read_all_jobs(self, nc: Client) -> list[tuple[str, bytes]]:
        """Every message under the prefix (each job's claims and results), through one consumer.

        Filtered on ``<prefix>>``: a wildcard per job token makes the server
        match each message against the stream's subject tree (slow with
        thousands of jobs); the caller keeps what it asked for.
        """
        out: list[tuple[str, bytes]] = []
        async with self._history_consumer(nc, f"{self._store.prefix}>") as (consumer, pending):
            if pending:
                await self._pull(nc, consumer, 0, out, count=pending)
        return out

    @contextlib.asynccontextmanager
    async def _history_consumer(
        self, nc: Client, filter_subject: str
    ) -> AsyncIterator[tuple[str, int]]:
        """A short-lived in-memory consumer on ``filter_subject``: (its name, messages pending)."""
        api = self._connection.api
        created = await api(
            nc,
            f"CONSUMER.CREATE.{self._stream}",
            {
                "stream_name": self._stream,
                "config": {
                    "deliver_policy": "all",
                    "ack_policy": "none",
                    "replay_policy": "instant",
                    "filter_subject": filter_subject,
                    "inactive_threshold": 30_000_000_000,
                    "mem_storage": True,
                    "num_replicas": 1,
                    "max_waiting": 1,
                },
            },
        )
        consumer = str(created["name"])
        try:
            yield consumer, int(created.get("num_pending") or 0)
        finally:
            try:
                await api(nc, f"CONSUMER.DELETE.{self._stream}.{consumer}")
            except (APIError, BackendUnavailableError) as error:  # it expires by itself
                log.debug("anarchon: deleting history consumer %s failed: %s", consumer, error)

    async def _last_sequence(self, nc: Client, subject: str) -> int:
        """The stream sequence of the newest message on ``subject`` (0: none), from the leader."""
        try:
            body = await self._connection.api(
                nc, f"STREAM.MSG.GET.{self._stream}", {"last_by_subj": subject}
            )
        except APIError as error:
            if error.err_code == ERR_NOT_FOUND_MSG or error.code == 404:
                return 0
            raise
        return int(body["message"].get("seq") or 0)

    async def _pull(
        self,
        nc: Client,
        consumer: str,
        target: int,
        out: list[tuple[str, bytes]],
        *,
        count: int | None = None,
    ) -> None:
        """Pull from ``consumer`` until the message with stream sequence ``target`` arrived.

        With ``count``: until ``count`` messages arrived instead.
        """
        unavailable = self._connection.unavailable
        timeout = self._connection.request_timeout
        inbox = nc.new_inbox()
        try:
            sub = await nc.subscribe(inbox, pending_msgs_limit=4 * _HISTORY_BATCH + 16)
        except UNREACHABLE as error:
            raise unavailable(error, "history") from error
        next_subject = f"{API}.CONSUMER.MSG.NEXT.{self._stream}.{consumer}"
        request = dumps({"batch": _HISTORY_BATCH, "no_wait": True})
        deadline = time.monotonic() + timeout
        seen = 0
        wanted = len(out) + count if count is not None else None

        def short() -> bool:
            return seen < target if wanted is None else len(out) < wanted

        try:
            while short():
                try:
                    await nc.publish(next_subject, request, reply=inbox)
                except UNREACHABLE as error:
                    raise unavailable(error, "history") from error
                got = 0
                while got < _HISTORY_BATCH:
                    try:
                        msg: Msg = await sub.next_msg(timeout=timeout)
                    except nats.errors.ConnectionClosedError as error:
                        if _being_cancelled():
                            raise asyncio.CancelledError from error
                        raise unavailable(error, "history") from error
                    except UNREACHABLE as error:
                        raise unavailable(error, "history") from error
                    headers = msg.headers or {}
                    status = headers.get("Status")
                    if status is not None and not msg.data:
                        if status == "100":  # idle heartbeat / flow control
                            continue
                        # 404/408: nothing more right now; 503: a just-created consumer on
                        # a clustered stream has no leader yet. Pull again until the deadline.
                        if status in ("404", "408", "503"):
                            break
                        raise APIError(code=int(status), description=headers.get("Description", ""))
                    out.append((msg.subject, msg.data))
                    got += 1
                    seen = max(seen, msg.metadata.sequence.stream)
                if short() and got < _HISTORY_BATCH:
                    # The replica holding the consumer has not stored the newest
                    # messages yet (a cluster): wait a moment and pull again.
                    if time.monotonic() > deadline:
                        log.debug(
                            "anarchon: history of %s read up to seq %d of %d",
                            consumer,
                            seen,
                            target,
                        )
                        return
                    await asyncio.sleep(0.01)
        finally:
            try:
                await sub.unsubscribe()
            except Exception as error:  # pragma: no cover - connection already gone
                log.debug("anarchon: unsubscribe failed: %r", error)


_SLOT_TOKEN = re.compile(r"[0-9]+")
"""The last token of a compare-and-set claim's subject, ``<claims>.<slot>``."""


def _not_ours(subject: str) -> None:
    raise ValueError(f"anarchon writes no message on {subject!r}")


def _being_cancelled() -> bool:
    """True when the current task has been asked to cancel (Python 3.11+; else False).

    nats-py's ``Subscription.next_msg`` raises ``ConnectionClosedError`` in place
    of the ``CancelledError`` it receives once the connection is closed (the
    CLI closes its backend, then ``asyncio.run`` cancels the reads still
    running). A cancelled task must end cancelled: one that ends with an
    error instead is an error nobody awaits ("Task exception was never
    retrieved").
    """
    task = asyncio.current_task()
    cancelling: Callable[[], int] | None = getattr(task, "cancelling", None)
    return cancelling is not None and cancelling() > 0


def _opt_int(value: Any) -> int | None:
    return None if value is None else stored_int(value)


def _claim_of(job: str, data: bytes) -> ClaimRecord:
    return _claim(job, json.loads(data))


def _result_of(data: bytes) -> StoredResult:
    return _result(json.loads(data))


def _claim(job: str, row: Any) -> ClaimRecord:
    return ClaimRecord(
        job=job,
        slot=stored_int(row["slot"]),
        token=str(row["token"]),
        instance_id=str(row["instance_id"]),
        at=stored_int(row["at"]),
        manual=bool(row.get("manual", False)),
    )


def _result(row: Any) -> StoredResult:
    return StoredResult(
        slot=stored_int(row["slot"]),
        token=str(row["token"]),
        instance_id=str(row["instance_id"]),
        status=str(row["status"]),
        started_at=_opt_int(row.get("started_at")),
        finished_at=_opt_int(row.get("finished_at")),
        error=None if row.get("error") is None else str(row["error"]),
        attempt=stored_int(row.get("attempt") or 1),
        manual=bool(row.get("manual", False)),
        reason=None if row.get("reason") is None else str(row["reason"]),
    )
