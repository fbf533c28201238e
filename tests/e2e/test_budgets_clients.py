"""What the real client libraries do with each answer of a budgeted key:
OpenAI's Node SDK (npm `openai`, chat.completions.create) and pi-ai (its
openai-completions provider, which calls its own copy of that SDK), through a
real dpgate in front of a real dpgate-sim.

dpgate's answers are built for the SDK's retry rule (openai/client.js,
shouldRetry and retryRequest): it obeys `x-should-retry` when present, else
retries 408, 409, 429 and 5xx, and sleeps for `retry-after-ms`, else
`Retry-After`. The 6.x installed here has no upper bound on that sleep
(older releases, like the Python SDK, fall back to their own 0.5-8 s backoff
for a wait of a minute or more). So:

- a minute's 429 carries the exact wait: the SDK sleeps that long and its
  retry is served;
- a day's 429 carries `x-should-retry: false`: the SDK fails at once instead
  of sleeping until UTC midnight;
- 400 budget_exceeded (larger than a whole window) is never retried.

Each test counts what reached dpgate two ways: the client's own attempts
(tests/e2e/fetch_log.mjs wraps the global fetch the SDK sends with) and
dpgate's per-key answer counter and access log, which do not take the
client's word for it. Each test has its own key, so its bucket starts full.

The numbers: 1,200 tokens per minute refill 20 tokens a second. A first call
of 1,000 output tokens leaves about 194 (dpgate-sim writes every requested
token: --max-output is above max_tokens), and a second of 220 is then some
30 tokens short: a wait of about 1.5 s.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from harness import (ADMIN_TOKEN, MODEL, REPO_ROOT, TOKENIZER, Gateway, Sim, gateway_config, http_request, json_lines,
                     metric_sample, poll)

HERE = Path(__file__).resolve().parent
OPENAI_CLIENT = HERE / "openai_client.mjs"
PI_AI_CLIENT = HERE / "pi_ai_client.mjs"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

TOKENS_PER_MIN = 1200
TOKENS_PER_DAY = 2000
PROMPT = "Say hi."
DRAIN = 1000  # max_tokens of the call that empties most of a minute's bucket
SHORT = 220  # then more than what is left: a wait of about 1.5 s
WINDOW = 1048576
AGENT_MAX_TOKENS = 32768  # what the desktop agent asks pi-ai for

MINUTE_KEYS = ("sdk-retry", "sdk-raise", "sdk-never", "sdk-headers", "pi-retry", "pi-raise", "pi-never")
DAY_KEYS = ("sdk-day", "pi-day")
KEYS = ([{"name": name, "key": f"sk-{name}", "tokens_per_min": TOKENS_PER_MIN} for name in MINUTE_KEYS] +
        [{"name": name, "key": f"sk-{name}", "tokens_per_day": TOKENS_PER_DAY} for name in DAY_KEYS])

# OpenAI's reset durations, as dpgate writes them.
RESET = re.compile(r"^(\d+ms|(\d+h)?(\d+m)?\d+s)$")


def node() -> str:
    found = shutil.which("node")
    if not found:
        pytest.fail("node not found: run scripts/setup")
    return found


def run_node(script: Path, spec: dict) -> dict:
    env = {**os.environ, "NODE_PATH": os.environ.get("NODE_PATH", str(REPO_ROOT / "local" / "npm" / "node_modules"))}
    try:
        out = subprocess.run([node(), str(script)], input=json.dumps(spec), capture_output=True, text=True,
                             timeout=30, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{script.name} still running after 30 s: sleeping for a Retry-After of hours?")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    log = tmp_path_factory.mktemp("budgets-clients") / "access.log"
    with Sim(max_output=4096, extra_args=["--tokenizer", str(TOKENIZER.parent)]) as sim:
        config = gateway_config([("primary", sim, "primary")], auth={"required": True, "keys": KEYS},
                                log={"access": str(log)})
        with Gateway(config) as gw:
            yield gw, sim, log


def openai_sdk(gw: Gateway, key: str, calls: list[dict]) -> list[dict]:
    spec = {"baseUrl": f"http://127.0.0.1:{gw.port}/v1", "apiKey": f"sk-{key}", "model": MODEL,
            "calls": [{"prompt": PROMPT, **call} for call in calls]}
    out = run_node(OPENAI_CLIENT, spec)
    assert out["version"].split(".")[0] == "6", f"written against openai 6.x, found {out['version']}"
    return out["results"]


def pi_ai(gw: Gateway, key: str, request_id: str, max_tokens: int, **extra) -> dict:
    spec = {"baseUrl": f"http://127.0.0.1:{gw.port}/v1", "apiKey": f"sk-{key}", "model": MODEL,
            "contextWindow": WINDOW, "maxTokens": max_tokens, "scenario": "text", "prompt": PROMPT,
            "requestId": request_id, **extra}
    return run_node(PI_AI_CLIENT, spec)


def key_answers(gw: Gateway, key: str, expected: dict[str, int]) -> dict[str, int]:
    """dpgate_key_requests_total{key} by status, once it shows `expected`
    (the counter is bumped as the answer is written, the client may exit a
    moment before)."""

    def fetch() -> dict[str, int]:
        status, _, raw = http_request(gw.admin_port, "GET", "/metrics", ADMIN)
        assert status == 200
        page = raw.decode()
        found = re.findall(rf'^dpgate_key_requests_total{{[^}}]*key="{re.escape(key)}"[^}}]*status="(\w+)"', page,
                           re.MULTILINE)
        return {s: int(metric_sample(page, "dpgate_key_requests_total", key=key, status=s)) for s in set(found)}

    return poll(fetch, lambda seen: seen == expected)


def access_statuses(log: Path, request_id: str, count: int) -> list[int]:
    """The statuses of the access records of `request_id`, in order, once
    `count` are written (a worker writes its records in batches)."""

    def fetch() -> list[int]:
        return [r["status"] for r in json_lines(log) if r["request_id"] == request_id]

    return poll(fetch, lambda statuses: len(statuses) >= count)


def assert_rate_limit_headers(headers: dict, limit: int) -> None:
    assert int(headers["x-ratelimit-limit-tokens"]) == limit, headers
    assert 0 <= int(headers["x-ratelimit-remaining-tokens"]) <= limit, headers
    assert RESET.match(headers["x-ratelimit-reset-tokens"]), headers
    assert "x-ratelimit-limit-requests" not in headers, "the key has no request budget"


def seconds_to_utc_midnight() -> float:
    return 86400 - time.time() % 86400


def skip_near_midnight() -> None:
    # Within a minute of midnight a day's wait is short: dpgate then lets the
    # SDK retry, rightly, and these tests would not see what they prove.
    if seconds_to_utc_midnight() < 300:
        pytest.skip("too close to UTC midnight for a day budget's refusal")


def test_the_sdk_waits_retry_after_ms_on_a_minute_429_and_its_retry_is_served(stack):
    """The SDK with maxRetries 1 meets a minute's 429: it sleeps for
    retry-after-ms (the exact wait, which it prefers to Retry-After's whole
    seconds), then sends the same request again, which dpgate serves because
    the bucket has refilled by then. dpgate saw both: a 429 and a 200 for
    the key, under one request id, and the backend only the second."""
    gw, sim, log = stack
    served_before = sim.stats()["requests"]
    drain, call = openai_sdk(gw, "sdk-retry", [{"requestId": "sdk-retry-drain", "max_tokens": DRAIN, "maxRetries": 0},
                                               {"requestId": "sdk-retry", "max_tokens": SHORT, "maxRetries": 1}])
    assert drain["ok"] and drain["usage"]["completion_tokens"] == DRAIN, drain
    assert call["ok"], call
    refused, served = call["attempts"]
    assert refused["status"] == 429 and served["status"] == 200, call
    assert (refused["retryCount"], served["retryCount"]) == ("0", "1")
    wait_ms = int(refused["headers"]["retry-after-ms"])
    assert 500 <= wait_ms <= 3000, f"the sizing aims at ~1.5 s: {refused}"
    assert int(refused["headers"]["retry-after"]) == math.ceil(wait_ms / 1000)
    assert_rate_limit_headers(refused["headers"], TOKENS_PER_MIN)
    # Node's timers may fire up to a millisecond early.
    slept_ms = served["sentMs"] - refused["answeredMs"]
    assert wait_ms - 1 <= slept_ms < wait_ms + 1000, call
    assert call["elapsedMs"] >= wait_ms

    assert key_answers(gw, "sdk-retry", {"200": 2, "429": 1}) == {"200": 2, "429": 1}
    assert access_statuses(log, "sdk-retry", 2) == [429, 200]
    assert sim.stats()["requests"] == served_before + 2, "the drain and the retry; the 429 never left dpgate"


def test_the_sdk_without_retries_raises_a_rate_limit_error_with_the_headers(stack):
    """maxRetries 0: the same 429 surfaces at once as RateLimitError, whose
    headers carry the wait and OpenAI's x-ratelimit-* fields, and whose
    body is OpenAI's rate_limit_exceeded."""
    gw, sim, log = stack
    drain, call = openai_sdk(gw, "sdk-raise", [{"requestId": "sdk-raise-drain", "max_tokens": DRAIN, "maxRetries": 0},
                                               {"requestId": "sdk-raise", "max_tokens": SHORT, "maxRetries": 0}])
    assert drain["ok"], drain
    assert not call["ok"], call
    error = call["error"]
    assert error["class"] == "RateLimitError" and error["status"] == 429, error
    assert (error["type"], error["code"]) == ("rate_limit_error", "rate_limit_exceeded")
    assert "Rate limit reached for key 'sdk-raise' on tokens per minute: limit 1,200" in error["message"], error
    headers = error["headers"]
    wait_ms = int(headers["retry-after-ms"])
    assert 0 < wait_ms <= 3000 and int(headers["retry-after"]) == math.ceil(wait_ms / 1000), headers
    assert f"Please try again in {math.ceil(wait_ms / 1000)}s." in error["message"]
    assert "x-should-retry" not in headers, "a minute's wait is worth retrying"
    assert_rate_limit_headers(headers, TOKENS_PER_MIN)
    assert int(headers["x-ratelimit-remaining-tokens"]) < SHORT
    assert [a["status"] for a in call["attempts"]] == [429]
    assert call["elapsedMs"] < wait_ms, "nothing was waited for"
    assert key_answers(gw, "sdk-raise", {"200": 1, "429": 1}) == {"200": 1, "429": 1}


