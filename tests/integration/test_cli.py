"""The dpgate command line: help, version, config checking, and refusing to
start on a bad config."""

from __future__ import annotations

import json
import subprocess

from harness import REPO_ROOT, bin_dir


def run(*args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(bin_dir() / "dpgate"), *args], capture_output=True, text=True, input=input,
                          timeout=60)


def test_help_and_version():
    out = run("--help")
    assert out.returncode == 0
    for command in ("serve --config", "check --config", "tokens --tokenizer"):
        assert command in out.stdout
    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("dpgate ")


def test_unknown_command_is_a_usage_error():
    out = run("frobnicate")
    assert out.returncode == 2
    assert "unknown command 'frobnicate'" in out.stderr


def test_check_accepts_the_examples():
    for name in ("local.yaml", "dpgate.yaml"):
        out = run("check", "--config", str(REPO_ROOT / "conf" / "examples" / name))
        assert out.returncode == 0, out.stderr
        assert ": ok (" in out.stdout


def test_bad_config_names_key_and_line_and_serve_refuses(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("listen:\n  port: 8900\nbackends:\n  - name: a\n    url: ftp://x\n    role: primary\n")
    for command in ("check", "serve"):
        out = run(command, "--config", str(path))
        assert out.returncode == 1
        assert "backends[0].url" in out.stderr and "line 5" in out.stderr, out.stderr


def test_tokens_counts_text_and_chat_bodies():
    tokenizer = REPO_ROOT / "local" / "tokenizer" / "deepseek-v3" / "tokenizer.json"
    out = run("tokens", "--tokenizer", str(tokenizer), input="Hello world")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"tokens": 2}
    lines = [json.dumps("Hello world"),
             json.dumps({"messages": [{"role": "user", "content": [
                 {"type": "text", "text": "Hi"}, {"type": "image_url", "image_url": {"url": "data:,"}}]}]}),
             "{not json"]
    out = run("tokens", "--tokenizer", str(tokenizer), "--jsonl", input="\n".join(lines) + "\n")
    assert out.returncode == 0, out.stderr
    results = [json.loads(line) for line in out.stdout.splitlines()]
    assert results[0] == {"tokens": 2}
    assert results[1]["images"] == 1 and results[1]["prompt_tokens"] > 0
    assert "error" in results[2]
