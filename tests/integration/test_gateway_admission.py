"""Admission through the real gateway: what cannot succeed is refused before
a backend sees it, with the OpenAI error a client can act on; what is
admitted reaches the backend with its output budget made explicit."""

from __future__ import annotations

import fcntl
import hashlib
import json
import random
import socket
import struct
import termios
import threading
import time

import pytest

from harness import (ADMIN_TOKEN, CLIENT_KEY, EXACT_SIM_COUNTS, MODEL, REPO_ROOT, Gateway, Sim, chat_body, gateway_config,
                     http_json, http_request, metric_sample)

CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def small_window():
    # A window of 40,000 tokens keeps the boundary cases small; the rules are
    # the same at 1,048,576 (tests/unit/admission has those).
    with Sim(window=1048576) as sim:
        config = gateway_config([("primary", sim, "primary")],
                                model={"window_tokens": 40000, "max_output_tokens": 32768})
        with Gateway(config) as gw:
            yield gw, sim


def refused(gw, sim, body, status, code):
    before = sim.stats()["requests"]
    got, _, err = gw.json("POST", CHAT, body)
    assert got == status, err
    assert err["error"]["code"] == code, err
    assert sim.stats()["requests"] == before, "a refused request must not reach the backend"
    return err["error"]


def test_over_the_window_is_context_length_exceeded_with_every_term(small_window):
    gw, sim = small_window
    # 30,000 distinct words are far more than 40,000 - 32,768 = 7,232 tokens.
    text = " ".join(f"w{i}" for i in range(30000))
    error = refused(gw, sim, chat_body(text), 400, "context_length_exceeded")
    assert error["param"] == "messages"
    # vLLM's and OpenAI's words, which clients (pi-ai's isContextOverflow) match to compact.
    assert error["message"].startswith("This model's maximum context length is 40000 tokens. However, you requested ")
    assert " in the messages, 0 for images, 32768 in the completion). Please reduce the length of the messages or " \
        "completion." in error["message"]


def test_the_default_budget_is_inserted_and_the_rest_is_byte_identical(small_window):
    gw, sim = small_window
    raw = b'{"model":"%s","messages":[{"role":"user","content":"hi"}]}' % MODEL.encode()
    status, _, body = gw.request("POST", CHAT, raw, {"Content-Type": "application/json"})
    assert status == 200, body
    forwarded = b'{"max_tokens":32768,' + raw[1:]
    stats = sim.stats()
    assert stats["last_request_body_bytes"] == len(forwarded)
    assert stats["last_request_body_sha256"] == hashlib.sha256(forwarded).hexdigest()


def test_output_budget_over_the_maximum(small_window):
    gw, sim = small_window
    before = sim.stats()["requests"]
    status, _, err = gw.json("POST", CHAT, chat_body(max_tokens=32769))
    assert status == 400 and err["error"]["param"] == "max_tokens", err
    assert "32768" in err["error"]["message"]
    assert sim.stats()["requests"] == before


def test_too_many_images_counts_history(small_window):
    gw, sim = small_window
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    history = [{"role": "user", "content": [image] * 400}, {"role": "assistant", "content": "ok"},
               {"role": "user", "content": [image] * 241}]
    error = refused(gw, sim, {"model": MODEL, "messages": history}, 400, "too_many_images")
    assert error["message"] == "641 images in this request (history included); the limit is 640."


def test_unknown_model_is_404(small_window):
    gw, sim = small_window
    refused(gw, sim, {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}, 404, "model_not_found")


@pytest.mark.parametrize("raw", [b"", b"[]", b'{"model":', b'{"model":"%s","messages":"hi"}' % MODEL.encode(),
                                 b'{"model":"%s","tool_choice":"required","messages":[{"role":"user","content":"x"}]}'
                                 % MODEL.encode(),
                                 b'{"model":"%s","messages":[{"role":"user","content":"\\ud800"}]}' % MODEL.encode(),
                                 b'{"model":"%s","messages":[]} trailing' % MODEL.encode(),
                                 b'{"model":"%s","max_tokens":1e400,"messages":[]}' % MODEL.encode()])
def test_malformed_bodies_are_400_and_the_gateway_keeps_serving(small_window, raw):
    gw, sim = small_window
    before = sim.stats()["requests"]
    status, _, body = gw.request("POST", CHAT, raw, {"Content-Type": "application/json"})
    assert status == 400, body
    error = json.loads(body)["error"]
    assert error["type"] == "invalid_request_error" and error["message"]
    assert sim.stats()["requests"] == before
    assert gw.json("POST", CHAT, chat_body(max_tokens=1))[0] == 200


