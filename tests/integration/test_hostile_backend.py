"""A backend that misbehaves on purpose, against a real dpgate.

HostileBackend speaks HTTP/1.1 over raw sockets so that each test decides
byte for byte what a completion request gets back: interim answers before
the final one, bytes after it (at once or while the connection sits idle in
dpgate's pool), a close while idle, a bad chunk header in the same segment
as whole events, and usage no backend can have meant. Its health and model
routes answer as vLLM's do, on connections of their own.

What must hold: each client gets its own answer and nothing else, whatever
the backend sent before or after it; the events that came whole before a
broken stream reach the client before the error event; and implausible
usage is relayed unchanged but counted nowhere except in
dpgate_backend_usage_invalid_total.
"""

from __future__ import annotations

import json
import queue
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import pytest
from harness import (ADMIN_TOKEN, CLIENT_KEY, MODEL, Gateway, chat_body, gateway_config, http_request, metric_sample,
                     poll, sse_events)

AUTH = {"Authorization": f"Bearer {CLIENT_KEY}"}
CHAT = "/v1/chat/completions"
WINDOW = 65536


def answer_json(text: str, usage: dict | None = None, raw_usage: str | None = None) -> bytes:
    """A chat completion as vLLM writes it; `raw_usage` is spliced as written
    (for values json.dumps cannot write, such as 2**64 - 1 exactly)."""
    body = {"id": "chatcmpl-" + text, "object": "chat.completion", "model": MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}
    text_body = json.dumps(body, separators=(",", ":"))
    usage_text = raw_usage if raw_usage is not None else json.dumps(
        usage or {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}, separators=(",", ":"))
    return (text_body[:-1] + ',"usage":' + usage_text + "}").encode()


def http_answer(body: bytes, status: str = "200 OK", extra: str = "") -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"{extra}\r\n").encode() + body


def chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


def sse(obj) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def token_event(text: str) -> dict:
    return {"id": "c", "object": "chat.completion.chunk", "model": MODEL,
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}], "usage": None}


STREAM_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


@dataclass
class Exchange:
    """One completion request as the backend saw it."""
    connection: int  # the backend's number for the connection it came on
    body: dict
    sock: socket.socket = field(repr=False)


Script = Callable[[Exchange], None]


class HostileBackend:
    """A backend on an ephemeral port. Completion requests are answered by
    the scripts queued with `then()`, in order (each writes what it likes on
    the exchange's socket); /health, /v1/models and /version as vLLM."""

    def __init__(self, dp: int = 1):
        self.dp = dp
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.scripts: queue.Queue[Script] = queue.Queue()
        self.exchanges: list[Exchange] = []
        self.connections = 0
        self.lock = threading.Lock()
        self.closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    def then(self, script: Script) -> None:
        self.scripts.put(script)

    def completion_connections(self) -> list[int]:
        with self.lock:
            return [e.connection for e in self.exchanges]

    def close(self) -> None:
        self.closing = True
        self.listener.close()

    def _accept(self) -> None:
        while not self.closing:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
                number = self.connections
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(sock, number), daemon=True).start()

    def _serve(self, sock: socket.socket, number: int) -> None:
        buffered = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffered:
                    data = sock.recv(65536)
                    if not data:
                        return
                    buffered += data
                head, buffered = buffered.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                fields = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
                length = int(fields.get("content-length", "0"))
                while len(buffered) < length:
                    data = sock.recv(65536)
                    if not data:
                        return
                    buffered += data
                body, buffered = buffered[:length], buffered[length:]
                if method == "GET":
                    sock.sendall(self._vllm_route(target))
                    continue
                exchange = Exchange(number, json.loads(body), sock)
                with self.lock:
                    self.exchanges.append(exchange)
                script = self.scripts.get(timeout=10)
                script(exchange)
        except OSError:
            pass
        finally:
            sock.close()

    def _vllm_route(self, target: str) -> bytes:
        if target == "/v1/models":
            body = {"object": "list", "data": [{"id": MODEL, "object": "model", "max_model_len": WINDOW}]}
        elif target == "/version":
            body = {"version": "0.0-hostile"}
        else:
            body = {}
        return http_answer(json.dumps(body).encode())


@pytest.fixture
def hostile():
    """A hostile backend and a one-thread dpgate in front of it: every
    request goes through the same worker's pool of connections."""
    backend = HostileBackend()
    config = gateway_config([("hostile", backend, "primary")], threads=1,
                            model={"window_tokens": WINDOW, "max_output_tokens": 1024})
    try:
        with Gateway(config) as gw:
            yield backend, gw
    finally:
        backend.close()


