"""``anarchon_nats._frames``: a chunk written as one buffer means what ``publish()`` means.

On a real nats-server: the same requests sent once through :func:`write_frames`
and once through nats-py's ``publish()`` arrive with the same subjects,
replies, headers and payloads; the frames are the bytes nats-py builds; a
JetStream stream de-duplicates a frame's ``Nats-Msg-Id`` as it does a
published one's; a payload over the server's limit is refused before anything
is sent; and a client that is not connected is left to ``publish()``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import nats
import pytest
from anarchon_nats._frames import Request, frames, write_frames
from hypothesis import given, settings
from hypothesis import strategies as st
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import MaxPayloadError
from nats.protocol import command

T = TypeVar("T")

_TOKEN = st.text("abcXYZ019_-", min_size=1, max_size=12)
_REQUEST = st.tuples(
    st.lists(_TOKEN, min_size=1, max_size=3).map(".".join),
    st.binary(max_size=300),
    st.one_of(
        st.none(),
        st.dictionaries(
            st.sampled_from(["Nats-Msg-Id", "Nats-Expected-Stream", "X-Test"]),
            st.text("abc:019.-_", min_size=1, max_size=40),
            min_size=1,
            max_size=3,
        ),
    ),
)


def _run(body: Callable[[], Awaitable[T]], timeout: float = 60) -> T:
    async def main() -> T:
        return await asyncio.wait_for(body(), timeout)

    return asyncio.run(main())


def _nats_py_frame(
    subject: str, reply: str, payload: bytes, headers: dict[str, str] | None
) -> bytes:
    """The frame nats-py's ``publish()`` builds (its header block, then its command)."""
    if headers is None:
        return command.pub_cmd(subject, reply, payload)
    block = b"NATS/1.0\r\n"
    for key, value in headers.items():
        block += f"{key}: {value}\r\n".encode()
    return command.hpub_cmd(subject, reply, block + b"\r\n", payload)


@given(st.lists(_REQUEST, max_size=20), _TOKEN)
def test_the_frames_are_the_bytes_nats_py_builds(
    requests: list[tuple[str, bytes, dict[str, str] | None]], inbox: str
) -> None:
    reply = f"_INBOX.{inbox}.7."
    expected = b"".join(
        _nats_py_frame(subject, f"{reply}{i}", payload, headers)
        for i, (subject, payload, headers) in enumerate(requests)
    )
    assert frames(requests, reply) == expected


async def _collect(
    nc: Client, subject: str, count: int, send: Callable[[], Awaitable[None]]
) -> list[Msg]:
    got: list[Msg] = []
    done = asyncio.get_running_loop().create_future()

    async def on(msg: Msg) -> None:
        got.append(msg)
        if len(got) == count and not done.done():
            done.set_result(None)

    sub = await nc.subscribe(subject, cb=on)
    await nc.flush()
    await send()
    await asyncio.wait_for(done, 10)
    await sub.unsubscribe()
    return got


@settings(max_examples=25, deadline=None)
@given(st.lists(_REQUEST, min_size=1, max_size=30))
def test_frames_arrive_as_published_messages_do(
    nats_url: str, requests: list[tuple[str, bytes, dict[str, str] | None]]
) -> None:
    async def body() -> None:
        nc = await nats.connect(nats_url)
        try:
            sent = [
                (f"frames.{subject}", payload, headers) for subject, payload, headers in requests
            ]
            written: list[bool] = []

            async def by_frames() -> None:
                written.append(await write_frames(nc, sent, "answers.f."))

            async def by_publish() -> None:
                for i, (subject, payload, headers) in enumerate(sent):
                    await nc.publish(subject, payload, reply=f"answers.f.{i}", headers=headers)

            def seen(msgs: list[Msg]) -> list[tuple[str, str, bytes, dict[str, str] | None]]:
                return [(m.subject, m.reply, m.data, m.headers) for m in msgs]

            framed = await _collect(nc, "frames.>", len(sent), by_frames)
            published = await _collect(nc, "frames.>", len(sent), by_publish)
            assert written == [True]
            assert seen(framed) == seen(published)
        finally:
            await nc.close()

    _run(body)


def test_a_stream_de_duplicates_a_frames_message_id(
    nats_url: str, stream: str, prefix: str
) -> None:
    async def body() -> None:
        nc = await nats.connect(nats_url)
        js = nc.jetstream()
        try:
            await js.add_stream(name=stream, subjects=[f"{prefix}>"])
            subject = f"{prefix}job.claims"
            ids = [{"Nats-Msg-Id": f"{prefix}job:{slot}"} for slot in (1000, 2000, 1000, 1000)]
            requests = [(subject, f'{{"n":{i}}}'.encode(), h) for i, h in enumerate(ids)]
            acks = await _collect(
                nc, "acks.>", len(requests), lambda: _written(nc, requests, "acks.x.")
            )
            by_index = {int(m.subject.rsplit(".", 1)[1]): json.loads(m.data) for m in acks}
            assert [by_index[i].get("duplicate", False) for i in range(4)] == [
                False,
                False,
                True,
                True,
            ]
            assert by_index[2]["seq"] == by_index[0]["seq"] == by_index[3]["seq"]
            info = await js.stream_info(stream)
            assert info.state.messages == 2
        finally:
            await nc.close()

    _run(body)


async def _written(nc: Client, requests: Sequence[Request], reply: str) -> None:
    assert await write_frames(nc, requests, reply)


def test_a_payload_over_the_limit_is_refused_before_anything_is_sent(nats_url: str) -> None:
    async def body() -> None:
        nc = await nats.connect(nats_url)
        try:
            small = ("frames.limit", b"x", None)
            large = ("frames.limit", b"x" * (nc.max_payload + 1), None)
            got: list[Msg] = []

            async def on(msg: Msg) -> None:
                got.append(msg)

            sub = await nc.subscribe("frames.limit", cb=on)
            with pytest.raises(MaxPayloadError):
                await write_frames(nc, [small, large], "answers.l.")
            await nc.flush()
            await asyncio.sleep(0.1)
            await sub.unsubscribe()
            assert got == []
        finally:
            await nc.close()

    _run(body)


def test_a_client_that_is_not_connected_is_left_to_publish(nats_url: str) -> None:
    async def body() -> None:
        nc = await nats.connect(nats_url)
        await nc.close()
        assert await write_frames(nc, [("frames.closed", b"x", None)], "answers.c.") is False

    _run(body)
