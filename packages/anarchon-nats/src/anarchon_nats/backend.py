"""``NatsBackend``: claims by de-duplicated publish on NATS JetStream (docs/backends/nats.md).

A claim publishes the claim record to ``<prefix><job>.claims`` with the header
``Nats-Msg-Id: <job>:<slot>``. Within the stream's duplicate window JetStream
stores only the first message with an id, and the stream (its leader, in a
cluster) orders publishes, so exactly one publisher gets an acknowledgement
that is not a duplicate: that instance wins. A duplicate acknowledgement names
the sequence of the stored message; a backend remembers the claims it stored
and the publishes it got no answer to, so a retried claim (same token) is
still recognised as the winner's (read back only when its answer was lost).
With ``durability="replicated"`` the stream has 3 replicas and a claim is a
compare-and-set publish to ``<prefix><job>.claims.<slot>``
(``Nats-Expected-Last-Subject-Sequence: 0``): first writer wins for as long
as the message is kept (docs/backends/nats.md, "Durability").

Results go to ``<prefix><job>.results``; history reads both subjects of a job
with a short-lived consumer and merges them with :func:`anarchon.build_history`.
``now_ms()`` is the server's clock: the time JetStream stamps on a message
published to ``<prefix>_clock``. ``claim_many`` and ``save_results`` pipeline
their publishes on the one connection. There are no leases (``runs`` is None).

``NatsBackend`` is the ``Backend`` the scheduler sees; the work is done by its
parts around one :class:`~anarchon_nats._store.Store` (connection, stream,
init state): ``_claims``, ``_history``, ``_fleet``, ``_members`` and ``_clock``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, ClassVar

from anarchon.backend import Backend
from anarchon.backend.membership import check_member_id, check_refresh
from anarchon.backend.registry import redact_url
from anarchon.errors import (
    BackendUnavailableError,
    DedupeWindowError,
    InvalidConfigError,
    UnsupportedError,
)
from anarchon.fleet.types import Declaration, JobControl, Member
from anarchon.types import ClaimInput, JobLimits, ResultWrite, RunRecord, StoredResult
from nats.aio.client import Client

from anarchon_nats._claims import MEMORY as MEMORY
from anarchon_nats._claims import Claims
from anarchon_nats._clock import Clock
from anarchon_nats._config import (
    check_durability,
    check_job_name,
    check_prefix,
    check_stream_name,
    parse_url,
)
from anarchon_nats._connection import DEFAULT_MAX_OUTSTANDING_PINGS as DEFAULT_MAX_OUTSTANDING_PINGS
from anarchon_nats._connection import DEFAULT_PING_INTERVAL_S as DEFAULT_PING_INTERVAL_S
from anarchon_nats._connection import RECONNECT_AFTER_TIMEOUTS as RECONNECT_AFTER_TIMEOUTS
from anarchon_nats._connection import Connection
from anarchon_nats._durability import REPLICATED_REPLICAS
from anarchon_nats._errors import is_transient_error
from anarchon_nats._fleet import Fleet
from anarchon_nats._history import History
from anarchon_nats._members import Members
from anarchon_nats._pipeline import BATCH_CHUNK as BATCH_CHUNK
from anarchon_nats._pipeline import Pipeline
from anarchon_nats._store import Store
from anarchon_nats._stream import Stream

__all__ = ["NatsBackend"]

DEFAULT_SERVERS = "nats://localhost:4222"
DEFAULT_PREFIX = "cron."
_MANY_JOBS = 8
"""``history_many`` of this many jobs or more reads all jobs through one consumer."""


class NatsBackend(Backend):
    """Exactly-once claims on NATS JetStream by de-duplicated publish or compare-and-set (no leases).

    >>> backend = NatsBackend("nats://localhost:4222", stream="CRON", prefix="cron.")
    >>> backend = NatsBackend.from_url("nats://user:pass@n1:4222,n2:4222?stream=BILLING&replicas=3")

    :param servers: a URL or a list of URLs (credentials in the URL are used);
        ignored when ``connection`` is given.
    :param connection: a connected nats-py client the user owns: used as is and
        never closed by the backend.
    :param stream: the JetStream stream holding claims and results (created on
        ``init()`` if missing, covering ``<prefix>>``).
    :param prefix: subject prefix, tokens ending in ``.``; job ``j`` uses
        ``<prefix>j.claims`` and ``<prefix>j.results``.
    :param duplicate_window_ms: the stream's duplicate window: how long a claim
        is remembered. Every job's ``jitter + max_late`` must be below it.
    :param history_size: the stream's per-subject limit (runs kept per job); it
        is stream-wide, so a job asking for more is refused (a job left at the
        option's default, 1000, gets this limit instead). It is raised when a
        fast job needs more to keep every claim younger than the window.
    :param replicas: stream replicas; new streams default to 1 and an existing
        stream is changed only when this is given.

    An existing stream with other settings is brought to these (window,
    per-subject limit, subjects, replicas when given) by a backend that runs
    jobs; a backend that only reads history leaves it alone.
    :param request_timeout: seconds to wait for each JetStream answer.
    :param durability: ``"fast"`` (default): a claim is a de-duplicated publish,
        remembered for the duplicate window. ``"replicated"``: the stream has
        3 replicas (``replicas`` defaults to 3; fewer is refused) and a claim
        is a compare-and-set publish on ``<prefix><job>.claims.<slot>``
        (first writer wins for as long as the message is kept: no window, no
        clock); needs nats-server 2.11 or later (checked at ``init()``).
        See docs/backends/nats.md, "Durability".
    :param connect_options: passed to ``nats.connect`` (``user_credentials``,
        ``nkeys_seed``, ``token``, ``tls`` (an ``ssl.SSLContext``),
        ``tls_hostname``, ``name``, ``connect_timeout``, callbacks, ...).
    """

    name: ClassVar[str] = "nats"

    def __init__(
        self,
        servers: str | Sequence[str] = DEFAULT_SERVERS,
        connection: Client | None = None,
        stream: str = "CRON",
        prefix: str = DEFAULT_PREFIX,
        duplicate_window_ms: int = 300_000,
        history_size: int = 1000,
        replicas: int | None = None,
        *,
        request_timeout: float = 5.0,
        durability: str = "fast",
        **connect_options: Any,
    ) -> None:
        server_list = [servers] if isinstance(servers, str) else [str(s) for s in servers]
        if not server_list or not all(isinstance(s, str) and s for s in server_list):
            raise InvalidConfigError("servers must be a URL or a non-empty list of URLs")
        if connection is not None:
            if server_list != [DEFAULT_SERVERS]:
                raise InvalidConfigError("pass either servers= or connection=, not both")
            if connect_options:
                raise InvalidConfigError(
                    "connection options ("
                    + ", ".join(sorted(connect_options))
                    + ") cannot be used with connection=: the connection is already made"
                )
        self.servers: list[str] = server_list
        self.connection = connection
        self.stream = check_stream_name(stream)
        self.prefix = check_prefix(prefix)
        if (
            isinstance(duplicate_window_ms, bool)
            or not isinstance(duplicate_window_ms, int)
            or duplicate_window_ms < 100
        ):
            raise InvalidConfigError(
                f"duplicate_window_ms must be an integer >= 100, got {duplicate_window_ms!r}"
            )
        if isinstance(history_size, bool) or not isinstance(history_size, int) or history_size < 1:
            raise InvalidConfigError(f"history_size must be an integer >= 1, got {history_size!r}")
        if replicas is not None and (
            isinstance(replicas, bool) or not isinstance(replicas, int) or not 1 <= replicas <= 5
        ):
            raise InvalidConfigError(f"replicas must be an integer from 1 to 5, got {replicas!r}")
        self.durability = check_durability(durability)
        if durability == "replicated":
            if replicas is not None and replicas < REPLICATED_REPLICAS:
                raise InvalidConfigError(
                    f"durability='replicated' needs a stream of at least {REPLICATED_REPLICAS}"
                    f" replicas, got replicas={replicas}"
                )
            replicas = replicas or REPLICATED_REPLICAS
        if (
            isinstance(request_timeout, bool)
            or not isinstance(request_timeout, (int, float))
            or not request_timeout > 0
        ):
            raise InvalidConfigError(f"request_timeout must be positive, got {request_timeout!r}")
        self.duplicate_window_ms = duplicate_window_ms
        self.dedupe_window_ms: float = float(duplicate_window_ms)
        self.history_size = history_size
        self.replicas = replicas
        self.request_timeout = float(request_timeout)
        self.connect_options: dict[str, Any] = dict(connect_options)
        self.shown = ",".join(redact_url(s) for s in server_list)
        """The servers as shown in messages: passwords hidden."""

        connection_ = Connection(
            server_list,
            connection,
            self.stream,
            request_timeout=self.request_timeout,
            connect_options=self.connect_options,
            shown=self.shown,
        )
        stream_ = Stream(
            connection_,
            prefix=self.prefix,
            duplicate_window_ms=duplicate_window_ms,
            history_size=history_size,
            replicas=replicas,
        )
        # Message ids are unique per stream, not per subject. With the default
        # prefix the id is "<job>:<slot>"; any other prefix goes in front of it,
        # so applications sharing one stream under different prefixes never
        # share an id (job names have no ".", so the two forms never meet).
        self._store = Store(
            connection_,
            stream_,
            id_prefix="" if prefix == DEFAULT_PREFIX else prefix,
            durability=durability,
        )
        self._claims = Claims(self._store, cas=durability == "replicated")
        self._history = History(self._store)
        self._clock = Clock(self._store)
        self._fleet = Fleet(self._store, self._clock)
        self._members = Members(self._store, self._clock)

    # Construction --------------------------------------------------------

    @classmethod
    def from_url(cls, url: str, **options: Any) -> NatsBackend:
        """``nats://[user:pass@]host[:port][,host2...][?options]``.

        Query options ``stream``, ``prefix``, ``duplicate_window_ms``,
        ``history_size``, ``replicas``, ``request_timeout`` and ``durability``
        are the backend's; ``name``, ``connect_timeout``, ``user_credentials`` (or
        ``creds``), ``nkeys_seed``, ``token``, ``tls_ca_file``,
        ``tls_cert_file``, ``tls_key_file``, ``tls_hostname``, ... pass to the
        driver. Anything else is an ``InvalidConfigError``.
        """
        servers, kwargs = parse_url(url, options)
        backend = cls(servers if len(servers) > 1 else servers[0], **kwargs)
        return backend

    def __repr__(self) -> str:
        return (
            f"NatsBackend({self.shown!r}, stream={self.stream!r}, prefix={self.prefix!r},"
            f" durability={self.durability!r})"
        )

    # Job checks ------------------------------------------------------------

    def check_job(self, limits: JobLimits) -> None:
        """Refuse what NATS cannot do safely, and learn the job's period.

        Job names must be letters, digits, ``_`` and ``-`` (``InvalidJobError``);
        ``history_ttl`` and lease options are refused (``UnsupportedError``);
        ``jitter + max_late`` must be below the duplicate window
        (``DedupeWindowError``); ``history_size`` may not exceed the
        backend's stream-wide limit (``UnsupportedError``), except the job
        option's default, 1000, which simply gets the stream's limit.
        """
        job = check_job_name(limits.job)
        if limits.history_ttl_ms is not None:
            raise UnsupportedError(
                f"job {job!r}: history_ttl is not supported by the NATS backend"
                " (history is trimmed by count only: history_size)"
            )
        lease = limits.lease_options_given()
        if lease:
            raise UnsupportedError(
                f"job {job!r}: option(s) {', '.join(lease)} need leases; the NATS backend has none"
            )
        if limits.jitter_ms + limits.max_late_ms >= self.dedupe_window_ms:
            raise DedupeWindowError(
                f"job {job!r}: jitter ({limits.jitter_ms} ms) + max_late ({limits.max_late_ms} ms)"
                f" must be below the stream's duplicate window ({self.duplicate_window_ms} ms)"
            )
        stream = self._store.stream
        stream.keep_history(job, limits.history_size)
        stream.need_claims(job, limits.period_ms)

    def per_subject_limit(self) -> int:
        """The stream's ``max_msgs_per_subject``: ``history_size``, raised for the fastest job."""
        return self._store.stream.per_subject_limit()

    # Connection and stream ---------------------------------------------------

    async def init(self) -> None:
        """Connect, create or update the stream and check the store format. Idempotent."""
        await self._store.init()

    async def close(self) -> None:
        """Close the connection if the backend opened it; a user's ``connection`` stays open."""
        await self._store.close()

    async def prepare_job(self, job: str, history_size: int) -> None:
        """Check the job's name and history size; apply the stream rules if not done yet.

        The first job prepared on a backend whose ``init()`` knew no jobs brings
        an existing stream to our settings; later ones raise the per-subject
        limit when a faster job needs more.
        """
        await self._store.prepare_job(job, history_size)

    def is_transient(self, error: BaseException) -> bool:
        """True for errors worth retrying: connection lost or closed, timeouts, 503 answers.

        nats-py's connection, reconnecting and timeout errors, "no responders"
        (JetStream without a leader: an election or a restart) and JetStream's
        503 answers are transient, and so is ``BackendUnavailableError``, which
        the backend raises for all of them. Everything else (refused requests,
        foreign data, configuration) reaches the user.
        """
        return is_transient_error(error)

    # Fleet registry and controls (subjects: anarchon_nats._fleet) --------------

    async def declare(self, declarations: Sequence[Declaration], ttl_ms: int) -> None:
        """Publish each declaration to its subject; purge the subjects of expired ones."""
        await self._fleet.declare(declarations, ttl_ms)

    async def declarations(self, job: str | None = None) -> list[Declaration]:
        """Every unexpired declaration (of ``job``, or of all jobs)."""
        return await self._fleet.declarations(job)

    async def set_control(self, control: JobControl) -> None:
        """Publish the job's control (its stored time is ``updated_at``)."""
        await self._fleet.set_control(control)

    async def controls(self) -> dict[str, JobControl]:
        """Every job's newest control."""
        return await self._fleet.controls()

    # Membership (subjects: anarchon_nats._members) -------------------------------

    async def refresh_member(self, instance_id: str, roster: str, ttl_ms: int) -> list[Member]:
        """Publish this instance's record to ``<prefix>_fleet.m.<b64 instance>``; every live member.

        ``seen_at`` is the message's stored time (the store clock); the
        subjects of expired records are purged as they are found.
        """
        check_refresh(instance_id, roster, ttl_ms)
        return await self._members.refresh(instance_id, roster, ttl_ms)

    async def leave_member(self, instance_id: str) -> None:
        """Purge this instance's membership subject."""
        check_member_id(instance_id)
        await self._members.leave(instance_id)

    async def members(self) -> list[Member]:
        """Every live member at the store clock's now, sorted by instance id."""
        return await self._members.members()

    # Clock ---------------------------------------------------------------------

    async def now_ms(self) -> int:
        """The server's clock: the time JetStream stamps on a message it stores.

        Publishes an empty message to ``<prefix>_clock`` and reads it back by
        sequence from the stream leader (two round trips). The stamp is taken
        while the publish is in flight, so the stamp plus the time the read
        back took is at most the leader's clock when this call returns: the
        scheduler anchors a reading at the reply's arrival and must never be
        ahead (docs/concepts.md, "The store clock").
        """
        return await self._clock.now_ms()

    # Claims --------------------------------------------------------------------

    async def claim(self, input: ClaimInput) -> bool:
        """Publish the claim with ``Nats-Msg-Id: <job>:<slot>``; the first stored one wins.

        (With a prefix other than ``cron.`` the id is ``<prefix><job>:<slot>``.)
        A duplicate acknowledgement names the stored claim's sequence; the
        answer is true only when that claim carries this token (a retried
        claim), as described at :meth:`claim_many`.
        """
        return (await self.claim_many([input]))[0]

    async def claim_many(self, inputs: Sequence[ClaimInput]) -> list[bool]:
        """``claim()`` for each item: the chunk's publishes pipelined, their acks awaited together.

        Chunks of :data:`BATCH_CHUNK` claims are published back to back on the
        one connection. A stored acknowledgement wins. A duplicate names the
        sequence of the stored claim, and is true only if that claim carries
        this token: the backend remembers the claims it stored (the newest
        :data:`MEMORY`) and the publishes it got no answer to. A duplicate of
        a remembered claim is answered from memory; a duplicate of a claim this
        backend may have published unanswered (a retry after a timeout or a
        dropped connection) is read back (``STREAM.MSG.GET`` by sequence,
        pipelined) and its token compared, and a message there that anarchon
        did not write raises ``ForeignDataError``; any other duplicate is
        another instance's claim: false, without a read. Answers are in request
        order. If any item failed, the first error is raised once its chunk
        has ended (items are repeat-safe).
        """
        return await self._claims.claim_many(inputs)

    async def record_claims(self, inputs: Sequence[ClaimInput]) -> None:
        """Nothing to do: on NATS the claim itself is the history record."""
        return None

    async def record_manual_run(self, input: ClaimInput) -> int | None:
        """Publish a manual claim record: no ``Nats-Msg-Id``, so it is never de-duplicated."""
        await self._claims.record_manual_run(input)
        return None

    # Results and history -------------------------------------------------------

    async def save_result(
        self,
        job: str,
        result: StoredResult,
        history_size: int,
        history_ttl_ms: int | None = None,
    ) -> None:
        """Publish the result to ``<prefix><job>.results`` (trimmed by the per-subject limit)."""
        await self._history.save_result(job, result)

    async def save_results(self, writes: Sequence[ResultWrite]) -> None:
        """``save_result()`` for each item: chunks of publishes pipelined, acks awaited together.

        A result is repeat-safe: history keeps one record per token, so a
        result published twice (a batch retried after a lost answer) shows once.
        """
        await self._history.save_results(writes)

    async def history(self, job: str, limit: int) -> list[RunRecord]:
        """Recent runs of ``job`` on every instance, newest first.

        Reads the job's claims and results subjects and merges them with
        :func:`anarchon.build_history`. A job registered here with a
        ``history_size`` below the stream-wide limit shows at most that many.
        """
        return await self._history.history(job, limit)

    async def history_many(self, jobs: Sequence[str], limit: int) -> dict[str, list[RunRecord]]:
        """The history of each of ``jobs``, read through one consumer for all of them.

        A few jobs are read one by one (:meth:`history`); from
        :data:`_MANY_JOBS` on, one consumer delivers every job's claims and
        results subjects at once, and the messages of the jobs asked for are
        kept. It reads up to the messages the consumer's stream copy held
        when it was created: in a cluster, a replica a moment behind the
        leader may miss the newest few (:meth:`history` waits for them).
        """
        names = list(dict.fromkeys(jobs))
        if len(names) < _MANY_JOBS:
            return await super().history_many(names, limit)
        return await self._history.history_many(names, limit)

    # White-box hooks of the tests ----------------------------------------------

    @property
    def _nc(self) -> Client | None:
        """The connected client (None when not connected)."""
        return self._store.connection.nc

    @property
    def _pipeline(self) -> Pipeline:
        return self._store.connection.pipeline

    @property
    def _reconnects(self) -> set[asyncio.Task[None]]:
        return self._store.connection.reconnects

    async def _client(self) -> Client:
        return await self._store.client()

    def _no_answer(self, what: str) -> BackendUnavailableError:
        return self._store.connection.no_answer(what)
