"""The gateway's proxy core through real processes: dpgate in front of
dpgate-sim backends, spoken to over raw HTTP."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import signal
import socket
import threading
import time

import pytest

from harness import (CLIENT_KEY, MODEL, Gateway, Sim, chat_body, gateway_config, http_json, open_stream,
                     sse_events)

CHAT = "/v1/chat/completions"
AUTH = {"Authorization": f"Bearer {CLIENT_KEY}"}


@pytest.fixture(scope="module")
def pair():
    """Two simulators (primary, standby) and a gateway, shared by the
    module's tests that leave them as they found them."""
    # The primary's window is wide so that a 100 MB body is judged by the transport, not by its size.
    with Sim(decode_us_per_token=2000, max_output=8, window=1 << 26) as primary, Sim() as standby:
        config = gateway_config([("primary", primary, "primary"), ("standby", standby, "standby")],
                                limits={"max_body_bytes": 200 * 1024 * 1024})
        with Gateway(config) as gw:
            yield gw, primary, standby


def test_non_stream_chat_is_relayed_with_route_and_request_id(pair):
    gw, primary, _ = pair
    status, headers, body = gw.json("POST", CHAT, chat_body("Hello!", max_tokens=4))
    assert status == 200, body
    assert body["object"] == "chat.completion"
    assert body["usage"]["completion_tokens"] == 4
    assert "prompt_tokens_details" in body["usage"]
    backend, rank = headers["x-dpgate-route"].split("/")
    assert backend == "primary" and 0 <= int(rank) < 8
    assert len(headers["x-request-id"]) == 32
    seen = primary.stats()["last_request_headers"]
    seen = {k.lower(): v for k, v in seen.items()}
    assert seen["x-request-id"] == headers["x-request-id"]
    assert seen["x-data-parallel-rank"] == rank


def test_client_request_id_is_kept_and_forwarded(pair):
    gw, primary, _ = pair
    status, headers, _ = gw.json("POST", CHAT, chat_body(), headers={"X-Request-ID": "trace-42"})
    assert status == 200
    assert headers["x-request-id"] == "trace-42"
    seen = {k.lower(): v for k, v in primary.stats()["last_request_headers"].items()}
    assert seen["x-request-id"] == "trace-42"


def test_body_bytes_forwarded_unchanged(pair):
    gw, primary, _ = pair
    # Odd spacing, key order and escapes that a re-serialiser would change.
    raw = ('{ "messages" : [ {"content":"caf\\u00e9 \\ud83d\\ude00  x","role":"user"} ],'
           '"model":"%s" ,"max_tokens" : 3 }' % MODEL).encode()
    status, _, body = gw.request("POST", CHAT, raw, {"Content-Type": "application/json"})
    assert status == 200, body
    stats = primary.stats()
    assert stats["last_request_body_bytes"] == len(raw)
    assert stats["last_request_body_sha256"] == hashlib.sha256(raw).hexdigest()


def test_hop_by_hop_and_credentials_are_not_forwarded(pair):
    gw, primary, _ = pair
    headers = {"Connection": "keep-alive, X-Secret-Hop", "X-Secret-Hop": "1", "Keep-Alive": "timeout=5",
               "Proxy-Authorization": "Basic eA==", "X-Forwarded-For": "10.9.8.7",
               "X-data-parallel-rank": "5", "X-Custom": "kept"}
    status, answer_headers, _ = gw.json("POST", CHAT, chat_body(), headers=headers)
    assert status == 200
    seen = {k.lower(): v for k, v in primary.stats()["last_request_headers"].items()}
    for name in ("x-secret-hop", "keep-alive", "proxy-authorization", "authorization", "te", "upgrade"):
        assert name not in seen, name
    assert seen["x-custom"] == "kept"
    assert seen["x-forwarded-for"] == "10.9.8.7, 127.0.0.1"
    rank = answer_headers["x-dpgate-route"].split("/")[1]
    assert seen["x-data-parallel-rank"] == rank, "a client's rank pin is dpgate's to set"


