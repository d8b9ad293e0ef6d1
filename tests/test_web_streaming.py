"""The stream against a real waitress server: tokens arrive one by one, before the work is done;
a client that goes away stops the generation; more streams than the limit are refused."""
import json
import socket
import urllib.parse

import pytest

from pipeline.generation import decode_loop
from web.serving import streaming

TIMEOUT = 20


class Stream:
    """A raw HTTP/1.1 client: sees bytes exactly when waitress sends them."""

    def __init__(self, port, **query):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        path = "/generate/stream?" + urllib.parse.urlencode(query)
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n"
                          "\r\n".encode())
        self.received = b""

    def read_until(self, marker: bytes, count: int = 1, ok: bool = True) -> bytes:
        while self.received.count(marker) < count:
            if ok and b"\r\n" in self.received:      # a refusal fails here, not by time-out
                status = self.received.split(b"\r\n", 1)[0]
                assert status == b"HTTP/1.1 200 OK", self.received
            chunk = self.sock.recv(65536)
            if not chunk:
                raise AssertionError(f"connection closed before {count} x {marker!r}: "
                                     f"{self.received[-300:]!r}")
            self.received += chunk
        return self.received

    def events(self) -> list:
        out = []
        for block in self.received.split(b"\n\n"):
            lines = dict(line.split(b": ", 1) for line in block.split(b"\n")
                         if line.startswith((b"event: ", b"data: ")))
            if b"event" in lines:
                out.append((lines[b"event"].decode(), json.loads(lines[b"data"])))
        return out

    def close(self):
        self.sock.close()


@pytest.fixture()
def slots(app):
    """The served app's stream slots."""
    return app.extensions["explainer"].slots


def wait_finished(slots, n_before: int) -> dict:
    """The record of the next stream to finish on the server (waits for it, no sleeping)."""
    with slots.changed:
        assert slots.changed.wait_for(lambda: len(slots.finished) > n_before, timeout=TIMEOUT)
        return slots.finished[n_before]


def test_first_token_arrives_while_the_rest_is_still_being_generated(server, model, slots):
    before = len(slots.finished)
    s = Stream(server, gen_max=40, gen_pace=25)      # at least 39 x 25 ms = 1 s of work
    try:
        s.read_until(b"event: token")
        # the first token is here, and the server has not finished the answer
        assert len(slots.finished) == before and slots.active >= 1
        assert s.received.split(b"\r\n", 1)[0] == b"HTTP/1.1 200 OK"
        assert b"Transfer-Encoding: chunked" in s.received
        s.read_until(b"event: done")
    finally:
        s.close()
    record = wait_finished(slots, before)
    assert record == {"steps": 40, "reason": "limit"}
    tokens = [d for e, d in s.events() if e == "token"]
    ids = model.tokenizer.encode_ordinary(
        "It is a truth universally acknowledged, that a single man in possession of a good "
        "fortune, must be in want of a")
    assert [t["id"] for t in tokens] == [p.token for p in decode_loop(model, ids, 40)]


def test_closing_the_connection_stops_the_generation(server, slots):
    before = len(slots.finished)
    s = Stream(server, gen_max=200, gen_pace=20)     # 4 s if nobody stopped it
    s.read_until(b"event: token", 3)
    seen = s.received.count(b"event: token")
    [running] = slots.running
    done_at_close = running["steps"]
    s.close()
    record = wait_finished(slots, before)
    assert record["reason"] == "disconnected"
    # waitress sees the socket close during the pause, and the loop asks before its next pass:
    # at most the step under way when the client left, and none of the 200 - 4 others
    assert seen <= done_at_close <= record["steps"] <= done_at_close + 1, (record, seen)


def test_more_streams_than_the_limit_are_refused_with_a_message(server, slots):
    before = len(slots.finished)
    busy = [Stream(server, gen_max=200, gen_pace=100) for _ in range(streaming.MAX_STREAMS)]
    try:
        for s in busy:
            s.read_until(b"event: token")
        extra = Stream(server, gen_max=5, gen_pace=0)
        head = extra.read_until(b"}", ok=False)      # to the end of the JSON message
        extra.close()
        assert head.startswith(b"HTTP/1.1 503 ")
        assert b"Retry-After: 5" in head
        assert b"already being generated" in head
    finally:
        for s in busy:
            s.close()
    for i in range(streaming.MAX_STREAMS):
        assert wait_finished(slots, before + i)["reason"] == "disconnected"
    # the slots are free again
    again = Stream(server, gen_max=2, gen_pace=0)
    try:
        again.read_until(b"event: done")
    finally:
        again.close()