def _cold_text(seed: int, size: int) -> str:
    """Text nothing has counted yet: words with numbers drawn afresh."""
    rng = random.Random(seed)
    words = ["the", "model", "gateway", "tokens", "window", "函数", "données", "request", "cache", "omega"]
    parts, n = [], 0
    while n < size:
        word = f"{rng.choice(words)}{rng.randrange(1_000_000)} "
        parts.append(word)
        n += len(word)
    return "".join(parts)


def _unsent_bytes(sock: socket.socket) -> int:
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]


def _admission_queued(gw) -> float:
    _, _, raw = http_request(gw.admin_port, "GET", "/metrics", {"Authorization": f"Bearer {ADMIN_TOKEN}"})
    return metric_sample(raw.decode(), "dpgate_admission_queued")


def _admission_sum(gw) -> float:
    _, _, raw = http_request(gw.admin_port, "GET", "/metrics", {"Authorization": f"Bearer {ADMIN_TOKEN}"})
    return metric_sample(raw.decode(), "dpgate_admission_seconds_sum")


@pytest.mark.parametrize("offload", [True, False], ids=["offloaded", "on-the-worker"])
def test_a_long_admission_leaves_the_worker_to_its_other_requests(offload):
    # One worker thread: both requests are on it. A cold count of 24 MiB
    # takes 100 ms or more (10 MiB took 49 ms on an idle AMD EPYC, under the
    # 50 ms this test needs; far more under the sanitizers); a small request sent
    # meanwhile is answered at once when the large body is judged on the
    # admission thread, and waits for it when admission runs on the worker
    # (limits.offload_admission_bytes: 0), which shows the check can fail.
    with Sim() as sim:
        limits = {} if offload else {"offload_admission_bytes": 0}
        config = gateway_config([("primary", sim, "primary")], threads=1, limits=limits,
                                log={"level": "warn", "access": "off"})
        with Gateway(config) as gw:
            big = json.dumps(chat_body(_cold_text(1 if offload else 2, 24 << 20))).encode()
            before = _admission_sum(gw)
            with socket.create_connection(("127.0.0.1", gw.port)) as a:
                a.sendall(f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {CLIENT_KEY}\r\n"
                          f"Content-Type: application/json\r\nContent-Length: {len(big)}\r\n\r\n".encode() + big)
                # Once the kernel has handed the whole body over, the gateway
                # reads the rest in a few ms, then judges it for far longer.
                deadline = time.monotonic() + 30
                while _unsent_bytes(a) > 0 and time.monotonic() < deadline:
                    time.sleep(0.002)
                time.sleep(0.03)
                started = time.monotonic()
                status, _, _ = gw.json("POST", CHAT, chat_body("small"))
                small_seconds = time.monotonic() - started
                assert status == 200
                a.settimeout(60)
                head = a.recv(65536)
            assert head.startswith(b"HTTP/1.1 400"), head[:200]  # ~3M tokens: over the window, counted
            big_admission = _admission_sum(gw) - before  # the small request's share is microseconds
            assert big_admission > 0.05, "the large body must take long enough to tell the two apart"
            if offload:
                assert small_seconds < big_admission / 4, (small_seconds, big_admission)
            else:
                assert small_seconds > big_admission / 4, (small_seconds, big_admission)


def test_a_conversations_next_turn_on_a_new_connection_is_counted_from_the_shared_cache():
    # Every turn on a fresh connection, as after a client's idle close: the
    # kernel gives each to either worker, and each worker counts small bodies
    # inline and large ones on its admission thread, each counter with a cache
    # of its own. From the third turn on the body is over the offload bound, so
    # some counter that never saw the conversation counts it, whichever
    # worker the connections land on; it takes the earlier messages' counts
    # from the cache the workers share. The simulator counts as vLLM does,
    # so every answer also checks dpgate's count.
    with Sim(max_output=8, extra_args=EXACT_SIM_COUNTS) as sim:
        config = gateway_config([("primary", sim, "primary")], threads=2, limits={"offload_admission_bytes": 4096},
                                log={"level": "warn", "access": "off"})
        with Gateway(config) as gw:
            rng = random.Random(7)
            messages = [{"role": "system", "content": "You answer the benchmark's questions tersely. " * 4}]
            for turn in range(10):
                words = " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "epsilon"]) for _ in range(300))
                messages.append({"role": "user", "content": f"Question {turn}: {words}"})
                status, _, answer = gw.json("POST", CHAT, {"model": MODEL, "max_tokens": 8, "messages": messages})
                assert status == 200, answer
                messages.append({"role": "assistant", "content": answer["choices"][0]["message"]["content"]})
            shared = gw.admin("GET", "/admin/status")[2]["shared_count_cache"]
            assert shared["hits"] > 0, shared
            assert 0 < shared["bytes"] <= shared["max_bytes"] == (256 << 20) // 2, shared
            page = http_request(gw.admin_port, "GET", "/metrics", {"Authorization": f"Bearer {ADMIN_TOKEN}"})[2].decode()
            assert metric_sample(page, "dpgate_count_checks_total") == 10
            assert metric_sample(page, "dpgate_count_mismatches_total") == 0