def test_stream_chunks_arrive_while_the_backend_generates():
    # 10 tokens at 150 ms each: a buffering proxy would deliver everything after ~1.5 s.
    with Sim(decode_us_per_token=150_000, max_output=10) as sim:
        with Gateway(gateway_config([("primary", sim, "primary")])) as gw:
            with open_stream(gw.port, CHAT, chat_body("stream please", stream=True, max_tokens=10,
                                                       stream_options={"include_usage": True}),
                             headers=AUTH) as resp:
                start = time.monotonic()
                assert resp.status == 200
                assert resp.headers["content-type"].startswith("text/event-stream")
                assert resp.headers["x-dpgate-route"].startswith("primary/")
                events = list(resp.events())
                assert resp.complete
    assert events[-1].data == "[DONE]"
    assert any(e.data != "[DONE]" and json.loads(e.data).get("usage") for e in events)
    first, last = events[0].at - start, events[-1].at - start
    assert last >= 1.3, f"the stream took {last:.2f}s; the simulator generates for 1.5s"
    assert first < 0.5, f"first event after {first:.2f}s: the gateway buffered the stream"
    gaps = [b.at - a.at for a, b in zip(events, events[1:-1])]
    assert sum(1 for g in gaps if g > 0.08) >= 6, f"events arrived in bursts: {gaps}"


def test_models_and_health_are_answered_by_dpgate(pair):
    gw, _, _ = pair
    status, _, models = gw.json("GET", "/v1/models")
    assert status == 200
    assert models["object"] == "list"
    entry = models["data"][0]
    assert entry["id"] == MODEL and entry["object"] == "model" and entry["owned_by"] == "dpgate"
    assert entry["max_model_len"] == 1048576
    status, _, health = http_json(gw.port, "GET", "/health")
    assert status == 200 and health["status"] == "ok"
    assert [(b["name"], b["role"], b["healthy"]) for b in health["backends"]] == [
        ("primary", "primary", True), ("standby", "standby", True)]


def test_public_window_is_lowered_to_the_smallest_backend_window():
    with Sim(window=1048576) as primary, Sim(window=524288) as standby:
        config = gateway_config([("primary", primary, "primary"), ("standby", standby, "standby")])
        with Gateway(config) as gw:
            deadline = time.monotonic() + 5
            while True:
                window = gw.json("GET", "/v1/models")[2]["data"][0]["max_model_len"]
                if window == 524288 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert window == 524288


def test_health_is_503_when_no_backend_is_routable():
    sim = Sim()
    config = gateway_config([("primary", sim, "primary")])
    with Gateway(config) as gw:
        sim.stop()
        body = gw.wait_health(503, timeout=5)
        assert body["status"] == "unavailable"
        status, _, err = gw.json("POST", CHAT, chat_body())
        assert status == 503
        assert err["error"]["code"] == "backend_unavailable"


def test_failover_to_standby_when_primary_dies():
    primary = Sim()
    with Sim() as standby:
        config = gateway_config([("primary", primary, "primary"), ("standby", standby, "standby")])
        with Gateway(config) as gw:
            assert gw.json("POST", CHAT, chat_body())[1]["x-dpgate-route"].startswith("primary/")
            primary.stop()
            deadline = time.monotonic() + 5
            while True:
                status, headers, _ = gw.json("POST", CHAT, chat_body())
                if status == 200 and headers["x-dpgate-route"].startswith("standby/"):
                    break
                assert time.monotonic() < deadline, "standby never took over"
                time.sleep(0.05)


