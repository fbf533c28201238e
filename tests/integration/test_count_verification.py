"""Count verification through real processes: dpgate compares its own exact
prompt count with the backend's usage.prompt_tokens on every answer it can
(chat, no images, counted exactly), and a difference shows in the metrics,
one warning line a minute, the access record and /admin/status.

The simulator counts as a real server does with --tokenizer (dpgate's own
admission library), and lies on purpose with --count-offset N or
{"count_offset": N} on /sim/fault.

Admission skips the exact count when a byte bound already proves that a
request fits (admission/admit.cpp). Every request here sets its output
budget to window - (its exact count, from `dpgate tokens`): the byte bound
then cannot prove that it fits, and admission counts exactly.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from harness import (ADMIN_TOKEN, CLIENT_KEY, MODEL, TOKENIZER, Gateway, Sim, bin_dir, gateway_config,
                     http_request, json_lines, metric_sample, sse_events)

CHAT = "/v1/chat/completions"
AUTH = {"Authorization": f"Bearer {CLIENT_KEY}"}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
WINDOW = 32768
TOKENIZER_DIR = TOKENIZER.parent
WARNING = "prompt token count mismatch"

LONG_TEXT = ("The gateway counts every prompt as the backend does, so that a request over the window is refused "
             "before any rank spends a prefill on it. ")


# ------------------------------------------------------------------ helpers


def counts(bodies: list[dict]) -> list[dict]:
    """`dpgate tokens --jsonl` for chat bodies: {"prompt_tokens", "images"} each."""
    out = subprocess.run([str(bin_dir() / "dpgate"), "tokens", "--tokenizer", str(TOKENIZER), "--jsonl"],
                         input="".join(json.dumps(b) + "\n" for b in bodies), capture_output=True, text=True,
                         check=True, timeout=60)
    results = [json.loads(line) for line in out.stdout.splitlines()]
    assert all("error" not in r for r in results), results
    return results


def exact(body: dict) -> tuple[dict, int]:
    """The body with max_tokens = window - 1,024 per image - its exact prompt
    count (so admission must count it), and that count."""
    [c] = counts([body])
    return {**body, "max_tokens": WINDOW - 1024 * c["images"] - c["prompt_tokens"]}, c["prompt_tokens"]


def chat(*messages: dict, **extra) -> dict:
    return {"model": MODEL, "messages": list(messages), **extra}


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def system(text: str) -> dict:
    return {"role": "system", "content": text}


def assistant(text: str) -> dict:
    return {"role": "assistant", "content": text}


def scrape(gw: Gateway) -> str:
    status, _, raw = http_request(gw.admin_port, "GET", "/metrics", ADMIN)
    assert status == 200
    return raw.decode()


def wait_metric(gw: Gateway, name: str, wanted: float, timeout: float = 5.0, **labels) -> float:
    """The metric once it reaches `wanted` (a relay records usage just after
    the client has the last byte), or its value at the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        got = metric_sample(scrape(gw), name, **labels)
        if got >= wanted or time.monotonic() > deadline:
            return got
        time.sleep(0.02)


