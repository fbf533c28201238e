"""Integration tests of dpgate-sim, the 950DT container stand-in: a real
process on an ephemeral port, spoken to over HTTP."""

from __future__ import annotations

import hashlib
import http.client
import json
import math
import shutil
import socket
import subprocess
import time

import pytest

from harness import Sim, open_stream, sse_events, sim  # noqa: F401

MODEL = "ds-v4.1-flash-1017"
CHAT = "/v1/chat/completions"


def chat_body(messages, **extra):
    return {"model": MODEL, "messages": messages, **extra}


def user(text):
    return {"role": "user", "content": text}


def pseudo_tokens(messages):
    """The sim's documented approximation: role + "\\n" + text per message, in
    4-byte units."""
    text = "".join(m["role"] + "\n" + m["content"] for m in messages)
    return math.ceil(len(text.encode()) / 4)


LONG = "The quick brown fox jumps over the lazy dog near the river bank. " * 4


def test_models_and_health(sim):
    status, headers, body = sim.json("GET", "/v1/models")
    assert status == 200
    assert body["object"] == "list"
    [model] = body["data"]
    assert model["id"] == MODEL and model["root"] == MODEL
    assert model["object"] == "model" and model["owned_by"] == "vllm"
    assert model["max_model_len"] == 1048576
    assert model["parent"] is None and model["permission"] == []
    assert isinstance(model["created"], int)

    status, _, body = sim.request("GET", "/health")
    assert (status, body) == (200, b"")
    assert sim.request("GET", "/nope")[0] == 404


def test_non_stream_chat_usage_shape(sim):
    messages = [{"role": "system", "content": "You are terse."}, user(LONG)]
    status, headers, body = sim.json("POST", CHAT, chat_body(messages, max_tokens=5))
    assert status == 200, body
    assert headers["content-type"] == "application/json"
    assert body["object"] == "chat.completion"
    assert body["id"].startswith("chatcmpl-") and body["model"] == MODEL
    [choice] = body["choices"]
    assert choice["message"]["role"] == "assistant"
    assert len(choice["message"]["content"].split()) == 5
    assert choice["finish_reason"] == "length"
    usage = body["usage"]
    assert usage["prompt_tokens"] == pseudo_tokens(messages)
    assert usage["completion_tokens"] == 5
    assert usage["total_tokens"] == usage["prompt_tokens"] + 5
    assert usage["prompt_tokens_details"] == {"cached_tokens": 0}
    assert 0 <= int(headers["x-sim-dp-rank"]) < 8

    # Same prompt, same answer: the text is derived from the prompt.
    again = sim.json("POST", CHAT, chat_body(messages, max_tokens=5))[2]
    assert again["choices"][0]["message"]["content"] == choice["message"]["content"]
    # Without max_tokens the answer is --max-output (16) tokens and "stop"s.
    body = sim.json("POST", CHAT, chat_body([user("hi")]))[2]
    assert body["usage"]["completion_tokens"] == 16
    assert body["choices"][0]["finish_reason"] == "stop"
    # max_completion_tokens counts like max_tokens; bigger than --max-output is capped.
    body = sim.json("POST", CHAT, chat_body([user("hi")], max_completion_tokens=1000))[2]
    assert body["usage"]["completion_tokens"] == 16


def test_completions_endpoint(sim):
    status, _, body = sim.json("POST", "/v1/completions", {"model": MODEL, "prompt": "abcdefgh", "max_tokens": 3})
    assert status == 200, body
    assert body["object"] == "text_completion" and body["id"].startswith("cmpl-")
    assert len(body["choices"][0]["text"].split()) == 3
    assert body["usage"]["prompt_tokens"] == 2
    assert body["usage"]["completion_tokens"] == 3