def test_content_length_over_limit_is_413_before_the_body_is_read(pair):
    gw, primary, _ = pair
    before = primary.stats()["requests"]
    with socket.create_connection(("127.0.0.1", gw.port), timeout=5) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 300000000\r\n\r\n")
        # No body byte is sent: the verdict must come from the header alone.
        reply = s.recv(65536)
    assert reply.startswith(b"HTTP/1.1 413")
    body = json.loads(reply.split(b"\r\n\r\n", 1)[1])
    assert body["error"]["code"] == "request_too_large"
    assert "209715200" in body["error"]["message"]
    assert primary.stats()["requests"] == before


def test_chunked_body_over_limit_is_413():
    with Sim() as sim:
        config = gateway_config([("primary", sim, "primary")], limits={"max_body_bytes": 1024 * 1024})
        with Gateway(config) as gw:
            chunk = b"x" * 65536
            data = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + CLIENT_KEY.encode() +
                    b"\r\nTransfer-Encoding: chunked\r\n\r\n" +
                    (b"%x\r\n" % len(chunk) + chunk + b"\r\n") * 17 + b"0\r\n\r\n")
            reply = gw.raw(data)
            assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
            assert b"request_too_large" in reply
            assert sim.stats()["requests"] == 0


SMUGGLING = {
    "cl_then_te": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "te_then_cl": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                  b"Content-Length: 4\r\n\r\n0\r\n\r\n",
    "two_content_lengths": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                           b"Content-Length: 4\r\n\r\n{}{}",
    "te_not_ending_in_chunked": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                                b"Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
    "chunked_on_http10": b"POST /v1/chat/completions HTTP/1.0\r\nHost: x\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "obs_fold": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n folded\r\n"
                b"Content-Length: 2\r\n\r\n{}",
    "bare_lf": b"POST /v1/chat/completions HTTP/1.1\nHost: x\nContent-Length: 2\n\n{}",
    "space_before_colon": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length : 2\r\n\r\n{}",
}


@pytest.mark.parametrize("shape", sorted(SMUGGLING))
def test_request_smuggling_shapes_are_refused_and_not_forwarded(pair, shape):
    gw, primary, _ = pair
    before = primary.stats()["requests"]
    # A second, innocent request rides behind: it must not be served either.
    follow = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
    reply = gw.raw(SMUGGLING[shape] + follow)
    assert reply.startswith(b"HTTP/1.1 400"), reply[:200]
    assert reply.count(b"HTTP/1.1 ") == 1, "the connection must close after the refusal"
    assert b'"code":"bad_request"' in reply
    assert primary.stats()["requests"] == before


def test_oversized_header_is_431(pair):
    gw, _, _ = pair
    reply = gw.raw(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 431"), reply[:100]


def test_slow_header_is_cut_at_the_header_deadline():
    with Sim() as sim:
        config = gateway_config([("primary", sim, "primary")], limits={"header_timeout_ms": 800})
        with Gateway(config) as gw:
            with socket.create_connection(("127.0.0.1", gw.port), timeout=5) as s:
                start = time.monotonic()
                s.sendall(b"GET /v1/models HTTP/1.1\r\n")
                reply = b""
                try:
                    for _ in range(20):  # one header byte every 100 ms: each read alone would be quick
                        s.sendall(b"X")
                        time.sleep(0.1)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                try:
                    while chunk := s.recv(4096):
                        reply += chunk
                except ConnectionResetError:
                    pass
                elapsed = time.monotonic() - start
            assert reply == b"", "a request whose header missed its deadline gets no answer"
            assert 0.7 < elapsed < 2.5, f"cut after {elapsed:.2f}s; the header deadline is 0.8s"
            # The gateway still serves everyone else.
            assert gw.json("GET", "/v1/models")[0] == 200


def test_keep_alive_serves_many_requests_on_one_connection(pair):
    gw, _, _ = pair
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=10)
    try:
        for i in range(20):
            conn.request("POST", CHAT, body=json.dumps(chat_body(f"turn {i}", max_tokens=2)),
                         headers={**AUTH, "Content-Type": "application/json"})
            resp = conn.getresponse()
            assert resp.status == 200
            json.loads(resp.read())
    finally:
        conn.close()