def test_the_sdk_does_not_retry_budget_exceeded(stack):
    """A request larger than a whole minute of the key's budget is a 400
    budget_exceeded: the SDK, though allowed two retries, sends it once and
    raises BadRequestError with the code. (The SDK retries no 400; dpgate's
    x-should-retry: false says so to any client.)"""
    gw, sim, log = stack
    [call] = openai_sdk(gw, "sdk-never", [{"requestId": "sdk-never", "max_tokens": 2000, "maxRetries": 2}])
    assert not call["ok"], call
    error = call["error"]
    assert error["class"] == "BadRequestError" and error["status"] == 400, error
    assert (error["type"], error["code"]) == ("invalid_request_error", "budget_exceeded")
    assert "rate limit" in error["message"] and "tokens_per_min: 1,200" in error["message"], error
    assert error["headers"]["x-should-retry"] == "false"
    assert [a["status"] for a in call["attempts"]] == [400]
    assert key_answers(gw, "sdk-never", {"400": 1}) == {"400": 1}
    assert access_statuses(log, "sdk-never", 1) == [400]


def test_the_sdk_fails_fast_on_a_spent_day_budget(stack):
    """A day's 429 asks for a wait until UTC midnight, hours: it carries
    x-should-retry: false, and the SDK, allowed two retries, obeys it and
    raises at once. Without that header it would sleep the whole
    Retry-After (the SDK has no cap) and run into this test's timeout."""
    skip_near_midnight()
    gw, sim, log = stack
    drain, call = openai_sdk(gw, "sdk-day", [{"requestId": "sdk-day-drain", "max_tokens": 1500, "maxRetries": 0},
                                             {"requestId": "sdk-day", "max_tokens": 600, "maxRetries": 2}])
    assert drain["ok"], drain
    assert RESET.match(drain["headers"]["x-ratelimit-reset-tokens"]), drain
    assert not call["ok"], call
    error = call["error"]
    assert error["class"] == "RateLimitError" and error["code"] == "rate_limit_exceeded", error
    assert "on tokens per day (UTC)" in error["message"], error
    headers = error["headers"]
    assert headers["x-should-retry"] == "false", headers
    assert int(headers["retry-after"]) > 60, headers
    assert_rate_limit_headers(headers, TOKENS_PER_DAY)
    assert [a["status"] for a in call["attempts"]] == [429]
    assert call["elapsedMs"] < 2000, call
    assert key_answers(gw, "sdk-day", {"200": 1, "429": 1}) == {"200": 1, "429": 1}
    assert access_statuses(log, "sdk-day", 1) == [429]


