"""What a hostile client meets, through a real gateway and simulator: what
the head decides is answered before the body is sent, and the body is
discarded by a lingering close; request bodies in memory have a process-wide
budget (503 beyond it) and their memory goes back to the system; a connection
that never sends a byte is cut at the header timeout; one address gets a
bounded share of the connections; at max_connections idle connections make
room for new ones; HEAD answers carry no body; an oversized admin request
gets 413; a field dpgate acts on sent twice gets 400."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from harness import (ADMIN_TOKEN, CLIENT_KEY, MODEL, Gateway, Sim, chat_body, gateway_config, http_json,
                     http_request, is_sanitized, metric_sample, poll, raise_nofile_limit, rss_kib)

CHAT = "/v1/chat/completions"
MIB = 1024 * 1024
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def scrape(gw: Gateway) -> str:
    status, _, raw = http_request(gw.admin_port, "GET", "/metrics", ADMIN)
    assert status == 200
    return raw.decode()


def open_connections(gw: Gateway) -> int:
    return gw.admin("GET", "/admin/status")[2]["open_connections"]


def wait_open_connections(gw: Gateway, wanted: int, timeout: float = 10.0) -> int:
    return poll(lambda: open_connections(gw), lambda n: n == wanted, timeout)


def head(method: str, path: str, *fields: str, length: int | None = None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: x", *fields]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class Answer:
    """One HTTP answer read off a socket: status, fields (lower-case names)
    and, unless `head_only`, its Content-Length body; `rest` holds what came
    after it."""

    def __init__(self, sock: socket.socket, head_only: bool = False, pending: bytes = b""):
        data = pending
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                raise EOFError(f"closed before a whole head: {data!r}")
            data += chunk
        head_bytes, _, data = data.partition(b"\r\n\r\n")
        lines = head_bytes.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split(" ", 2)[1])
        self.fields = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.fields[name.strip().lower()] = value.strip()
        length = 0 if head_only else int(self.fields.get("content-length", "0"))
        while len(data) < length:
            chunk = sock.recv(65536)
            if not chunk:
                raise EOFError("closed mid-body")
            data += chunk
        self.body, self.rest = data[:length], data[length:]

    def json(self) -> dict:
        return json.loads(self.body)


def read_to_end(sock: socket.socket, timeout: float) -> tuple[bytes, str]:
    """Everything until the peer closes: (bytes, "eof" | "reset" | "timeout")."""
    sock.settimeout(timeout)
    out = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return out, "eof"
            out += chunk
    except ConnectionResetError:
        return out, "reset"
    except socket.timeout:
        return out, "timeout"


def closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    """Whether the peer closes the connection (EOF or reset) within `timeout`."""
    return read_to_end(sock, timeout)[1] in ("eof", "reset")


def keep_sending(sock: socket.socket, total: int, piece: bytes = b"x" * 65536) -> tuple[int, str]:
    """Sends up to `total` bytes; stops at the first failure. Returns (sent, how it ended)."""
    sent = 0
    try:
        while sent < total:
            sent += sock.send(piece[:min(len(piece), total - sent)])
    except (BrokenPipeError, ConnectionResetError) as e:
        return sent, type(e).__name__
    except socket.timeout:
        return sent, "timeout"
    return sent, "done"


# --------------------------------------------------------------------------
# What the head decides, before the body


@pytest.fixture(scope="module")
def gw():
    with Sim() as sim:
        keys = [{"name": "local-demo", "key": CLIENT_KEY},
                {"name": "one-a-minute", "key": "sk-one-a-minute", "requests_per_min": 1}]
        config = gateway_config([("primary", sim, "primary")], auth={"keys": keys},
                                limits={"linger_timeout_ms": 1500})
        with Gateway(config) as g:
            yield g


@pytest.mark.parametrize("case", ["no_key", "wrong_key", "unknown_path", "wrong_method", "rate_limited"])
def test_what_the_head_decides_is_answered_before_the_body_is_sent(gw, case):
    fields, path, method = [f"Authorization: Bearer {CLIENT_KEY}"], CHAT, "POST"
    expected = {"no_key": 401, "wrong_key": 401, "unknown_path": 404, "wrong_method": 405, "rate_limited": 429}[case]
    if case == "no_key":
        fields = []
    elif case == "wrong_key":
        fields = ["Authorization: Bearer sk-not-a-key"]
    elif case == "unknown_path":
        path = "/v1/embeddings"
    elif case == "wrong_method":
        method = "PUT"
    elif case == "rate_limited":
        fields = ["Authorization: Bearer sk-one-a-minute"]
        gw.request("POST", CHAT, chat_body("the one of this minute", max_tokens=1),
                   headers={"Authorization": "Bearer sk-one-a-minute"})
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
        # 200 MiB announced, not a byte of it sent: the answer comes all the same.
        s.sendall(head(method, path, "Content-Type: application/json", *fields, length=200 * MIB))
        answer = Answer(s)
        assert answer.status == expected, answer.body
        assert answer.fields.get("connection") == "close"
        if expected == 401:
            assert answer.fields.get("www-authenticate") == "Bearer"
        if expected == 429:
            assert int(answer.fields["retry-after"]) >= 1
        # Lingering close: the send side is shut (a clean end of stream after
        # the answer, not a reset), and what the client still sends is read
        # and dropped instead of being answered with a reset...
        s.settimeout(5)
        assert s.recv(1) == b"", "the answer is followed by the end of the stream"
        sent, ended = keep_sending(s, 8 * MIB)
        assert (sent, ended) == (8 * MIB, "done")
        # ...until linger_timeout_ms (1.5 s) has passed: then the connection closes.
        deadline = time.monotonic() + 30
        while ended == "done" and time.monotonic() < deadline:
            time.sleep(0.2)
            sent, ended = keep_sending(s, MIB)
        assert ended in ("BrokenPipeError", "ConnectionResetError"), "the lingering connection never closed"


def test_a_key_check_waits_for_no_100_continue(gw):
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
        s.sendall(head("POST", CHAT, "Expect: 100-continue", length=1000))
        answer = Answer(s)
        assert answer.status == 401, "no 100 Continue before the key is checked"
    # With the key, 100 Continue, then the answer.
    body = json.dumps(chat_body("continue", max_tokens=1)).encode()
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
        s.sendall(head("POST", CHAT, f"Authorization: Bearer {CLIENT_KEY}", "Expect: 100-continue",
                       "Content-Type: application/json", length=len(body)))
        assert Answer(s, head_only=True).status == 100
        s.sendall(body)
        assert Answer(s).status == 200


def test_a_refusal_whose_body_came_whole_keeps_the_connection(gw):
    body = json.dumps(chat_body("x")).encode()
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
        s.sendall(head("POST", CHAT, "Authorization: Bearer sk-not-a-key", length=len(body)) + body)
        first = Answer(s)
        assert first.status == 401 and first.fields.get("connection") != "close"
        s.sendall(head("GET", "/health"))
        assert Answer(s, pending=first.rest).status == 200


# --------------------------------------------------------------------------
# Memory: a budget for bodies in memory, and memory back to the system


def _metric(gw: Gateway, name: str, **labels) -> float:
    return metric_sample(scrape(gw), name, **labels)


def test_bodies_beyond_the_buffered_budget_get_503_before_they_are_sent():
    with Sim() as sim:
        config = gateway_config([("primary", sim, "primary")],
                                limits={"max_body_bytes": 2 * MIB, "max_buffered_body_bytes": 3 * MIB})
        with Gateway(config) as gw:
            image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * (2 * MIB - 400)}}
            body = json.dumps({"model": MODEL, "max_tokens": 1, "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Image 1:"}, image]}]}).encode()
            assert len(body) <= 2 * MIB
            auth = f"Authorization: Bearer {CLIENT_KEY}"
            held = socket.create_connection(("127.0.0.1", gw.port), timeout=10)
            try:
                # The first holds its length of the budget with half its body sent.
                held.sendall(head("POST", CHAT, auth, length=len(body)) + body[:MIB])
                assert poll(lambda: _metric(gw, "dpgate_buffered_body_bytes"), lambda v: v == len(body)) == len(body)
                # A second would go beyond: 503 from its head.
                with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
                    s.sendall(head("POST", CHAT, auth, length=len(body)))
                    answer = Answer(s)
                    assert answer.status == 503, answer.body
                    error = answer.json()["error"]
                    assert error["code"] == "overloaded" and "max_buffered_body_bytes" in error["message"]
                    assert int(answer.fields["retry-after"]) >= 1
                # So would a chunked body's chunk, at its size line.
                with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
                    s.sendall(head("POST", CHAT, auth, "Transfer-Encoding: chunked") + b"%x\r\n" % (2 * MIB))
                    assert Answer(s).status == 503
                # The first completes; its share is given back.
                held.sendall(body[MIB:])
                assert Answer(held).status == 200
            finally:
                held.close()
            assert poll(lambda: _metric(gw, "dpgate_buffered_body_bytes"), lambda v: v == 0) == 0
            assert gw.request("POST", CHAT, body)[0] == 200


def test_memory_goes_back_after_concurrent_large_bodies_refused_and_admitted():
    with Sim() as sim:
        # Two 200 MiB bodies fit the budget, a third does not.
        config = gateway_config([("primary", sim, "primary")],
                                limits={"max_buffered_body_bytes": 450 * MIB, "linger_timeout_ms": 2000})
        with Gateway(config) as gw:
            if is_sanitized(gw.pid):
                pytest.skip("ASan's quarantine keeps freed memory on purpose")
            for i in range(10):
                assert gw.json("POST", CHAT, chat_body(f"warm {i}", max_tokens=1))[0] == 200
            time.sleep(0.5)
            baseline_kib = rss_kib(gw.pid)
            prefix = json.dumps({"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": [
                {"type": "text", "text": "Image 1:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,"}}]}]}).encode()
            cut = prefix.index(b"base64,") + len(b"base64,")
            body = prefix[:cut] + b"A" * (200 * MIB - len(prefix)) + prefix[cut:]
            assert len(body) == 200 * MIB
            view = memoryview(body)
            heads_sent = threading.Barrier(6)
            statuses: list[int] = []
            peak = [0]

            def client(with_key: bool) -> None:
                fields = [f"Authorization: Bearer {CLIENT_KEY}"] if with_key else []
                with socket.create_connection(("127.0.0.1", gw.port), timeout=120) as s:
                    s.sendall(head("POST", CHAT, "Content-Type: application/json", *fields, length=len(body)))
                    heads_sent.wait()
                    try:
                        s.sendall(view)  # refused ones too: a hostile client sends regardless
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                    try:
                        statuses.append(Answer(s).status)
                    except (EOFError, ConnectionResetError):
                        statuses.append(0)

            threads = [threading.Thread(target=client, args=(i % 2 == 0,)) for i in range(6)]
            for t in threads:
                t.start()
            while any(t.is_alive() for t in threads):
                peak[0] = max(peak[0], rss_kib(gw.pid))
                time.sleep(0.05)
            # Back near where it was: the freed bodies went back to the system.
            bound_kib = baseline_kib + 100 * 1024
            now_kib = poll(lambda: rss_kib(gw.pid), lambda kib: kib <= bound_kib, timeout=30)
            assert now_kib <= bound_kib, (f"RSS {now_kib // 1024} MiB after the bodies (peak {peak[0] // 1024} MiB), "
                                          f"{baseline_kib // 1024} MiB before; answers {statuses}")
            assert sorted(statuses) == [200, 200, 401, 401, 401, 503], statuses
            assert gw.json("POST", CHAT, chat_body("after", max_tokens=1))[0] == 200


# --------------------------------------------------------------------------
# Connections


def test_a_connection_that_never_sends_a_byte_is_cut_at_the_header_timeout():
    with Sim() as sim:
        config = gateway_config([("primary", sim, "primary")],
                                limits={"header_timeout_ms": 1000, "keepalive_timeout_ms": 60000})
        with Gateway(config) as gw:
            with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as silent:
                started = time.monotonic()
                # Well before the keep-alive timeout (60 s): the header timeout (1 s) cut it.
                assert closed_by_peer(silent, timeout=30)
                assert time.monotonic() - started >= 0.9
            # Between requests the keep-alive timeout still applies.
            with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as kept:
                kept.sendall(head("GET", "/health"))
                first = Answer(kept)
                assert first.status == 200
                time.sleep(2.5)
                kept.sendall(head("GET", "/health"))
                assert Answer(kept, pending=first.rest).status == 200


def test_one_address_gets_at_most_max_connections_per_ip():
    raise_nofile_limit()
    with Sim() as sim:
        config = gateway_config([("primary", sim, "primary")],
                                limits={"max_connections_per_ip": 5, "header_timeout_ms": 30000})
        with Gateway(config) as gw:
            assert wait_open_connections(gw, 0) == 0  # the harness's /health polls closed
            held = [socket.create_connection(("127.0.0.1", gw.port), timeout=10) for _ in range(5)]
            try:
                assert wait_open_connections(gw, 5) == 5
                with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as extra:
                    extra.sendall(head("GET", "/health"))
                    data, how = read_to_end(extra, timeout=10)
                    assert data == b"" and how in ("eof", "reset"), "the sixth is closed at once, unanswered"
                assert _metric(gw, "dpgate_connections_refused_total", reason="per_ip") >= 1
                # The five held ones are served.
                held[0].sendall(head("GET", "/health"))
                assert Answer(held[0]).status == 200
            finally:
                for s in held:
                    s.close()
            assert wait_open_connections(gw, 0) == 0
            assert http_json(gw.port, "GET", "/health")[0] == 200


def test_at_max_connections_idle_connections_make_room_oldest_first():
    raise_nofile_limit()
    with Sim() as sim:
        config = gateway_config([("primary", sim, "primary")],
                                limits={"max_connections": 50, "header_timeout_ms": 60000})
        with Gateway(config) as gw:
            assert wait_open_connections(gw, 0) == 0
            oldest = [socket.create_connection(("127.0.0.1", gw.port), timeout=10) for _ in range(10)]
            assert wait_open_connections(gw, 10) == 10
            time.sleep(0.2)
            newer = [socket.create_connection(("127.0.0.1", gw.port), timeout=10) for _ in range(40)]
            try:
                assert wait_open_connections(gw, 50) == 50
                # Everyone idle: a new client (who stays) and a monitor are served all the same.
                newcomer = socket.create_connection(("127.0.0.1", gw.port), timeout=10)
                newer.append(newcomer)
                body = json.dumps(chat_body("still served", max_tokens=1)).encode()
                newcomer.sendall(head("POST", CHAT, f"Authorization: Bearer {CLIENT_KEY}", length=len(body)) + body)
                assert Answer(newcomer).status == 200
                assert http_json(gw.port, "GET", "/health")[0] == 200
                assert _metric(gw, "dpgate_idle_connections_evicted_total") >= 2
                # The ones that made room were the oldest.
                closed = [s for s in oldest + newer[:-1] if closed_by_peer(s, timeout=0.05)]
                assert 2 <= len(closed) <= 10
                assert all(s in oldest for s in closed), "a newer idle connection went before an older one"
            finally:
                for s in oldest + newer:
                    s.close()


# --------------------------------------------------------------------------
# Small ones


@pytest.mark.parametrize("method,path,status", [("HEAD", "/health", 200), ("HEAD", "/v1/models", 200),
                                                ("HEAD", CHAT, 405), ("HEAD", "/nowhere", 404)])
def test_head_answers_carry_no_body(gw, method, path, status):
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
        # The next request right behind it: a body after the head would be read as its answer.
        s.sendall(head(method, path, f"Authorization: Bearer {CLIENT_KEY}") + head("GET", "/health"))
        first = Answer(s, head_only=True)
        assert first.status == status
        assert int(first.fields["content-length"]) > 0, "the length GET would have"
        second = Answer(s, pending=first.rest)
        assert second.status == 200 and second.json()["status"] == "ok"


@pytest.mark.parametrize("path,token,status", [("/admin/status", True, 200), ("/health", False, 200),
                                               ("/nowhere", True, 404), ("/admin/status", False, 401)])
def test_admin_head_answers_carry_no_body(gw, path, token, status):
    fields = [f"Authorization: Bearer {ADMIN_TOKEN}"] if token else []
    with socket.create_connection(("127.0.0.1", gw.admin_port), timeout=10) as s:
        s.sendall(head("HEAD", path, *fields) + head("GET", "/health"))
        first = Answer(s, head_only=True)
        assert first.status == status
        second = Answer(s, pending=first.rest)
        assert second.status == 200 and second.json() == {"status": "ok"}


def test_an_oversized_admin_body_gets_413(gw):
    with socket.create_connection(("127.0.0.1", gw.admin_port), timeout=10) as s:
        s.sendall(head("POST", "/admin/flip", f"Authorization: Bearer {ADMIN_TOKEN}",
                       "Content-Type: application/json", length=2 * MIB))
        answer = Answer(s)
        assert answer.status == 413, answer.body
        assert answer.json()["error"]["code"] == "request_too_large"
        assert answer.fields.get("connection") == "close"
        sent, ended = keep_sending(s, 2 * MIB)  # read and dropped, not reset
        assert ended == "done"
    # The listener serves on.
    assert gw.admin("GET", "/admin/status")[0] == 200


@pytest.mark.parametrize("name,first,second", [
    ("Authorization", f"Bearer {CLIENT_KEY}", "Bearer sk-wrong"),
    ("Authorization", "Bearer sk-wrong", f"Bearer {CLIENT_KEY}"),
    ("X-Request-ID", "a", "b"),
    ("x-data-parallel-rank", "0", "1"),
    ("X-Session-ID", "s1", "s2"),
    ("Expect", "100-continue", "100-continue"),
])
def test_a_field_dpgate_acts_on_sent_twice_gets_400(gw, name, first, second):
    body = json.dumps(chat_body("twice", max_tokens=1)).encode()
    fields = [f"{name}: {first}", f"{name.lower()}: {second}"]
    if name != "Authorization":
        fields.append(f"Authorization: Bearer {CLIENT_KEY}")
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
        s.sendall(head("POST", CHAT, "Content-Type: application/json", *fields, length=len(body)) + body)
        answer = Answer(s)
    assert answer.status == 400, answer.body
    error = answer.json()["error"]
    assert error["code"] == "duplicate_header" and name.lower() in error["message"].lower()


def test_two_admin_tokens_get_400(gw):
    with socket.create_connection(("127.0.0.1", gw.admin_port), timeout=10) as s:
        s.sendall(head("GET", "/admin/status", f"Authorization: Bearer {ADMIN_TOKEN}", "Authorization: Bearer wrong"))
        answer = Answer(s)
    assert answer.status == 400 and answer.json()["error"]["code"] == "duplicate_header"