def test_expect_100_continue_and_a_100_mb_body(pair):
    gw, primary, _ = pair
    # 100 MB of image: admission reserves 1,024 tokens for it and skips its bytes.
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * (100 * 1024 * 1024)}}
    raw = json.dumps({"model": MODEL, "max_tokens": 1, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Image 1:"}, image]}]}).encode()
    with socket.create_connection(("127.0.0.1", gw.port), timeout=60) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Authorization: Bearer " + CLIENT_KEY.encode() + b"\r\n"
                  b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(raw))
        interim = s.recv(4096)
        assert interim.startswith(b"HTTP/1.1 100 Continue"), interim
        s.sendall(raw)
        reply = b""
        while b"\r\n\r\n" not in reply:
            reply += s.recv(65536)
    assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
    stats = primary.stats()
    assert stats["last_request_body_bytes"] == len(raw)
    assert stats["last_request_body_sha256"] == hashlib.sha256(raw).hexdigest()


def test_unknown_path_and_wrong_method(pair):
    gw, _, _ = pair
    status, _, body = gw.json("GET", "/v1/engines")
    assert status == 404 and body["error"]["code"] == "not_found"
    status, _, body = gw.json("GET", CHAT)
    assert status == 405


def test_client_disconnect_mid_stream_cancels_upstream():
    with Sim(decode_us_per_token=100_000, max_output=100) as sim:
        with Gateway(gateway_config([("primary", sim, "primary")])) as gw:
            with open_stream(gw.port, CHAT, chat_body("long answer", stream=True, max_tokens=100),
                             headers=AUTH) as resp:
                events = resp.events()
                next(events)
                next(events)
            # The socket is closed here, 10 s before the answer would end.
            deadline = time.monotonic() + 3
            while sim.stats()["cancelled"] < 1:
                assert time.monotonic() < deadline, f"the simulator never saw a cancel: {sim.stats()}"
                time.sleep(0.05)
            assert sim.stats()["in_flight"] == 0


def test_client_disconnect_during_prefill_cancels_upstream():
    # 200 ms per prompt token: the backend is silent for seconds before its first byte.
    with Sim(prefill_us_per_token=200_000) as sim:
        with Gateway(gateway_config([("primary", sim, "primary")])) as gw:
            with open_stream(gw.port, CHAT, chat_body("a prompt of some length to prefill slowly", stream=True),
                             headers=AUTH, timeout=1) as _:
                pass
            deadline = time.monotonic() + 3
            while sim.stats()["cancelled"] < 1:
                assert time.monotonic() < deadline, f"the simulator never saw a cancel: {sim.stats()}"
                time.sleep(0.05)


def test_cut_upstream_stream_ends_in_an_error_event_and_a_broken_body():
    with Sim(decode_us_per_token=10_000, max_output=20) as sim:
        with Gateway(gateway_config([("primary", sim, "primary")])) as gw:
            sim.set_fault("cut_stream", after_chunks=3)
            status, _, events, complete = sse_events(gw.port, CHAT, chat_body(stream=True), headers=AUTH)
            assert status == 200
            assert not complete, "a broken stream must not end like a clean one"
            assert all(e.data != "[DONE]" for e in events)
            error = json.loads(events[-1].data)["error"]
            assert error["code"] == "stream_interrupted"
            assert "primary" in error["message"]
            sim.set_fault("none")
            assert gw.json("POST", CHAT, chat_body())[0] == 200


def test_backend_error_statuses_are_relayed():
    with Sim() as sim:
        with Gateway(gateway_config([("primary", sim, "primary")])) as gw:
            # /health stays 200 under the status fault, so the backend stays routable.
            sim.set_fault("status", status=500)
            status, headers, _ = gw.request("POST", CHAT, chat_body())
            assert status == 500
            assert headers["x-dpgate-route"].startswith("primary/")


def test_sigterm_drains_a_live_stream_then_exits_zero():
    with Sim(decode_us_per_token=100_000, max_output=15) as sim:
        gw = Gateway(gateway_config([("primary", sim, "primary")], limits={"drain_timeout_ms": 10000}))
        try:
            with open_stream(gw.port, CHAT, chat_body(stream=True, max_tokens=15), headers=AUTH) as resp:
                events = resp.events()
                next(events)
                os.kill(gw.pid, signal.SIGTERM)
                # New connections are refused once draining starts (each
                # worker closes its listener after the signal).
                deadline = time.monotonic() + 3.0
                with pytest.raises(OSError):
                    while time.monotonic() < deadline:
                        socket.create_connection(("127.0.0.1", gw.port), timeout=1).close()
                        time.sleep(0.05)
                rest = list(events)
                assert resp.complete
                assert rest[-1].data == "[DONE]"
            assert gw.process.popen.wait(10) == 0
        finally:
            gw.stop()


def test_pipelined_requests_are_answered_in_order(pair):
    gw, _, _ = pair
    one = json.dumps(chat_body("first", max_tokens=1)).encode()
    req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Authorization: Bearer " + CLIENT_KEY.encode() + b"\r\nContent-Length: %d\r\n\r\n" % len(one) + one)
    last = (b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + CLIENT_KEY.encode() +
            b"\r\nConnection: close\r\n\r\n")
    reply = gw.raw(req + req + last, timeout=10)
    assert reply.count(b"HTTP/1.1 200 OK") == 3, reply[:500]


def test_concurrent_clients_do_not_disturb_each_other(pair):
    gw, _, _ = pair
    failures = []

    def client(n):
        for i in range(10):
            status, _, body = gw.json("POST", CHAT, chat_body(f"client {n} turn {i}", max_tokens=2))
            if status != 200:
                failures.append((status, body))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_connections_beyond_max_connections_are_closed_at_once():
    with Sim() as sim:
        config = gateway_config([("primary", sim, "primary")], limits={"max_connections": 4})
        with Gateway(config) as gw:
            # The /health polls that waited for the backend used the client
            # port: until dpgate has seen them close they count, and the 4th
            # connection below would be over the limit.
            deadline = time.monotonic() + 10
            while gw.admin("GET", "/admin/status")[2]["open_connections"] > 0:
                assert time.monotonic() < deadline, "dpgate never let go of the /health connections"
                time.sleep(0.02)
            # Four connections each in the middle of a head: busy, so none is
            # closed to make room (idle ones are: test_hostile_client.py).
            held = [socket.create_connection(("127.0.0.1", gw.port), timeout=5) for _ in range(4)]
            for s in held:
                s.sendall(b"GET /health HTTP/1.1\r\n")
            try:
                # The kernel completes connections before dpgate accepts them:
                # wait until dpgate holds all four, or the 5th may overtake them.
                deadline = time.monotonic() + 10
                while gw.admin("GET", "/admin/status")[2]["open_connections"] < 4:
                    status = gw.admin("GET", "/admin/status")[2]
                    assert time.monotonic() < deadline, f"dpgate never accepted the four connections: {status['open_connections']}"
                    time.sleep(0.02)
                with socket.create_connection(("127.0.0.1", gw.port), timeout=5) as extra:
                    extra.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                    try:
                        assert extra.recv(100) == b"", "the connection over the limit must be closed"
                    except ConnectionResetError:
                        pass
            finally:
                for s in held:
                    s.close()
            # Freed slots are usable again (once dpgate has seen the closes).
            deadline = time.monotonic() + 5
            while True:
                try:
                    if http_json(gw.port, "GET", "/health")[0] == 200:
                        break
                except (ConnectionError, http.client.HTTPException):
                    pass
                assert time.monotonic() < deadline, "closed connections never freed their slots"
                time.sleep(0.05)
