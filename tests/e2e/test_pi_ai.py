"""pi-ai (npm @mariozechner/pi-ai), the library the operators' desktop agent
builds on, through a real dpgate in front of a real dpgate-sim: its
OpenAI-completions provider with a custom model whose baseUrl is dpgate's
/v1. What the agent relies on: streamed text with usage, streamed tool
calls, and an over-window refusal that isContextOverflow() recognises, which
is what makes the agent compact its history instead of failing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from harness import (ADMIN_TOKEN, CLIENT_KEY, MODEL, REPO_ROOT, TOKENIZER, Gateway, Sim, gateway_config,
                     http_request, json_lines, metric_sample)

CLIENT = Path(__file__).resolve().parent / "pi_ai_client.mjs"
WINDOW = 40000
MAX_TOKENS = 32768  # what the agent asks for; dpgate's max_output_tokens
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

# An agent's system prompt is long: over the 7,232 bytes left by a 32,768
# budget in a 40,000 window, so admission counts it exactly (not by the byte
# bound) and dpgate compares its count with the backend's.
AGENT_SYSTEM_PROMPT = "\n".join(
    f"Rule {i}: read the file before editing it, keep the change small, and say what you changed and why."
    for i in range(90))


def node() -> str:
    found = shutil.which("node")
    if not found:
        pytest.fail("node not found: run scripts/setup")
    return found


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    log = tmp_path_factory.mktemp("pi-ai") / "access.log"
    tokenizer_dir = str(TOKENIZER.parent)
    with Sim(window=WINDOW, extra_args=["--tokenizer", tokenizer_dir]) as sim:
        config = gateway_config([("primary", sim, "primary")],
                                model={"window_tokens": WINDOW, "max_output_tokens": MAX_TOKENS},
                                log={"access": str(log)})
        with Gateway(config) as gw:
            yield gw, sim, log


def pi_ai(gw: Gateway, scenario: str, prompt: str, request_id: str, **extra) -> dict:
    spec = {"baseUrl": f"http://127.0.0.1:{gw.port}/v1", "apiKey": CLIENT_KEY, "model": MODEL,
            "contextWindow": WINDOW, "maxTokens": MAX_TOKENS, "scenario": scenario, "prompt": prompt,
            "requestId": request_id, **extra}
    env = {**os.environ, "NODE_PATH": os.environ.get("NODE_PATH", str(REPO_ROOT / "local" / "npm" / "node_modules"))}
    out = subprocess.run([node(), str(CLIENT)], input=json.dumps(spec), capture_output=True, text=True, timeout=60,
                         env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def access_record(log: Path, request_id: str, timeout: float = 5.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        records = json_lines(log)
        for record in records:
            if record["request_id"] == request_id:
                return record
        if time.monotonic() > deadline:
            raise AssertionError(f"no access record for {request_id}: {records}")
        time.sleep(0.05)


def scrape(gw: Gateway) -> str:
    status, _, raw = http_request(gw.admin_port, "GET", "/metrics", ADMIN)
    assert status == 200
    return raw.decode()


def test_an_over_window_request_is_a_context_overflow_to_pi_ai(stack):
    gw, sim, log = stack
    before = sim.stats()["requests"]
    # 30,000 distinct words: far more than the 7,232 tokens a 32,768 budget leaves.
    result = pi_ai(gw, "text", " ".join(f"w{i}" for i in range(30000)), "pi-overflow")
    assert result["stopReason"] == "error"
    assert result["events"][-1] == "error"
    message = result["errorMessage"]
    assert f"maximum context length is {WINDOW} tokens" in message, message
    assert f"{MAX_TOKENS} in the completion). Please reduce the length of the messages or completion." in message
    assert result["isContextOverflow"] is True, message
    assert sim.stats()["requests"] == before, "refused by dpgate, never sent to a backend"
    record = access_record(log, "pi-overflow")
    assert record["status"] == 400 and record["rejection"] == "context_length_exceeded"


def test_pi_ai_streams_text_through_dpgate_and_reads_the_usage(stack):
    gw, sim, log = stack
    checks = metric_sample(scrape(gw), "dpgate_count_checks_total")
    result = pi_ai(gw, "text", "Say hello to the operators.", "pi-text", systemPrompt=AGENT_SYSTEM_PROMPT)
    assert result["stopReason"] == "stop", result
    events = result["events"]
    assert events[0] == "start" and events[-1] == "done"
    assert "text_start" in events and "text_end" in events and events.count("text_delta") >= 2
    assert result["text"] and result["text"] == result["deltas"]
    assert result["isContextOverflow"] is False

    # The usage pi-ai read is the backend's, relayed: 16 tokens out (the
    # simulator's cap), and the prompt dpgate counted exactly and agreed on.
    record = access_record(log, "pi-text")
    usage = result["usage"]
    assert usage["output"] == record["completion_tokens"] == 16
    assert usage["input"] + usage["cacheRead"] == record["prompt_tokens"] > 0
    assert "count_mismatch" not in record
    page = scrape(gw)
    assert metric_sample(page, "dpgate_count_checks_total") == checks + 1
    assert metric_sample(page, "dpgate_count_mismatches_total") == 0


def test_pi_ai_streams_a_tool_call_through_dpgate(stack):
    gw, sim, log = stack
    result = pi_ai(gw, "tool", "What is the weather in Lisbon?", "pi-tool")
    assert result["stopReason"] == "toolUse", result
    events = result["events"]
    assert events[0] == "start" and events[-1] == "done"
    assert events.index("toolcall_start") < events.index("toolcall_delta") < events.index("toolcall_end")
    [call] = result["toolCalls"]
    # The simulator calls the first tool with "{}": pi-ai parsed it into an object.
    assert call["name"] == "get_weather" and call["id"]
    assert call["arguments"] == {}
    assert result["usage"]["output"] == 2
    record = access_record(log, "pi-tool")
    assert record["status"] == 200 and record["stream"] is True