def access_lines(path: Path, ids: set[str], timeout: float = 5.0) -> dict[str, dict]:
    """The access records by request id, once those of `ids` are written (a
    worker flushes within 250 ms)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = {l["request_id"]: l for l in json_lines(path)}
        if ids <= lines.keys() or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def send(gw: Gateway, body: dict, request_id: str) -> tuple[int, str, dict | None]:
    """One chat request, streamed or not. Returns (the status, the route
    "backend/rank", the usage the client saw or None)."""
    headers = {**AUTH, "X-Request-ID": request_id}
    if body.get("stream"):
        status, resp_headers, events, complete = sse_events(gw.port, CHAT, body, headers)
        assert status == 200 and complete, (status, events)
        usage = [json.loads(e.data)["usage"] for e in events
                 if e.data != "[DONE]" and json.loads(e.data).get("usage")]
        return status, resp_headers["x-dpgate-route"], usage[-1] if usage else None
    status, resp_headers, raw = gw.request("POST", CHAT, body, {"X-Request-ID": request_id})
    assert status == 200, raw
    return status, resp_headers["x-dpgate-route"], json.loads(raw)["usage"]


def warnings(gw: Gateway) -> list[str]:
    return [l for l in gw.process.stderr().splitlines() if WARNING in l]


def matched_sim(**kw) -> Sim:
    return Sim(window=WINDOW, extra_args=["--tokenizer", str(TOKENIZER_DIR), *kw.pop("extra_args", [])], **kw)


def config_for(backends, log: Path) -> dict:
    return gateway_config(backends, model={"window_tokens": WINDOW}, log={"access": str(log)})


# A mix of what clients send: short and multi-turn text, system prompts,
# content parts, tool-call history, streams with and without stream_options.
# The flag says whether its answer carries usage (and so is compared).
def request_mix() -> list[tuple[dict, bool]]:
    calls = [{"id": "call-1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": \"rank 3\"}"}}]
    mix = [
        (chat(user("Hello there, how are you today?")), True),
        (chat(system("You are a terse assistant."), user(LONG_TEXT)), True),
        (chat(system("Answer in French."), user("Bonjour !"), assistant("Bonjour. Que puis-je faire ?"),
              user(LONG_TEXT * 3)), True),
        (chat(user([{"type": "text", "text": "first part"}, {"type": "text", "text": LONG_TEXT}])), True),
        (chat(user("Find rank 3."), {"role": "assistant", "content": None, "tool_calls": calls},
              {"role": "tool", "tool_call_id": "call-1", "content": "rank 3 holds 12 conversations"},
              user("And rank 4?")), True),
        (chat(user("Stream this, dpgate asks for the usage itself."), stream=True), True),
        (chat(system("Stream politely."), user(LONG_TEXT), stream=True,
              stream_options={"include_usage": True}), True),
        (chat(user("hi"), assistant("hello"), user("a stream whose client said no usage"), stream=True,
              stream_options={"include_usage": False}), False),
        (chat(system("s"), user("one"), assistant("two"), user("three " + LONG_TEXT), stream=True), True),
    ]
    return mix


# ------------------------------------------------------------------ the simulator alone


def test_the_simulator_counts_like_the_admission_library_and_lies_when_told():
    bodies = [b for b, _ in request_mix()]
    expected = [c["prompt_tokens"] for c in counts(bodies)]
    with matched_sim(extra_args=["--count-offset", "3"]) as sim:
        for body, want in zip(bodies, expected):
            body = {**body, "stream": False}
            body.pop("stream_options", None)
            status, _, answer = sim.json("POST", CHAT, body)
            assert status == 200, answer
            usage = answer["usage"]
            assert usage["prompt_tokens"] == want + 3
            assert usage["prompt_tokens_details"]["cached_tokens"] <= want

        # A repeated long prompt hits the prefix cache: still never above the real count.
        body = chat(user(LONG_TEXT * 20))
        [want] = [c["prompt_tokens"] for c in counts([body])]
        sim.set_fault("none")  # a mode change keeps the lie
        for _ in range(3):
            usage = sim.json("POST", CHAT, body, headers={"X-data-parallel-rank": "2"})[2]["usage"]
            assert usage["prompt_tokens"] == want + 3
            assert 0 <= usage["prompt_tokens_details"]["cached_tokens"] <= want
        assert usage["prompt_tokens_details"]["cached_tokens"] > 0

        # Completions: each prompt string tokenized with its BOS, as vLLM sums them.
        text = LONG_TEXT
        [plain] = [json.loads(l)["tokens"] for l in subprocess.run(
            [str(bin_dir() / "dpgate"), "tokens", "--tokenizer", str(TOKENIZER), "--jsonl"],
            input=json.dumps(text) + "\n", capture_output=True, text=True, check=True).stdout.splitlines()]
        status, _, answer = sim.json("POST", "/v1/completions", {"model": MODEL, "prompt": text})
        assert status == 200 and answer["usage"]["prompt_tokens"] == plain + 1 + 3
        status, _, answer = sim.json("POST", "/v1/completions", {"model": MODEL, "prompt": [text, [1, 2, 3]]})
        assert status == 200 and answer["usage"]["prompt_tokens"] == plain + 1 + 3 + 3

        # The offset at run time: alone it changes nothing else; a negative one stops at 0.
        assert sim.json("POST", "/sim/fault", {"count_offset": -5})[2]["count_offset"] == -5
        assert sim.fault()["mode"] == "none"
        usage = sim.json("POST", CHAT, bodies[0])[2]["usage"]
        assert usage["prompt_tokens"] == expected[0] - 5
        sim.json("POST", "/sim/fault", {"count_offset": -100000})
        assert sim.json("POST", CHAT, bodies[0])[2]["usage"]["prompt_tokens"] == 0
        assert sim.json("POST", "/sim/fault", {"count_offset": "3"})[0] == 400
        state = sim.json("POST", "/sim/fault", {"count_offset": 0})[2]
        assert "count_offset" not in state and state["mode"] == "none"
        assert sim.json("POST", CHAT, bodies[0])[2]["usage"]["prompt_tokens"] == expected[0]


def test_the_simulator_refuses_what_it_cannot_count_with(tmp_path):
    def run(*args):
        # An ephemeral port: a simulator that wrongly starts must not take 8000 from anyone.
        argv = [str(bin_dir() / "dpgate-sim"), "--listen", "127.0.0.1:0", "--port-file", str(tmp_path / "port"), *args]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        return proc.returncode, err

    code, err = run("--tokenizer", str(TOKENIZER_DIR), "--chat-template", str(tmp_path / "missing.jinja"))
    assert code == 2 and "--chat-template" in err, err
    code, err = run("--chat-template", str(tmp_path / "missing.jinja"))
    assert code == 2 and "--chat-template needs --tokenizer" in err, err
    code, err = run("--tokenizer", "/nonexistent/tokenizer.json")
    assert code == 2 and "--tokenizer" in err, err
    code, err = run("--count-offset", "three")
    assert code == 2 and "--count-offset" in err, err


# ------------------------------------------------------------------ through the gateway


def test_a_matched_backend_is_checked_on_every_answer_and_never_mismatches(tmp_path):
    log = tmp_path / "access.log"
    with matched_sim() as primary, matched_sim() as standby, \
            Gateway(config_for([("primary", primary, "primary"), ("standby", standby, "standby")], log)) as gw:
        page = scrape(gw)
        for backend in ("primary", "standby"):
            # Present from the start, so an alert on them has a series to read.
            assert f'dpgate_count_mismatches_total{{backend="{backend}"}} 0' in page
            assert f'dpgate_count_checks_total{{backend="{backend}"}} 0' in page

        mix = request_mix()
        expected = counts([b for b, _ in mix])
        eligible = 0
        ids = set()
        for i, ((body, has_usage), count) in enumerate(zip(mix, expected)):
            body = {**body, "max_tokens": WINDOW - count["prompt_tokens"]}
            _, route, usage = send(gw, body, f"match-{i}")
            assert route.startswith("primary/")
            if has_usage:
                eligible += 1
                if usage is not None:
                    assert usage["prompt_tokens"] == count["prompt_tokens"], (i, body)
            ids.add(f"match-{i}")

        # A completions request with one prompt is compared too (its tokens
        # plus BOS); one with several is not (admission's count is the
        # longest prompt's, vLLM's usage the sum of all).
        status, _, _ = gw.request("POST", "/v1/completions", {"model": MODEL, "prompt": LONG_TEXT, "max_tokens": 4})
        assert status == 200
        eligible += 1
        status, _, _ = gw.request("POST", "/v1/completions",
                                  {"model": MODEL, "prompt": [LONG_TEXT, "short"], "max_tokens": 4})
        assert status == 200

        assert wait_metric(gw, "dpgate_count_checks_total", eligible, backend="primary") == eligible
        time.sleep(0.3)  # nothing more arrives
        page = scrape(gw)
        assert metric_sample(page, "dpgate_count_checks_total", backend="primary") == eligible
        assert metric_sample(page, "dpgate_count_checks_total", backend="standby") == 0
        assert metric_sample(page, "dpgate_count_mismatches_total") == 0
        lines = access_lines(log, ids)
        assert ids <= lines.keys()
        assert all("count_mismatch" not in lines[i] for i in ids), [lines[i] for i in ids]
        status, _, state = http_request(gw.admin_port, "GET", "/admin/status", ADMIN)
        assert status == 200 and json.loads(state)["last_count_mismatch"] is None
        assert warnings(gw) == []


def test_a_backend_that_reports_other_counts_is_noticed_on_every_answer_and_logged_once(tmp_path):
    log = tmp_path / "access.log"
    with matched_sim(extra_args=["--count-offset", "3"]) as primary, \
            Gateway(config_for([("primary", primary, "primary")], log)) as gw:
        sent = []
        for i, (body, has_usage) in enumerate(request_mix()):
            if not has_usage:
                continue
            body, count = exact(body)
            _, route, usage = send(gw, body, f"lie-{i}")
            if usage is not None:
                assert usage["prompt_tokens"] == count + 3  # relayed as the backend said it
            sent.append((f"lie-{i}", count, route))

        n = len(sent)
        assert wait_metric(gw, "dpgate_count_mismatches_total", n, backend="primary") == n
        page = scrape(gw)
        assert metric_sample(page, "dpgate_count_checks_total", backend="primary") == n

        lines = access_lines(log, {rid for rid, _, _ in sent})
        for rid, count, _ in sent:
            assert lines[rid]["count_mismatch"] == {"dpgate": count, "backend": count + 3}, lines[rid]

        last_id, last_count, last_route = sent[-1]
        status, _, state = http_request(gw.admin_port, "GET", "/admin/status", ADMIN)
        last = json.loads(state)["last_count_mismatch"]
        backend, rank = last_route.split("/")
        assert last["backend"] == backend and last["rank"] == int(rank) and last["request_id"] == last_id
        assert last["dpgate_prompt_tokens"] == last_count and last["backend_prompt_tokens"] == last_count + 3
        when = datetime.strptime(last["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
        assert abs(datetime.now(timezone.utc) - when) < timedelta(minutes=1)

        # One warning line for all of them (at most one a minute), with both
        # numbers, the backend, the rank and the request id of the first.
        first_id, first_count, first_route = sent[0]
        [line] = warnings(gw)
        first_backend, first_rank = first_route.split("/")
        assert f"request {first_id} on backend {first_backend} rank {first_rank}:" in line
        assert f"dpgate counted {first_count}, the backend reported {first_count + 3}" in line
        assert re.search(r" warn: ", line)

        # Requests with images are never compared: images add no prompt text
        # the backend counts, dpgate reserves tokens for them instead.
        image = chat(user([{"type": "text", "text": LONG_TEXT},
                           {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]))
        body, _ = exact(image)
        for i, variant in enumerate((body, {**body, "stream": True})):
            send(gw, variant, f"image-{i}")
        lines = access_lines(log, {"image-0", "image-1"})
        for i in range(2):
            assert lines[f"image-{i}"]["images"] == 1 and "count_mismatch" not in lines[f"image-{i}"]
        time.sleep(0.3)
        page = scrape(gw)
        assert metric_sample(page, "dpgate_count_checks_total", backend="primary") == n
        assert metric_sample(page, "dpgate_count_mismatches_total", backend="primary") == n
        assert len(warnings(gw)) == 1


def test_a_backend_that_starts_lying_mid_run_is_noticed_from_then_on(tmp_path):
    log = tmp_path / "access.log"
    with matched_sim() as primary, Gateway(config_for([("primary", primary, "primary")], log)) as gw:
        body, count = exact(chat(system("You are terse."), user(LONG_TEXT)))
        streamed = {**body, "stream": True}
        for i, b in enumerate((body, streamed)):
            send(gw, b, f"before-{i}")
        assert wait_metric(gw, "dpgate_count_checks_total", 2) == 2
        assert metric_sample(scrape(gw), "dpgate_count_mismatches_total") == 0

        state = primary.json("POST", "/sim/fault", {"count_offset": -2})[2]
        assert state["count_offset"] == -2 and state["mode"] == "none"
        for i, b in enumerate((body, streamed, body)):
            send(gw, b, f"during-{i}")
        assert wait_metric(gw, "dpgate_count_mismatches_total", 3) == 3
        assert metric_sample(scrape(gw), "dpgate_count_checks_total") == 5

        primary.json("POST", "/sim/fault", {"count_offset": 0})
        send(gw, body, "after-0")
        assert wait_metric(gw, "dpgate_count_checks_total", 6) == 6
        assert metric_sample(scrape(gw), "dpgate_count_mismatches_total") == 3

        ids = {"before-0", "before-1", "during-0", "during-1", "during-2", "after-0"}
        lines = access_lines(log, ids)
        assert all("count_mismatch" not in lines[i] for i in ("before-0", "before-1", "after-0"))
        for i in ("during-0", "during-1", "during-2"):
            assert lines[i]["count_mismatch"] == {"dpgate": count, "backend": count - 2}
        last = json.loads(http_request(gw.admin_port, "GET", "/admin/status", ADMIN)[2])["last_count_mismatch"]
        assert last["request_id"] == "during-2" and last["backend_prompt_tokens"] == count - 2
        [line] = warnings(gw)
        assert "request during-0 " in line and f"dpgate counted {count}, the backend reported {count - 2}" in line


def test_a_backend_with_another_chat_template_is_noticed_without_any_offset(tmp_path):
    # The model's own template with one more line in front: what a backend
    # started with another --chat-template file renders.
    config = json.loads((TOKENIZER_DIR / "tokenizer_config.json").read_text())
    other = tmp_path / "other.jinja"
    other.write_text("Served with a different chat template.\n" + config["chat_template"])
    body, count = exact(chat(system("You are terse."), user(LONG_TEXT)))
    out = subprocess.run([str(bin_dir() / "dpgate"), "tokens", "--tokenizer", str(TOKENIZER), "--chat-template",
                          str(other), "--jsonl"], input=json.dumps(body) + "\n", capture_output=True, text=True,
                         check=True, timeout=60)
    other_count = json.loads(out.stdout)["prompt_tokens"]
    assert other_count > count
    # Room for the backend's larger count: it would refuse the request
    # otherwise (vLLM checks the window with its own count), which is the
    # other face of the same fault. Admission still counts exactly.
    body["max_tokens"] = WINDOW - other_count

    log = tmp_path / "access.log"
    with matched_sim(extra_args=["--chat-template", str(other)]) as primary, \
            Gateway(config_for([("primary", primary, "primary")], log)) as gw:
        streamed = {**body, "stream": True, "stream_options": {"include_usage": True}}
        for i, b in enumerate((body, streamed)):
            _, _, usage = send(gw, b, f"other-{i}")
            assert usage["prompt_tokens"] == other_count
        assert wait_metric(gw, "dpgate_count_mismatches_total", 2, backend="primary") == 2
        lines = access_lines(log, {"other-0", "other-1"})
        for i in range(2):
            assert lines[f"other-{i}"]["count_mismatch"] == {"dpgate": count, "backend": other_count}
        assert len(warnings(gw)) == 1