def test_one_key_cannot_hold_every_admission_thread():
    # One worker, two admission threads, at most one per key. "heavy" sends
    # four large cold bodies at once; "light" then sends one body over the
    # offload bound. Light's is judged on the free thread at once, so it is
    # answered before heavy's second body is judged. When every large body
    # waits in one line (as with one admission thread per worker), it comes
    # last. The order of the answers, not their time, is checked.
    keys = [{"name": "heavy", "key": "sk-heavy"}, {"name": "light", "key": "sk-light"}]
    heavy_bodies = [json.dumps(chat_body(_cold_text(100 + seed, 24 << 20))).encode() for seed in range(4)]
    light_body = chat_body(_cold_text(7, 200 << 10))
    with Sim() as sim:
        config = gateway_config([("primary", sim, "primary")], threads=1, admission_threads=2,
                                auth={"required": True, "keys": keys}, log={"level": "warn", "access": "off"})
        with Gateway(config) as gw:
            finished: list[tuple[float, str]] = []

            def heavy(body):
                with socket.create_connection(("127.0.0.1", gw.port)) as s:
                    s.sendall(f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-heavy\r\n"
                              f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
                    s.settimeout(180)
                    head = s.recv(65536)
                    finished.append((time.monotonic(), f"heavy {head[9:12].decode()}"))

            heavies = [threading.Thread(target=heavy, args=(body,)) for body in heavy_bodies]
            for t in heavies:
                t.start()
            # The four bodies are in, and those not being judged are queued
            # (each is judged for far longer than this takes).
            deadline = time.monotonic() + 60
            while _admission_queued(gw) < 2 and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(0.02)
            status, _, answer = http_json(gw.port, "POST", CHAT, light_body, {"Authorization": "Bearer sk-light"},
                                          timeout=180)
            finished.append((time.monotonic(), f"light {status}"))
            for t in heavies:
                t.join(180)
            order = [who for _, who in sorted(finished)]
            assert len(order) == 5, order
            assert order.index("light 200") <= 1, order
            assert order.count("heavy 400") == 4, order  # ~6M tokens each: over the window, counted


def _tool_call_body(indent: int, depth: int) -> dict:
    """A tool call whose arguments the golden tools template prints with
    tojson(indent=tool_json_indent): a small body, a prompt of `indent` x
    `depth` spaces per line."""
    arguments = {"a": json.loads("[" * depth + "0" + "]" * depth)}
    return {"model": MODEL, "chat_template_kwargs": {"tool_json_indent": indent},
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
            "messages": [{"role": "user", "content": "hi"},
                         {"role": "assistant", "content": "",
                          "tool_calls": [{"id": "c", "type": "function",
                                          "function": {"name": "f", "arguments": arguments}}]},
                         {"role": "tool", "tool_call_id": "c", "content": "r"}]}


def test_a_small_body_the_template_makes_much_of_is_judged_off_the_worker():
    # A 3 KB body whose template output is megabytes would hold the worker
    # for as long as counting them takes; it is judged in the admission pool
    # like a large body (and counted: dpgate_admission_deferred_total). A
    # 104 KB body whose indent would build gigabytes is too, and is a 400.
    tools_template = REPO_ROOT / "tests" / "golden" / "templates" / "deepseek_tools.jinja"
    with Sim() as sim:
        config = gateway_config([("primary", sim, "primary")], threads=1,
                                model={"chat_template": str(tools_template)}, log={"level": "warn", "access": "off"})
        with Gateway(config) as gw:
            def deferred():
                _, _, raw = http_request(gw.admin_port, "GET", "/metrics", {"Authorization": f"Bearer {ADMIN_TOKEN}"})
                return metric_sample(raw.decode(), "dpgate_admission_deferred_total")

            ordinary = _tool_call_body(2, 3)
            assert gw.json("POST", CHAT, ordinary)[0] == 200
            assert deferred() == 0
            large_prompt = _tool_call_body(2000, 40)
            assert len(json.dumps(large_prompt)) < 4096
            status, _, answer = gw.json("POST", CHAT, large_prompt)
            assert status == 200, answer
            assert deferred() == 1
            hostile = _tool_call_body(0, 200)
            hostile["chat_template_kwargs"]["tool_json_indent"] = " " * 103_000
            status, _, answer = gw.json("POST", CHAT, hostile)
            assert status == 400 and "would exceed" in answer["error"]["message"], answer
            assert deferred() == 2
            assert gw.json("POST", CHAT, ordinary)[0] == 200
            assert deferred() == 2
