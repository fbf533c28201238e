"""The served model's chat template through the real gateway: tool definitions
count exactly where the template renders them, a template's own refusal
reaches the client as a 400 with its words, and `dpgate check` and start-up
say which template is in use."""

from __future__ import annotations

import json
import subprocess

from harness import MODEL, REPO_ROOT, TOKENIZER, Gateway, Sim, bin_dir, gateway_config

CHAT = "/v1/chat/completions"
TOOLS_TEMPLATE = REPO_ROOT / "tests" / "golden" / "templates" / "deepseek_tools.jinja"


def tools(count: int, words: int) -> list:
    return [{"type": "function", "function": {
        "name": f"tool_{i}",
        "description": " ".join(f"word{(i * 131 + w) % 977}" for w in range(words)),
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}
        for i in range(count)]


def count(body: dict, chat_template=None) -> int:
    """dpgate's own count of a chat body (the tokens CLI, the same code as admission)."""
    args = [str(bin_dir() / "dpgate"), "tokens", "--tokenizer", str(TOKENIZER.parent), "--jsonl"]
    if chat_template:
        args += ["--chat-template", str(chat_template)]
    out = subprocess.run(args, input=json.dumps(body) + "\n", capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["prompt_tokens"]


def test_tools_push_a_request_over_the_window_only_where_the_template_renders_them(tmp_path):
    # Qwen3's template renders every tool definition (`tool | tojson`);
    # DeepSeek V3's, the served model's own, renders none.
    qwen3 = tmp_path / "qwen3.jinja"
    config = json.loads((TOKENIZER.parent.parent / "qwen3" / "tokenizer_config.json").read_text())
    qwen3.write_text(config["chat_template"])
    body = {"model": MODEL, "messages": [{"role": "user", "content": "What now?"}], "tools": tools(30, 120)}
    with_tools = count(body, qwen3)
    without = count(body)
    assert with_tools > without + 3000  # the definitions are in one prompt and not in the other
    # A window the request fits only when its tools are not rendered.
    window = without + 1000 + 64
    body["max_tokens"] = 1000
    model = {"window_tokens": window, "max_output_tokens": 1000}
    with Sim() as sim:
        renders = gateway_config([("primary", sim, "primary")], model={**model, "chat_template": str(qwen3)})
        ignores = gateway_config([("primary", sim, "primary")], model=model)
        with Gateway(renders) as gw:
            before = sim.stats()["requests"]
            status, _, error = gw.json("POST", CHAT, body)
            assert status == 400, error
            assert error["error"]["code"] == "context_length_exceeded"
            assert f"you requested {with_tools + 1000} tokens ({with_tools} in the messages" in error["error"]["message"]
            assert sim.stats()["requests"] == before
        with Gateway(ignores) as gw:
            status, _, answer = gw.json("POST", CHAT, body)
            assert status == 200, answer


def test_the_templates_own_refusal_is_a_400_with_its_words(tmp_path):
    template = tmp_path / "strict.jinja"
    template.write_text("{% for m in messages %}{% if m.role not in ['user', 'assistant'] %}"
                        "{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}"
                        "{{ m.role }}: {{ m.content }}\n{% endfor %}")
    with Sim() as sim:
        with Gateway(gateway_config([("primary", sim, "primary")], model={"chat_template": str(template)})) as gw:
            before = sim.stats()["requests"]
            status, _, error = gw.json("POST", CHAT, {"model": MODEL, "messages": [
                {"role": "system", "content": "s"}, {"role": "user", "content": "u"}]})
            assert status == 400, error
            assert error["error"]["message"] == "Only user and assistant roles are supported!"
            assert error["error"]["type"] == "invalid_request_error"
            assert sim.stats()["requests"] == before
            status, _, _ = gw.json("POST", CHAT, {"model": MODEL, "messages": [{"role": "user", "content": "u"}]})
            assert status == 200


def test_check_and_startup_name_the_template_and_whether_it_renders_tools(tmp_path):
    with Sim() as sim:
        for chat_template, origin, renders in ((None, "tokenizer_config.json chat_template", "no"),
                                               (TOOLS_TEMPLATE, str(TOOLS_TEMPLATE), "yes")):
            model = {"chat_template": str(chat_template)} if chat_template else {}
            config = gateway_config([("primary", sim, "primary")], model=model)
            path = tmp_path / "dpgate.yaml"
            path.write_text(json.dumps(config))
            out = subprocess.run([str(bin_dir() / "dpgate"), "check", "--config", str(path)],
                                 capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, out.stderr
            line = next(l for l in out.stdout.splitlines() if l.startswith("chat template: "))
            assert origin in line and "content format string (detected)" in line, line
            assert line.endswith(f"renders tool definitions: {renders}"), line
            with Gateway(config) as gw:
                assert f"renders tool definitions: {renders}" in gw.process.stdout() + gw.process.stderr()


def test_a_template_that_does_not_parse_stops_check_and_serve(tmp_path):
    template = tmp_path / "broken.jinja"
    template.write_text("{% for m in messages %}{{ m.content }}\n{% if %}")
    path = tmp_path / "dpgate.yaml"
    with Sim() as sim:
        path.write_text(json.dumps(gateway_config([("primary", sim, "primary")], model={"chat_template": str(template)})))
    for command in ("check", "serve"):
        out = subprocess.run([str(bin_dir() / "dpgate"), command, "--config", str(path)],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 1
        assert "model.chat_template" in out.stderr and "line 2" in out.stderr, out.stderr