def test_the_sdk_reads_what_is_left_from_every_answer(stack):
    """Successful answers carry x-ratelimit-*, which the SDK exposes through
    withResponse(): the remaining tokens drop by each call's reservation
    (prompt + max_tokens) and the unused output of a short completion (a
    2-token tool call of a 100-token budget) comes back before the next
    call. Refill between calls is bounded by the time between them (20
    tokens a second)."""
    gw, sim, log = stack
    calls = [{"requestId": f"sdk-headers-{i}", "max_tokens": 100, "maxRetries": 0, "tool": i == 2} for i in range(4)]
    results = openai_sdk(gw, "sdk-headers", calls)
    assert all(r["ok"] for r in results), results
    for r in results:
        assert_rate_limit_headers(r["headers"], TOKENS_PER_MIN)
    remaining = [int(r["headers"]["x-ratelimit-remaining-tokens"]) for r in results]
    used = [r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"] for r in results]
    reserved = [r["usage"]["prompt_tokens"] + 100 for r in results]
    assert [r["usage"]["completion_tokens"] for r in results] == [100, 100, 2, 100]
    assert results[2]["finishReason"] == "tool_calls"

    # The first call found the bucket full: it holds exactly 1,200 less the reservation.
    assert remaining[0] == TOKENS_PER_MIN - reserved[0]

    def refill_bound(i: int) -> int:
        # At most what refills from call i-1 leaving to call i's answer,
        # plus the part of a token the header's whole number left out.
        gap_ms = (results[i]["startedMs"] + results[i]["attempts"][-1]["answeredMs"] -
                  results[i - 1]["startedMs"] - results[i - 1]["attempts"][0]["sentMs"])
        return math.ceil(gap_ms * TOKENS_PER_MIN / 60000) + 1

    for i in (1, 2, 3):
        refund = reserved[i - 1] - used[i - 1]
        expected = remaining[i - 1] + refund - reserved[i]
        assert expected <= remaining[i] <= expected + refill_bound(i), (i, remaining, used, reserved)
    assert remaining[1] < remaining[0], "a call that used its whole budget leaves less"
    # The tool call gave back 98 of its 100: the next call's remaining shows them.
    assert reserved[2] - used[2] == 98
    assert remaining[3] >= remaining[2] + 98 - reserved[3]
    assert key_answers(gw, "sdk-headers", {"200": 4}) == {"200": 4}


def test_pi_ai_by_default_waits_out_a_minute_429_and_succeeds(stack):
    """pi-ai's openai-completions provider builds an OpenAI client without
    maxRetries and passes the caller's maxRetries only when set, so by
    default the SDK's 2 retries apply (pi-ai's maxRetryDelayMs cap is not
    used by this provider). A minute's 429 is therefore waited out inside
    pi-ai's call, for retry-after-ms, and the stream then succeeds: the
    agent never sees the 429."""
    gw, sim, log = stack
    result = pi_ai(gw, "pi-retry", "pi-retry", SHORT, maxRetries=None, drain={"max_tokens": DRAIN})
    assert result["stopReason"] in ("stop", "length"), result
    assert result["events"][0] == "start" and result["events"][-1] == "done"
    refused, served = result["attempts"]
    assert refused["status"] == 429 and served["status"] == 200, result
    wait_ms = int(refused["headers"]["retry-after-ms"])
    assert wait_ms - 1 <= served["sentMs"] - refused["answeredMs"] < wait_ms + 1000, result
    assert key_answers(gw, "pi-retry", {"200": 2, "429": 1}) == {"200": 2, "429": 1}
    assert access_statuses(log, "pi-retry", 2) == [429, 200]


def test_pi_ai_reports_a_minute_429_as_a_rate_limit_not_an_overflow(stack):
    """With retries off (maxRetries 0) the 429 reaches the agent: pi-ai ends
    the stream with stopReason "error" and the SDK's message ("429 Rate
    limit reached ..."), which isContextOverflow() rejects: the agent does
    not compact its history for a rate limit."""
    gw, sim, log = stack
    result = pi_ai(gw, "pi-raise", "pi-raise", SHORT, maxRetries=0, drain={"max_tokens": DRAIN})
    assert result["stopReason"] == "error" and result["events"] == ["error"], result
    assert result["errorMessage"].startswith("429 Rate limit reached for key 'pi-raise' on tokens per minute"), result
    assert result["isContextOverflow"] is False
    assert [a["status"] for a in result["attempts"]] == [429]
    assert key_answers(gw, "pi-raise", {"200": 1, "429": 1}) == {"200": 1, "429": 1}


def test_pi_ai_fails_fast_on_a_spent_day_budget(stack):
    """pi-ai with its default retries meets a day's 429: the SDK inside it
    obeys x-should-retry: false, so the agent gets the error at once (not
    hours later) and, again, not as a context overflow."""
    skip_near_midnight()
    gw, sim, log = stack
    result = pi_ai(gw, "pi-day", "pi-day", 600, maxRetries=None, drain={"max_tokens": 1500})
    assert result["stopReason"] == "error", result
    assert result["errorMessage"].startswith("429 Rate limit reached for key 'pi-day' on tokens per day (UTC)"), result
    assert result["isContextOverflow"] is False
    [refused] = result["attempts"]
    assert refused["status"] == 429 and refused["headers"]["x-should-retry"] == "false", result
    assert result["elapsedMs"] < 2000, result
    assert key_answers(gw, "pi-day", {"200": 1, "429": 1}) == {"200": 1, "429": 1}


def test_pi_ai_budget_exceeded_is_not_an_overflow_and_not_retried(stack):
    """The agent asks for 32,768 output tokens; under a key of 1,200 tokens
    a minute that can never be served: 400 budget_exceeded, sent once
    despite pi-ai's default retries. isContextOverflow() is false: none of
    pi-ai's overflow patterns (dist/utils/overflow.js: "maximum context
    length is N tokens", "too many tokens", "context length exceeded", ...)
    is in the message; and its "rate limit" is one of the non-overflow
    patterns, which would win even if one were. Compacting would not help
    here: the output budget alone is over the key's minute."""
    gw, sim, log = stack
    result = pi_ai(gw, "pi-never", "pi-never", AGENT_MAX_TOKENS, maxRetries=None)
    assert result["stopReason"] == "error", result
    message = result["errorMessage"]
    assert message.startswith("400 This request reserves 32,"), message
    assert "rate limit" in message and "tokens_per_min: 1,200" in message, message
    assert result["isContextOverflow"] is False, message
    assert [a["status"] for a in result["attempts"]] == [400]
    assert key_answers(gw, "pi-never", {"400": 1}) == {"400": 1}
    assert access_statuses(log, "pi-never", 1) == [400]
