"""The fast paths' switch, DPGATE_PLAIN (common/fast_paths.hpp): an unknown
name stops every program at start with status 2 and the valid names; with
every fast path off the programs answer as with them on; and a gateway says
at start which ones it runs without."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from harness import TOKENIZER, Gateway, Sim, bin_dir, chat_body, gateway_config

NAMES = ("json_string_stop_sse2", "simdjson_structurals", "deepseek_v3_splitter_fast_path", "bpe_rank_sweep",
         "bpe_char_premerge", "bpe_linear_merge", "utf8_ascii_runs", "deepseek_v3_fast_path", "http_grammar_sse2", "drain_aware_read",
         "accepted_socket", "write_now", "uncancellable_io", "cycle_clock", "heap_pages", "stream_usage_sse2",
         "written_usage")


def run(program: str, *args: str, plain: str | None, input: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DPGATE_PLAIN"}
    if plain is not None:
        env["DPGATE_PLAIN"] = plain
    return subprocess.run([str(bin_dir() / program), *args], capture_output=True, text=True, input=input,
                          env=env, timeout=120)


@pytest.mark.parametrize("program", ["dpgate", "dpgate-sim"])
def test_an_unknown_name_stops_the_program_with_status_2_and_the_valid_names(program):
    out = run(program, "--help", plain="write_now,turbo")
    assert out.returncode == 2, out.stderr
    assert 'DPGATE_PLAIN: unknown fast path "turbo"' in out.stderr, out.stderr
    for name in NAMES:
        assert name in out.stderr, name
    assert run(program, "--help", plain="write_now,bpe_rank_sweep").returncode == 0


def test_counts_are_the_same_with_every_fast_path_off():
    """Texts and chat bodies that take every counting fast path (ASCII
    windows, CJK runs, long runs for the rank sweep, DeepSeek V3's template
    natively, invalid UTF-8 and JSON) count alike with DPGATE_PLAIN=1."""
    lines = [json.dumps("Hello world, 12345 times: " + "word " * 500),
             json.dumps("你好世界。" * 300 + "\n\n  \t" + "ab" * 3000 + "!" * 5000 + "a" * 20000),
             json.dumps("é ß Ж 😀 \u3000 \u00a0" * 100),
             json.dumps({"messages": [{"role": "system", "content": "Be brief."},
                                      {"role": "user", "content": "日本語 and English " * 200},
                                      {"role": "assistant", "content": None,
                                       "tool_calls": [{"id": "c1", "type": "function",
                                                       "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
                                      {"role": "tool", "tool_call_id": "c1", "content": "{\"ok\": true}"}],
                         "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}),
             json.dumps({"messages": [{"role": "user", "content": "x" * 100000}]}),
             '{"messages": [{"role": "user", "content": "bad \\ud800 escape"}]}',
             "{not json"]
    text = "\n".join(lines) + "\n"
    fast = run("dpgate", "tokens", "--tokenizer", str(TOKENIZER), "--jsonl", plain=None, input=text)
    plain = run("dpgate", "tokens", "--tokenizer", str(TOKENIZER), "--jsonl", plain="1", input=text)
    assert fast.returncode == 0 and plain.returncode == 0, fast.stderr + plain.stderr
    assert fast.stdout == plain.stdout
    assert len(fast.stdout.splitlines()) == len(lines)


def test_a_gateway_says_which_fast_paths_it_runs_without(monkeypatch):
    monkeypatch.setenv("DPGATE_PLAIN", "write_now,drain_aware_read")
    with Sim() as sim, Gateway(gateway_config([("primary", sim, "primary")])) as gw:
        status, _, _ = gw.json("POST", "/v1/chat/completions", chat_body("hello"))
        assert status == 200
        log = gw.process.stderr()
    assert "fast paths off (DPGATE_PLAIN): drain_aware_read, write_now" in log, log