def scrape(gw: Gateway) -> str:
    status, _, body = http_request(gw.admin_port, "GET", "/metrics", {"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert status == 200
    return body.decode()


def post_chat(gw: Gateway, text: str, **extra):
    return http_request(gw.port, "POST", CHAT, AUTH, chat_body(text, max_tokens=16, **extra), timeout=10)


def answers(text: str, after: bytes = b"", delay_after: float = 0.0, close_after: float | None = None) -> Script:
    """A script: the answer to this request, then `after` (at once when
    delay_after is 0, in the same segment; else later, while the connection
    sits idle), then a close `close_after` seconds on, if given."""
    def script(e: Exchange) -> None:
        if delay_after == 0:
            e.sock.sendall(http_answer(answer_json(text)) + after)
        else:
            e.sock.sendall(http_answer(answer_json(text)))
            time.sleep(delay_after)
            e.sock.sendall(after)
        if close_after is not None:
            time.sleep(close_after)
            e.sock.shutdown(socket.SHUT_RDWR)
    return script


def content(body: bytes) -> str:
    return json.loads(body)["choices"][0]["message"]["content"]


def wait_dropped(gw: Gateway, reason: str, at_least: float) -> float:
    return poll(lambda: metric_sample(scrape(gw), "dpgate_upstream_connections_dropped_total",
                                      backend="hostile", reason=reason),
                lambda v: v >= at_least)


# --------------------------------------------------------------------------
# Crossed answers


def test_an_unsolicited_answer_sent_while_idle_reaches_no_client(hostile):
    backend, gw = hostile
    unsolicited = http_answer(answer_json("NOT-YOURS"))
    sent = threading.Event()

    def first(e: Exchange) -> None:
        e.sock.sendall(http_answer(answer_json("first")))
        time.sleep(0.2)  # the connection is back in dpgate's pool by now
        e.sock.sendall(unsolicited)
        sent.set()

    backend.then(first)
    backend.then(answers("second"))
    status, _, body = post_chat(gw, "one")
    assert status == 200 and content(body) == "first"
    assert sent.wait(5)
    time.sleep(0.2)  # the bytes are in dpgate's socket
    status, _, body = post_chat(gw, "two")
    assert status == 200 and content(body) == "second", body
    # The second request went on a connection of its own.
    first_connection, second_connection = backend.completion_connections()
    assert first_connection != second_connection
    assert wait_dropped(gw, "bytes_while_idle", 1) == 1


@pytest.mark.parametrize("same_segment", [True, False], ids=["same-segment", "later-segment"])
def test_bytes_right_after_the_answer_reach_no_client(hostile, same_segment):
    backend, gw = hostile
    extra = http_answer(answer_json("NOT-YOURS"))
    backend.then(answers("first", after=extra, delay_after=0 if same_segment else 0.05))
    backend.then(answers("second"))
    status, _, body = post_chat(gw, "one")
    assert status == 200 and content(body) == "first"
    time.sleep(0.3)
    status, _, body = post_chat(gw, "two")
    assert status == 200 and content(body) == "second", body
    assert len(set(backend.completion_connections())) == 2
    reason = "bytes_after_answer" if same_segment else "bytes_while_idle"
    assert wait_dropped(gw, reason, 1) == 1


def test_a_connection_the_backend_closed_while_idle_is_not_reused(hostile):
    backend, gw = hostile
    backend.then(answers("first", close_after=0.05))
    backend.then(answers("second"))
    status, _, body = post_chat(gw, "one")
    assert status == 200 and content(body) == "first"
    time.sleep(0.3)
    status, _, body = post_chat(gw, "two")
    assert status == 200 and content(body) == "second"
    assert wait_dropped(gw, "closed_while_idle", 1) == 1
    # Nothing was written to the closed connection, so nothing was retried.
    assert metric_sample(scrape(gw), "dpgate_upstream_retries_total") == 0


def test_a_clean_idle_connection_is_reused(hostile):
    backend, gw = hostile
    for text in ("a", "b", "c"):
        backend.then(answers(text))
        status, _, body = post_chat(gw, text)
        assert status == 200 and content(body) == text
        time.sleep(0.05)
    assert len(set(backend.completion_connections())) == 1
    assert metric_sample(scrape(gw), "dpgate_upstream_connections_dropped_total") == 0


def test_an_answer_that_runs_to_the_close_ends_at_the_close(hostile):
    """No length, no chunks: the body ends where the backend closes, which
    may come with the head's bytes (the head is read drain-aware)."""
    backend, gw = hostile

    def to_the_close(e: Exchange) -> None:
        body = answer_json("until-close")
        # Corked, the answer and the close leave in one TCP segment.
        e.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        e.sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n" + body)
        e.sock.shutdown(socket.SHUT_RDWR)

    backend.then(to_the_close)
    # The stream idle deadline is minutes: a missed end would outlast the client's 10 s.
    status, _, body = post_chat(gw, "one")
    assert status == 200 and content(body) == "until-close"
    backend.then(answers("next"))
    status, _, body = post_chat(gw, "two")
    assert status == 200 and content(body) == "next"
    assert len(set(backend.completion_connections())) == 2


# --------------------------------------------------------------------------
# Interim (1xx) answers

INTERIMS = {
    "100": b"HTTP/1.1 100 Continue\r\n\r\n",
    "103": b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n",
    "102-100-103": (b"HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n"
                    b"HTTP/1.1 103 Early Hints\r\nLink: <x>\r\n\r\n"),
    # A 1xx has no body whatever its fields say.
    "100-with-length": b"HTTP/1.1 100 Continue\r\nContent-Length: 4\r\n\r\n",
}


@pytest.mark.parametrize("interim", INTERIMS, ids=list(INTERIMS))
@pytest.mark.parametrize("apart", [False, True], ids=["one-segment", "apart"])
def test_interim_answers_are_passed_over(hostile, interim, apart):
    backend, gw = hostile

    def first(e: Exchange) -> None:
        e.sock.sendall(INTERIMS[interim])
        if apart:
            time.sleep(0.1)
        e.sock.sendall(http_answer(answer_json("first")))

    backend.then(first)
    backend.then(answers("second"))
    status, headers, body = post_chat(gw, "one")
    assert status == 200 and content(body) == "first", (status, body)
    assert "link" not in headers
    status, _, body = post_chat(gw, "two")
    assert status == 200 and content(body) == "second", (status, body)
    # The connection served both: an interim answer leaves it clean.
    assert len(set(backend.completion_connections())) == 1


def test_interim_answers_before_a_stream(hostile):
    backend, gw = hostile

    def stream(e: Exchange) -> None:
        e.sock.sendall(INTERIMS["103"])
        time.sleep(0.05)
        e.sock.sendall(STREAM_HEAD + chunk(sse(token_event("hi"))) + chunk(sse(b"[DONE]")) + b"0\r\n\r\n")

    backend.then(stream)
    status, _, events, complete = sse_events(gw.port, CHAT, chat_body("s", stream=True, max_tokens=4), headers=AUTH)
    assert status == 200 and complete
    assert [e.data for e in events][-1] == "[DONE]"
    assert events[0].json()["choices"][0]["delta"]["content"] == "hi"


def test_endless_interim_answers_are_a_backend_failure(hostile):
    backend, gw = hostile

    def endless(e: Exchange) -> None:
        try:
            for _ in range(5000):
                e.sock.sendall(INTERIMS["103"])
        except OSError:
            pass  # dpgate gave up and closed

    backend.then(endless)
    status, _, body = post_chat(gw, "one")
    assert status == 502, body
    gw.wait_all_healthy()  # a 502 keeps the backend out until a probe passes
    backend.then(answers("after"))
    status, _, body = post_chat(gw, "two")
    assert status == 200 and content(body) == "after"


def test_a_protocol_switch_is_a_backend_failure(hostile):
    backend, gw = hostile
    backend.then(lambda e: e.sock.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n"
                                          b"Connection: upgrade\r\n\r\n" + http_answer(answer_json("x"))))
    status, _, body = post_chat(gw, "one")
    assert status == 502, body
    assert json.loads(body)["error"]["code"] == "backend_unreachable"
    gw.wait_all_healthy()
    backend.then(answers("after"))
    status, _, body = post_chat(gw, "two")
    assert status == 200 and content(body) == "after"


# --------------------------------------------------------------------------
# Streams that break


@pytest.mark.parametrize("client_usage", [False, True], ids=["dpgate-filters", "client-asked-usage"])
def test_events_before_a_bad_chunk_header_in_the_same_segment_arrive(hostile, client_usage):
    backend, gw = hostile

    def broken(e: Exchange) -> None:
        e.sock.sendall(STREAM_HEAD + chunk(sse(token_event("zero"))))
        time.sleep(0.05)
        # Two whole events, then a chunk header that is not hex: one segment.
        e.sock.sendall(chunk(sse(token_event("one"))) + chunk(sse(token_event("two"))) + b"zz\r\nnot a chunk\r\n")

    backend.then(broken)
    extra = {"stream_options": {"include_usage": True}} if client_usage else {}
    status, _, events, complete = sse_events(gw.port, CHAT, chat_body("s", stream=True, max_tokens=4, **extra),
                                             headers=AUTH)
    assert status == 200 and not complete
    parsed = [e.json() for e in events]
    assert [p["choices"][0]["delta"]["content"] for p in parsed[:-1]] == ["zero", "one", "two"], parsed
    assert parsed[-1]["error"]["code"] == "stream_interrupted"


def test_an_event_the_stream_breaks_inside_is_dropped_not_relayed_broken(hostile):
    backend, gw = hostile

    def cut(e: Exchange) -> None:
        whole = sse(token_event("whole"))
        half = sse(token_event("half"))[:30]
        e.sock.sendall(STREAM_HEAD + chunk(whole) + chunk(half))
        time.sleep(0.05)
        e.sock.shutdown(socket.SHUT_RDWR)

    backend.then(cut)
    status, _, events, complete = sse_events(gw.port, CHAT, chat_body("s", stream=True, max_tokens=4), headers=AUTH)
    assert status == 200 and not complete
    parsed = [e.json() for e in events]  # every event is whole JSON
    assert parsed[0]["choices"][0]["delta"]["content"] == "whole"
    assert len(parsed) == 2 and parsed[1]["error"]["code"] == "stream_interrupted", parsed


# --------------------------------------------------------------------------
# Usage no backend can have meant

MAX_U64 = str(2**64 - 1)
IMPLAUSIBLE = {
    "2^64-1": '{"prompt_tokens":' + MAX_U64 + ',"completion_tokens":2,"total_tokens":' + MAX_U64 + '}',
    "cached-2^64-1": ('{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9,'
                      '"prompt_tokens_details":{"cached_tokens":' + MAX_U64 + '}}'),
    "negative": '{"prompt_tokens":-7,"completion_tokens":2,"total_tokens":-5}',
    "fraction": '{"prompt_tokens":7.5,"completion_tokens":2,"total_tokens":9.5}',
    "huge": '{"prompt_tokens":1e300,"completion_tokens":2,"total_tokens":1e300}',
    "beyond-64-bits": '{"prompt_tokens":99999999999999999999999,"completion_tokens":2}',
    "text": '{"prompt_tokens":"7","completion_tokens":2,"total_tokens":9}',
    "over-window": '{"prompt_tokens":%d,"completion_tokens":2,"total_tokens":%d}' % (WINDOW + 1, WINDOW + 3),
    "total-over-window": '{"prompt_tokens":7,"completion_tokens":2,"total_tokens":%d}' % (WINDOW + 1),
    "cached-over-prompt": ('{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9,'
                           '"prompt_tokens_details":{"cached_tokens":8}}'),
}
TOKEN_FAMILIES = ("dpgate_prompt_tokens_total", "dpgate_cached_prompt_tokens_total",
                  "dpgate_completion_tokens_total", "dpgate_count_checks_total")


def token_counters(gw: Gateway) -> dict[str, float]:
    page = scrape(gw)
    return {name: metric_sample(page, name) for name in TOKEN_FAMILIES}


def invalid_usage(gw: Gateway) -> float:
    return metric_sample(scrape(gw), "dpgate_backend_usage_invalid_total", backend="hostile")


def counted_plausible_usage(backend: HostileBackend, gw: Gateway) -> dict[str, float]:
    """A plausible answer first, so the token counters have something to lose."""
    usage = {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9, "prompt_tokens_details": {"cached_tokens": 4}}
    backend.then(lambda e: e.sock.sendall(http_answer(answer_json("ok", usage=usage))))
    assert post_chat(gw, "plausible")[0] == 200
    return poll(lambda: token_counters(gw), lambda c: c["dpgate_completion_tokens_total"] == 2)


def plus_one_plausible(before: dict[str, float]) -> dict[str, float]:
    """The counters after one more answer_json() usage (7 prompt, 2 completion, no cached)."""
    return {**before, "dpgate_prompt_tokens_total": before["dpgate_prompt_tokens_total"] + 7,
            "dpgate_completion_tokens_total": before["dpgate_completion_tokens_total"] + 2,
            "dpgate_count_checks_total": before["dpgate_count_checks_total"] + 1}


def after_one_more_plausible(backend: HostileBackend, gw: Gateway, before: dict[str, float]) -> dict[str, float]:
    """The counters once a plausible answer after the one under test is
    counted: accounting follows each answer on the same worker, so by then
    the one under test was accounted for too (or ignored)."""
    backend.then(lambda e: e.sock.sendall(http_answer(answer_json("ok"))))
    assert post_chat(gw, "after")[0] == 200
    goal = before["dpgate_completion_tokens_total"] + 2
    return poll(lambda: token_counters(gw), lambda c: c["dpgate_completion_tokens_total"] >= goal)


@pytest.mark.parametrize("usage", IMPLAUSIBLE, ids=list(IMPLAUSIBLE))
def test_implausible_usage_in_an_answer_is_relayed_but_not_counted(hostile, usage):
    backend, gw = hostile
    before = counted_plausible_usage(backend, gw)
    assert before["dpgate_prompt_tokens_total"] == 7 and before["dpgate_cached_prompt_tokens_total"] == 4
    sent = answer_json("odd", raw_usage=IMPLAUSIBLE[usage])
    backend.then(lambda e: e.sock.sendall(http_answer(sent)))
    status, _, body = post_chat(gw, "odd")
    assert status == 200 and body == sent  # relayed unchanged
    # Only the plausible answer after it counts.
    assert after_one_more_plausible(backend, gw, before) == plus_one_plausible(before)
    assert invalid_usage(gw) == 1


@pytest.mark.parametrize("usage", ["2^64-1", "cached-2^64-1", "cached-over-prompt", "negative"])
def test_implausible_usage_in_a_stream_is_relayed_but_not_counted(hostile, usage):
    backend, gw = hostile
    before = counted_plausible_usage(backend, gw)
    usage_event = b'{"id":"c","object":"chat.completion.chunk","model":"%s","choices":[],"usage":%s}' % (
        MODEL.encode(), IMPLAUSIBLE[usage].encode())

    def stream(e: Exchange) -> None:
        e.sock.sendall(STREAM_HEAD + chunk(sse(token_event("hi"))) + chunk(sse(usage_event)) +
                       chunk(sse(b"[DONE]")) + b"0\r\n\r\n")

    backend.then(stream)
    # The client asked for the usage chunk itself: it gets it as sent.
    body = chat_body("s", stream=True, max_tokens=4, stream_options={"include_usage": True})
    status, _, events, complete = sse_events(gw.port, CHAT, body, headers=AUTH)
    assert status == 200 and complete
    assert events[1].data.encode() == usage_event
    assert after_one_more_plausible(backend, gw, before) == plus_one_plausible(before)
    assert invalid_usage(gw) == 1


def test_a_usage_of_2_to_the_64_does_not_wrap_or_lower_the_counters(hostile):
    """The original finding: 2^64-1 added to a 64-bit counter is 1 less, and
    a cached-tokens counter goes down."""
    backend, gw = hostile
    before = counted_plausible_usage(backend, gw)
    for _ in range(3):
        sent = answer_json("odd", raw_usage=IMPLAUSIBLE["cached-2^64-1"])
        backend.then(lambda e, sent=sent: e.sock.sendall(http_answer(sent)))
        assert post_chat(gw, "odd")[0] == 200
    after = after_one_more_plausible(backend, gw, before)
    assert after["dpgate_cached_prompt_tokens_total"] == before["dpgate_cached_prompt_tokens_total"]
    assert after == plus_one_plausible(before)
    assert invalid_usage(gw) == 3


def test_usage_over_the_window_counts_when_the_request_asked_for_several_sequences(hostile):
    """vLLM sums usage over a request's sequences: n choices may together
    complete more tokens than one window holds."""
    backend, gw = hostile
    usage = {"prompt_tokens": 7, "completion_tokens": WINDOW + 5, "total_tokens": WINDOW + 12}
    backend.then(lambda e: e.sock.sendall(http_answer(answer_json("many", usage=usage))))
    status, _, _ = http_request(gw.port, "POST", CHAT, AUTH, chat_body("n", max_tokens=16, n=3), timeout=10)
    assert status == 200
    counted = poll(lambda: token_counters(gw), lambda c: c["dpgate_completion_tokens_total"] > 0)
    assert counted["dpgate_completion_tokens_total"] == WINDOW + 5
    assert invalid_usage(gw) == 0