def test_stream_sequence_with_usage_and_done(sim):
    body = chat_body([user(LONG)], max_tokens=4, stream=True, stream_options={"include_usage": True})
    status, headers, events, complete = sse_events(sim.port, CHAT, body)
    assert status == 200 and complete
    assert headers["content-type"].startswith("text/event-stream")
    assert headers["transfer-encoding"] == "chunked"
    assert [e.data for e in events][-1] == "[DONE]"
    chunks = [e.json() for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    content = chunks[1:-1]
    assert len(content) == 4
    assert [c["choices"][0]["finish_reason"] for c in content] == [None, None, None, "length"]
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"]["completion_tokens"] == 4
    assert usage_chunk["usage"]["prompt_tokens"] == pseudo_tokens([user(LONG)])
    assert "cached_tokens" in usage_chunk["usage"]["prompt_tokens_details"]

    # Without include_usage: no usage chunk.
    body = chat_body([user("hello")], max_tokens=2, stream=True)
    _, _, events, complete = sse_events(sim.port, CHAT, body)
    assert complete
    assert len(events) == 1 + 2 + 1
    assert all("usage" not in e.json() for e in events[:-1])


def test_stream_chunks_arrive_over_time():
    with Sim(decode_us_per_token=60_000, max_output=8) as sim:
        body = chat_body([user("time me")], stream=True)
        start = time.monotonic()
        _, _, events, complete = sse_events(sim.port, CHAT, body)
        assert complete and len(events) == 1 + 8 + 1
        first_token, last_token = events[1].at, events[8].at
        # 7 decode steps of 60 ms lie between the first and last token.
        assert last_token - first_token >= 0.35
        # The first token comes at once, not after the decode: well before
        # the decode's span (an absolute bound would fail a sanitizer build).
        assert first_token - start < last_token - first_token


def test_rank_pinning_and_errors(sim):
    status, headers, _ = sim.json("POST", CHAT, chat_body([user("pin")], max_tokens=1),
                                  {"X-data-parallel-rank": "5"})
    assert status == 200 and headers["x-sim-dp-rank"] == "5"
    assert sim.stats()["by_rank"][5] == 1

    for value, shown in [("8", "8"), ("-1", "-1"), ("99", "99")]:
        status, _, body = sim.json("POST", CHAT, chat_body([user("pin")]), {"X-data-parallel-rank": value})
        assert status == 400
        assert body == {"object": "error", "message": f"data_parallel_rank {shown} is out of range [0, 8).",
                        "type": "BadRequestError", "param": None, "code": 400}

    # Not an integer: ignored, as vLLM does, so the sim picks the rank itself.
    status, headers, _ = sim.json("POST", CHAT, chat_body([user("pin")], max_tokens=1),
                                  {"X-data-parallel-rank": "abc"})
    assert status == 200 and 0 <= int(headers["x-sim-dp-rank"]) < 8


def test_round_robin_spreads_over_all_ranks(sim):
    ranks = [int(sim.json("POST", CHAT, chat_body([user("rr")], max_tokens=1))[1]["x-sim-dp-rank"])
             for _ in range(16)]
    assert sorted(set(ranks)) == list(range(8))
    assert sim.stats()["by_rank"] == [2] * 8


def test_cached_tokens_grow_over_a_pinned_conversation(sim):
    pin = {"X-data-parallel-rank": "2"}
    messages = [{"role": "system", "content": "You are a careful agent. " * 8}, user(LONG)]
    cached, prompts = [], []
    for turn in range(3):
        _, _, body = sim.json("POST", CHAT, chat_body(messages, max_tokens=4), pin)
        usage = body["usage"]
        cached.append(usage["prompt_tokens_details"]["cached_tokens"])
        prompts.append(usage["prompt_tokens"])
        messages = messages + [{"role": "assistant", "content": body["choices"][0]["message"]["content"]},
                               user(f"turn {turn}: " + LONG)]
    assert cached[0] == 0
    assert 0 < cached[1] < cached[2]
    for hit, prompt_before, prompt_now in zip(cached[1:], prompts, prompts[1:]):
        assert hit % 16 == 0 and hit < prompt_now
        # Everything of the previous turn but its partial last block is cached.
        assert hit >= prompt_before - 16 - 16

    # The same conversation on another rank finds nothing.
    _, _, body = sim.json("POST", CHAT, chat_body(messages, max_tokens=4), {"X-data-parallel-rank": "3"})
    assert body["usage"]["prompt_tokens_details"]["cached_tokens"] == 0

    # A full repeat hits everything but the last block, as vLLM recomputes it.
    again = sim.json("POST", CHAT, chat_body(messages, max_tokens=4), {"X-data-parallel-rank": "3"})[2]
    prompt = again["usage"]["prompt_tokens"]
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] == (prompt - 1) // 16 * 16

    metrics = sim.request("GET", "/metrics")[2].decode()
    hits = f'vllm:prefix_cache_hits_total{{engine="2",model_name="{MODEL}"}} {float(sum(cached))}'
    assert hits in metrics


