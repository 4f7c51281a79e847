"""Claims: who won each ``(job, slot)``, by de-duplicated publish or by compare-and-set.

``fast`` (the default): a claim publishes the claim record to
``<prefix><job>.claims`` with the header ``Nats-Msg-Id: <job>:<slot>``;
JetStream stores only the first message with an id inside the duplicate
window.

``replicated``: a claim publishes the record to its own subject,
``<prefix><job>.claims.<slot>``, with ``Nats-Expected-Last-Subject-Sequence: 0``
(and the same message id): the stream stores it only while the subject is
empty, so the first writer wins for as long as the message is kept, with no
window and no clock. A claim whose acknowledgement does not arrive is settled
by reading the subject's last message from the stream leader.

:class:`Claims` publishes them in pipelined chunks, reads the verdicts, and
remembers the claims it stored and the publishes it got no answer to, so that
a retried claim (same token) is still recognised as the winner's.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Sequence
from typing import Any

from anarchon.errors import BackendError, BackendUnavailableError, ForeignDataError
from anarchon.types import ClaimInput
from nats.aio.client import Client

from anarchon_nats._connection import API, STORED_ACK, Stored, dumps, stored
from anarchon_nats._errors import (
    ERR_DUPLICATE_IN_PROCESS,
    ERR_LAST_SEQ_NOT_READY,
    ERR_NOT_FOUND_MSG,
    ERR_WRONG_LAST_SEQUENCE,
    ERR_WRONG_LAST_SEQUENCE_CONSTANT,
    api_error,
)
from anarchon_nats._pipeline import BATCH_CHUNK, Request
from anarchon_nats._store import Store

__all__ = ["MEMORY", "Claims", "wall_ms"]

log = logging.getLogger("anarchon.nats")

MEMORY = 65_536
"""Claims a backend remembers (its own stored claims, and publishes it got no answer to)."""
_MSG_ID = "Nats-Msg-Id"
_EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
_WRONG_LAST = re.compile(r"wrong last sequence: ([0-9]+)")
_TAKEN = 2
"""Verdict kind: the slot's subject holds a message (a compare-and-set claim refused)."""
_TRIM_EVERY = 64
"""Compare-and-set wins of a job after which its old slot subjects are purged."""


def wall_ms() -> int:
    """This machine's clock in ms (the ``at`` of a claim record)."""
    return time.time_ns() // 1_000_000


