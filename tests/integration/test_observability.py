"""The usage chunk dpgate asks for on the client's behalf, the JSON access
log, and metrics switched off: through a real gateway and simulator."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from harness import (ADMIN_TOKEN, CLIENT_KEY, Gateway, Sim, chat_body, gateway_config, http_request, json_lines,
                     sse_events)
from harness import metric_sample as sample

CHAT = "/v1/chat/completions"
AUTH = {"Authorization": f"Bearer {CLIENT_KEY}"}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def scrape(gw: Gateway) -> str:
    status, _, raw = http_request(gw.admin_port, "GET", "/metrics", ADMIN)
    assert status == 200
    return raw.decode()




def completion_tokens_when(gw: Gateway, wanted: float, timeout: float = 5.0) -> float:
    """The completion tokens dpgate counted, once they reach `wanted` (a relay
    records its usage just after the client has the last byte)."""
    deadline = time.monotonic() + timeout
    while True:
        got = sample(scrape(gw), "dpgate_completion_tokens_total")
        if got >= wanted or time.monotonic() > deadline:
            return got
        time.sleep(0.02)


def usage_events(events) -> list[dict]:
    return [json.loads(e.data) for e in events if e.data != "[DONE]" and json.loads(e.data).get("usage")]


def test_a_stream_without_include_usage_is_counted_and_its_client_sees_no_usage_chunk():
    with Sim() as sim, Gateway(gateway_config([("primary", sim, "primary")])) as gw:
        status, _, events, complete = sse_events(gw.port, CHAT, chat_body("count me", max_tokens=5, stream=True), AUTH)
        assert status == 200 and complete
        assert events[-1].data == "[DONE]"
        assert usage_events(events) == [], "the client did not ask for usage and must not get it"
        content = [json.loads(e.data) for e in events[:-1]]
        assert all(c["choices"] for c in content), "no empty-choices chunk may reach the client"
        assert completion_tokens_when(gw, 5) == 5

        # A client that asks for usage gets exactly one usage chunk, as from the backend.
        body = chat_body("count me too", max_tokens=4, stream=True, stream_options={"include_usage": True})
        status, _, events, complete = sse_events(gw.port, CHAT, body, AUTH)
        assert status == 200 and complete
        usage = usage_events(events)
        assert len(usage) == 1 and usage[0]["choices"] == [] and usage[0]["usage"]["completion_tokens"] == 4
        assert completion_tokens_when(gw, 9) == 9

        # stream_options sent without include_usage is the client's: left alone.
        body = chat_body("mine", max_tokens=3, stream=True, stream_options={"include_usage": False})
        status, _, events, complete = sse_events(gw.port, CHAT, body, AUTH)
        assert status == 200 and complete and usage_events(events) == []


def test_stream_usage_off_forwards_the_stream_untouched_and_counts_nothing():
    with Sim() as sim, Gateway(gateway_config([("primary", sim, "primary")],
                                              metrics={"stream_usage": False})) as gw:
        status, _, events, complete = sse_events(gw.port, CHAT, chat_body("x", max_tokens=5, stream=True), AUTH)
        assert status == 200 and complete and usage_events(events) == []
        status, _, _ = gw.request("POST", CHAT, chat_body("y", max_tokens=2))
        assert status == 200
        # Only the non-stream answer carried usage.
        assert completion_tokens_when(gw, 2) == 2
        time.sleep(0.3)
        assert sample(scrape(gw), "dpgate_completion_tokens_total") == 2


def read_lines(path: Path, ids: set[str], timeout: float = 5.0, also=None) -> list[dict]:
    """The access-log lines, once those of `ids` are there and, when `also`
    is given, a line it accepts (each worker flushes its own lines within
    250 ms, so lines from different workers arrive in any order)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = json_lines(path)
        if (ids <= {l["request_id"] for l in lines} and (also is None or any(also(l) for l in lines))) or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def test_access_log_has_one_json_line_per_request_and_no_secret_or_content(tmp_path):
    log = tmp_path / "access.log"
    secret_prompt = "the secret prompt text 7f3a"
    with Sim() as sim, Gateway(gateway_config([("primary", sim, "primary")], log={"access": str(log)})) as gw:
        status, headers, _ = gw.request("POST", CHAT, chat_body(secret_prompt, max_tokens=3),
                                        {"X-Request-ID": "req-ok-1"})
        assert status == 200
        backend, rank = headers["x-dpgate-route"].split("/")
        status, _, events, _ = sse_events(gw.port, CHAT, chat_body(secret_prompt, max_tokens=2, stream=True),
                                          {**AUTH, "X-Request-ID": "req-stream-1"})
        assert status == 200
        assert http_request(gw.port, "POST", CHAT, {"Authorization": "Bearer sk-wrong", "X-Request-ID": "req-401"},
                            chat_body("x"))[0] == 401
        assert gw.request("POST", CHAT, {"model": "nope", "messages": [{"role": "user", "content": "x"}]},
                          {"X-Request-ID": "req-404"})[0] == 404
        assert gw.raw(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999999\r\n\r\n"
                      ).startswith(b"HTTP/1.1 413")

        # The 413 line has no id of its own, and it may come from another
        # worker than the others, flushed later: wait for it by its status.
        too_large = lambda l: l["status"] == 413 and l["rejection"] == "request_too_large"
        lines = read_lines(log, {"req-ok-1", "req-stream-1", "req-401", "req-404"}, also=too_large)
        by_id = {l["request_id"]: l for l in lines}
        ok = by_id["req-ok-1"]
        assert ok["status"] == 200 and ok["backend"] == backend and ok["rank"] == int(rank)
        assert ok["key"] == "local-demo" and len(ok["key_hash"]) == 12
        assert ok["prompt_tokens"] > 0 and ok["completion_tokens"] == 3 and ok["cached_tokens"] >= 0
        assert ok["method"] == "POST" and ok["path"] == CHAT and ok["stream"] is False
        assert ok["ttfb_ms"] >= 0 and ok["duration_ms"] >= ok["ttfb_ms"] and ok["bytes_in"] > 0 and ok["bytes_out"] > 0
        assert ok["rejection"] is None
        stream = by_id["req-stream-1"]
        assert stream["stream"] is True and stream["completion_tokens"] == 2 and stream["status"] == 200
        refused = by_id["req-401"]
        assert refused["status"] == 401 and refused["rejection"] == "invalid_api_key" and refused["key"] is None
        assert by_id["req-404"]["rejection"] == "model_not_found" and by_id["req-404"]["backend"] is None
        assert any(too_large(l) for l in lines)
        for line in lines:
            assert set(line) >= {"time", "request_id", "key_hash", "backend", "rank", "status", "prompt_tokens",
                                 "cached_tokens", "completion_tokens", "ttfb_ms", "duration_ms", "bytes_in",
                                 "bytes_out", "rejection"}
        text = log.read_text()
        assert CLIENT_KEY not in text and "sk-wrong" not in text and secret_prompt not in text

        # Rotation: the file is moved away, a reload reopens the path.
        rotated = tmp_path / "access.log.1"
        os.rename(log, rotated)
        status, _, _ = http_request(gw.admin_port, "POST", "/admin/reload", ADMIN)
        assert status == 200
        assert gw.request("GET", "/v1/models", None, {"X-Request-ID": "after-rotation"})[0] == 200
        assert "after-rotation" in {l["request_id"] for l in read_lines(log, {"after-rotation"})}
        assert "after-rotation" not in rotated.read_text()


def test_metrics_off_serves_requests_and_answers_404_on_metrics():
    with Sim() as sim, Gateway(gateway_config([("primary", sim, "primary")], metrics={"enabled": False})) as gw:
        assert gw.request("POST", CHAT, chat_body("hi", max_tokens=2))[0] == 200
        status, _, events, complete = sse_events(gw.port, CHAT, chat_body("hi", max_tokens=2, stream=True), AUTH)
        assert status == 200 and complete and usage_events(events) == []
        status, _, raw = http_request(gw.admin_port, "GET", "/metrics", ADMIN)
        assert status == 404 and json.loads(raw)["error"]["code"] == "metrics_disabled"