def test_prefix_cache_is_bounded():
    # 64 tokens = 4 blocks per rank: a 40-token-block prompt cannot stay whole.
    with Sim(cache_tokens=64) as sim:
        pin = {"X-data-parallel-rank": "0"}
        messages = [user("x" * 4 * 16 * 40)]
        sim.json("POST", CHAT, chat_body(messages, max_tokens=1), pin)
        body = sim.json("POST", CHAT, chat_body(messages, max_tokens=1), pin)[2]
        # The head survives (later blocks are evicted first), up to capacity.
        assert body["usage"]["prompt_tokens_details"]["cached_tokens"] == 64


def test_context_window_error():
    with Sim(window=1000) as sim:
        messages = [user("y" * (4 * 900 - 5))]  # "user\n" + text = 900 tokens
        status, _, body = sim.json("POST", CHAT, chat_body(messages, max_tokens=200))
        assert status == 400
        assert body == {
            "object": "error",
            "message": "This model's maximum context length is 1000 tokens. However, you requested 1100 tokens "
                       "(900 in the messages, 200 in the completion). Please reduce the length of the messages "
                       "or completion.",
            "type": "BadRequestError", "param": None, "code": 400}
        assert sim.json("POST", CHAT, chat_body(messages, max_tokens=100))[0] == 200


def test_malformed_json_is_a_vllm_400(sim):
    status, _, body = sim.json("POST", CHAT, b'{"messages": [', {"Content-Type": "application/json"})
    assert status == 400
    assert body["object"] == "error" and body["type"] == "BadRequestError" and body["code"] == 400
    assert body["param"] is None and body["message"]
    status, _, body = sim.json("POST", CHAT, {"messages": "not a list"})
    assert status == 400 and "messages" in body["message"]


TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}},
         {"type": "function", "function": {"name": "write_file", "parameters": {"type": "object"}}}]


def test_tools_call_then_text(sim):
    messages = [user("open README")]
    status, _, body = sim.json("POST", CHAT, chat_body(messages, tools=TOOLS))
    assert status == 200
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    [call] = choice["message"]["tool_calls"]
    assert call["type"] == "function"
    assert call["function"] == {"name": "read_file", "arguments": "{}"}
    assert body["usage"]["completion_tokens"] == 2

    messages += [{"role": "assistant", "content": None, "tool_calls": [call]},
                 {"role": "tool", "tool_call_id": call["id"], "content": "# dpgate"}]
    body = sim.json("POST", CHAT, chat_body(messages, tools=TOOLS, max_tokens=3))[2]
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["choices"][0]["message"]["content"]

    # Streamed: tool_call deltas.
    _, _, events, complete = sse_events(sim.port, CHAT, chat_body([user("open README")], tools=TOOLS, stream=True))
    assert complete and events[-1].data == "[DONE]"
    deltas = [e.json()["choices"][0] for e in events[1:-1]]
    assert deltas[0]["delta"]["tool_calls"][0]["function"]["name"] == "read_file"
    assert deltas[0]["delta"]["tool_calls"][0]["id"]
    assert deltas[1]["delta"]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert deltas[-1]["finish_reason"] == "tool_calls"


def test_stats_record_headers_and_body(sim):
    raw = json.dumps(chat_body([user("hash me")], max_tokens=1)).encode()
    status, _, _ = sim.request("POST", CHAT, raw, {"Content-Type": "application/json", "X-Request-ID": "req-42",
                                                   "X-Forwarded-For": "10.0.0.7"})
    assert status == 200
    stats = sim.stats()
    assert stats["requests"] == 1 and stats["in_flight"] == 0
    assert stats["last_request_headers"]["X-Request-ID"] == "req-42"
    assert stats["last_request_headers"]["X-Forwarded-For"] == "10.0.0.7"
    assert stats["last_request_body_sha256"] == hashlib.sha256(raw).hexdigest()
    assert stats["last_request_body_bytes"] == len(raw)
    sim.reset()
    assert sim.stats()["requests"] == 0