class Claims:
    """The claims of one backend and its memory of them.

    ``won`` maps sequence -> token of claims this backend stored (the newest
    :data:`MEMORY`); ``unsure`` maps message id -> token of claim publishes
    that got no answer (yet).
    """

    def __init__(self, store: Store, *, cas: bool = False) -> None:
        self._store = store
        self._connection = store.connection
        self._stream = store.stream.name
        self._instances: dict[str, str] = {}
        self.won: dict[int, str] = {}
        self.unsure: dict[str, str] = {}
        self.cas = cas
        """Claim by compare-and-set on ``<prefix><job>.claims.<slot>`` (``replicated``)."""
        self._wins_since_trim: dict[str, int] = {}

    def _instance_json(self, instance_id: str) -> str:
        """``instance_id`` as a JSON string (kept for the few ids a backend sees)."""
        text = self._instances.get(instance_id)
        if text is None:
            text = json.dumps(instance_id)
            if len(self._instances) < 64:
                self._instances[instance_id] = text
        return text

    def request(self, input: ClaimInput, at: int | None = None) -> Request:
        """``(subject, payload, headers)`` of a scheduled claim (``at``: default now)."""
        job = input.job
        store = self._store
        subject = store.job_subjects(job)[0]
        instance = self._instance_json(input.instance_id)
        token = input.token
        token = f'"{token}"' if token.isalnum() else json.dumps(token)
        # The same JSON as dumps() of the record, written directly (the hot path).
        payload = (
            f'{{"slot":{int(input.slot)},"token":{token},"instance_id":{instance},'
            f'"at":{wall_ms() if at is None else at},"manual":false}}'
        ).encode()
        msg_id = f"{store.id_prefix}{job}:{input.slot}"
        if self.cas:
            # The message id stays: within the window it also stops a claim of the
            # same slot by an instance still claiming the ``fast`` way.
            return (
                f"{subject}.{int(input.slot)}",
                payload,
                {_MSG_ID: msg_id, _EXPECTED_LAST_SUBJECT_SEQ: "0"},
            )
        return subject, payload, {_MSG_ID: msg_id}

    def _verdict(self, ack: dict[str, Any]) -> tuple[int, int]:
        """A claim's acknowledgement: ``(0, seq)`` stored (won), ``(1, seq)`` a duplicate
        of the claim stored at ``seq``, ``(2, seq)`` the slot's subject holds the
        message at ``seq`` (0: not named), ``(-1, 0)`` ask again."""
        problem = api_error(ack)
        if problem is None:
            seq = int(ack.get("seq") or 0)
            if seq and not ack.get("duplicate"):
                return 0, seq  # the stored original: this claim won
            # seq 0 without an error: a 2.9 cluster answering a duplicate of a
            # claim still in flight. Ask again.
            return (1, seq) if seq else (-1, 0)
        if problem.err_code in (ERR_DUPLICATE_IN_PROCESS, ERR_LAST_SEQ_NOT_READY):
            return -1, 0  # a clustered stream has the first claim with this id in flight
        if self.cas and problem.err_code == ERR_WRONG_LAST_SEQUENCE:
            found = _WRONG_LAST.search(problem.description or "")
            return _TAKEN, int(found.group(1)) if found else 0
        if self.cas and problem.err_code == ERR_WRONG_LAST_SEQUENCE_CONSTANT:
            return _TAKEN, 0
        raise self._connection.answer_error(problem, "claim")

    def _remember(self, seq: int, token: str) -> None:
        won = self.won
        won[seq] = token
        if len(won) > MEMORY:
            del won[next(iter(won))]

    def _owner_check(self, subject: str, seq: int, message: Stored, token: str) -> bool:
        """Whether the stored claim at ``seq`` carries ``token``; foreign data raises.

        A compare-and-set claim (``<claims>.<slot>``) may find its message id
        held by a ``fast`` claim of the same slot on ``<claims>``.
        """
        if message.subject != subject and not (
            self.cas and message.subject == subject.rpartition(".")[0]
        ):
            raise ForeignDataError(
                f"stream {self._stream!r}: the message id of a claim on {subject!r} is held by"
                f" sequence {seq} on {message.subject!r}, which anarchon did not write"
                " (another publisher uses anarchon's message ids)",
                key=message.subject,
            )
        try:
            row = json.loads(message.data)
            stored_token = row["token"] if isinstance(row, dict) else None
        except (ValueError, KeyError):
            stored_token = None
        if not isinstance(stored_token, str):
            raise ForeignDataError(
                f"stream {self._stream!r}: sequence {seq} on {subject!r} is not an anarchon"
                f" claim record: {message.data[:80]!r}",
                key=subject,
            )
        return stored_token == token

    def _claim_gone(self, seq: int) -> bool:
        # The claim is remembered but its message is gone (deleted or purged by
        # hand): we cannot prove it is ours, and a false answer never runs a slot twice.
        log.warning(
            "anarchon: claim at %s seq %d is remembered but its message is gone; not running it",
            self._stream,
            seq,
        )
        return False

    async def claim_many(self, inputs: Sequence[ClaimInput]) -> list[bool]:
        """Each claim's verdict, in order: chunks of :data:`BATCH_CHUNK` publishes pipelined."""
        if not inputs:
            return []
        nc = await self._store.client()
        answers: list[bool] = []
        for start in range(0, len(inputs), BATCH_CHUNK):
            answers.extend(await self._claim_chunk(nc, inputs[start : start + BATCH_CHUNK]))
        return answers

    async def _claim_chunk(self, nc: Client, chunk: Sequence[ClaimInput]) -> list[bool]:
        at = wall_ms()
        requests = [self.request(input, at) for input in chunk]
        ids = [headers[_MSG_ID] for _s, _p, headers in requests if headers is not None]
        unsure = self.unsure
        # A publish of ours this backend never heard back about may be the stored claim.
        maybe_ours = [msg_id in unsure for msg_id in ids]
        for msg_id, input in zip(ids, chunk, strict=True):
            unsure[msg_id] = input.token
        while len(unsure) > MEMORY:
            del unsure[next(iter(unsure))]
        connection = self._connection
        won = [False] * len(chunk)
        errors: list[BaseException | None] = [None] * len(chunk)
        answered = [False] * len(chunk)
        pending = list(range(len(chunk)))
        delay = 0.005
        deadline = 0.0
        try:
            while pending:
                replies = await connection.send(nc, [requests[i] for i in pending], "claim")
                again: list[int] = []
                reads: list[tuple[int, int]] = []
                checks: list[int] = []
                for i, msg in zip(pending, replies, strict=True):
                    if msg is None:
                        maybe_ours[i] = True
                        if self.cas:
                            checks.append(i)  # settled by the slot subject's last message
                        else:
                            errors[i] = connection.no_answer("claim")
                        continue
                    fast = STORED_ACK.fullmatch(msg.data)
                    try:
                        kind, seq = (
                            (0, int(fast.group(1)))
                            if fast is not None
                            else self._verdict(connection.answer(msg, "claim"))
                        )
                    except (BackendError, BackendUnavailableError) as error:
                        errors[i] = error
                        answered[i] = not isinstance(error, BackendUnavailableError)
                        continue
                    if kind < 0:
                        again.append(i)
                        continue
                    answered[i] = True
                    token = chunk[i].token
                    if kind == 0:
                        won[i] = True
                        self._remember(seq, token)
                        continue
                    owner = self.won.get(seq) if seq else None
                    if owner is not None:
                        won[i] = owner == token
                    elif maybe_ours[i]:
                        if seq:
                            reads.append((i, seq))
                        else:
                            checks.append(i)
                    # else: a claim this backend never published: another instance's.
                if reads:
                    owned = await self._owns_many(
                        nc, [(requests[i][0], seq, chunk[i].token) for i, seq in reads]
                    )
                    for (i, seq), answer in zip(reads, owned, strict=True):
                        if isinstance(answer, BaseException):
                            errors[i] = answer
                            answered[i] = isinstance(answer, ForeignDataError)
                        else:
                            won[i] = answer
                            if answer:
                                self._remember(seq, chunk[i].token)
                if checks:
                    settled = await self._last_of_many(
                        nc, [(requests[i][0], chunk[i].token) for i in checks]
                    )
                    for i, verdict in zip(checks, settled, strict=True):
                        if isinstance(verdict, BaseException):
                            errors[i] = verdict
                            answered[i] = isinstance(verdict, ForeignDataError)
                        elif verdict is None:
                            again.append(i)  # nothing stored: claim again (still first-wins)
                        else:
                            answered[i] = True
                            won[i] = verdict[0]
                            if verdict[0]:
                                self._remember(verdict[1], chunk[i].token)
                if again:
                    now = time.monotonic()
                    if not deadline:
                        deadline = now + connection.request_timeout
                    elif now > deadline:
                        for i in again:
                            errors[i] = BackendUnavailableError(
                                f"claim of {chunk[i].job}:{chunk[i].slot} is still in process"
                                f" on {connection.shown}; retry"
                            )
                        break
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 0.1)
                pending = again
        finally:
            for i, msg_id in enumerate(ids):
                if answered[i] and unsure.get(msg_id) == chunk[i].token:
                    del unsure[msg_id]
        for failure in errors:
            if failure is not None:
                raise failure
        if self.cas:
            await self._trim(nc, [chunk[i].job for i in range(len(chunk)) if won[i]])
        return won

    async def _last_of_many(
        self, nc: Client, items: Sequence[tuple[str, str]]
    ) -> list[tuple[bool, int] | BaseException | None]:
        """Settle compare-and-set claims whose answer was lost, from the stream leader.

        For each ``(slot subject, token)``: ``(ours, seq)`` from the subject's
        last message, None when the subject is empty (the publish was not
        stored: claiming again is safe), or the error of a read that failed:
        the claim is then unconfirmed and is not run (the scheduler retries it
        with the same token until its deadline).
        """
        connection = self._connection
        get = f"{API}.STREAM.MSG.GET.{self._stream}"
        replies = await connection.send(
            nc, [(get, dumps({"last_by_subj": subject}), None) for subject, _t in items], "claim"
        )
        answers: list[tuple[bool, int] | BaseException | None] = []
        for (subject, token), msg in zip(items, replies, strict=True):
            try:
                body = connection.answer(msg, "claim check")
                problem = api_error(body)
                if problem is not None:
                    if problem.err_code == ERR_NOT_FOUND_MSG or problem.code == 404:
                        answers.append(None)
                        continue
                    raise connection.answer_error(problem, "claim check")
                seq = int(body["message"].get("seq") or 0)
                answers.append((self._owner_check(subject, seq, stored(body), token), seq))
            except (BackendError, BackendUnavailableError, ForeignDataError) as error:
                if not isinstance(error, ForeignDataError):
                    log.warning(
                        "anarchon: claim on %s unconfirmed: its acknowledgement was lost and"
                        " the stream leader cannot be read (%s); not running it unless a retry"
                        " confirms it",
                        subject,
                        error,
                    )
                answers.append(error)
        return answers

    async def _trim(self, nc: Client, jobs: Sequence[str]) -> None:
        """Purge each job's oldest slot subjects, keeping the stream's per-subject limit.

        A compare-and-set claim refuses a slot for as long as its message is
        kept; one subject per slot would otherwise grow without end. Every
        :data:`_TRIM_EVERY` wins of a job, its ``<claims>.*`` subjects are
        purged down to the newest ``per_subject_limit()`` (at least as many
        claims as the duplicate window spans, and the history kept).
        """
        due: list[str] = []
        counts = self._wins_since_trim
        for job in jobs:
            counts[job] = counts.get(job, 0) + 1
            if counts[job] >= _TRIM_EVERY:
                counts[job] = 0
                due.append(job)
        if not due:
            return
        keep = self._store.stream.per_subject_limit()
        purge = f"{API}.STREAM.PURGE.{self._stream}"
        requests: list[Request] = [
            (
                purge,
                dumps({"filter": f"{self._store.job_subjects(job)[0]}.*", "keep": keep}),
                None,
            )
            for job in dict.fromkeys(due)
        ]
        try:
            replies = await self._connection.send(nc, requests, "purge")
        except (BackendError, BackendUnavailableError) as error:
            log.debug("anarchon: trimming slot subjects failed: %s", error)
            return
        for (_s, payload, _h), msg in zip(requests, replies, strict=True):
            problem: BaseException | None
            try:
                problem = api_error(self._connection.answer(msg, "purge"))
            except (BackendError, BackendUnavailableError) as error:
                problem = error
            if problem is not None:  # the next trim tries again
                log.debug("anarchon: trimming %s failed: %s", payload, problem)

    async def _owns_many(
        self, nc: Client, items: Sequence[tuple[str, int, str]]
    ) -> list[bool | BaseException]:
        """Whether each ``(subject, seq, token)`` is a stored claim with that token, reads pipelined."""
        connection = self._connection
        answers: list[bool | BaseException] = [False] * len(items)
        todo = list(range(len(items)))
        get = f"{API}.STREAM.MSG.GET.{self._stream}"
        for attempt in range(3):
            replies = await connection.send(
                nc, [(get, dumps({"seq": items[i][1]}), None) for i in todo], "claim"
            )
            missing: list[int] = []
            for i, msg in zip(todo, replies, strict=True):
                subject, seq, token = items[i]
                try:
                    body = connection.answer(msg, "claim")
                    problem = api_error(body)
                    if problem is not None:
                        if problem.err_code == ERR_NOT_FOUND_MSG or problem.code == 404:
                            missing.append(i)
                            continue
                        raise connection.answer_error(problem, "claim")
                    answers[i] = self._owner_check(subject, seq, stored(body), token)
                except (BackendError, BackendUnavailableError, ForeignDataError) as error:
                    answers[i] = error
            todo = missing
            if not todo:
                break
            if attempt < 2:
                await asyncio.sleep(0.02 * (attempt + 1))
        for i in todo:
            answers[i] = self._claim_gone(items[i][1])
        return answers

    async def record_manual_run(self, input: ClaimInput) -> None:
        """Publish a manual claim record: no ``Nats-Msg-Id``, so it is never de-duplicated."""
        nc = await self._store.client()
        subject = self._store.job_subjects(input.job)[0]
        payload = dumps(
            {
                "slot": input.slot,
                "token": input.token,
                "instance_id": input.instance_id,
                "at": wall_ms(),
                "manual": True,
            }
        )
        await self._connection.publish(nc, subject, payload, "manual run")