def test_keep_alive_serves_many_requests_on_one_connection(sim):
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)
    try:
        for i in range(5):
            conn.request("POST", CHAT, json.dumps(chat_body([user(f"k{i}")], max_tokens=1)),
                         {"Content-Type": "application/json"})
            resp = conn.getresponse()
            assert resp.status == 200
            resp.read()
        conn.request("POST", CHAT, json.dumps(chat_body([user("s")], max_tokens=2, stream=True)))
        resp = conn.getresponse()
        assert resp.read().endswith(b"data: [DONE]\n\n")
        conn.request("GET", "/health")
        assert conn.getresponse().status == 200
    finally:
        conn.close()


# ---------------------------------------------------------------- faults


def test_fault_status(sim):
    assert sim.set_fault("status", status=503) == {"mode": "status", "status": 503, "after_chunks": 1,
                                                   "chunk_delay_ms": 100, "close_with_event": False}
    assert sim.fault()["mode"] == "status"
    status, _, body = sim.json("POST", CHAT, chat_body([user("x")]))
    assert status == 503 and body["code"] == 503 and body["object"] == "error"
    assert sim.json("GET", "/v1/models")[0] == 503
    assert sim.request("GET", "/health")[0] == 200
    sim.set_fault("status")  # default 500
    assert sim.json("POST", "/v1/completions", {"prompt": "x"})[0] == 500
    sim.set_fault("none")
    assert sim.json("POST", CHAT, chat_body([user("x")]))[0] == 200


def test_fault_from_command_line_and_bad_fault_bodies():
    with Sim(fault="status:502") as sim:
        assert sim.json("POST", CHAT, chat_body([user("x")]))[0] == 502
        assert sim.json("POST", "/sim/fault", {"mode": "explode"})[0] == 400
        assert sim.json("POST", "/sim/fault", {"mode": "status", "status": 200})[0] == 400
        assert sim.fault()["mode"] == "status"


def test_fault_unhealthy(sim):
    sim.set_fault("unhealthy")
    assert sim.request("GET", "/health")[0] == 503
    assert sim.json("POST", CHAT, chat_body([user("x")], max_tokens=1))[0] == 200
    sim.set_fault("none")
    assert sim.request("GET", "/health")[0] == 200


def test_fault_hang_then_cancel_counted(sim):
    sim.set_fault("hang")
    with pytest.raises(TimeoutError):
        sim.request("POST", CHAT, chat_body([user("x")]), timeout=0.5)
    # The client gave up and closed: the sim notices and counts it.
    deadline = time.monotonic() + 5
    while sim.stats()["cancelled"] < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    stats = sim.stats()
    assert stats["cancelled"] == 1 and stats["in_flight"] == 0 and stats["requests"] == 1
    with pytest.raises(TimeoutError):
        sim.request("GET", "/health", timeout=0.3)
    sim.set_fault("none")
    assert sim.request("GET", "/health")[0] == 200


def test_fault_cut_stream(sim):
    sim.set_fault("cut_stream", after_chunks=3)
    body = chat_body([user("x")], max_tokens=10, stream=True)
    status, _, events, complete = sse_events(sim.port, CHAT, body)
    assert status == 200
    assert not complete
    assert len(events) == 3 and "[DONE]" not in [e.data for e in events]
    # Non-streaming answers are untouched.
    assert sim.json("POST", CHAT, chat_body([user("x")], max_tokens=1))[0] == 200
    # close_with_event: the last event and the close in one segment; the
    # stream ends the same way, one event later.
    assert sim.set_fault("cut_stream", after_chunks=3, close_with_event=True)["close_with_event"] is True
    status, _, events, complete = sse_events(sim.port, CHAT, body)
    assert status == 200 and not complete
    assert len(events) == 3 and "[DONE]" not in [e.data for e in events]
    status, _, error = sim.json("POST", "/sim/fault", {"mode": "cut_stream", "close_with_event": 1})
    assert status == 400 and "close_with_event" in json.dumps(error), error
    sim.set_fault("none")


def test_fault_slow(sim):
    sim.set_fault("slow", chunk_delay_ms=80)
    body = chat_body([user("x")], max_tokens=5, stream=True)
    _, _, events, complete = sse_events(sim.port, CHAT, body)
    assert complete
    assert events[5].at - events[1].at >= 4 * 0.08 * 0.9


def test_fault_refuse_closes_api_connections_but_not_control(sim):
    idle = socket.create_connection(("127.0.0.1", sim.port))
    control = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=5)
    try:
        # An idle keep-alive connection that has already served a request.
        idle.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert idle.recv(4096).startswith(b"HTTP/1.1 200")
        control.request("POST", "/sim/fault", json.dumps({"mode": "refuse"}))
        assert json.loads(control.getresponse().read())["mode"] == "refuse"

        idle.settimeout(3)
        assert idle.recv(4096) == b""  # closed by the sim, no answer

        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            sim.request("POST", CHAT, chat_body([user("x")]))
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            sim.request("GET", "/health")
        # Control stays reachable on new and kept-alive connections.
        assert sim.fault()["mode"] == "refuse"
        control.request("POST", "/sim/fault", json.dumps({"mode": "none"}))
        assert control.getresponse().status == 200
        assert sim.json("POST", CHAT, chat_body([user("x")], max_tokens=1))[0] == 200
    finally:
        idle.close()
        control.close()


def test_client_disconnect_mid_stream_is_cancelled():
    with Sim(decode_us_per_token=100_000, max_output=50) as sim:
        with open_stream(sim.port, CHAT, chat_body([user("cancel me")], stream=True),
                         {"X-data-parallel-rank": "4"}) as resp:
            events = resp.events()
            next(events), next(events), next(events)
            assert sim.stats()["in_flight"] == 1
        deadline = time.monotonic() + 5
        while sim.stats()["cancelled"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        stats = sim.stats()
        assert stats["cancelled"] == 1 and stats["in_flight"] == 0
        metrics = sim.request("GET", "/metrics")[2].decode()
        line = next(l for l in metrics.splitlines()
                    if l.startswith('vllm:generation_tokens_total{engine="4"'))
        assert 2 <= float(line.split()[-1]) < 10  # stopped generating long before 50


# ---------------------------------------------------------------- metrics, limits, lifecycle


def test_metrics_format(sim):
    sim.json("POST", CHAT, chat_body([user(LONG)], max_tokens=3), {"X-data-parallel-rank": "1"})
    status, headers, body = sim.request("GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    text = body.decode()
    families = {"vllm:num_requests_running": "gauge", "vllm:num_requests_waiting": "gauge",
                "vllm:prefix_cache_queries_total": "counter", "vllm:prefix_cache_hits_total": "counter",
                "vllm:prompt_tokens_total": "counter", "vllm:generation_tokens_total": "counter"}
    for name, kind in families.items():
        assert f"# HELP {name} " in text
        assert f"# TYPE {name} {kind}\n" in text
        for engine in range(8):
            assert f'{name}{{engine="{engine}",model_name="{MODEL}"}} ' in text
    prompt = pseudo_tokens([user(LONG)])
    assert f'vllm:prompt_tokens_total{{engine="1",model_name="{MODEL}"}} {float(prompt)}' in text
    assert f'vllm:prefix_cache_queries_total{{engine="1",model_name="{MODEL}"}} {float(prompt)}' in text
    assert f'vllm:generation_tokens_total{{engine="1",model_name="{MODEL}"}} 3.0' in text

    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed")
    result = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True)
    # vLLM's metric names contain ':', which promtool's linter flags (exit 3)
    # although the format allows it; anything else is a failure, and a parse
    # error exits 1.
    problems = [l for l in (result.stdout + result.stderr).decode().splitlines() if l.strip()]
    assert result.returncode in (0, 3), problems
    assert all("should not contain ':'" in p for p in problems), problems


def test_hundred_megabyte_body_is_accepted():
    size = 100 * 1024 * 1024
    with Sim(window=40_000_000, cache_tokens=1024) as sim:
        raw = json.dumps(chat_body([user("z" * size)], max_tokens=2)).encode()
        status, _, body = sim.request("POST", CHAT, raw, {"Content-Type": "application/json"}, timeout=120)
        assert status == 200, body[:300]
        usage = json.loads(body)["usage"]
        assert usage["prompt_tokens"] == math.ceil((len("user\n") + size) / 4)
        stats = sim.stats()
        assert stats["last_request_body_bytes"] == len(raw)
        assert stats["last_request_body_sha256"] == hashlib.sha256(raw).hexdigest()


def test_sigterm_exits_zero_promptly_with_open_connections():
    sim = Sim(fault="hang")
    hung = socket.create_connection(("127.0.0.1", sim.port))
    try:
        hung.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.1)
        start = time.monotonic()
        assert sim.stop() == 0
        assert time.monotonic() - start < 2
    finally:
        hung.close()
